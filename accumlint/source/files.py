"""Finding the files to check, reading them faithfully and writing them back safely.

A fixer that changes a file's encoding, BOM, line endings or mode, or leaves a
half-written file after an interrupt, is worse than no fixer: so files are
read as bytes, decoded as Python would decode them (PEP 263, BOM), never
newline-translated, and replaced atomically, and only when that loses nothing:
a file edited during the run, a read-only file, a file with hard links or one
whose owner cannot be kept is left alone, and the caller says why.
"""

from __future__ import annotations

import io
import os
import re
import signal
import stat
import threading
import tokenize
from contextlib import contextmanager
from typing import Callable, Iterator, NamedTuple, Optional, Sequence

from accumlint.diagnostics import Diagnostic

PYTHON_SUFFIXES = (".py", ".ipynb")

# Folders a tree walk never enters (they hold tools' state, builds or installs).
SKIPPED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".tox", ".nox", ".eggs", ".venv", "venv",
        "__pycache__", "__pypackages__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".accumlint_cache", ".ipynb_checkpoints", "node_modules", "build", "dist",
        "_build", "buck-out", "site-packages", ".direnv",
    }
)


class SourceError(Exception):
    """A file that cannot be read or decoded; carries a 1-based position."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


class ReadError(SourceError):
    """A path that cannot be read at all (missing, a folder, no permission)."""


class WriteRefused(Exception):
    """A fixed file that is not written, because writing it would lose something."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------- discovery


class SourcePath(NamedTuple):
    """A file to check: the path to print (as the user gave it) and whether it was named.

    `root` is the folder whose walk found it (None for a named file); `error`
    says why a folder of the walk could not be listed (then `display` is that folder).
    """

    display: str
    explicit: bool
    root: Optional[str] = None
    error: Optional[str] = None


class _IgnoreFiles:
    """`.gitignore` files that apply below a folder, deepest deciding first (git's rule).

    Folders are absolute path strings; each folder's chain of specs (up to the
    walk's stop) is found once, so a file in a tree without .gitignore files
    costs a dictionary lookup.
    """

    def __init__(self) -> None:
        self._specs: dict[str, object] = {}
        self._chains: dict[tuple[str, str], tuple[tuple[str, object], ...]] = {}

    def _spec(self, directory: str):
        if directory not in self._specs:
            spec = None
            for name in (".gitignore", ".git/info/exclude"):
                candidate = os.path.join(directory, name)
                if os.path.isfile(candidate):
                    import pathspec

                    try:
                        with open(candidate, encoding="utf-8", errors="replace") as handle:
                            lines = handle.read().splitlines()
                    except OSError:
                        continue
                    more = pathspec.GitIgnoreSpec.from_lines(lines)
                    spec = more if spec is None else spec + more
            self._specs[directory] = spec
        return self._specs[directory]

    def _chain(self, directory: str, stop: str) -> tuple[tuple[str, object], ...]:
        """(folder, spec) of every .gitignore from `directory` up to `stop`, deepest first."""
        key = (directory, stop)
        if key not in self._chains:
            spec = self._spec(directory)
            parent = os.path.dirname(directory)
            above = () if directory == stop or parent == directory else self._chain(parent, stop)
            self._chains[key] = ((directory, spec), *above) if spec is not None else above
        return self._chains[key]

    def ignored(self, path: str, is_dir: bool, stop: str) -> bool:
        """Whether a .gitignore between `path` (absolute) and `stop` (included) ignores it."""
        for directory, spec in self._chain(os.path.dirname(path), stop):
            relative = _below(path, directory).replace(os.sep, "/") + ("/" if is_dir else "")
            result = spec.check_file(relative)
            if result.include is not None:
                return bool(result.include)
        return False


def _below(path: str, directory: str) -> str:
    """`os.path.relpath(path, directory)` for a path inside the (absolute) directory, without
    relpath's work (it makes both absolute and compares them part by part)."""
    prefix = directory if directory.endswith(os.sep) else directory + os.sep
    return path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, directory)


