"""Which project modules may run a module's helpers from a loop: the importers of a module.

A finding on a helper's statement belongs to the helper's file (README, "The
project around a file"), so checking that file alone must find the loops of other
modules that call it. The project's Python files are scanned once per process
(only their import lines and the names they call are kept), bounded in files
and bytes so that a very large tree costs a bounded scan, never a hang.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import time
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from accumlint.project.root import (DEFINITION_REST, INSTALLED_PACKAGE_FOLDERS, assigned_as_value, forget_joins,
                                    import_lines, remember_resolutions)

if TYPE_CHECKING:
    from accumlint.project.reach import BackwardNames

# A tree larger than this is not scanned further: importers beyond it stay unknown.
MAX_FILES = 5_000
MAX_BYTES = 64 << 20
MAX_FILE_BYTES = 2_000_000
_SKIPPED_FOLDERS = {"__pycache__", "node_modules", "build", "dist", *INSTALLED_PACKAGE_FOLDERS}
_LOOP = re.compile(r"\n[ \t]*(?:for|while|async[ \t]+for)\b")  # in "\n" + text, as `IMPORT_LINE`

# Outside a check run (`one_run`), a scan serves this many seconds: a long-lived process, such
# as a library user's, sees new files after it.
SCAN_LIFETIME = 5.0
_SCANS: dict[str, tuple[float, "_Scan"]] = {}
_in_run = False


class _Scan:
    """The project files read, and what is learnt of them as it is asked for (it goes with the scan)."""

    __slots__ = ("texts", "paths", "chars", "looped", "trains", "complete", "by_name", "mentions", "calls", "digests", "candidates",
                 "memo", "all_index", "middles", "through", "callers", "training_mentions", "backward_texts", "unentered",
                 "backward_names")

    def __init__(self, texts: dict[str, str], complete: bool, unentered: frozenset[str] = frozenset()) -> None:
        self.texts = texts  # path -> text of every project file read
        self.unentered = unentered  # the names of the folders the walk did not enter (skipped, or links)
        self.paths = sorted(texts)
        self.chars = sum(len(text) for text in texts.values())
        self.looped: dict[str, bool] = {}  # path -> whether it holds a loop (`_holds_loop`), as asked
        self.trains: dict[str, bool] = {}  # path -> whether its loops may train (`_may_train`), as asked
        self.complete = complete  # False: the tree was larger than the bounds, some files were not read
        self.by_name: dict[str, list[str]] = {}  # module name -> the loop files whose import lines mention it, as asked
        self.mentions: dict[str, set[str]] = {}  # path -> the module names its import lines mention
        self.calls: dict[tuple[str, frozenset[str]], bool] = {}  # (path, names) -> whether its text calls one
        self.digests: dict[str, str] = {}  # path -> sha256 of its text
        self.candidates: dict[tuple[str, frozenset[str]], list[tuple[str, str]]] = {}  # see `_candidates`
        self.memo: dict = {}  # see `run_memo`
        self.all_index: Optional[dict[str, list[str]]] = None  # module name -> every file whose import lines mention it (`_middles`)
        self.middles: dict[str, list[str]] = {}  # module name -> `_middles`' answer, as asked
        # (path, functions) -> loop file -> the module between: see `importers_through`
        self.through: dict[tuple[str, frozenset[str]], dict[str, str]] = {}
        self.callers: dict[tuple[str, str], list[tuple[str, str]]] = {}  # see `callers_of`
        # `_training_mentions`' answer, in a one-element tuple once asked (the answer may be None)
        self.training_mentions: Optional[tuple[Optional[frozenset[str]]]] = None
        self.backward_texts: dict[str, bool] = {}  # path -> whether its text holds `backward(`, as asked
        self.backward_names: "Optional[tuple[Optional[BackwardNames]]]" = None  # `backward_names`' answer, once asked


def _scan(root: str) -> _Scan:
    """The project's Python files (bounded in files and bytes)."""
    found: dict[str, str] = {}
    unentered: set[str] = set()
    files = total = 0
    for folder, folders, names in os.walk(root):
        entered = sorted(
            f for f in folders
            if not f.startswith(".") and f not in _SKIPPED_FOLDERS
            and not os.path.exists(os.path.join(folder, f, "pyvenv.cfg"))
        )
        unentered.update(f for f in folders if f not in entered or os.path.islink(os.path.join(folder, f)))
        folders[:] = entered
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            files += 1
            if files > MAX_FILES or total > MAX_BYTES:
                return _Scan(found, False)
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
            found[path] = text
    return _Scan(found, True, frozenset(unentered))


