"""The index of the project's modules: each one's summary, computed once per content.

`ProjectIndex` lives as long as the process (a worker reads a helper module
once, however many of its importers it analyses); a summary is reused while
the file's size and modification time are unchanged. Nothing here imports
LibCST: the text gate's project clause (`reach`) and the result cache ask it
before any file is parsed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, TypeVar, Union

from accumlint.project.configs import ConfigError, ConfigFacts, read_config
from accumlint.project.root import checked_parent, find_root
from accumlint.project.summary import ModuleSummary, definition_effects, imports_only, summarize

# A module larger than this is generated code: nothing is read from it.
MAX_MODULE_BYTES = 2_000_000

# The stamp of a module's text that is not (yet) on disk (`ProjectIndex.overlaid`).
_OVERLAID = (-1, -1)


@dataclass
class _Entry:
    stamp: tuple[int, int]
    digest: str
    summary: ModuleSummary


class ProjectIndex:
    """Summaries of the project's modules, computed once per file content."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._roots: dict[tuple[str, Optional[str]], str] = {}
        self._configs: dict[str, Union[ConfigFacts, ConfigError, None]] = {}
        # (path, word) -> the stamp of a text that does not hold the word (`entry`'s `mentioning`)
        self._lacking: dict[tuple[str, str], tuple[int, int]] = {}
        # (path, name, word) -> the stamp of the text read and `effects`' answer for it
        self._effects: dict[tuple[str, str, str], tuple[tuple[int, int], Optional[frozenset[str]]]] = {}
        # path -> the stamp of the text read and `imports`' answer for it
        self._imports: dict[str, tuple[tuple[int, int], Optional[dict[str, tuple[str, Optional[str], int]]]]] = {}

    def root_of(self, path: str) -> str:
        folder = os.path.dirname(os.path.abspath(path))
        key = (folder, checked_parent())  # the fallback root is the run's
        root = self._roots.get(key)
        if root is None:
            root = self._roots[key] = find_root(folder)
        return root

    def _held(self, path: str) -> Optional[tuple[tuple[int, int], Optional[_Entry]]]:
        """The stamp of the module's file and the entry the index holds of it, when that
        entry is of this stamp (or overlaid); None when there is no file to read: gone,
        not a regular file (a FIFO or a device is never opened), or too large."""
        try:
            status = os.stat(path)
        except OSError:
            return None
        stamp = (status.st_size, status.st_mtime_ns)
        found = self._entries.get(path)
        if found is not None and (found.stamp == stamp or found.stamp == _OVERLAID):
            return stamp, found
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_MODULE_BYTES:
            return None
        return stamp, None

    def entry(self, path: str, mentioning: Optional[str] = None) -> Optional[_Entry]:
        """The module's summary entry (None: unreadable, not a regular file, too large); with
        `mentioning`, None too when its text does not hold that word, which one search of its
        bytes rules out for most modules, without `ast`."""
        held = self._held(path)
        if held is None:
            return None
        stamp, found = held
        if found is not None:
            return found
        if mentioning is not None and self._lacking.get((path, mentioning)) == stamp:
            return None
        data = _read(path)
        if data is None:
            return None
        if mentioning is not None and mentioning.encode() not in data:
            self._lacking[(path, mentioning)] = stamp
            return None
        found = self._entries[path] = _Entry(stamp, digest(data), summarize(path, _text(data)))
        return found

    def imports(self, path: str) -> Optional[dict[str, tuple[str, Optional[str], int]]]:
        """The module's imports as its summary entry holds them (`entry(path)`), without
        summarising the rest of it when the index does not hold its summary yet
        (`summary.imports_only`); None where `entry` gives no summary, or one with an error."""
        held = self._held(path)
        if held is None:
            return None
        stamp, found = held
        if found is not None:
            return found.summary.imports if found.summary.error is None else None
        return _answer_for_stamp(self._imports, path, stamp, path, lambda data: imports_only(_text(data)))

    def effects(self, path: str, name: str, mentioning: str) -> Optional[frozenset[str]]:
        """What `entry(path, mentioning)` would say of the effects of the module's top-level
        function `name` (else of its class `name`'s `__call__`), without summarising the
        module when the index does not hold its summary yet (`summary.definition_effects`).
        None: no such definition, or no entry."""
        held = self._held(path)
        if held is None:
            return None
        stamp, found = held
        if found is not None:
            if found.summary.error is not None:
                return None
            function = found.summary.functions.get(name) or found.summary.functions.get(f"{name}.__call__")
            return function.effects if function is not None else None
        return _answer_for_stamp(self._effects, (path, name, mentioning), stamp, path,
                                 lambda data: definition_effects(_text(data), name) if mentioning.encode() in data else None)

    @contextlib.contextmanager
    def overlaid(self, path: str, text: str, summary: Optional[ModuleSummary] = None) -> Iterator[None]:
        """Within the block, the module at `path` reads as `text` (the fixer's current text
        of a file not yet written); after it, as its file on disk again. `summary`, the
        caller's summary of `text` at that path, spares summarising the text again."""
        key = os.path.abspath(path)
        text_digest = digest(text.encode("utf-8", "surrogatepass"))
        if summary is None or summary.path != key:
            summary = summarize(key, text)
        self._entries[key] = _Entry(_OVERLAID, text_digest, summary)
        try:
            yield
        finally:
            self._entries.pop(key, None)

    def config(self, path: str) -> Union[ConfigFacts, ConfigError, None]:
        if path not in self._configs:
            self._configs[path] = read_config(path)
        return self._configs[path]


