"""A cache of analysis results for unchanged files.

An entry is keyed by a hash of everything the result depends on: the text,
the analysis options, accumlint's version, the Python and LibCST it runs
under, and the size and modification time of accumlint's own modules (so an
edited install never serves stale results).
It holds the raw findings before selection and `noqa`, so changing
`--select` or a comment elsewhere never needs a re-parse. One small file per
entry, written atomically: parallel runs and workers cannot corrupt it. An
entry is trusted only when its checksum (over its key and its content) holds
and its content has the exact shape of a list of findings; anything else, a
damaged or hand-made file, is a miss, and the next analysis rewrites it. A
broken or unwritable cache is simply a miss.

Where: `--cache-dir`, else $ACCUMLINT_CACHE_DIR, else `.accumlint_cache/` at
the project root (the nearest folder, from the first checked path upwards,
whose pyproject.toml has a `[tool.accumlint]` table, or that holds `.git`),
so a check run from a subfolder shares the project's cache instead of
leaving caches in every folder. Its size is bounded: once it holds more
than MAX_BYTES, the least recently used entries go (hits refresh an entry's
time), and caches of other accumlint versions are removed.

The folder is accumlint's own, as ruff's is: accumlint uses a folder it
created (marked with a standard CACHEDIR.TAG and its own MARKER file, and a
`.gitignore` of `*`), or an existing folder that holds nothing but what
accumlint writes (an empty one, or the cache of an older accumlint), which
it marks without writing a `.gitignore` into it. A named folder that holds
anything else (`--cache-dir .`, `ACCUMLINT_CACHE_DIR=~/.cache`) is never
written into: the cache goes to a `.accumlint_cache/` folder inside it. Only
files accumlint wrote are ever removed (by pruning or `accumlint clean`),
and the folder itself only when accumlint created it and nothing else is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple, Optional

import accumlint
from accumlint.diagnostics import Diagnostic, FixInfo
from accumlint.project.importers import IMPORTERS
from accumlint.project.importers import unchanged as importers_unchanged
from accumlint.source.files import SourceError, read_bytes, signals_deferred

ENVIRONMENT_VARIABLE = "ACCUMLINT_CACHE_DIR"
DEFAULT_DIRECTORY = ".accumlint_cache"
MAX_BYTES = 64 * 1024 * 1024

# The standard tag of a cache folder (https://bford.info/cachedir/): backup tools skip it.
TAG = "CACHEDIR.TAG"
TAG_TEXT = "Signature: 8a477f597d28d172789f06886806bc55\n# accumlint's cache of results.\n"
# accumlint's own mark: which folders it may remove files from, and whether it created the folder.
MARKER = "accumlint-cache.marker"
MARKER_CREATED = "accumlint cache folder\ncreated by accumlint: `accumlint clean` removes it\n"
MARKER_ADOPTED = "accumlint cache folder\nadopted by accumlint: `accumlint clean` removes what accumlint wrote here\n"
GITIGNORE = ".gitignore"
GITIGNORE_TEXT = "# Created by accumlint.\n*\n"
# What accumlint writes at the top of a cache folder (its entries live in `v<version>/` folders).
_OWN_FILES = {TAG: (TAG_TEXT,), MARKER: (MARKER_CREATED, MARKER_ADOPTED), GITIGNORE: (GITIGNORE_TEXT,)}


def _environment() -> str:
    """The Python and LibCST an entry was computed under: a file LibCST reads as a syntax
    error under one Python may parse under another. LibCST is found, not imported (a cache
    hit must not pay for its import): its version file's size and time stand for it."""
    from importlib.util import find_spec

    spec = find_spec("libcst")
    libcst = ""
    if spec is not None and spec.origin is not None:
        version_file = Path(spec.origin).with_name("_version.py")
        try:
            status = version_file.stat()
            libcst = f"{version_file}:{status.st_size}:{status.st_mtime_ns}"
        except OSError:
            libcst = spec.origin
    return f"{sys.version}|{sys.implementation.cache_tag}|{libcst}"


def _code_fingerprint() -> str:
    package = Path(accumlint.__file__).parent
    digest = hashlib.sha256(accumlint.__version__.encode())
    digest.update(_environment().encode())
    for directory, dirnames, filenames in sorted(os.walk(package)):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                status = os.stat(os.path.join(directory, name))
                digest.update(f"{directory}/{name}:{status.st_size}:{status.st_mtime_ns}".encode())
    return digest.hexdigest()


