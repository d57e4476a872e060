"""One run of `accumlint check`: files in, per-file results out, fixes written.

The engine reads every file and runs the cheap text prefilter in this
process; only the files that pass it are analysed, from the cache when their
text is unchanged, else in worker processes (`accumlint.check.workers`: as many as
the amount of code can pay for, each file under a time budget and a memory
limit, so that no file can crash or hang the run). In a worker, Python's own
parser runs first (`accumlint.source.gate`: syntax errors at CPython's position, a
nesting bound, and a structural gate), and LibCST only for the files it keeps.
Every failure is a value attached to its file (a `syntax-error`,
`internal-error` or `io-error` diagnostic), never the end of the run.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Union

from accumlint.check.analysis import AnalysisOptions
from accumlint.compat.collector import collector_paused
from accumlint.check.config import Resolver, Settings
from accumlint.diagnostics import SYNTAX_ERROR, Diagnostic, syntax_error
from accumlint.source.gate import ParseFailure, Unanalysable, screen, text_stage
from accumlint.check.noqa import NAMES as SUPPRESSION_CODES
from accumlint.check.noqa import suppressions
from accumlint.source.files import (
    ReadError,
    SourceError,
    WriteRefused,
    discover,
    outside,
    read_bytes,
    write_atomic,
)
from accumlint.source.documents import load_document

if TYPE_CHECKING:
    from accumlint.project.reach import BackwardNamesOf

INTERNAL_ERROR = "internal-error"
# A path that cannot be read (missing, a folder without permission) or a fix that cannot be written.
IO_ERROR = "io-error"
ERROR_CODES = frozenset({SYNTAX_ERROR, INTERNAL_ERROR, IO_ERROR})

# Larger files are almost always generated; parsing one can take seconds and GBs.
MAX_ANALYSED_CHARS = 2_000_000
# Deeply nested (generated) code needs more than Python's default of 1000.
RECURSION_LIMIT = 8_000
# A worker process pays for itself with about this much code (half a second of
# LibCST) to analyse beside the largest file, which one worker must do alone.
CHARS_PER_WORKER = 100_000
# Each file's analysis (or fix) may take this many CPU seconds (--file-timeout; see workers.WALL_FACTOR),
# and may use this much memory beyond what its worker starts with.
FILE_TIME_BUDGET = 30.0
FILE_MEMORY_BUDGET = 2 << 30

# Told (analyses done, analyses in all) as files are analysed: the command line's progress bar.
Progress = Callable[[int, int], None]


def is_error(diagnostic: Diagnostic) -> bool:
    """A file that could not be checked (unreadable, unparsable, analysis failure)."""
    return diagnostic.code in ERROR_CODES


def internal_error(path: str, message: str) -> Diagnostic:
    """The diagnostic for a file whose analysis failed, so the run can go on."""
    return syntax_error(path, 1, 1, message)._replace(code=INTERNAL_ERROR, name=INTERNAL_ERROR)


def io_error(path: str, message: str) -> Diagnostic:
    """The diagnostic for a path that cannot be read, or a fixed file that cannot be written."""
    return syntax_error(path, 1, 1, message)._replace(code=IO_ERROR, name=IO_ERROR)


# Immutable records are NamedTuples: a frozen dataclass costs more to create
# (each generated method is compiled), and start-up pays it.


class Request(NamedTuple):
    """What the command line asked the engine to do."""

    paths: tuple[str, ...] = (".",)
    stdin: Optional[bytes] = None
    stdin_filename: Optional[str] = None
    fix: bool = False
    write: bool = True
    use_cache: bool = True
    prefilter: bool = True
    jobs: Optional[int] = None
    cache_dir: Optional[str] = None
    file_budget: float = FILE_TIME_BUDGET


@dataclass
class FileResult:
    """What happened to one file; `document` is its final (possibly fixed) form."""

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    fixed: list[Diagnostic] = field(default_factory=list)
    document: object = None
    original: object = None
    unsafe_fixes: bool = False
    converged: bool = True
    rounds: int = 0  # rounds of `--fix` that changed the text
    root: Optional[str] = None  # the folder it was found in (None: named on the command line)

    @property
    def changed(self) -> bool:
        return self.document is not None and self.document is not self.original


@dataclass
class RunResult:
    files: list[FileResult]
    analysed: int = 0
    cache_hits: int = 0
    workers: int = 1

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return sorted((d for f in self.files for d in f.diagnostics), key=Diagnostic.sort_key)


# ---------------------------------------------------------------- analysis (in workers)


class Task(NamedTuple):
    """One file to analyse or fix: plain data, so it can cross to a worker process."""

    path: str
    text: str
    options: AnalysisOptions
    enabled: frozenset[str] = frozenset()
    fix: bool = False
    unsafe: bool = False
    gate: bool = True
    plain: Optional[bool] = None  # the text stage's shortcut verdict (`gate.text_stage`), when known
    fixable: Optional[frozenset[str]] = None  # the codes `--fix` may fix (None: every code)


class TaskResult(NamedTuple):
    """Raw findings (check) or remaining findings and fixed text (fix)."""

    diagnostics: list[Diagnostic]
    text: Optional[str] = None
    fixed: tuple[Diagnostic, ...] = ()
    converged: bool = True
    cacheable: bool = False
    rounds: int = 0
    reads: tuple[tuple[str, str], ...] = ()  # the project files the analysis read, with their sha256


def _keeper(enabled: frozenset[str], suppressed: dict):
    """What the fixer may fix; what a comment silenced is kept aside, per text, for AL002."""

    def keep(text: str, diagnostic: Diagnostic) -> bool:
        if diagnostic.code not in enabled:
            return False
        if suppressions(text).suppresses(diagnostic):
            suppressed.setdefault(text, {})[diagnostic] = None
            return False
        return True

    return keep


def run_task(task: Task) -> TaskResult:
    """Screen, then analyse (or fix) one text; any failure becomes a diagnostic of that file.

    The cyclic collector is paused for the whole of it (`accumlint.compat.collector`):
    each collection would traverse the file's trees again, and nothing keeps
    them in a cycle (the module's tree goes by reference counting when the file
    is done, and the model breaks its own cycles, a statement and its events,
    when the analysis is done with it: `ModuleModel.release`). What the analysis
    leaves is collected as soon as it returns."""
    with collector_paused():
        return _run_task(task)


def _run_task(task: Task) -> TaskResult:
    try:
        if not screen(task.text, task.path, gate=task.gate, plain=task.plain) and not task.fix:
            return _from_importers(task)
    except ParseFailure as failure:  # CPython's own verdict and position
        return TaskResult([syntax_error(task.path, failure.line, failure.column, failure.message)], cacheable=True)
    except Unanalysable as refusal:
        return TaskResult([internal_error(task.path, f"cannot be analysed: {refusal.message}")], cacheable=True)
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        if task.fix:
            from accumlint.check.fixes import fix_text

            suppressed: dict[str, dict[Diagnostic, None]] = {}
            keep = _keeper(task.enabled, suppressed)
            outcome = fix_text(task.text, task.path, task.options, unsafe=task.unsafe, keep=keep, fixable=task.fixable)
            raw = outcome.remaining + list(suppressed.get(outcome.text, ()))
            return TaskResult(raw, outcome.text, tuple(outcome.fixed), outcome.converged, rounds=outcome.rounds)
        from accumlint.check.analysis import analyze, project_report

        diagnostics = analyze(task.text, task.path, task.options)
        report = project_report(task.path)
        # a diagnostic of another file (a named configuration file that does not parse) is not cached
        return TaskResult(diagnostics + report.diagnostics, cacheable=not report.diagnostics,
                          reads=tuple(sorted(report.reads.items())))
    except ParseFailure as failure:  # CPython parsed it: the limitation is LibCST's
        where = f"line {failure.line}, column {failure.column}"
        message = f"cannot be analysed: valid Python that LibCST cannot parse ({failure.message.strip()} at {where})"
        return TaskResult([internal_error(task.path, message)], cacheable=True)
    except Unanalysable as refusal:
        return TaskResult([internal_error(task.path, f"cannot be analysed: {refusal.message}")], cacheable=True)
    except RecursionError:
        message = "analysis exceeded the recursion limit (deeply nested code); file not checked"
    except MemoryError:
        message = "analysis ran out of memory; file not checked"
    except Exception as error:  # noqa: BLE001 - one file's failure must not end the run
        message = f"internal error while checking this file: {type(error).__name__}: {error}"
    return TaskResult([internal_error(task.path, message)])


def _from_importers(task: Task) -> TaskResult:
    """A module with no loop of its own: the findings that other modules' loops make on
    its helpers (`analysis.findings_from_importers`); `--fix` runs the fixer on it
    (`fixes.fix_text` applies their fixes)."""
    try:
        from accumlint.check.analysis import findings_from_importers

        found = findings_from_importers(task.text, task.path, task.options)
    except Exception:  # noqa: BLE001 - precision first: what cannot be read says nothing
        return TaskResult([], cacheable=True)
    return TaskResult(found.diagnostics, cacheable=True, reads=tuple(sorted(found.reads.items())))


def _workers(jobs: Optional[int], tasks: list[Task]) -> int:
    """How many worker processes the tasks can pay for (--jobs decides when given)."""
    if not tasks:
        return 0
    if jobs is not None:
        return max(min(jobs, len(tasks)), 1)
    sizes = [len(task.text) for task in tasks]
    useful = 1 + (sum(sizes) - max(sizes)) // CHARS_PER_WORKER
    return max(min(os.cpu_count() or 1, len(tasks), useful), 1)


def _no_progress(done: int, total: int) -> None:
    pass


class RunState(NamedTuple):
    """What of the run's process a worker needs, handed to forked and spawned workers
    alike (the pool's initializer, `enter_run`): the common parent of the checked paths
    (`accumlint.project.root.set_checked_paths`), and whether the process-wide speed-ups
    are on (`accumlint.compat.enable`: the command's own run, no kill switch)."""

    checked_parent: Optional[str]
    speedups: bool

    @classmethod
    def here(cls) -> "RunState":
        from accumlint.compat import process_wide
        from accumlint.project.root import checked_parent

        return cls(checked_parent(), process_wide())


def enter_run(state: RunState) -> None:
    """A worker's start: put it in the state of the run that started it."""
    from accumlint import compat
    from accumlint.project.root import set_checked_parent

    set_checked_parent(state.checked_parent)
    if state.speedups:
        compat.enable()  # honours the kill switch, which a worker's environment carries too


def execute(
    tasks: list[Task],
    jobs: Optional[int],
    progress: Progress = _no_progress,
    budget: float = FILE_TIME_BUDGET,
) -> tuple[list[TaskResult], int]:
    """Results in task order, and how many worker processes ran them; `progress(done, total)` after each.

    A file whose worker crashed, was killed or ran past `budget` seconds gets
    an internal error naming what happened; the other files are not affected.
    """
    progress(0, len(tasks))
    if not tasks:  # every file from the result cache: no worker to start, nor its module to import
        return [], 0
    from accumlint.check.workers import Failure, WorkerPool, start_method

    workers = _workers(jobs, tasks)
    if workers > 1:  # imported once here, inherited by the forked workers
        from accumlint.check.analysis import load_analysis, scan_importers_ahead

        load_analysis()
        import accumlint.check.fixes  # noqa: F401

        if start_method() == "fork":
            scan_importers_ahead([(task.path, task.text) for task in tasks])

    results: list[Optional[TaskResult]] = [None] * len(tasks)
    order = sorted(range(len(tasks)), key=lambda i: -len(tasks[i].text))  # biggest first
    done = 0
    with WorkerPool(workers, run_task, budget, FILE_MEMORY_BUDGET, enter_run, (RunState.here(),)) as pool:
        for position, outcome in pool.map([tasks[i] for i in order], [len(tasks[i].text) for i in order]):
            index = order[position]
            if isinstance(outcome, Failure):
                outcome = TaskResult([internal_error(tasks[index].path, outcome.message)])
            results[index] = outcome
            done += 1
            progress(done, len(tasks))
    return results, workers


# ---------------------------------------------------------------- the run


@dataclass
class _Read:
    """A file read and screened: its text stage's verdict (`plain`) and, for a file that
    stage drops, whether its loops reach a backward in another project module."""

    path: str
    settings: Settings
    result: FileResult
    document: Any
    plain: Optional[bool]
    elsewhere: bool = False


@dataclass
class _Pending:
    result: FileResult
    settings: Settings
    enabled: frozenset[str]
    cache_key: Optional[str] = None


def _fixable(diagnostics: list[Diagnostic], unsafe: bool) -> bool:
    return any(d.fix and (unsafe or d.fix.applicability == "safe") for d in diagnostics)


def _select(document, diagnostics: list[Diagnostic], enabled: frozenset[str]) -> list[Diagnostic]:
    """Enabled, unsuppressed findings of the final text (and of its noqa comments), located and sorted.

    `diagnostics` are the raw findings, suppressed ones included: a comment that
    silences none of them is an unused one (AL002).
    """
    text_rules = suppressions(document.text)
    if not any(is_error(d) for d in diagnostics):
        diagnostics = diagnostics + text_rules.check(document.path, diagnostics, enabled)
    kept = [
        document.locate(d)
        for d in diagnostics
        if is_error(d) or (d.code in enabled and not text_rules.suppresses(d))
    ]
    return sorted(kept, key=Diagnostic.sort_key)


def discovered(paths: tuple[str, ...], resolver: Resolver):
    """The files a run over `paths` checks (`discover` under each file's `exclude`)."""

    def excluded(path: str, is_dir: bool) -> bool:
        return resolver.settings_for(path, is_dir).is_excluded(path, is_dir)

    return discover(list(paths), excluded)


def _sources(request: Request, resolver: Resolver):
    """(display path, settings, bytes or SourceError, root folder) for each file of the run."""
    if request.stdin is not None:
        display = request.stdin_filename or "-"
        yield display, resolver.settings_for(request.stdin_filename or "."), request.stdin, None
        return

    for source in discovered(request.paths, resolver):
        data: Union[bytes, SourceError]
        settings = resolver.settings_for(source.display, is_dir=False if source.error is None else None)
        if source.error is not None:
            data = ReadError(source.error)
        else:
            try:
                data = read_bytes(source.display, settings.config.max_file_size)
            except SourceError as error:
                data = error
        yield source.display, settings, data, source.root


def _load(result: FileResult, data: Union[bytes, SourceError]):
    """The file's document, or None with its one error diagnostic set."""
    path = result.path
    try:
        if isinstance(data, SourceError):
            raise data
        return load_document(path, data)
    except ReadError as error:
        result.diagnostics = [io_error(path, error.message)]
    except SourceError as error:
        result.diagnostics = [syntax_error(path, error.line, error.column, error.message)]
    except Exception as error:  # noqa: BLE001 - a reader's bug costs one file, not the run
        result.diagnostics = [internal_error(path, f"internal error while reading this file: {type(error).__name__}: {error}")]
    return None


def check(request: Request, resolver: Resolver, progress: Progress = _no_progress) -> RunResult:
    """Check (and fix) every file the request names; `progress` hears how many analyses are done."""
    cache = None
    roots: Optional[_Roots] = None
    if request.use_cache:  # `--no-cache` does not pay for importing it (hashlib, json)
        from accumlint.check.cache import open_cache

        cache = open_cache(request.cache_dir, request.paths)
        roots = _Roots(request)
    # The project of each file is known before the prefilter asks about it (`_reaches_backward_elsewhere`, `_called_from_project_loops`),
    # and the run's scans of the project's trees serve the prefilter and the analyses alike.
    from accumlint.project.importers import one_run
    from accumlint.project.root import set_checked_paths

    set_checked_paths(request.paths if request.stdin is None else ())
    with one_run():
        return _check_in_run(request, resolver, progress, cache, roots)


def _check_in_run(request: Request, resolver: Resolver, progress: Progress, cache, roots: "Optional[_Roots]") -> RunResult:
    """`check` within the run's project state (`check` sets it up)."""
    from accumlint.project.importers import note_training

    files: list[FileResult] = []
    unfixable: list[tuple[FileResult, frozenset[str]]] = []
    pending: list[_Pending] = []
    tasks: list[Task] = []
    read: list[_Read] = []
    for path, settings, data, root in _sources(request, resolver):
        result = FileResult(path, unsafe_fixes=settings.unsafe_fixes, root=root)
        files.append(result)
        if not settings.fixable >= settings.enabled:  # like ruff: an unfixable rule's findings offer no fix
            unfixable.append((result, settings.fixable))
        document = _load(result, data)
        if document is None:
            continue
        result.document = result.original = document
        plain = text_stage(document.text) if request.prefilter else None
        read.append(_Read(path, settings, result, document, plain))
    # stage one may pass on a setting's name alone (`num_training_steps=...` reads like
    # `training_step`): stage two would then drop a loop whose backward is in a helper module
    asked = [entry for entry in read if request.prefilter and not entry.plain]
    # many files asked: the names of the project's backward functions spare resolving most imports
    names = _backward_names() if len(asked) >= PROJECT_NAMES_FROM else None
    for entry in asked:
        entry.elsewhere = _reaches_backward_elsewhere(entry.path, entry.document.text, names)
    if request.prefilter:
        for entry in read:
            note_training(entry.path, entry.document.text, entry.plain is not None or entry.elsewhere)
    # every file's own verdict is known before any file asks whether another's loops train
    for entry in read:
        path, settings, result, document, plain, elsewhere = (
            entry.path, entry.settings, entry.result, entry.document, entry.plain, entry.elsewhere)
        gate = request.prefilter and not elsewhere  # the text gate's stage two would drop it: its backward is elsewhere
        if request.prefilter and plain is None and not elsewhere and not _called_from_project_loops(path, document.text):
            continue
        if len(document.text) > MAX_ANALYSED_CHARS:
            size = len(document.text) / 1e6
            limit = MAX_ANALYSED_CHARS / 1e6
            result.diagnostics = [internal_error(path, f"file too large to check ({size:.1f} MB; the limit is {limit:.0f} MB)")]
            continue
        config = settings.config
        options = AnalysisOptions(config.optimizer_names, config.accumulation_names)
        enabled = settings.enabled_for(path)
        item = _Pending(result, settings, enabled)
        if cache is not None and roots is not None:
            item.cache_key = cache.key(document.text, options, roots.of(path))
            cached = cache.get(item.cache_key, path)
            if cached is not None and not (
                request.fix and _fixable(_select(document, cached, enabled), settings.unsafe_fixes)
            ):
                result.diagnostics = _select(document, cached, enabled)
                continue
        pending.append(item)
        fixable = None if settings.fixable >= enabled else settings.fixable
        tasks.append(Task(path, document.text, options, enabled, request.fix, settings.unsafe_fixes, gate, plain, fixable))

    outcomes, workers = execute(tasks, request.jobs, progress, request.file_budget)
    unwritten = [
        (item, task) for item, task, outcome in zip(pending, tasks, outcomes) if not _finish(item, outcome, cache, request)
    ]
    if unwritten:  # their findings are those of the text still on disk: check it again
        from accumlint.project.importers import forget

        forget()  # the tree as the fixes written left it
        rechecks, _ = execute([task._replace(fix=False) for _, task in unwritten], request.jobs, budget=request.file_budget)
        for (item, _), outcome in zip(unwritten, rechecks):
            result = item.result
            result.diagnostics = result.diagnostics + _select(result.original, outcome.diagnostics, item.enabled)
    _report_once(files)
    if cache is not None:
        cache.prune()
    for result, fixable in unfixable:
        result.diagnostics = [d if d.fix is None or d.code in fixable else d._replace(fix=None) for d in result.diagnostics]
    return RunResult(files, analysed=len(tasks), cache_hits=cache.hits if cache else 0, workers=workers)


class _Roots:
    """The project root of each checked file, for the result cache's key (one search per folder)."""

    def __init__(self, request: Request) -> None:
        from accumlint.project.root import common_parent

        self._checked = common_parent(request.paths) if request.stdin is None else None
        self._found: dict[str, str] = {}

    def of(self, path: str) -> str:
        """"" for a text that has no file (stdin without `--stdin-filename`)."""
        from accumlint.project.root import root_under

        if path == "-" or not os.path.isfile(path):
            return ""
        folder = os.path.dirname(os.path.abspath(path))
        root = self._found.get(folder)
        if root is None:
            root = self._found[folder] = root_under(folder, self._checked)
        return root


# From this many modules the text gate drops, the prefilter asks the project's scan for the
# names of its backward functions (`importers.backward_names`) before resolving their imports:
# a whole tree's check reads every file anyway, a few files' check need not.
PROJECT_NAMES_FROM = 50


def _backward_names() -> "BackwardNamesOf":
    from accumlint.project.importers import backward_names

    return backward_names


def _reaches_backward_elsewhere(path: str, text: str, names: "Optional[BackwardNamesOf]" = None) -> bool:
    """The gate's project clause: a module with no backward call of its own whose loop
    calls a project helper that runs one (`accumlint.project.reach`)."""
    if "import" not in text:  # the common case: no import, no helper of another module
        return False
    from accumlint.project.reach import loop_reaches_project_backward

    try:
        return loop_reaches_project_backward(path, text, names)
    except (OSError, ValueError, RecursionError):
        return False  # precision first: a project that cannot be read adds nothing


def _called_from_project_loops(path: str, text: str) -> bool:
    """The gate's other project clause: a module with no backward call whose helpers (a
    zeroing, a step, a division of the loss: `def clear(opt): opt.zero_grad()`) a loop of
    another project module may call; the analysis of its importers decides
    (`analysis.findings_from_importers`)."""
    from accumlint.project.importers import candidate_importers, helper_definitions

    definitions = helper_definitions(text)
    if not definitions or not os.path.isfile(path):
        return False
    from accumlint.project.modules import root_of

    target = os.path.abspath(path)
    try:
        root = root_of(path)
        # by the text first, then by the effects (`ast`) of the few helpers whose names an importer calls
        return bool(candidate_importers(root, target, [name for name, _ in definitions])) and bool(
            candidate_importers(root, target, _role_helpers(target, text, definitions)))
    except (OSError, ValueError, RecursionError):
        return False  # precision first: a project that cannot be read adds nothing


def _role_helpers(path: str, text: str, definitions: list[tuple[str, str]]) -> list[str]:
    """The names of the module's helpers that hold a role effect: each candidate definition
    read by itself, where the whole module's summary would parse a large module (a
    framework's) for a few of its functions; the summary where a definition's text does not
    parse by itself."""
    from accumlint.project.modules import summary_of_text
    from accumlint.project.summary import definition_holds_role

    found: set[str] = set()
    for name, definition in definitions:
        holds = definition_holds_role(definition)
        if holds is None:
            return summary_of_text(path, text).role_helpers()
        if holds:
            found.add(name)
    return sorted(found)


def _report_once(files: list[FileResult]) -> None:
    """A diagnostic of another file (a broken configuration file that several modules
    name) is reported once in the run."""
    seen: set[tuple] = set()
    for result in files:
        kept = []
        for diagnostic in result.diagnostics:
            if diagnostic.path != result.path:
                key = (diagnostic.path, diagnostic.line, diagnostic.column, diagnostic.message)
                if key in seen:
                    continue
                seen.add(key)
            kept.append(diagnostic)
        result.diagnostics = kept


def _fix_comments(result: FileResult, raw: list[Diagnostic], enabled: frozenset[str]) -> None:
    """`--fix` for the noqa comments themselves (AL001, AL002): text edits inside the comments' spans,
    round after round until none is left (a colon added can leave the code it names unused).

    Comments change nothing the analysis finds, and every line keeps its
    number, so the raw findings of the fixed code hold for every round.
    """
    from accumlint.check.fixes import MAX_ROUNDS

    if not any(d.code in SUPPRESSION_CODES for d in result.diagnostics):
        return
    text, fixed, rounds = result.document.text, [], 0
    while True:
        correction = suppressions(text).corrected(text, result.path, raw, enabled, unsafe=result.unsafe_fixes)
        if correction.text == text:
            break
        if result.rounds + rounds == MAX_ROUNDS:
            result.converged = False
            break
        text, rounds = correction.text, rounds + 1
        fixed += correction.fixed
    if not rounds:
        return
    try:
        result.document = result.document.replaced(text)
    except SourceError:
        return  # the comments stay as they are; their findings are still reported
    result.fixed += [result.original.locate(d) for d in fixed]
    result.rounds += rounds
    result.diagnostics = _select(result.document, raw, enabled)


def _finish(item: _Pending, outcome: TaskResult, cache, request: Request) -> bool:
    """Take a task's outcome into its file's result; False when the fixed file could not be written."""
    result = item.result
    if cache is not None and outcome.cacheable and item.cache_key:
        cache.put(item.cache_key, outcome.diagnostics, outcome.reads)
    result.converged = outcome.converged
    result.rounds = outcome.rounds
    if outcome.text is not None and outcome.text != result.original.text:
        try:
            result.document = result.original.replaced(outcome.text)
        except SourceError as error:
            result.diagnostics = [internal_error(result.path, error.message)]
            return True
    result.fixed = [result.original.locate(d) for d in outcome.fixed]
    result.diagnostics = _select(result.document, outcome.diagnostics, item.enabled)
    if request.fix and all(d.code in item.settings.fixable for d in result.diagnostics if d.code in SUPPRESSION_CODES):
        _fix_comments(result, outcome.diagnostics, item.enabled)
    if result.changed and request.write and request.stdin is None:
        problem = _write(result)
        if problem is not None:  # nothing was fixed: no fix counted, no fixed text shown
            result.diagnostics = [io_error(result.path, f"not fixed: {problem}")]
            result.document = result.original
            result.fixed = []
            return False
    return True


def _write(result: FileResult) -> Optional[str]:
    """Write a fixed file back, only if that is safe; why not, when it is not."""
    if result.root is not None and outside(result.path, result.root):
        target = os.path.realpath(result.path)
        return f"it is a symbolic link to {target}, outside the checked folder {result.root}"
    try:
        write_atomic(result.path, result.document.encoded(), expected=result.original.encoded())
    except WriteRefused as refusal:
        return refusal.message
    except UnicodeEncodeError as error:
        return f"the fixed code cannot be encoded as {error.encoding}: {error.reason}"
    except OSError as error:
        return f"cannot write the file: {error.strerror or error}"
    return None
