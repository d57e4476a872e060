"""Which project modules may run a module's helpers from a loop: the importers of a module.

A finding on a helper's statement belongs to the helper's file (README, "The
project around a file"), so checking that file alone must find the loops of other
modules that call it. The project's Python files are scanned once per process
(only their import lines and the names they call are kept), bounded in files
and bytes so that a very large tree costs a bounded scan, never a hang.
"""

from __future__ import annotations

import os
import re
import stat
import time
from typing import Optional

# A tree larger than this is not scanned further: importers beyond it stay unknown.
MAX_FILES = 5_000
MAX_BYTES = 64 << 20
MAX_FILE_BYTES = 2_000_000
_SKIPPED_FOLDERS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "build", "dist"}
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import\b([^\n#;]*)|import[ \t]+([\w.]+))", re.MULTILINE)
_LOOP = re.compile(r"^[ \t]*(?:for|while|async[ \t]+for)\b", re.MULTILINE)

# A scan serves this many seconds (a long-lived editor-server process sees new files after it).
SCAN_LIFETIME = 5.0
_SCANS: dict[str, tuple[float, dict[str, str]]] = {}
_MENTIONS: dict[str, frozenset[str]] = {}
_CALLS: dict[str, frozenset[str]] = {}
_CALLED = re.compile(r"\b(\w+)\s*\(")


def _scan(root: str) -> dict[str, str]:
    """path -> text of the project's files that hold a loop (bounded in files and bytes)."""
    found: dict[str, str] = {}
    files = total = 0
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(
            f for f in folders
            if not f.startswith(".") and f not in _SKIPPED_FOLDERS
            and not os.path.exists(os.path.join(folder, f, "pyvenv.cfg"))
        )
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            files += 1
            if files > MAX_FILES or total > MAX_BYTES:
                return found
            path = os.path.join(folder, name)
            try:
                status = os.stat(path)
                # only regular files: opening a FIFO or a device named `x.py` would block or never end
                if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_FILE_BYTES:
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            total += len(text)
            if _LOOP.search(text) is not None:
                found[path] = text
    return found


def _mentioned(path: str, text: str) -> frozenset[str]:
    """The module names a file's import lines mention (and the names `from X import` takes)."""
    names = _MENTIONS.get(path)
    if names is None:
        found: set[str] = set()
        for match in _IMPORT_LINE.finditer(text):
            module = match.group(1) or match.group(3)
            found.update(part for part in module.split(".") if part)
            if match.group(2):  # `from . import steps`: the names may be modules
                found.update(re.findall(r"\w+", match.group(2)))
        names = _MENTIONS[path] = frozenset(found)
    return names


def _called_names(path: str, text: str) -> frozenset[str]:
    names = _CALLS.get(path)
    if names is None:
        names = _CALLS[path] = frozenset(_CALLED.findall(text))
    return names


# A top-level function, up to the next top-level statement.
_TOP_LEVEL_FUNCTION = re.compile(r"^def[ \t]+(\w+)[^\n]*\n(?:[ \t]+[^\n]*\n|[ \t]*\n)*", re.MULTILINE)
# Text a function needs to hold a statement a rule reports on (role effects, `summary.ROLE_EFFECTS`).
_ROLE_HINT = re.compile(r"\.backward\(|zero_grad\(|\.step\(|\.grad\b|loss\w*\s*/|/=|sched")


def helper_names(text: str) -> list[str]:
    """Top-level functions of a module whose text may hold a backward, step, zeroing,
    loss division or scheduler (the summary decides; this only spares reading the tree)."""
    return [m.group(1) for m in _TOP_LEVEL_FUNCTION.finditer(text) if _ROLE_HINT.search(m.group(0))]


def candidate_importers(root: str, path: str, functions: list[str]) -> list[tuple[str, str]]:
    """(path, text) of the project files that may import the module at `path` and call one
    of `functions` in a loop: their import lines name its module and they call the
    function. Resolving their imports decides."""
    wanted = set(functions)
    if not wanted:
        return []
    stamped = _SCANS.get(root)
    if stamped is None or time.monotonic() - stamped[0] > SCAN_LIFETIME:
        stamped = _SCANS[root] = (time.monotonic(), _scan(root))
        _MENTIONS.clear()
        _CALLS.clear()
    scan = stamped[1]
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(path))
    target = os.path.abspath(path)
    found = []
    for other, text in scan.items():
        if stem not in text or not any(name in text for name in wanted) or os.path.abspath(other) == target:
            continue
        if stem in _mentioned(other, text) and wanted & _called_names(other, text):
            found.append((other, text))
    return found


def forget(root: Optional[str] = None) -> None:
    """Drop the scans (all, or one root's): the editor server does when files change."""
    if root is None:
        _SCANS.clear()
    else:
        _SCANS.pop(root, None)
    _MENTIONS.clear()
    _CALLS.clear()