_Key = TypeVar("_Key")
_Answer = TypeVar("_Answer")


def _answer_for_stamp(cache: dict[_Key, tuple[tuple[int, int], Optional[_Answer]]], key: _Key, stamp: tuple[int, int],
                      path: str, answer: Callable[[bytes], Optional[_Answer]]) -> Optional[_Answer]:
    """`answer` of the file's bytes, kept in `cache` under `key` while the file has `stamp`
    (None, not kept, when it cannot be read)."""
    known = cache.get(key)
    if known is not None and known[0] == stamp:
        return known[1]
    data = _read(path)
    if data is None:
        return None
    cache[key] = (stamp, answer(data))
    return cache[key][1]


def _text(data: bytes) -> str:
    """A module's text as the index reads it."""
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def _read(path: str) -> Optional[bytes]:
    """The file's bytes (None: it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


INDEX = ProjectIndex()


def overlaid(path: str, text: str, summary: Optional[ModuleSummary] = None) -> "contextlib.AbstractContextManager[None]":
    """Other modules' views read the module at `path` as `text` within the block (`summary`:
    the caller's summary of that text, if it has one)."""
    return INDEX.overlaid(path, text, summary)


def root_of(path: str) -> str:
    """The project root of a module (found once per folder)."""
    return INDEX.root_of(path)


def definition_effects_of(path: str, name: str, hint: str) -> Optional[frozenset[str]]:
    """The effects of a project module's top-level function (or callable class) `name`,
    when its text mentions `hint` (None otherwise: see `ProjectIndex.effects`)."""
    return INDEX.effects(path, name, hint)


_LAST_TEXT: dict[str, tuple[str, ModuleSummary]] = {}


def summary_of_text(path: str, text: str) -> ModuleSummary:
    """The summary of a module's text, computed once for the last text of each path (the
    gate's project clause, the search for its importers and the analysis all ask; forked
    workers inherit what the run's own process computed)."""
    found = _LAST_TEXT.get(path)
    if found is None or found[0] != text:
        if len(_LAST_TEXT) > 64:
            _LAST_TEXT.clear()
        found = _LAST_TEXT[path] = (text, summarize(path, text))
    return found[1]