def _mentioned(scan: _Scan, path: str) -> set[str]:
    """The module names a file's import lines mention (and the names `from X import` takes)."""
    found = scan.mentions.get(path)
    if found is None:
        found = scan.mentions[path] = set()
        for match in import_lines(scan.texts[path]):
            module = match.group(1) or match.group(3)
            found.update(part for part in module.split(".") if part)
            if match.group(2):  # `from . import steps`: the names may be modules
                found.update(re.findall(r"\w+", match.group(2)))
    return found


def _holds_loop(scan: _Scan, path: str) -> bool:
    """Whether a line of the file begins with `for`, `while` or `async for` (asked only of
    the files that mention a module asked about: most files of a tree never are)."""
    found = scan.looped.get(path)
    if found is None:
        text = scan.texts[path]
        first_line = text[:text.find("\n")] if "\n" in text else text
        # `_LOOP` needs the break before a line: the first line is matched after one of its own
        found = scan.looped[path] = _LOOP.search(text) is not None or _LOOP.match("\n" + first_line) is not None
    return found


def _calls_one_of(scan: _Scan, path: str, names: frozenset[str]) -> bool:
    """Whether the file's text calls one of `names` (`name(` or `name (`, the name a whole
    word): a literal search for each name, where finding every name a large file calls
    would read each of its calls."""
    key = (path, names)
    found = scan.calls.get(key)
    if found is None:
        found = scan.calls[key] = any(_calls(scan.texts[path], name) for name in names)
    return found


def _calls(text: str, name: str) -> bool:
    """`name(` as a whole word, or `name` handed to a name that is called instead
    (`step_fn = name`, `root.assigned_as_value`)."""
    start = text.find(name)
    while start != -1:
        end = start + len(name)
        if not (start and (text[start - 1].isalnum() or text[start - 1] == "_")):
            rest = text[end:end + 40].lstrip(" \t")
            if rest.startswith("(") or (not rest[:1].isalnum() and rest[:1] not in "_.(" and assigned_as_value(text, start)):
                return True
        start = text.find(name, end)
    return False


# A top-level function, up to the next top-level statement.
_TOP_LEVEL_FUNCTION = re.compile(r"^def[ \t]+(\w+)" + DEFINITION_REST, re.MULTILINE)
# A top-level class with its body: its objects' methods run where the importer calls them.
_TOP_LEVEL_CLASS = re.compile(r"^class[ \t]+(\w+)" + DEFINITION_REST, re.MULTILINE)
# Text a function needs to hold a statement a rule reports on (role effects, `summary.ROLE_EFFECTS`):
# `.backward(`, `zero_grad(`, `.step(`, `.grad` (a word), `loss... /`, `/=`, `sched`.
_ROLE_WORDS = (".backward(", "zero_grad(", ".step(", "/=", "sched")
_GRAD_WORD = re.compile(r"\.grad\b")
_LOSS_DIVISION = re.compile(r"loss\w*\s*/")


def _may_hold_role(text: str) -> bool:
    """Whether `text` holds one of the role hints: literal searches first (most modules hold
    none, and a literal search reads a large text many times faster than one alternation)."""
    if any(word in text for word in _ROLE_WORDS):
        return True
    if ".grad" in text and _GRAD_WORD.search(text):
        return True
    return "loss" in text and _LOSS_DIVISION.search(text) is not None


def helper_names(text: str) -> list[str]:
    """Top-level functions and classes of a module whose text may hold a backward, step, zeroing,
    loss division or scheduler (the summary decides; this only spares reading the tree)."""
    return [name for name, _ in helper_definitions(text)]