def _repository_root(start: str) -> str:
    """The git work tree holding `start` (absolute), or `start` itself outside any repository."""
    directory = start
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return start
        directory = parent


def _is_environment(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def discover(
    paths: list[str], is_excluded: Callable[[str, bool], bool]
) -> Iterator[SourcePath]:
    """Files to check below the given paths, each once, in a stable order.

    Named files are always checked (unless `exclude` names them, so that
    pre-commit's file lists honor it); folders are walked, skipping tools'
    folders, virtual environments, `.gitignore`d paths and `exclude`. A
    named folder that a .gitignore above it ignores is still walked.
    A path that does not exist is yielded so that reading it reports it, and
    so is a folder that cannot be listed (with its `error`).
    """
    ignores = _IgnoreFiles()
    seen: set[object] = set()

    def once(display: str, explicit: bool, root: Optional[str] = None) -> Iterator[SourcePath]:
        try:  # the same file under two names (a link, `a.py` and `./a.py`) is checked once
            status = os.stat(display)
            key: object = (status.st_dev, status.st_ino)
        except OSError:
            key = os.path.realpath(display)
        if key not in seen:
            seen.add(key)
            yield SourcePath(display, explicit, root)

    for given in paths:
        if not os.path.isdir(given):
            if not is_excluded(given, False):
                yield from once(given, True)
            continue
        root = os.path.abspath(given)
        stop = _repository_root(root)
        if root != stop and ignores.ignored(root, True, stop):
            stop = root  # an ignored folder named explicitly: only its own .gitignore files apply
        unlisted: list[OSError] = []
        for directory, dirnames, filenames in _walk(given, unlisted):
            if directory is None:
                error = unlisted.pop()
                folder = error.filename if isinstance(error.filename, str) else given
                yield SourcePath(_shown(folder, given), False, given, f"cannot read folder: {error.strerror or error}")
                continue
            absolute = os.path.abspath(directory)
            kept = []
            for name in sorted(dirnames):
                child = os.path.join(absolute, name)
                path = os.path.join(directory, name)
                if name in SKIPPED_DIRS or name.endswith(".egg-info") or _is_environment(child):
                    continue
                if ignores.ignored(child, True, stop) or is_excluded(path, True):
                    continue
                kept.append(name)
            dirnames[:] = kept
            for name in sorted(filenames):
                if not name.endswith(PYTHON_SUFFIXES):
                    continue
                path = os.path.join(directory, name)
                if ignores.ignored(os.path.join(absolute, name), False, stop) or is_excluded(path, False):
                    continue
                yield from once(_shown(path, given), False, given)


def _shown(path: str, given: str) -> str:
    return path[2:] if given == "." and path.startswith("./") else path


def _walk(top: str, errors: list[OSError]):
    """`os.walk`, with a (None, [], []) step where a folder cannot be listed (its error in `errors`)."""
    pending: list[OSError] = []
    for step in os.walk(top, onerror=pending.append):
        while pending:
            errors.append(pending.pop(0))
            yield None, [], []
        yield step
    while pending:
        errors.append(pending.pop(0))
        yield None, [], []


def outside(path: str, root: str) -> bool:
    """Whether a file found below `root` is really elsewhere (a symbolic link out of the tree)."""
    real_root = os.path.realpath(root)
    return os.path.commonpath([os.path.realpath(path), real_root]) != real_root


# ---------------------------------------------------------------- reading


# The default of the `max-file-size` setting: a larger file is reported, not read.
MAX_FILE_SIZE = 50_000_000

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
# Opening never waits (a FIFO without a writer), never makes a terminal ours, never leaks to children.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _refuse_special(status: os.stat_result, limit: Optional[int]) -> None:
    """Raise ReadError for anything but a regular file within `limit` bytes."""
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise ReadError("cannot read file: it is a directory")
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "a special file")
        raise ReadError(f"not a regular file ({kind}); not read")
    if limit is not None and status.st_size > limit:
        raise ReadError(_too_large(status.st_size, limit))


def _too_large(size: int, limit: int) -> str:
    return f"file too large to read ({size:,} bytes; the limit, `max-file-size`, is {limit:,} bytes)"


def read_bytes(path: str, limit: Optional[int] = MAX_FILE_SIZE) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; raises ReadError with a plain message.

    Only regular files are read: a FIFO would wait forever for a writer, a device
    (a link to /dev/zero) never ends. The path is checked before it is opened (so a
    device is never opened), opened without waiting, and checked again on the open
    file, so a FIFO swapped in between is refused too; reading stops past `limit`
    (a file that grows meanwhile).
    """
    try:
        _refuse_special(os.stat(path), limit)
        descriptor = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise ReadError("no such file or directory") from None
    except IsADirectoryError:
        raise ReadError("cannot read file: it is a directory") from None
    except OSError as error:
        raise ReadError(f"cannot read file: {error.strerror or error}") from None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            _refuse_special(os.fstat(handle.fileno()), limit)
            data = handle.read() if limit is None else handle.read(limit + 1)
    except OSError as error:
        raise ReadError(f"cannot read file: {error.strerror or error}") from None
    if limit is not None and len(data) > limit:
        raise ReadError(_too_large(len(data), limit))
    return data


def decode_python(data: bytes) -> tuple[str, str]:
    """Text and encoding of Python source, as the interpreter would decode it.

    A declared codec this interpreter does not know (one an installed package would
    register) is read as UTF-8 when the bytes are UTF-8. The BOM is kept out of the text (encoding 'utf-8-sig' puts it back on
    write); line endings are left exactly as they are.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if not str(error).startswith("unknown encoding"):
            raise SourceError(f"cannot decode file: {error}") from None
        # a codec that a package registers when installed (`# -*- coding: future_fstrings -*-`),
        # missing here: such codecs read UTF-8 text, so the file is read as UTF-8 when it is
        encoding = "utf-8"
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError:
            raise SourceError(f"cannot decode file: {error}") from None
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise SourceError(
            f"cannot decode file as {encoding}: {error.reason} (byte 0x{data[error.start]:02x})",
            line,
            column,
        ) from None


def python_lines(text: str, keepends: bool = False) -> list[str]:
    """The text's lines as Python numbers them: ended by a line feed, a carriage return
    and line feed, or a carriage return alone. (`str.splitlines` also breaks at a form
    feed and other characters that Python reads as whitespace, which would shift the
    line numbers of everything after them.)"""
    if "\r" not in text and not keepends:
        lines = text.split("\n")
    else:
        lines = _LINE_ENDS.findall(text)
        if not keepends:
            lines = [line.rstrip("\r\n") for line in lines]
        return lines
    if lines[-1] == "":
        lines.pop()
    return lines


_LINE_ENDS = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def unified_diff(before: str, after: str, label: str) -> str:
    """A unified diff between two texts, safe for files without a final newline."""
    import difflib  # only `--diff` and the fixer's reports need it: not paid at start-up

    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), label, label
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


class PythonDocument(NamedTuple):
    """A `.py` file: the text analysed is the file's text."""

    path: str
    text: str
    encoding: str

    @classmethod
    def from_bytes(cls, path: str, data: bytes) -> "PythonDocument":
        text, encoding = decode_python(data)
        return cls(path, text, encoding)

    def replaced(self, text: str) -> "PythonDocument":
        return self._replace(text=text)

    def locate(self, diagnostic: Diagnostic) -> Diagnostic:
        return diagnostic

    def text_line(self, diagnostic: Diagnostic) -> int:
        """The line of `text` a located diagnostic is on (the same line, for a file)."""
        return diagnostic.line

    def lines(self, diagnostic: Diagnostic) -> list[str]:
        """The lines a diagnostic's line numbers count (the whole file), for source snippets."""
        return python_lines(self.text)

    def diff(self, before: "PythonDocument") -> str:
        return unified_diff(before.text, self.text, self.path)

    def encoded(self) -> bytes:
        return self.text.encode(self.encoding)


