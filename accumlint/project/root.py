"""The project root and the module files that an import names."""

from __future__ import annotations

import functools
import os
import re
from typing import Callable, Iterable, Iterator, Optional

# What marks the folder that holds a project.
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


# The common parent of the paths this run checks (None: not known, e.g. the editor server):
# the project's root where no marker says it (README, "The project around a file").
_checked_parent: Optional[str] = None


def set_checked_paths(paths: Iterable[str]) -> None:
    """Remember the paths a run checks: a module under their common parent, with no root
    marker above it, belongs to the project rooted there (a script in `tools/` importing
    the package beside `tools/`). The run's workers are handed it (`set_checked_parent`)."""
    set_checked_parent(common_parent(paths))


def set_checked_parent(parent: Optional[str]) -> None:
    """Set the common parent of the paths this run checks (what `set_checked_paths` found,
    in the process that runs the check, or in one of its workers)."""
    global _checked_parent
    _checked_parent = parent


def common_parent(paths: Iterable[str]) -> Optional[str]:
    """The folder that holds all the checked paths (None: none, or paths on different drives)."""
    folders = [os.path.abspath(p) if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in paths if p != "-"]
    try:
        return os.path.commonpath(folders) if folders else None
    except ValueError:  # paths on different drives
        return None


def checked_parent() -> Optional[str]:
    """The common parent of the paths this run checks (see `set_checked_paths`)."""
    return _checked_parent


def find_root(path: str) -> str:
    """The nearest folder from `path` up that holds a root marker; else the common parent
    of the checked paths when `path` lies under it, or `path`'s own folder, either one
    widened to the ancestors its imports join it to (`joined_ancestor`)."""
    return root_under(path, checked_parent())


def root_under(path: str, checked: Optional[str]) -> str:
    """`find_root` in a run whose checked paths' common parent is `checked` (None: unknown)."""
    start = os.path.abspath(path)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    marked = _marked_ancestor(folder)
    if marked is not None:
        return marked
    if checked is not None and _inside(folder, checked):
        joined = joined_ancestor(checked)
        importing = _importing_ancestor(folder)  # `projects/a/train.py` importing `projects.a.config`
        return importing if importing != joined and _inside(joined, importing) else joined
    return joined_ancestor(folder)


# folder -> the nearest folder from it up that holds a root marker (None: none), as found
# (cleared with `forget_joins`): the folders of a tree share their ancestors.
_MARKED: dict[str, Optional[str]] = {}


def _marked_ancestor(folder: str) -> Optional[str]:
    climbed = []
    candidate = folder
    while True:
        if candidate in _MARKED:
            found = _MARKED[candidate]
            break
        climbed.append(candidate)
        if any(os.path.exists(os.path.join(candidate, marker)) for marker in ROOT_MARKERS):
            found = candidate
            break
        parent = os.path.dirname(candidate)
        if parent == candidate:
            found = None
            break
        candidate = parent
    for each in climbed:
        _MARKED[each] = found
    return found


# How far, and over how many scripts per folder, an unmarked project is widened upwards.
_JOIN_LEVELS = 3
_JOIN_SCRIPTS = 200
_JOIN_SCRIPT_BYTES = 65_536  # import lines sit at the top of a script
# An import line, matched in "\n" + text: `from MODULE import NAMES` (groups 1, 2) or
# `import MODULE` (group 3). A pattern that begins with a literal is searched for line by
# line, where `^` under MULTILINE is tried at every offset of the text.
IMPORT_LINE = re.compile(r"\n[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import\b([^\n#;]*)|import[ \t]+([\w.]+))")


def import_lines(text: str) -> Iterator["re.Match[str]"]:
    """The matches of `IMPORT_LINE` in "\n" + `text`, in order: only the lines that hold
    `import` are tried (a match stays within its line, one at most per line), not every
    line of the text."""
    start = text.find("import")
    while start != -1:
        line = text.rfind("\n", 0, start)
        end = text.find("\n", start)
        # the first line has no break before it of its own
        match = IMPORT_LINE.match(text, line) if line != -1 else IMPORT_LINE.match("\n" + text[:end if end != -1 else len(text)])
        if match is not None:
            yield match
        if end == -1:
            break
        start = text.find("import", end)