def helper_definitions(text: str) -> list[tuple[str, str]]:
    """(name, text of the definition) of each top-level function, then each class, whose text
    may hold a role effect (`helper_names`), in order."""
    if not _may_hold_role(text):  # most modules: no function of theirs can hold one
        return []
    found = [(m.group(1), m.group(0)) for m in _top_level_definitions(text, "def", _TOP_LEVEL_FUNCTION)
             if _may_hold_role(m.group(0))]
    return found + [(m.group(1), m.group(0)) for m in _top_level_definitions(text, "class", _TOP_LEVEL_CLASS)
                    if _may_hold_role(m.group(0))]


def _top_level_functions(text: str) -> Iterator["re.Match[str]"]:
    """The matches of `_TOP_LEVEL_FUNCTION` in `text`, in order (see `_top_level_definitions`)."""
    return _top_level_definitions(text, "def", _TOP_LEVEL_FUNCTION)


def _top_level_definitions(text: str, keyword: str, pattern: "re.Pattern[str]") -> Iterator["re.Match[str]"]:
    """The matches of `pattern` (a top-level `def` or `class` with its body) in `text`, in
    order, as `finditer` gives them, tried only where a line begins with `keyword` (found by
    a literal search), not at every offset, where a `^` under MULTILINE is tried. A match
    ends where a line begins, and no line inside it begins with the keyword (its lines after
    the first are indented, blank, or close a bracket)."""
    start = 0
    line_start = "\n" + keyword
    while True:
        if not (text.startswith(keyword, start) and (start == 0 or text[start - 1] == "\n")):
            found = text.find(line_start, start)
            if found == -1:
                return
            start = found + 1
        match = pattern.match(text, start)
        if match is not None:
            yield match
            start = match.end()
        else:
            start += 1


def candidate_importers(root: str, path: str, functions: list[str]) -> list[tuple[str, str]]:
    """(path, text) of the project files that may import the module at `path` and call one
    of `functions` in a loop: their import lines name its module and they call the
    function. Resolving their imports decides."""
    return _candidates(_scanned(root), path, functions) if functions else []


def callers_of(root: str, path: str, function: str) -> Optional[list[tuple[str, str]]]:
    """(path, text) of every project file, with a loop or not, that may call the module at
    `path`'s `function`: its import lines name the module and its text names the function
    (`from engine import train_one_epoch as fit`, `E.train_one_epoch(...)`, `main()` that
    calls it once). Resolving their imports decides. None when the tree was too large to
    read whole: a caller may be among the files not read."""
    scan = _scanned(root)
    return _callers(scan, path, function) if scan.complete else None


def _callers(scan: _Scan, path: str, function: str) -> list[tuple[str, str]]:
    found = scan.callers.get((path, function))
    if found is None:
        target = os.path.abspath(path)
        mention = re.compile(rf"(?<!\w){re.escape(function)}(?!\w)")
        found = scan.callers[(path, function)] = [
            (other, scan.texts[other]) for other in _middles(scan, _stem(path))
            if os.path.abspath(other) != target and function in scan.texts[other] and mention.search(scan.texts[other])
        ]
    return found


def importers_through(root: str, path: str, functions: list[str]) -> dict[str, str]:
    """Of `candidate_importers`, those that may run the helpers two calls deep: each
    loop file with the project module between (which imports the module at `path` and
    whose top-level function calls one of `functions`)."""
    wanted = frozenset(functions)
    if not wanted:
        return {}
    scan = _scanned(root)
    _candidates(scan, path, functions)
    return scan.through.get((path, wanted), {})


def _candidates(scan: _Scan, path: str, functions: list[str]) -> list[tuple[str, str]]:
    wanted = frozenset(functions)
    if not wanted:
        return []
    asked = (path, wanted)  # a module's names are asked twice: for the cache's dependency, then for its importers
    if asked not in scan.candidates:
        direct = _search(scan, path, wanted)
        through = scan.through[asked] = _search_through(scan, path, wanted, {other for other, _ in direct})
        scan.candidates[asked] = direct + [(other, scan.texts[other]) for other in sorted(through)]
    return scan.candidates[asked]


