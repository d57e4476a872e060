"""The project root and the module files that an import names."""

from __future__ import annotations

import os
from typing import Iterable, Optional

# What marks the folder that holds a project.
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


# The common parent of the paths this run checks (None: not known, e.g. the editor server):
# the project's root where no marker says it (README, "The project around a file").
_checked_parent: Optional[str] = None


def set_checked_paths(paths: Iterable[str]) -> None:
    """Remember the paths a run checks: a module under their common parent, with no root
    marker above it, belongs to the project rooted there (a script in `tools/` importing
    the package beside `tools/`). The run's workers are handed it (`set_checked_parent`)."""
    folders = [os.path.abspath(p) if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in paths if p != "-"]
    try:
        set_checked_parent(os.path.commonpath(folders) if folders else None)
    except ValueError:  # paths on different drives
        set_checked_parent(None)


def set_checked_parent(parent: Optional[str]) -> None:
    """Set the common parent of the paths this run checks (what `set_checked_paths` found,
    in the process that runs the check, or in one of its workers)."""
    global _checked_parent
    _checked_parent = parent


def checked_parent() -> Optional[str]:
    """The common parent of the paths this run checks (see `set_checked_paths`)."""
    return _checked_parent


def find_root(path: str) -> str:
    """The nearest folder from `path` up that holds a root marker; else the common parent
    of the checked paths when `path` lies under it; else `path`'s own folder."""
    start = os.path.abspath(path)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    candidate = folder
    while True:
        if any(os.path.exists(os.path.join(candidate, marker)) for marker in ROOT_MARKERS):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            break
        candidate = parent
    checked = checked_parent()
    if checked is not None and _inside(folder, checked):
        return checked
    return folder


def search_folders(root: str, importer: str) -> tuple[str, ...]:
    """Where an absolute import's first part may be a project module: the root, its
    `src/`, and the importing file's own folder (Python puts a script's folder first
    on `sys.path`)."""
    folders = [os.path.dirname(os.path.abspath(importer)), root, os.path.join(root, "src")]
    unique: list[str] = []
    for folder in folders:
        if folder not in unique and _inside(folder, root):
            unique.append(folder)
    return tuple(unique)


def _inside(folder: str, root: str) -> bool:
    return folder == root or folder.startswith(root.rstrip(os.sep) + os.sep)


def module_file(folder: str, parts: list[str]) -> Optional[str]:
    """The file of module `a.b.c` under `folder`: `a/b/c.py` or `a/b/c/__init__.py`.
    Folders without `__init__.py` count (namespace packages)."""
    if not parts or any(not part.isidentifier() for part in parts):
        return None
    base = os.path.join(folder, *parts)
    if os.path.isfile(base + ".py"):
        return base + ".py"
    init = os.path.join(base, "__init__.py")
    if os.path.isfile(init):
        return init
    return None


def is_package_folder(folder: str, parts: list[str]) -> bool:
    """Whether `a.b` names a folder under `folder` (a package, namespace or not)."""
    return bool(parts) and all(p.isidentifier() for p in parts) and os.path.isdir(os.path.join(folder, *parts))


def resolve_module(root: str, importer: str, module: str, level: int) -> Optional[str]:
    """The project file an import names (`from .a import b`: module "a", level 1), or
    None when it is not the project's (third-party, missing, outside the root)."""
    parts = [p for p in module.split(".") if p] if module else []
    if level > 0:
        folder = os.path.dirname(os.path.abspath(importer))
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        if not _inside(folder, root):
            return None
        if not parts:
            init = os.path.join(folder, "__init__.py")
            return init if os.path.isfile(init) else None
        return module_file(folder, parts)
    if not parts:
        return None
    for folder in search_folders(root, importer):
        found = module_file(folder, parts)
        if found is not None:
            return found
    return None


def resolve_submodule(root: str, importer: str, module: str, level: int, name: str) -> Optional[str]:
    """`from pkg import mod` where `mod` is a module of package `pkg`, not a name in it."""
    folder = package_folder(root, importer, module, level)
    return module_file(folder, [name]) if folder is not None else None


def package_folder(root: str, importer: str, module: str, level: int) -> Optional[str]:
    """The project folder of the package an import names (`from pkg.sub import ...`,
    `from . import ...`), namespace or not; None when it names none."""
    parts = [p for p in module.split(".") if p] if module else []
    if level > 0:
        folder = os.path.dirname(os.path.abspath(importer))
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        if not _inside(folder, root):
            return None
        found = os.path.join(folder, *parts)
        return found if all(p.isidentifier() for p in parts) and os.path.isdir(found) else None
    for folder in search_folders(root, importer):
        if is_package_folder(folder, parts):
            return os.path.join(folder, *parts)
    return None
