"""Which project modules may run a module's helpers from a loop: the importers of a module.

A finding on a helper's statement belongs to the helper's file (SPEC section 2,
"Project facts"), so checking that file alone must find the loops of other
modules that call it. The project's Python files are scanned once per process
(only their import lines and the names they call are kept), bounded in files
and bytes so that a very large tree costs a bounded scan, never a hang.
"""

from __future__ import annotations

import os
import re
from typing import Optional

# A tree larger than this is not scanned further: importers beyond it stay unknown.
MAX_FILES = 5_000
MAX_BYTES = 64 << 20
MAX_FILE_BYTES = 2_000_000
_SKIPPED_FOLDERS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "build", "dist"}
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import\b([^\n#;]*)|import[ \t]+([\w.]+))", re.MULTILINE)
_LOOP = re.compile(r"^[ \t]*(?:for|while|async[ \t]+for)\b", re.MULTILINE)

_SCANS: dict[str, dict[str, tuple[frozenset[str], str]]] = {}


def _scan(root: str) -> dict[str, tuple[frozenset[str], str]]:
    """path -> (the module names its import lines mention, its text), for files that hold a loop."""
    found: dict[str, tuple[frozenset[str], str]] = {}
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
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            total += len(text)
            if _LOOP.search(text) is None:
                continue
            mentioned = set()
            for match in _IMPORT_LINE.finditer(text):
                module = match.group(1) or match.group(3)
                mentioned.update(part for part in module.split(".") if part)
                if match.group(2):  # `from . import steps`: the names may be modules
                    mentioned.update(re.findall(r"\w+", match.group(2)))
            if mentioned:
                found[path] = (frozenset(mentioned), text)
    return found


def candidate_importers(root: str, path: str, functions: list[str]) -> list[tuple[str, str]]:
    """(path, text) of the project files that may import the module at `path` and call one
    of `functions` in a loop: their import lines name its module and they call the
    function. Resolving their imports decides."""
    scan = _SCANS.get(root)
    if scan is None:
        scan = _SCANS[root] = _scan(root)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(path))
    calls = re.compile(r"\b(?:%s)\s*\(" % "|".join(re.escape(f) for f in functions)) if functions else None
    found = []
    for other, (mentioned, text) in scan.items():
        if os.path.abspath(other) == os.path.abspath(path) or calls is None:
            continue
        if stem in mentioned and calls.search(text):
            found.append((other, text))
    return found


def forget(root: Optional[str] = None) -> None:
    """Drop the scans (all, or one root's): the editor server does when files change."""
    if root is None:
        _SCANS.clear()
    else:
        _SCANS.pop(root, None)