def _search(scan: _Scan, path: str, wanted: frozenset[str], everywhere: bool = False,
            backpropagates: bool = False, keep: Optional[Callable[[str], bool]] = None) -> list[tuple[str, str]]:
    """The loop files that may train (with `everywhere`, every file) whose import lines name
    the module at `path` and whose text calls one of `wanted`. With `backpropagates` (one of
    `wanted` may run a backward itself), every such loop file may train. `keep`: only the
    files it keeps are searched."""
    stem = _stem(path)
    target = os.path.abspath(path)
    backpropagating = wanted & _backward_functions(path)
    if not (everywhere or backpropagates or backpropagating):
        mentioned = _training_mentions(scan)
        if mentioned is not None and stem not in mentioned:
            return []  # no loop file that may train names the module in its imports
    found = []
    for other in (_middles(scan, stem) if everywhere else _mentioning(scan, stem)):  # in a stable order
        if os.path.abspath(other) == target:
            continue
        if keep is not None and not keep(other):
            continue
        if not (everywhere or backpropagates or backpropagating) and _noted_training(scan, other) is False:
            continue  # the run's gate found that its loops run no backward: no text search
        if not _calls_one_of(scan, other, wanted):
            continue
        # a loop file trains when it calls a helper that backpropagates, here or one call on
        if everywhere or backpropagates or _may_train(scan, other) \
                or (backpropagating and _calls_one_of(scan, other, backpropagating)):
            found.append((other, scan.texts[other]))
    return found


def _backward_text(scan: _Scan, path: str) -> bool:
    """Whether the scanned file's text holds `backward(` (what `_backward_functions` needs to
    find any), asked once per file and scan."""
    found = scan.backward_texts.get(path)
    if found is None:
        found = scan.backward_texts[path] = "backward(" in scan.texts[path]
    return found


def backward_names(root: str, path: str) -> "Optional[BackwardNames]":
    """Within a run's complete scan of `root`, which holds `path`: every name an import must
    name to reach a project function that runs a backward (`reach`), casefolded: the
    top-level functions and classes that may run one (`reach.backward_functions`) and
    the names of their modules. An import that names none of them cannot reach one, and
    need not be resolved. The names of the folders the walk did not enter are among
    them: a module there was not read. None when the scan cannot say: outside a run, a
    tree larger than the bounds, or a `src/` folder the walk did not enter (absolute
    imports search it)."""
    if not _in_run:
        return None
    scan = _scanned(root)
    if os.path.abspath(path) not in scan.texts:
        return None
    if scan.backward_names is None:
        from accumlint.project.reach import BackwardNames

        found: Optional[BackwardNames] = None
        if scan.complete and "src" not in scan.unentered:
            functions: set[str] = set()
            modules: set[str] = set()
            for other in scan.paths:
                defined = _backward_functions(other) if _backward_text(scan, other) else frozenset()
                if defined:
                    modules.add(_stem(other).casefold())
                    functions.update(name.casefold() for name in defined)
            found = BackwardNames(frozenset(functions), frozenset(modules),
                                  frozenset(name.casefold() for name in scan.unentered))
        scan.backward_names = (found,)
    return scan.backward_names[0]


def _training_mentions(scan: _Scan) -> Optional[frozenset[str]]:
    """The module names the import lines of the scan's training files mention, when a check
    run has given its verdict (`note_training`) on every scanned file of a complete scan: a
    module no such file names has no importer whose loops may train (but through a helper
    that runs a backward itself, which the callers test apart). None when any file lacks a
    verdict: then no name can be ruled out."""
    if scan.training_mentions is None:
        verdicts = [_noted_training(scan, path) for path in scan.paths] if scan.complete else [None]
        mentioned = None if any(verdict is None for verdict in verdicts) else frozenset(
            name for path, verdict in zip(scan.paths, verdicts) if verdict for name in _mentioned(scan, path))
        scan.training_mentions = (mentioned,)
    return scan.training_mentions[0]


def _backward_functions(path: str) -> frozenset[str]:
    from accumlint.project.reach import backward_functions

    return backward_functions(path)


# abspath -> (hash of its text, whether its loops may train): the run's own verdicts on the
# files it checks (`note_training`), which `_may_train` takes instead of reading them again.
_NOTED: dict[str, tuple[int, bool]] = {}


def note_training(path: str, text: str, trains: bool) -> None:
    """Within a check run, record the text gate's verdict on a checked file (`trains`: it
    may hold training code, or a loop of it reaches a project backward): the search for
    importers asks it of the project's loop files, and most of them are checked too."""
    if _in_run:
        _NOTED[os.path.abspath(path)] = (hash(text), trains)


def _noted_training(scan: _Scan, path: str) -> Optional[bool]:
    """The recorded verdict on a scanned file, when it was made on the text scanned."""
    noted = _NOTED.get(os.path.abspath(path))
    return noted[1] if noted is not None and noted[0] == hash(scan.texts[path]) else None


def _may_train(scan: _Scan, path: str) -> bool:
    """Whether a loop file's loops may run a backward: the text gate keeps the file (a
    backward call of its own, an accumulation setting, a `training_step`), or a loop of it
    calls a project helper that runs one (`reach`). A loop that runs no backward is no
    training loop, and says nothing of the helpers it calls: a library's loops over
    schedulers or optimizers (a tree of code that never trains) are not read as importers."""
    found = scan.trains.get(path)
    if found is None:
        from accumlint.project.reach import loop_reaches_project_backward
        from accumlint.source.gate import might_hold_training_code

        text = scan.texts[path]
        noted = _noted_training(scan, path)
        try:
            found = noted if noted is not None else might_hold_training_code(text) or loop_reaches_project_backward(
                path, text, backward_names)
        except (OSError, ValueError, RecursionError):
            found = False  # precision first: a loop whose helpers cannot be read adds nothing
        scan.trains[path] = found
    return found


def _search_through(scan: _Scan, path: str, wanted: frozenset[str], direct: set[str]) -> dict[str, str]:
    """The loop files that call, one call deep, a top-level function of another project file
    that calls one of `wanted` of the module at `path` (the helper is then two calls deep
    from the loop): loop file -> that file."""
    target = os.path.abspath(path)
    found: dict[str, str] = {}
    backpropagates = bool(wanted & _backward_functions(path))  # the loop trains through the middle
    keep = None
    mentioned = None if backpropagates else _training_mentions(scan)
    if mentioned is not None:
        # a middle no training loop file imports, and that runs no backward of its own, has no
        # importer for the second search to find (`_search`'s first test): it need not be read
        keep = lambda middle: _stem(middle) in mentioned or _backward_text(scan, middle)  # noqa: E731
    for middle, text in _search(scan, path, wanted, everywhere=True, keep=keep):
        callers = [m.group(1) for m in _top_level_functions(text)
                   if any(_calls(m.group(0).split("\n", 1)[-1], name) for name in wanted)]
        for other, _ in _search(scan, middle, frozenset(callers), backpropagates=backpropagates) if callers else []:
            if other not in direct and os.path.abspath(other) != target:
                found.setdefault(other, middle)
    package = os.path.join(os.path.dirname(path), "__init__.py")
    exported = _reexported(scan.texts[package], _stem(path), wanted) if package in scan.texts and package != path else frozenset()
    # `from src.batteries import zero_grad`, where the package's `__init__` re-exports it from
    # the module: the package stands between, as a middle does
    # the middle of a loop file found directly too: its text may name the module's stem for
    # another import (`torch.utils.data` beside `from src.batteries import zero_grad`); which
    # of the two its imports name is read when its findings are asked (`_importers_findings`)
    for other, _ in _search(scan, package, exported, backpropagates=backpropagates) if exported else []:
        if os.path.abspath(other) != target:
            found.setdefault(other, package)
    return found


