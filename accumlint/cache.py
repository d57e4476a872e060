"""A cache of analysis results for unchanged files.

An entry is keyed by a hash of everything the result depends on: the text,
the analysis options, accumlint's version and the size and modification time
of accumlint's own modules (so an edited install never serves stale results).
It holds the raw findings before selection and `noqa`, so changing
`--select` or a comment elsewhere never needs a re-parse. One small file per
entry, written atomically: parallel runs and workers cannot corrupt it, and
a broken or unwritable cache is simply a miss.

Where: `--cache-dir`, else $ACCUMLINT_CACHE_DIR, else `.accumlint_cache/` at
the project root (the nearest folder, from the first checked path upwards,
whose pyproject.toml has a `[tool.accumlint]` table, or that holds `.git`),
so a check run from a subfolder shares the project's cache instead of
leaving caches in every folder. Its size is bounded: once it holds more
than MAX_BYTES, the least recently used entries go (hits refresh an entry's
time), and caches of other accumlint versions are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import accumlint
from accumlint.diagnostics import Diagnostic, FixInfo
from accumlint.sources import signals_deferred

ENVIRONMENT_VARIABLE = "ACCUMLINT_CACHE_DIR"
DEFAULT_DIRECTORY = ".accumlint_cache"
TAG = "CACHEDIR.TAG"
MAX_BYTES = 64 * 1024 * 1024


def _code_fingerprint() -> str:
    package = Path(accumlint.__file__).parent
    digest = hashlib.sha256(accumlint.__version__.encode())
    for directory, dirnames, filenames in sorted(os.walk(package)):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                status = os.stat(os.path.join(directory, name))
                digest.update(f"{directory}/{name}:{status.st_size}:{status.st_mtime_ns}".encode())
    return digest.hexdigest()


def _digest_of(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def _to_json(diagnostic: Diagnostic) -> dict:
    return {**diagnostic._asdict(), "fix": diagnostic.fix._asdict() if diagnostic.fix else None}


def _from_json(data: dict, path: str) -> Diagnostic:
    fix = data.pop("fix")
    return Diagnostic(**{**data, "path": path}, fix=FixInfo(**fix) if fix else None)


class Cache:
    """Raw analysis results on disk, one file per key."""

    def __init__(self, directory: Path, max_bytes: int = MAX_BYTES) -> None:
        self.root = directory
        self.directory = directory / f"v{accumlint.__version__}"
        self.max_bytes = max_bytes
        self._salt = _code_fingerprint()
        self.hits = 0
        self.writes = 0

    def key(self, text: str, options: object) -> str:
        digest = hashlib.sha256(self._salt.encode())
        digest.update(repr(options).encode())
        digest.update(text.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def get(self, key: str, path: str) -> Optional[list[Diagnostic]]:
        """The raw findings stored under `key`, unless a project module the analysis read
        (a helper, a constant, a configuration file) has changed since: then a miss."""
        entry = self.directory / f"{key}.json"
        try:
            with open(entry, encoding="utf-8") as handle:
                stored = json.load(handle)
            if type(stored) is dict:  # a result that read other project files: each must be unchanged
                if not all(_digest_of(read) == digest for read, digest in stored["reads"]):
                    return None
                stored = stored["diagnostics"]
            found = [_from_json(entry, path) for entry in stored]
            os.utime(entry)  # recently used: pruned last
        except (OSError, ValueError, TypeError, KeyError):
            return None
        self.hits += 1
        return found

    def put(self, key: str, diagnostics: list[Diagnostic], reads: tuple[tuple[str, str], ...] = ()) -> None:
        """Store raw findings (a JSON list), or, when the analysis read other project files,
        an object with the findings and those files' sha256 (`get` checks them)."""
        try:
            if not self.directory.is_dir():
                self._create()
            found = [_to_json(d) for d in diagnostics]
            entry = json.dumps({"diagnostics": found, "reads": [list(r) for r in reads]} if reads else found)
            with signals_deferred():  # an interrupt leaves no temporary file behind
                handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
                try:
                    with os.fdopen(handle, "w", encoding="utf-8") as stream:
                        stream.write(entry)
                    os.replace(temporary, self.directory / f"{key}.json")
                    self.writes += 1
                except BaseException:
                    os.unlink(temporary)
                    raise
        except OSError:
            pass  # a cache that cannot be written is a cache that misses

    def prune(self) -> None:
        """Keep the cache under `max_bytes` (oldest entries first); drop other versions' caches."""
        if not self.writes:
            return
        try:
            for other in self.root.iterdir():
                if other.is_dir() and other.name.startswith("v") and other != self.directory:
                    shutil.rmtree(other, ignore_errors=True)
            entries = [(e.stat().st_mtime, e.stat().st_size, e.path) for e in os.scandir(self.directory)]
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

    def _create(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        root = self.directory.parent
        (root / ".gitignore").write_text("# Created by accumlint.\n*\n", encoding="utf-8")
        (root / TAG).write_text(
            "Signature: 8a477f597d28d172789f06886806bc55\n# accumlint's cache of results.\n",
            encoding="utf-8",
        )


def project_root(start: Path) -> Path:
    """The nearest folder from `start` up that configures accumlint or is a git root; else `start`'s."""
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
        try:
            if "[tool.accumlint" in (candidate / "pyproject.toml").read_text(encoding="utf-8", errors="replace"):
                return candidate
        except OSError:
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


def clean(directory: Path) -> bool:
    """Remove a cache folder that accumlint made (it holds our CACHEDIR.TAG); True if one was removed."""
    if not (directory / TAG).is_file():
        return False
    shutil.rmtree(directory)
    return True