def assigned_as_value(text: str, start: int) -> bool:
    """Whether the name at `start` is the value of an assignment, whole or an arm of a
    conditional expression (`step_fn = train_mse`, `step_fn = a if mse else train_mse`):
    the name bound to it may be called in its place."""
    line = text.rfind("\n", 0, start) + 1
    return _ASSIGNED_VALUE.fullmatch(text, line, start) is not None


# What stands before a name that an assignment binds: `step_fn = `, `self.fn = cond and a if c else `
_ASSIGNED_VALUE = re.compile(r"[ \t]*[\w.]+[ \t]*=(?!=)(?:[^\n=]*[ \t]else)?[ \t]*")


@functools.lru_cache(maxsize=1024)
def joined_ancestor(folder: str) -> str:
    """Without a root marker, the project is the checked folder, widened to its parent
    while an import joins the two: a script in the parent, or in a folder beside this one,
    imports the folder's modules (`from utils.dist import wrap` beside `utils/`,
    `from mylib.steps import accumulate` in `train/loop.py`); a script in the folder imports
    a module that is not beside it but is in the parent or the parent's `src/`
    (`segment/train.py` importing the `utils` package next to `segment/`, run from the
    repository's top); or the folder is a package whose scripts import each other
    relatively (`from .options import parse_args`: Python imports them from the parent).
    So checking one file of an unmarked tree reads the modules that checking the whole
    tree reads. At most `_JOIN_LEVELS` levels; scripts are only searched for import lines,
    never parsed."""
    current = folder
    for _ in range(_JOIN_LEVELS):
        parent = os.path.dirname(current)
        if parent == current or not _joined(current, parent):
            break
        current = parent
    importing = _importing_ancestor(folder)
    return importing if importing != current and _inside(current, importing) else current


def _importing_ancestor(folder: str) -> str:
    """The parent of the nearest folder (this one or up to `_JOIN_LEVELS` above) whose name the
    folder's scripts import as the head of an absolute import (`projects/depth/train.py`
    importing `projects.depth.config`): they run from that parent (`python -m
    projects.depth.train`), which is their project's root. `folder` itself when none."""
    heads = _imported_names(folder)
    candidate = folder
    for _ in range(_JOIN_LEVELS + 1):
        name = os.path.basename(candidate)
        parent = os.path.dirname(candidate)
        if parent == candidate or os.path.basename(parent) in INSTALLED_PACKAGE_FOLDERS:
            break
        if name.isidentifier() and name in heads:
            return parent
        candidate = parent
    return folder


def forget_joins() -> None:
    """Drop what `joined_ancestor` read, and the search folders found (the editor server
    does when files change; a check run at its start and end)."""
    joined_ancestor.cache_clear()
    _imported_names.cache_clear()
    _listing.cache_clear()
    _MARKED.clear()
    _SEARCH_FOLDERS.clear()
    if _RESOLVED is not None:
        _RESOLVED.clear()


# Folders of installed distributions: each package in them is a project of its own, and
# the folder is no project (the packages beside an installed one import it, as users do).
INSTALLED_PACKAGE_FOLDERS = frozenset({"site-packages", "dist-packages"})


def _joined(folder: str, parent: str) -> bool:
    if os.path.basename(parent) in INSTALLED_PACKAGE_FOLDERS:
        return False
    name = os.path.basename(folder)
    if name.isidentifier() and (name in _imported_names(parent) or _imported_by_a_sibling(folder, parent, name)
                                or _relative_package(folder)):
        return True
    source = os.path.join(parent, "src")  # the parent's `src/` is a search folder of a project rooted there
    beside, above, below = _listing(folder), _listing(parent), _listing(source)
    return any(
        # (a name that no folder lists is none's module: no `stat` for it)
        imported != _RELATIVE_NAME
        and (imported in above or imported + ".py" in above or imported in below or imported + ".py" in below)
        and ((imported not in beside and imported + ".py" not in beside)
             or (module_file(folder, [imported]) is None and not is_package_folder(folder, [imported])))
        and any(module_file(base, [imported]) is not None or _holds_scripts(os.path.join(base, imported))
                for base in (parent, source))
        for imported in _imported_names(folder)
    )