def _reexported(text: str, stem: str, wanted: frozenset[str]) -> frozenset[str]:
    """Which of `wanted` a package's `__init__` text imports from its module `stem`
    (`from .optimizer import zero_grad`, `from .optimizer import *`), so that importing
    them from the package imports the module's functions."""
    found: set[str] = set()
    for match in import_lines(text):
        module = match.group(1)
        if module is None or module.lstrip(".") != stem or not module.startswith("."):
            continue
        names = match.group(2)
        if "(" in names and ")" not in names:  # `from .optimizer import (` over several lines
            opening = text.find("(", max(match.start() - 1, 0))
            closing = text.find(")", opening)
            names = text[opening:closing] if opening != -1 and closing != -1 else names
        if names.strip() == "*":
            return wanted
        found |= set(re.findall(r"\w+", names)) & wanted
    return frozenset(found)


def _stem(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(path)) if stem == "__init__" else stem


# How many module names a scan of at most SEARCHED_CHARS characters answers `_middles` for by
# searching every text for the name, before it indexes every file's import lines at once: a
# tree asked about a few modules (one file checked, or a few of its scripts) reads the import
# lines of the files that hold the name. A larger tree is indexed at once: its whole check
# asks about many modules, and each search would read all of its text again.
SEARCHED_NAMES = 8
SEARCHED_CHARS = 4_000_000


def _middles(scan: _Scan, name: str) -> list[str]:
    """Every file (sorted) whose import lines mention the module name `name`. The first
    `SEARCHED_NAMES` names asked of a scan of a small tree are looked for in the texts (a file
    whose text does not hold the name cannot mention it: an import line's names are words of
    the text); then, and in a large tree at once, every file's import lines are indexed once."""
    found = scan.middles.get(name)
    if found is not None:
        return found
    if scan.all_index is None and len(scan.middles) < SEARCHED_NAMES and scan.chars <= SEARCHED_CHARS:
        found = [other for other in scan.paths if name in scan.texts[other] and name in _mentioned(scan, other)]
    else:
        if scan.all_index is None:
            scan.all_index = {}
            for other in scan.paths:
                for mentioned in _mentioned(scan, other):
                    scan.all_index.setdefault(mentioned, []).append(other)
        found = scan.all_index.get(name, [])
    scan.middles[name] = found
    return found


def _mentioning(scan: _Scan, name: str) -> list[str]:
    """The loop files (sorted) whose import lines mention the module name `name`: of
    `_middles`' files, those that hold a loop. Every question about importers
    (`_candidates`) asks `_middles` too, so its index of every file's import lines is
    made once per scan whichever asks first, and no file's text is searched per name."""
    found = scan.by_name.get(name)
    if found is None:
        found = [other for other in _middles(scan, name) if _holds_loop(scan, other)]
        scan.by_name[name] = found
    return found


def _scanned(root: str) -> _Scan:
    stamped = _SCANS.get(root)
    if stamped is None or (not _in_run and time.monotonic() - stamped[0] > SCAN_LIFETIME):
        stamped = _SCANS[root] = (time.monotonic(), _scan(root))
    return stamped[1]


def run_memo(root: str) -> Optional[dict]:
    """In a check run (`one_run`), a dict that lives as long as the run's scan of `root`, for
    what the analysis computes from the scanned files (an importer's findings); None outside
    a run, where files may change between two questions."""
    return _scanned(root).memo if _in_run else None


def scan_ahead(root: str) -> None:
    """Scan the tree at `root` now: a run does it before it forks its workers, which inherit
    the scan instead of each making its own."""
    _scanned(root)


@contextlib.contextmanager
def one_run() -> Iterator[None]:
    """Within the block, one check run: each root is scanned once (the scans from before it
    are dropped), and the scan serves the whole run, however long it takes. A run's files
    change only when it writes its fixes, after every analysis (it calls `forget` then);
    meanwhile the file each import resolves to is remembered (`root.remember_resolutions`).
    Forked workers inherit it, with the scans made before they start."""
    global _in_run
    forget()
    _in_run = True
    remember_resolutions(True)
    try:
        yield
    finally:
        _in_run = False
        remember_resolutions(False)
        forget()