def _digest_of(path: str) -> Optional[str]:
    """The sha256 of a project file an analysis read (None: gone, or no longer a regular file)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def _unchanged(read: object, fingerprint: object) -> bool:
    """Whether what an analysis read is as it was: a project file (its sha256), or the
    importers of a module's helpers (`accumlint.project.importers.dependency`)."""
    if type(read) is not str or type(fingerprint) is not str:
        return False
    if read.startswith(IMPORTERS):
        return importers_unchanged(read, fingerprint)
    return _digest_of(read) == fingerprint


# ---------------------------------------------------------------- entries


def _to_json(diagnostic: Diagnostic) -> dict:
    data = {**diagnostic._asdict(), "fix": diagnostic.fix._asdict() if diagnostic.fix else None}
    del data["path"]  # the entry serves any file with the same text
    return data


_INTEGER_FIELDS = ("line", "column", "end_line", "end_column")
_TEXT_FIELDS = ("code", "name", "message", "help")
_OPTIONAL_INTEGER_FIELDS = ("cell", "related_line")
_FIELDS = frozenset(Diagnostic._fields) - {"path"}


def _is_int(value: Any) -> bool:
    return type(value) is int


def _from_json(data: Any, path: str) -> Optional[Diagnostic]:
    """The finding an entry's item holds, or None when the item is not exactly one."""
    if type(data) is not dict or data.keys() != _FIELDS:
        return None
    if not all(_is_int(data[name]) for name in _INTEGER_FIELDS):
        return None
    if not all(type(data[name]) is str for name in _TEXT_FIELDS):
        return None
    if not all(data[name] is None or _is_int(data[name]) for name in _OPTIONAL_INTEGER_FIELDS):
        return None
    fix = data["fix"]
    if fix is not None:
        if type(fix) is not dict or fix.keys() != set(FixInfo._fields):
            return None
        if fix["applicability"] not in ("safe", "unsafe") or type(fix["description"]) is not str:
            return None
        fix = FixInfo(**fix)
    return Diagnostic(**{**data, "path": path, "fix": fix})


def _checksum(key: str, payload: str) -> str:
    return hashlib.sha256(f"{key}\n{payload}".encode("utf-8", "surrogatepass")).hexdigest()


def _encode(key: str, diagnostics: list[Diagnostic], reads: tuple[tuple[str, str], ...] = ()) -> str:
    """An entry's file: the checksum of its key and content, a newline, the content (JSON):
    the findings' list, or, when the analysis read other project files (helpers, constants,
    configuration files), an object with the findings and those files' sha256."""
    found = [_to_json(d) for d in diagnostics]
    payload = json.dumps({"diagnostics": found, "reads": [list(r) for r in reads]} if reads else found)
    return f"{_checksum(key, payload)}\n{payload}"


def _decode(key: str, entry: str, path: str) -> Optional[list[Diagnostic]]:
    """The findings of an entry's file, or None when its checksum or its shape is wrong."""
    checksum, newline, payload = entry.partition("\n")
    if not newline or checksum != _checksum(key, payload):
        return None
    try:
        items = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if type(items) is dict:  # a result that read other project files: each must be unchanged
        reads = items.get("reads")
        if type(reads) is not list or not all(type(r) is list and len(r) == 2 and _unchanged(*r) for r in reads):
            return None
        items = items.get("diagnostics")
    if type(items) is not list:
        return None
    found = [_from_json(item, path) for item in items]
    return None if None in found else found


# ---------------------------------------------------------------- the folder


def _holds(path: Path, texts: tuple[str, ...]) -> bool:
    """Whether a small regular file holds one of `texts` exactly (never opens a FIFO or a device)."""
    try:
        return read_bytes(str(path), 4096).decode("utf-8") in texts
    except (SourceError, ValueError):
        return False


def is_marked(directory: Path) -> bool:
    """Whether accumlint marked this folder as its cache."""
    return _holds(directory / MARKER, _OWN_FILES[MARKER])


def _is_entry(name: str) -> bool:
    """Whether a name is one accumlint gives a file in a `v<version>/` folder: an entry (a key's
    SHA-256) or a temporary file being written (`tempfile`'s)."""
    return _ENTRY.fullmatch(name) is not None


