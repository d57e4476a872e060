"""Finding the files to check, reading them faithfully and writing them back safely.

A fixer that changes a file's encoding, BOM, line endings or mode, or leaves a
half-written file after an interrupt, is worse than no fixer: so files are
read as bytes, decoded as Python would decode them (PEP 263, BOM), never
newline-translated, and replaced atomically.
"""

from __future__ import annotations

import difflib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Optional

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


# ---------------------------------------------------------------- discovery


@dataclass(frozen=True)
class SourcePath:
    """A file to check: the path to print (as the user gave it) and whether it was named."""

    display: str
    explicit: bool


class _IgnoreFiles:
    """`.gitignore` files that apply below a folder, deepest deciding first (git's rule)."""

    def __init__(self) -> None:
        self._specs: dict[Path, object] = {}

    def _spec(self, directory: Path):
        if directory not in self._specs:
            spec = None
            for name in (".gitignore", ".git/info/exclude"):
                candidate = directory / name
                if candidate.is_file():
                    import pathspec

                    try:
                        lines = candidate.read_text(encoding="utf-8", errors="replace").splitlines()
                    except OSError:
                        continue
                    more = pathspec.GitIgnoreSpec.from_lines(lines)
                    spec = more if spec is None else spec + more
            self._specs[directory] = spec
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool, stop: Path) -> bool:
        """Whether a .gitignore between `path` and `stop` (included) ignores it."""
        directory = path.parent
        while True:
            spec = self._spec(directory)
            if spec is not None:
                relative = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
                result = spec.check_file(relative)
                if result.include is not None:
                    return bool(result.include)
            if directory == stop or directory.parent == directory:
                return False
            directory = directory.parent


def _repository_root(start: Path) -> Path:
    """The git work tree holding `start`, or `start` itself outside any repository."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def _is_environment(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file()


def discover(
    paths: list[str], is_excluded: Callable[[str, bool], bool]
) -> Iterator[SourcePath]:
    """Files to check below the given paths, each once, in a stable order.

    Named files are always checked (unless `exclude` names them, so that
    pre-commit's file lists honor it); folders are walked, skipping tools'
    folders, virtual environments, `.gitignore`d paths and `exclude`. A
    named folder that a .gitignore above it ignores is still walked.
    A path that does not exist is yielded so that reading it reports it.
    """
    ignores = _IgnoreFiles()
    seen: set[str] = set()

    def once(display: str, explicit: bool) -> Iterator[SourcePath]:
        key = os.path.realpath(display)
        if key not in seen:
            seen.add(key)
            yield SourcePath(display, explicit)

    for given in paths:
        if not os.path.isdir(given):
            if not is_excluded(given, False):
                yield from once(given, True)
            continue
        root = Path(os.path.abspath(given))
        stop = _repository_root(root)
        if root != stop and ignores.ignored(root, True, stop):
            stop = root  # an ignored folder named explicitly: only its own .gitignore files apply
        for directory, dirnames, filenames in os.walk(given):
            absolute = Path(os.path.abspath(directory))
            kept = []
            for name in sorted(dirnames):
                child = absolute / name
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
                if ignores.ignored(absolute / name, False, stop) or is_excluded(path, False):
                    continue
                yield from once(path[2:] if given == "." and path.startswith("./") else path, False)


# ---------------------------------------------------------------- reading


def read_bytes(path: str) -> bytes:
    """A file's bytes; raises SourceError with a plain message."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except IsADirectoryError:
        raise SourceError("cannot read file: it is a directory") from None
    except OSError as error:
        raise SourceError(f"cannot read file: {error.strerror or error}") from None


def decode_python(data: bytes) -> tuple[str, str]:
    """Text and encoding of Python source, as the interpreter would decode it.

    The BOM is kept out of the text (encoding 'utf-8-sig' puts it back on
    write); line endings are left exactly as they are.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
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


def unified_diff(before: str, after: str, label: str) -> str:
    """A unified diff between two texts, safe for files without a final newline."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), label, label
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


@dataclass(frozen=True)
class PythonDocument:
    """A `.py` file: the text analysed is the file's text."""

    path: str
    text: str
    encoding: str

    @classmethod
    def from_bytes(cls, path: str, data: bytes) -> "PythonDocument":
        text, encoding = decode_python(data)
        return cls(path, text, encoding)

    def replaced(self, text: str) -> "PythonDocument":
        return replace(self, text=text)

    def locate(self, diagnostic: Diagnostic) -> Diagnostic:
        return diagnostic

    def text_line(self, diagnostic: Diagnostic) -> int:
        """The line of `text` a located diagnostic is on (the same line, for a file)."""
        return diagnostic.line

    def lines(self, diagnostic: Diagnostic) -> list[str]:
        """The lines a diagnostic's line numbers count (the whole file), for source snippets."""
        return self.text.splitlines()

    def diff(self, before: "PythonDocument") -> str:
        return unified_diff(before.text, self.text, self.path)

    def encoded(self) -> bytes:
        return self.text.encode(self.encoding)


def load_document(path: str, data: bytes):
    """The document for a file's bytes: a notebook for `.ipynb`, Python otherwise."""
    if path.endswith(".ipynb"):
        from accumlint.notebooks import NotebookDocument

        return NotebookDocument.from_bytes(path, data)
    return PythonDocument.from_bytes(path, data)


# ---------------------------------------------------------------- writing


def write_atomic(path: str, data: bytes) -> None:
    """Replace a file's content all at once, keeping its mode.

    The bytes go to a temporary file in the same folder, are flushed to disk,
    and `os.replace` swaps it in: an interrupt leaves the old file or the
    new one, never a mix. A symbolic link is kept; its target is replaced.
    """
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    handle, temporary = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(target) + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise

