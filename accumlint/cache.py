"""A cache of analysis results for unchanged files.

An entry is keyed by a hash of everything the result depends on: the text,
the analysis options, accumlint's version and the size and modification time
of accumlint's own modules (so an edited install never serves stale results).
It holds the raw findings before selection and `noqa`, so changing
`--select` or a comment elsewhere never needs a re-parse. One small file per
entry, written atomically: parallel runs and workers cannot corrupt it, and
a broken or unwritable cache is simply a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Optional

import accumlint
from accumlint.diagnostics import Diagnostic, FixInfo

ENVIRONMENT_VARIABLE = "ACCUMLINT_CACHE_DIR"
DEFAULT_DIRECTORY = ".accumlint_cache"


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


def _to_json(diagnostic: Diagnostic) -> dict:
    return dataclasses.asdict(diagnostic)


def _from_json(data: dict, path: str) -> Diagnostic:
    fix = data.pop("fix")
    return Diagnostic(**{**data, "path": path}, fix=FixInfo(**fix) if fix else None)


class Cache:
    """Raw analysis results on disk, one file per key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / f"v{accumlint.__version__}"
        self._salt = _code_fingerprint()
        self.hits = 0

    def key(self, text: str, options: object) -> str:
        digest = hashlib.sha256(self._salt.encode())
        digest.update(repr(options).encode())
        digest.update(text.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def get(self, key: str, path: str) -> Optional[list[Diagnostic]]:
        try:
            with open(self.directory / f"{key}.json", encoding="utf-8") as handle:
                entries = json.load(handle)
            found = [_from_json(entry, path) for entry in entries]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        self.hits += 1
        return found

    def put(self, key: str, diagnostics: list[Diagnostic]) -> None:
        try:
            if not self.directory.is_dir():
                self._create()
            handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump([_to_json(d) for d in diagnostics], stream)
            os.replace(temporary, self.directory / f"{key}.json")
        except OSError:
            pass  # a cache that cannot be written is a cache that misses

    def _create(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        root = self.directory.parent
        (root / ".gitignore").write_text("# Created by accumlint.\n*\n", encoding="utf-8")
        (root / "CACHEDIR.TAG").write_text(
            "Signature: 8a477f597d28d172789f06886806bc55\n# accumlint's cache of results.\n",
            encoding="utf-8",
        )


def open_cache() -> Cache:
    """The cache in $ACCUMLINT_CACHE_DIR, or `.accumlint_cache/` in the working folder."""
    return Cache(Path(os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_DIRECTORY))