def _is_version_folder(name: str) -> bool:
    return _VERSION_FOLDER.fullmatch(name) is not None


_ENTRY = re.compile(r"[0-9a-f]{64}\.json|tmp[0-9a-z_]{8}\.tmp")
_VERSION_FOLDER = re.compile(r"v[0-9][0-9A-Za-z.+-]*")


def _only_ours(directory: Path) -> bool:
    """Whether an unmarked folder holds nothing but what accumlint writes (nothing at all, or an
    older accumlint's cache: its tag, its `.gitignore` and `v*` folders of entries)."""
    try:
        for child in os.scandir(directory):
            if child.name in _OWN_FILES:
                if not _holds(Path(child.path), _OWN_FILES[child.name]):
                    return False
            elif not (_is_version_folder(child.name) and child.is_dir(follow_symlinks=False)):
                return False
            elif not all(_is_entry(entry.name) and entry.is_file(follow_symlinks=False) for entry in os.scandir(child.path)):
                return False
    except OSError:
        return False
    return True


def _usable(directory: Path) -> bool:
    """Whether the cache may live in this folder: it is accumlint's, or it may become so."""
    if not os.path.lexists(directory):
        return True
    return os.path.isdir(directory) and (is_marked(directory) or _only_ours(directory))


def cache_root(chosen: Path) -> Optional[Path]:
    """The folder the cache lives in for a chosen one: itself when accumlint may use it, else
    a `.accumlint_cache/` inside it; None when neither may be used (nothing is cached)."""
    for candidate in (chosen, chosen / DEFAULT_DIRECTORY):
        if _usable(candidate):
            return candidate
    return None


def _write_new(path: Path, text: str) -> None:
    """Write a small file only if it does not exist (no one's file is ever replaced)."""
    try:
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        pass


def _claim(root: Path) -> None:
    """Create (or adopt) and mark the cache folder; a `.gitignore` only in a folder accumlint creates."""
    if is_marked(root):
        return
    try:
        root.mkdir(parents=True)
        created = True
    except FileExistsError:
        created = False
        if not _usable(root):  # something arrived meanwhile: not ours to write into
            raise
    _write_new(root / MARKER, MARKER_CREATED if created else MARKER_ADOPTED)  # first: a parallel run sees it's ours
    if created:
        _write_new(root / GITIGNORE, GITIGNORE_TEXT)
    _write_new(root / TAG, TAG_TEXT)


def _remove_entries(folder: str) -> bool:
    """Remove the entries accumlint wrote in a `v*` folder, then the folder if that empties it;
    True when the folder is gone."""
    try:
        for entry in os.scandir(folder):
            if _is_entry(entry.name) and entry.is_file(follow_symlinks=False):
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    pass
        os.rmdir(folder)
    except OSError:
        return False
    return True


class Cache:
    """Raw analysis results on disk, one file per key.

    `root` is the folder chosen for it; when that folder holds other things, the
    cache lives in `root`'s `.accumlint_cache/` instead (see `cache_root`), and
    when neither may be used nothing is cached (`usable` is False).
    """

    def __init__(self, directory: Path, max_bytes: int = MAX_BYTES) -> None:
        found = cache_root(directory)
        self.usable = found is not None
        self.root = found if found is not None else directory
        self.directory = self.root / f"v{accumlint.__version__}"
        self.max_bytes = max_bytes
        self._salt = _code_fingerprint()
        self.hits = 0
        self.writes = 0

    def key(self, text: str, options: object, root: str = "") -> str:
        """The key of a text's result under `options`, in the project rooted at `root`:
        without a root marker the root is the checked paths' common parent, so the same
        file checked beside other paths may read another project."""
        digest = hashlib.sha256(self._salt.encode())
        digest.update(repr(options).encode())
        digest.update(root.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(text.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def get(self, key: str, path: str) -> Optional[list[Diagnostic]]:
        """The raw findings stored under `key`; a miss when the entry is damaged, not ours,
        or a project file its analysis read has changed since (`_decode`)."""
        if not self.usable:
            return None
        entry = self.directory / f"{key}.json"
        try:
            with open(entry, encoding="utf-8", errors="surrogateescape") as handle:
                found = _decode(key, handle.read(), path)
            if found is None:
                return None  # damaged or not ours: a miss, rewritten by the analysis that follows
            os.utime(entry)  # recently used: pruned last
        except (OSError, ValueError):
            return None
        self.hits += 1
        return found

    def put(self, key: str, diagnostics: list[Diagnostic], reads: tuple[tuple[str, str], ...] = ()) -> None:
        """Store raw findings, with the project files they were computed from (`_encode`)."""
        if not self.usable:
            return
        try:
            if not self.directory.is_dir():
                _claim(self.root)
                self.directory.mkdir(exist_ok=True)
            entry = _encode(key, diagnostics, reads)
            with signals_deferred():  # an interrupt leaves no temporary file behind
                handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
                try:
                    with os.fdopen(handle, "w", encoding="utf-8", errors="surrogatepass") as stream:
                        stream.write(entry)
                    os.replace(temporary, self.directory / f"{key}.json")
                    self.writes += 1
                except BaseException:
                    os.unlink(temporary)
                    raise
        except OSError:
            pass  # a cache that cannot be written is a cache that misses

    def prune(self) -> None:
        """Keep the cache under `max_bytes` (oldest entries first); drop other versions' entries."""
        if not self.writes or not is_marked(self.root):
            return
        try:
            for other in os.scandir(self.root):
                if _is_version_folder(other.name) and other.is_dir(follow_symlinks=False) and other.path != str(self.directory):
                    _remove_entries(other.path)
            entries = [
                (e.stat().st_mtime, e.stat().st_size, e.path)
                for e in os.scandir(self.directory)
                if _is_entry(e.name) and e.is_file(follow_symlinks=False)
            ]
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes * 0.8:
                break
            try:
                os.unlink(path)
                total -= size
            except OSError:
                pass


def project_root(start: Path) -> Path:
    """The nearest folder from `start` up that configures accumlint or is a git root; else `start`'s."""
    start = start.resolve()
    folder = start if os.path.isdir(start) else start.parent
    for candidate in (folder, *folder.parents):
        if os.path.exists(candidate / ".git"):  # (False for a path that cannot be read, never an error)
            return candidate
        try:
            if "[tool.accumlint" in read_bytes(str(candidate / "pyproject.toml")).decode("utf-8", "replace"):
                return candidate
        except SourceError:
            continue
    return folder


def cache_directory(explicit: Optional[str] = None, paths: tuple[str, ...] = (".",)) -> Path:
    """`--cache-dir`, else $ACCUMLINT_CACHE_DIR, else `.accumlint_cache/` at the project root."""
    chosen = explicit or os.environ.get(ENVIRONMENT_VARIABLE)
    if chosen:
        return Path(chosen)
    first = next((path for path in paths if path != "-"), ".")
    return project_root(Path(first)) / DEFAULT_DIRECTORY


def open_cache(explicit: Optional[str] = None, paths: tuple[str, ...] = (".",)) -> Cache:
    """The cache for a run over `paths` (see `cache_directory`)."""
    return Cache(cache_directory(explicit, paths))


class Cleaned(NamedTuple):
    """What `clean` did: the cache folder it found (None: none), and what it left there."""

    directory: Optional[Path]
    kept: tuple[str, ...] = ()


def clean(chosen: Path) -> Cleaned:
    """Remove the cache for a chosen folder: only a folder accumlint marked (the chosen one or
    its `.accumlint_cache/`), only the files accumlint wrote there, and the folder itself
    only when accumlint created it and nothing else is left in it."""
    for directory in (chosen, chosen / DEFAULT_DIRECTORY):
        if os.path.isdir(directory) and is_marked(directory):
            break
    else:
        return Cleaned(None)
    created = _holds(directory / MARKER, (MARKER_CREATED,))
    kept = []
    for child in sorted(os.scandir(directory), key=lambda child: child.name):
        if child.name == MARKER:
            continue
        if child.name in _OWN_FILES and _holds(Path(child.path), _OWN_FILES[child.name]):
            os.unlink(child.path)
        elif _is_version_folder(child.name) and child.is_dir(follow_symlinks=False) and _remove_entries(child.path):
            pass
        else:
            kept.append(child.name)
    if kept:
        return Cleaned(directory, tuple(kept))  # still marked: a later clean finds it again
    os.unlink(directory / MARKER)
    if created:
        os.rmdir(directory)
    return Cleaned(directory)