# How many sibling folders are searched for a script that imports the folder.
_JOIN_SIBLINGS = 64


def _imported_by_a_sibling(folder: str, parent: str, name: str) -> bool:
    """Whether a script in a folder beside `folder` imports it (`train/loop.py` importing
    `mylib.steps` beside it: run from the parent, as the tree's check reads it)."""
    try:
        with os.scandir(parent) as entries:
            siblings = sorted(e.path for e in entries if e.is_dir() and not e.name.startswith((".", "_")))
    except OSError:
        return False
    return any(name in _imported_names(sibling) for sibling in siblings[:_JOIN_SIBLINGS] if sibling != folder)


def _relative_package(folder: str) -> bool:
    """Whether one of the folder's scripts imports relatively (`from .options import ...`,
    `from . import steps`): the folder is a package (namespace or not) imported from its parent."""
    return _RELATIVE_NAME in _imported_names(folder)


# What `_imported_names` records for a relative import (no module name is this).
_RELATIVE_NAME = "."


@functools.lru_cache(maxsize=1024)
def _listing(folder: str) -> frozenset[str]:
    """The names in a folder (read once per folder, as `_imported_names`)."""
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return frozenset()


@functools.lru_cache(maxsize=1024)
def _imported_names(folder: str) -> frozenset[str]:
    """First parts of the absolute imports of the scripts directly in `folder` (read once
    per folder: many folders share a parent)."""
    names: set[str] = set()
    for script in _scripts(folder):
        try:
            with open(script, "rb") as handle:
                text = handle.read(_JOIN_SCRIPT_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        for match in import_lines(text):
            first = (match.group(1) or match.group(3)).split(".")[0]
            names.add(first or _RELATIVE_NAME)  # a relative import names no folder
    return frozenset(names)


def _scripts(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            found = [e.path for e in entries if e.name.endswith(".py") and e.is_file()]
    except OSError:
        return []
    return sorted(found)[:_JOIN_SCRIPTS]


def _holds_scripts(folder: str) -> bool:
    return bool(_scripts(folder))


# (root, importing file, working folder when the file's path is relative) -> `search_folders`
# (cleared with `forget_joins`): each import of a file asks, and the prefilter then the analysis.
_SEARCH_FOLDERS: dict[tuple[str, str, str], tuple[str, ...]] = {}


def search_folders(root: str, importer: str) -> tuple[str, ...]:
    """Where an absolute import's first part may be a project module: the root, its
    `src/`, the importing file's own folder (Python puts a script's folder first
    on `sys.path`), and the folder it runs from when it imports its own ancestor package
    (`_importing_ancestor`)."""
    key = (root, importer, "" if os.path.isabs(importer) else os.getcwd())
    found = _SEARCH_FOLDERS.get(key)
    if found is None:
        found = _SEARCH_FOLDERS[key] = _search_folders(root, importer)
    return found


def _search_folders(root: str, importer: str) -> tuple[str, ...]:
    here = os.path.dirname(os.path.abspath(importer))
    # the folder a script that imports its own ancestor package runs from (`src/` for
    # `src/task/pretrain/train.py` importing `task.pretrain.data`): its other imports start there too
    folders = [here, root, os.path.join(root, "src"), _importing_ancestor(here)]
    unique: list[str] = []
    for folder in folders:
        if folder not in unique and _inside(folder, root):
            unique.append(folder)
    return tuple(unique)


def own_package_folders(root: str, importer: str, head: str) -> tuple[str, ...]:
    """Where `head.x` is looked up when `head` is a package that holds the importer
    (`training/loop.py` imports `training.scaler`): the folder above each enclosing folder
    named `head`, inside the root. The script run beside that package puts that folder on
    `sys.path` (`cd examples/image && python train.py`); a package of the same name
    elsewhere is not what the import means."""
    if not head.isidentifier():
        return ()
    found: list[str] = []
    folder = os.path.dirname(os.path.abspath(importer))
    while _inside(folder, root) and folder != root:
        parent = os.path.dirname(folder)
        if os.path.basename(folder) == head and _inside(parent, root):
            found.append(parent)
        folder = parent
    return tuple(found)


def may_name_module(root: str, importer: str, target: str, text: str) -> bool:
    """Whether an import of the module at `importer` (whose text is `text`) may resolve to the
    module file `target` (`resolve_module`, `resolve_submodule`); False only when none can,
    decided without reading the imports themselves.

    Every way an import reaches a module looks it up in a folder (a search folder, a
    relative import's package, an imported package): the module's parent folder itself,
    which is then the root, its `src/`, or the importer's folder or one of its ancestors,
    or a folder further up, from which the dotted name spells the parent folder's name,
    which the importer's text then holds."""
    module = os.path.dirname(target) if os.path.basename(target) == "__init__.py" else os.path.splitext(target)[0]
    parent = os.path.dirname(module)
    if parent in (root, os.path.join(root, "src")) or _inside(os.path.dirname(os.path.abspath(importer)), parent):
        return True
    name = os.path.basename(parent)
    if not name.isascii():  # an identifier in the text may be spelled otherwise (Python normalises it, NFKC)
        return True
    return name.isidentifier() and name in text


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


# (question, root, importing file, module, level, name, working folder when the file's path is
# relative) -> `resolve_module`'s or `resolve_submodule`'s answer, within a check run only
# (`remember_resolutions`); None outside one.
_RESOLVED: Optional[dict[tuple[str, str, str, str, int, str, str], Optional[str]]] = None


def remember_resolutions(on: bool) -> None:
    """Within a check run (`importers.one_run`), remember the file each import resolves to:
    the imports of a module are resolved again by every question about its names, in every
    analysis that reads it, and each resolution asks the disk whether files exist. A run's
    files do not appear or go until it writes its fixes, and it forgets them then
    (`forget_joins`); outside a run every resolution asks the disk."""
    global _RESOLVED
    _RESOLVED = {} if on else None


# The rest of a top-level `def` or `class` line and its block, as text: indented and blank lines,
# and the lines a bracketed signature closes at the margin (`) -> None:`, as black writes it).
DEFINITION_REST = r"[^\n]*\n(?:[ \t]+[^\n]*\n|[ \t]*\n|[)\]}][^\n]*\n)*"


def in_run() -> bool:
    """Whether a check run is under way (`importers.one_run`): its files do not change until
    it writes its fixes, so what is learnt of them may be kept until then."""
    return _RESOLVED is not None


def _remembered(question: str, root: str, importer: str, module: str, level: int, name: str,
                resolve: Callable[[], Optional[str]]) -> Optional[str]:
    if _RESOLVED is None:
        return resolve()
    key = (question, root, importer, module, level, name, "" if os.path.isabs(importer) else os.getcwd())
    if key in _RESOLVED:
        return _RESOLVED[key]
    found = _RESOLVED[key] = resolve()
    return found


def resolve_module(root: str, importer: str, module: str, level: int) -> Optional[str]:
    """The project file an import names (`from .a import b`: module "a", level 1), or
    None when it is not the project's (third-party, missing, outside the root)."""
    return _remembered("module", root, importer, module, level, "", lambda: _resolve_module(root, importer, module, level))


def _resolve_module(root: str, importer: str, module: str, level: int) -> Optional[str]:
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
    for folder in search_folders(root, importer) + own_package_folders(root, importer, parts[0]):
        found = module_file(folder, parts)
        if found is not None:
            return found
    return None


def resolve_submodule(root: str, importer: str, module: str, level: int, name: str) -> Optional[str]:
    """`from pkg import mod` where `mod` is a module of package `pkg`, not a name in it."""
    return _remembered("submodule", root, importer, module, level, name,
                       lambda: _resolve_submodule(root, importer, module, level, name))


def _resolve_submodule(root: str, importer: str, module: str, level: int, name: str) -> Optional[str]:
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
    for folder in search_folders(root, importer) + own_package_folders(root, importer, parts[0] if parts else ""):
        if is_package_folder(folder, parts):
            return os.path.join(folder, *parts)
    return None