def single_caller(root: str, path: str, text: str, name: str) -> bool:
    """Whether the top-level function `name` of the module at `path` (whose text is `text`)
    is used once in the whole project, by one call: what an unsafe fix of its statements
    needs (it changes what every caller runs). Counted on the text: every
    mention of the name outside import statements and `def` lines, in every project file
    (comments, strings and another module's function of the same name count too); False
    when the tree was too large to read whole."""
    scan = _scanned(root)
    if not scan.complete:
        return False
    target = os.path.abspath(path)
    mention = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    others = [t for p, t in scan.texts.items() if os.path.abspath(p) != target]
    calls = uses = 0
    for other_text in [text] + others:
        if name not in other_text:
            continue
        imports = [m.span() for m in _IMPORT_STATEMENT.finditer(other_text)]
        for match in mention.finditer(other_text):
            if any(start <= match.start() < end for start, end in imports):
                continue
            line_start = other_text.rfind("\n", 0, match.start()) + 1
            if _DEF_PREFIX.fullmatch(other_text, line_start, match.start()):
                continue  # a definition (this one, or another module's of the same name) is no use
            uses += 1
            calls += _CALL_AFTER.match(other_text, match.end()) is not None
            if uses > 1:
                return False
    return uses == 1 and calls == 1


_IMPORT_STATEMENT = re.compile(r"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import[ \t]*\([^)]*\)|from[ \t][^\n]*|import[ \t][^\n]*)",
                               re.MULTILINE)
_DEF_PREFIX = re.compile(r"[ \t]*(?:async[ \t]+)?def[ \t]+")
_CALL_AFTER = re.compile(r"\s*\(")


# A dependency of a cached result that is not one file: which modules may call a module's helpers.
IMPORTERS = "importers-of:"


def dependency(root: str, path: str, functions: list[str], callers: bool = False) -> tuple[str, str]:
    """(key, fingerprint) of the importers a module's helpers have now: the files that
    `candidate_importers` finds (with `callers`, those `callers_of` finds for the one
    function), with a hash of each one's text. A result cache stores it beside the files
    the analysis read, so that a file that starts (or stops) importing the module, which
    is none of those, makes the module's result stale (`unchanged`)."""
    asked: list = [root, os.path.abspath(path), sorted(set(functions))]
    if callers:
        asked.append(_CALLERS)
    return IMPORTERS + json.dumps(asked), _fingerprint(root, path, functions, callers)


# The mark of a `dependency` on `callers_of`.
_CALLERS = "callers"


def unchanged(key: str, fingerprint: str) -> bool:
    """Whether a `dependency` still holds (False for a key it did not make)."""
    try:
        asked = json.loads(key[len(IMPORTERS):])
    except (ValueError, TypeError):
        return False
    if not key.startswith(IMPORTERS) or not isinstance(asked, list) or len(asked) not in (3, 4):
        return False
    root, path, functions = asked[:3]
    callers = asked[3:] == [_CALLERS]
    if len(asked) == 4 and not callers:
        return False
    if not (isinstance(root, str) and isinstance(path, str) and isinstance(functions, list)):
        return False
    if callers and len(functions) != 1:
        return False
    return _fingerprint(root, path, [str(f) for f in functions], callers) == fingerprint


def _fingerprint(root: str, path: str, functions: list[str], callers: bool = False) -> str:
    digest = hashlib.sha256()
    scan = _scanned(root)
    found = _callers(scan, path, functions[0]) if callers else _candidates(scan, path, functions)
    for other, text in sorted(found):
        text_digest = scan.digests.get(other)
        if text_digest is None:
            text_digest = scan.digests[other] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        digest.update(f"{other}\0{text_digest}\0".encode())
    if callers and not scan.complete:
        digest.update(b"incomplete")
    return digest.hexdigest()


def forget(root: Optional[str] = None) -> None:
    """Drop the scans (all, or one root's): the editor server does when files change."""
    forget_joins()  # an import that joined a folder to its parent may be gone
    # what `reach` remembers, when it was ever imported: a run whose every file comes from
    # the result cache need not import it (and the summaries it imports) only to forget nothing
    reach = sys.modules.get("accumlint.project.reach")
    if reach is not None:
        reach.forget()
    if root is None:
        _SCANS.clear()
        _NOTED.clear()
    else:
        _SCANS.pop(root, None)