# ---------------------------------------------------------------- writing


_DEFERRED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def signals_deferred(signals: Sequence[int] = _DEFERRED_SIGNALS):
    """Hold back interrupts while a file is being replaced; they arrive right after.

    So an interrupt leaves the old file or the new one, and no temporary file.
    Python runs signal handlers in the main thread whichever thread the
    signal reached, so swapping the handlers (not the thread's signal mask)
    holds them back in every case; other threads cannot install handlers and
    run the block as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {number: signal.signal(number, lambda number, frame: caught.append(number)) for number in signals}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in caught:
            signal.raise_signal(number)


def _refusal(target: str, status: os.stat_result) -> Optional[str]:
    """Why replacing this file would lose something, if it would."""
    if not status.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        return "the file is read-only"
    if status.st_nlink > 1:
        return f"the file has {status.st_nlink} hard links, which a rewritten file would break"
    return None


def _unchanged(target: str, expected: Optional[bytes]) -> bool:
    if expected is None:
        return True
    try:
        with open(target, "rb") as handle:
            return handle.read() == expected
    except OSError:
        return False


def write_atomic(path: str, data: bytes, *, expected: Optional[bytes] = None) -> None:
    """Replace a file's content all at once, keeping its mode, owner, group and extended attributes.

    The bytes go to a temporary file in the same folder, are flushed to disk,
    and `os.replace` swaps it in: an interrupt leaves the old file or the
    new one, never a mix, and no temporary file (interrupts wait until the
    swap is done). With `expected`, the file is replaced only if it still
    holds exactly those bytes, checked just before the swap: a change saved
    while the run was analysing is never overwritten. A symbolic link is
    kept; its target is replaced. Raises WriteRefused (nothing written) for
    a changed, read-only or hard-linked file, or one whose owner or extended
    attributes cannot be kept.
    """
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    try:
        status: Optional[os.stat_result] = os.stat(target)
    except FileNotFoundError:
        if expected is not None:
            raise WriteRefused("the file was removed during the run") from None
        status = None
    if status is not None:
        reason = _refusal(target, status)
        if reason:
            raise WriteRefused(reason)
    import tempfile  # only a fix writes: a check does not pay for importing it (shutil, random)

    with signals_deferred():
        handle, temporary = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(target) + ".", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            if status is not None:
                os.chmod(temporary, stat.S_IMODE(status.st_mode))
                _keep_owner(temporary, status)
                _keep_extended_attributes(target, temporary)
            if not _unchanged(target, expected):
                raise WriteRefused("the file changed on disk during the run; check it again")
            os.replace(temporary, target)
        except BaseException:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
            raise


def _keep_owner(temporary: str, status: os.stat_result) -> None:
    created = os.stat(temporary)
    if (created.st_uid, created.st_gid) == (status.st_uid, status.st_gid):
        return
    try:
        os.chown(temporary, status.st_uid, status.st_gid)
    except (PermissionError, AttributeError):
        raise WriteRefused(
            f"its owner and group ({status.st_uid}:{status.st_gid}) could not be kept on a rewritten file"
        ) from None


def _keep_extended_attributes(target: str, temporary: str) -> None:
    """Give the rewritten file the extended attributes of the file it replaces (tags,
    ACLs, quarantine marks), as its mode is kept; raise WriteRefused where one cannot be."""
    if not hasattr(os, "listxattr"):
        return  # (not on this platform)
    try:
        names = os.listxattr(target)
    except OSError:
        return  # the file system keeps none
    for name in names:
        try:
            value = os.getxattr(target, name)
            try:
                if os.getxattr(temporary, name) == value:
                    continue  # (the folder's default, given to every new file)
            except OSError:
                pass
            os.setxattr(temporary, name, value)
        except OSError as error:
            raise WriteRefused(
                f"its extended attribute {name} could not be kept on a rewritten file ({error.strerror or error})"
            ) from None
