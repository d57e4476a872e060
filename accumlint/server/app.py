"""The language server: LSP messages in, accumlint's findings and fixes out (pygls, lsprotocol).

- Every analysis runs in a forked child process (`children`), never on the
  event loop: hover, code actions and `shutdown` are answered at once while
  a big file is being checked, and a run whose text has changed since is
  killed (a newer text supersedes it).
- Diagnostics are pushed on open and save at once, on change after a short
  pause (typing must not run a check per keystroke), for `.py` files and
  notebook documents (one diagnostic list per cell); a client that pulls
  diagnostics (`textDocument/diagnostic`) gets them on request instead. Each
  diagnostic links its rule document (`codeDescription`).
- Code actions: per finding, its fix ("(unsafe)" in the title of unsafe ones,
  which are never preferred) and "Disable GAxxx for this line" (`# noqa`),
  from the analysis of the document's current text (none while it is under
  way); `source.fixAll.accumlint` applies the safe fixes only, as the LSP
  expects of fix-all actions that editors run on save, and
  `notebook.source.fixAll.accumlint` does so across a notebook's cells.
- Hover over a finding shows its rule document.
- The configuration is read on every check; a changed `pyproject.toml`
  (watched files) re-checks every open document. A configuration that cannot
  be used is shown once (`window/showMessage`) and the defaults apply meanwhile.
- Malformed messages get a protocol error and the server goes on
  (`transport`); `exit` after `shutdown` ends the process with status 0.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

import accumlint
from accumlint.diagnostics import Diagnostic
from accumlint.check.engine import is_error
from accumlint.check.noqa import NAMES as SUPPRESSION_CODES
from accumlint.server import children, lint
from accumlint.server.transport import FramedInput, Output, RobustProtocol

logger = logging.getLogger(__name__)

SOURCE = "accumlint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
NOTEBOOK_FIX_ALL = f"{types.CodeActionKind.Notebook.value}.{FIX_ALL}"
DEBOUNCE_SECONDS = float(os.environ.get("ACCUMLINT_LSP_DEBOUNCE", "0.3"))

server = LanguageServer(
    SOURCE,
    accumlint.__version__,
    protocol_cls=RobustProtocol,
    text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
    notebook_document_sync=types.NotebookDocumentSyncOptions(
        notebook_selector=[
            types.NotebookDocumentFilterWithCells(
                notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
            )
        ],
        save=True,
    ),
)


class ServerCancelled(JsonRpcException):
    """The document changed while its diagnostics were computed: the client asks again (LSP 3.17)."""

    CODE = types.LSPErrorCodes.ServerCancelled.value


class Superseded(Exception):
    """The run was ended: its text changed, the configuration changed, or the server is stopping."""


# ---------------------------------------------------------------- documents and units


def _is_open(uri: str) -> bool:
    """Whether the client opened the document (a `.py` file or a notebook's cell)."""
    return unquote(uri) in server.workspace.text_documents or server.workspace.get_notebook_document(
        notebook_uri=uri
    ) is not None


def _path(uri: str, suffix: str) -> str:
    path = to_fs_path(uri)
    return path if path else os.path.join(os.getcwd(), f"untitled{suffix}")


def _unit_for(uri: str) -> tuple[str, lint.Unit]:
    """(key, unit): a notebook (by a cell's or its own uri) or a file, as the editor has it now."""
    notebook = server.workspace.get_notebook_document(cell_uri=uri) or server.workspace.get_notebook_document(
        notebook_uri=uri
    )
    if notebook is not None:
        cells = tuple(
            lint.Cell(cell.document, server.workspace.get_text_document(cell.document).source,
                      cell.kind == types.NotebookCellKind.Code)
            for cell in notebook.cells
        )
        return notebook.uri, lint.Unit(_path(notebook.uri, ".ipynb"), cells=cells)
    return uri, lint.Unit(_path(uri, ".py"), text=server.workspace.get_text_document(uri).source)


def _uris(key: str, unit: lint.Unit) -> list[str]:
    return [cell.uri for cell in unit.cells] if unit.cells is not None else [key]


@functools.lru_cache(maxsize=None)
def _rule_link(code: str) -> Optional[types.CodeDescription]:
    """The rule document's `file:` URI: the repository's `rules/GAxxx.md` in a checkout,
    the installed copy otherwise (it opens in the editor, also on a remote machine)."""
    try:
        from accumlint.rules.catalog import RULES_BY_CODE
        from accumlint.rules.docs import documents

        folder = documents()
        document = folder.joinpath(RULES_BY_CODE[code].document) if folder is not None else None
        if isinstance(document, os.PathLike) and document.is_file():
            return types.CodeDescription(href=Path(os.path.abspath(document)).as_uri())
    except (ImportError, OSError, TypeError, ValueError, KeyError):
        pass
    return None


class _Lines:
    """A document's lines, split once for all the ranges converted to the client's units."""

    def __init__(self, uri: str) -> None:
        self.document = server.workspace.get_text_document(uri)
        self.lines = self.document.lines

    def range(self, d: Diagnostic) -> types.Range:
        start = ServerTextPosition(max(d.line - 1, 0), max(d.column - 1, 0))
        end = ServerTextPosition(max(d.end_line - 1, 0), max(d.end_column - 1, 0))
        return self.document.position_codec.range_to_client_units(self.lines, ServerTextRange(start, end))


def _lsp_diagnostic(lines: _Lines, d: Diagnostic) -> types.Diagnostic:
    error = is_error(d)
    return types.Diagnostic(
        range=lines.range(d),
        message=d.message + (f"\n{d.help}" if d.help else ""),
        severity=types.DiagnosticSeverity.Error if error else types.DiagnosticSeverity.Warning,
        code=d.code if not error else d.name,
        code_description=None if error else _rule_link(d.code),
        source=SOURCE,
        data={"fix": d.fix.applicability if d.fix else None},
    )


def _lsp_diagnostics(uri: str, found: list[tuple[str, Diagnostic]]) -> list[types.Diagnostic]:
    lines = _Lines(uri)
    return [_lsp_diagnostic(lines, d) for where, d in found if where == uri]


# ---------------------------------------------------------------- analyses, off the event loop


@dataclass(frozen=True)
class Analysis:
    """The findings of one text of a unit, under one configuration."""

    unit: lint.Unit
    generation: int
    found: list[tuple[str, Diagnostic]]  # (editor document, finding)
    result_id: str


@dataclass
class _Run:
    """A run under way: its text, its configuration, and the future its waiters share."""

    unit: lint.Unit
    generation: int
    answer: asyncio.Future
    task: Optional[asyncio.Task] = None

    def end(self) -> None:
        """Kill the run's child; its waiters hear Superseded."""
        if self.task is not None:
            self.task.cancel()
        if not self.answer.done():
            self.answer.set_exception(Superseded())


class Analyses:
    """The newest analysis of each unit (by its key), and the runs under way.

    A run is shared by everyone who wants the same text; a run of an older
    text, or under an older configuration, is killed when a newer one starts.
    """

    def __init__(self) -> None:
        self.generation = 0  # counts configuration changes
        self._done: dict[str, Analysis] = {}
        self._running: dict[str, _Run] = {}
        self._ids = itertools.count(1)
        self._config_problem: Optional[str] = None

    def current(self, key: str, unit: lint.Unit) -> Optional[Analysis]:
        """The finished analysis of exactly this text under the current configuration, if any."""
        done = self._done.get(key)
        return done if done is not None and done.generation == self.generation and done.unit == unit else None

    async def analyse(self, key: str, unit: lint.Unit) -> Analysis:
        """The analysis of this text: finished, under way, or started now. Raises Superseded
        when the run is ended first, children.ChildFailed when it fails."""
        done = self.current(key, unit)
        if done is not None:
            return done
        run = self._running.get(key)
        if run is None or run.unit != unit or run.generation != self.generation:
            self.cancel(key)
            answer = asyncio.get_running_loop().create_future()
            # A run nobody waits for any more may end in Superseded: that is no error to log.
            answer.add_done_callback(lambda future: future.cancelled() or future.exception())
            run = _Run(unit, self.generation, answer)
            run.task = asyncio.ensure_future(self._run(key, run))
            self._running[key] = run
        return await asyncio.shield(run.answer)

    async def _run(self, key: str, run: _Run) -> None:
        try:
            result: lint.Findings = await children.run_in_child(lint.findings, run.unit)
        except asyncio.CancelledError:
            run.end()
            raise
        except children.ChildFailed as error:
            logger.error("the analysis of %s failed: %s", run.unit.path, error)
            run.answer.set_exception(error)
            return
        finally:
            if self._running.get(key) is run:
                del self._running[key]
        self._show_config_problem(result.config_problem)
        found = [(run.unit.uri_of(d, key), d) for d in result.diagnostics]
        analysis = Analysis(run.unit, run.generation, found, f"{run.generation}.{next(self._ids)}")
        if run.generation == self.generation:
            self._done[key] = analysis
        run.answer.set_result(analysis)

    def cancel(self, key: str) -> None:
        """End the run under way for the unit, if any (its child is killed)."""
        run = self._running.pop(key, None)
        if run is not None:
            run.end()

    def forget(self, key: str) -> None:
        self.cancel(key)
        self._done.pop(key, None)

    def invalidate(self) -> None:
        """The configuration changed: every analysis is out of date, every run is ended."""
        self.generation += 1
        for key in list(self._running):
            self.cancel(key)

    def stop(self) -> None:
        for key in list(self._running):
            self.cancel(key)
        children.kill_all()

    def _show_config_problem(self, problem: Optional[str]) -> None:
        """Tell the user once per problem (not once per check) that the configuration is unusable."""
        if problem is not None and problem != self._config_problem:
            server.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=f"accumlint: {problem}. The default settings apply until it is fixed.",
            ))
        self._config_problem = problem


analyses = Analyses()
_pending: dict[str, asyncio.Task] = {}
_session = {"shutdown": False}


def _pulls_diagnostics() -> bool:
    """Whether the client asks for diagnostics (`textDocument/diagnostic`) instead of being sent them."""
    text_document = server.client_capabilities.text_document
    return text_document is not None and text_document.diagnostic is not None


def _publish(key: str, analysis: Analysis) -> None:
    for target in _uris(key, analysis.unit):
        if _is_open(target):
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=target, diagnostics=_lsp_diagnostics(target, analysis.found)
            ))


async def _check_and_publish(uri: str, key: str, delay: float) -> None:
    if delay:
        await asyncio.sleep(delay)
    if _pending.get(key) is asyncio.current_task():
        del _pending[key]
    if not _is_open(uri):
        return
    key, unit = _unit_for(uri)
    try:
        analysis = await analyses.analyse(key, unit)
    except (Superseded, children.ChildFailed):
        return
    if _is_open(uri) and _unit_for(uri)[1] == analysis.unit:
        _publish(key, analysis)


def _check(uri: str, *, changed: bool) -> None:
    """Check the document (or the notebook holding it) and publish: at once, or after a
    pause when it changed (a newer change restarts the pause). Its run under way, of a
    text now out of date, ends at once. A document the client never opened is not checked."""
    if not _is_open(uri):
        return
    key = _unit_for(uri)[0]
    previous = _pending.pop(key, None)
    if previous is not None:
        previous.cancel()
    if changed:
        analyses.cancel(key)
    if _pulls_diagnostics():
        return
    _pending[key] = asyncio.ensure_future(_check_and_publish(uri, key, DEBOUNCE_SECONDS if changed else 0))


def _closed(key: str, uris: list[str]) -> None:
    timer = _pending.pop(key, None)
    if timer is not None:
        timer.cancel()
    analyses.forget(key)
    if not _pulls_diagnostics():
        for uri in uris:
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# ---------------------------------------------------------------- document events


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(params: types.DidOpenTextDocumentParams) -> None:
    _check(params.text_document.uri, changed=False)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(params: types.DidChangeTextDocumentParams) -> None:
    _check(params.text_document.uri, changed=True)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(params: types.DidSaveTextDocumentParams) -> None:
    """Check the saved module, then the other open modules again: the analysis reads the
    saved modules of the project, so an importer's findings, or those a
    loop elsewhere makes on a helper, may change with this one."""
    saved = params.text_document.uri
    _check(saved, changed=False)
    for uri in list(server.workspace.text_documents):
        if uri != saved and uri.endswith(".py") and _is_open(uri):
            analyses.forget(_unit_for(uri)[0])
            _check(uri, changed=False)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(params: types.DidCloseTextDocumentParams) -> None:
    _closed(params.text_document.uri, [params.text_document.uri])


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def notebook_did_open(params: types.DidOpenNotebookDocumentParams) -> None:
    _check(params.notebook_document.uri, changed=False)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def notebook_did_change(params: types.DidChangeNotebookDocumentParams) -> None:
    _check(params.notebook_document.uri, changed=True)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
def notebook_did_save(params: types.DidSaveNotebookDocumentParams) -> None:
    _check(params.notebook_document.uri, changed=False)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(params: types.DidCloseNotebookDocumentParams) -> None:
    _closed(params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents])


@server.feature(types.INITIALIZED)
def initialized(params: types.InitializedParams) -> None:
    """Ask the client to watch `pyproject.toml` files, where it can (dynamic registration)."""
    workspace = server.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace else None
    if watched is None or not watched.dynamic_registration:
        return
    options = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]
    )
    registration = types.Registration(
        id="accumlint-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
    )
    server.client_register_capability(types.RegistrationParams(registrations=[registration]))


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def watched_files_changed(params: types.DidChangeWatchedFilesParams) -> None:
    """A configuration changed: check every open document again (the next check reads it)."""
    if not any(change.uri.endswith("pyproject.toml") for change in params.changes):
        return
    analyses.invalidate()
    if _pulls_diagnostics():
        workspace = server.client_capabilities.workspace
        if workspace and workspace.diagnostics and workspace.diagnostics.refresh_support:
            server.workspace_diagnostic_refresh(None)
        return
    seen: set[str] = set()
    for uri in list(server.workspace.text_documents):
        key = _unit_for(uri)[0]
        if key not in seen:
            seen.add(key)
            _check(uri, changed=False)


@server.feature(types.SHUTDOWN)
def shutdown(params: Any) -> None:
    """End every run and pending check: nothing is analysed after `shutdown`."""
    _session["shutdown"] = True
    for timer in _pending.values():
        timer.cancel()
    _pending.clear()
    analyses.stop()


# ---------------------------------------------------------------- pull diagnostics


@server.feature(
    types.TEXT_DOCUMENT_DIAGNOSTIC,
    types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False),
)
async def pull_diagnostics(params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
    """The document's diagnostics, once its current text is analysed ("unchanged" when the
    client already has them)."""
    uri = params.text_document.uri
    if not _is_open(uri):
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    key, unit = _unit_for(uri)
    try:
        analysis = await analyses.analyse(key, unit)
    except Superseded:
        raise ServerCancelled("the document changed; ask again", data=types.DiagnosticServerCancellationData(
            retrigger_request=True
        )) from None
    if params.previous_result_id == analysis.result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=analysis.result_id)
    return types.RelatedFullDocumentDiagnosticReport(
        items=_lsp_diagnostics(uri, analysis.found), result_id=analysis.result_id
    )


# ---------------------------------------------------------------- code actions and hover


def _text_edits(old: str, new: str) -> list[types.TextEdit]:
    """One edit replacing the lines that differ (whole lines, so positions need no unit conversion)."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    prefix = 0
    while prefix < min(len(old_lines), len(new_lines)) and old_lines[prefix] == new_lines[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(old_lines), len(new_lines)) - prefix
           and old_lines[-1 - suffix] == new_lines[-1 - suffix]):
        suffix += 1
    end_line = len(old_lines) - suffix
    if suffix == 0 and old_lines and not old_lines[-1].endswith(("\n", "\r")):
        last = old_lines[-1]
        end = types.Position(len(old_lines) - 1, len(last.encode("utf-16-le")) // 2)
    else:
        end = types.Position(end_line, 0)
    replacement = "".join(new_lines[prefix:len(new_lines) - suffix])
    return [types.TextEdit(range=types.Range(types.Position(prefix, 0), end), new_text=replacement)]


def _workspace_edit(texts: dict[Optional[str], str], uri: str) -> types.WorkspaceEdit:
    changes = {}
    for target, new in texts.items():
        target = target or uri
        old = server.workspace.get_text_document(target).source
        if old != new:
            changes[target] = _text_edits(old, new)
    return types.WorkspaceEdit(changes=changes)


def _wanted(kind: str, only: Optional[list[str]]) -> bool:
    return only is None or any(kind == want or kind.startswith(f"{want}.") for want in only)


Texts = Optional[dict[Optional[str], str]]


def _action_texts(unit: lint.Unit, targets: list[Diagnostic], fix_all: bool) -> tuple[list[tuple[Texts, Texts]], Texts]:
    """(fix, noqa) texts per finding, and the fix-all texts (in the child: each is an analysis)."""
    per_finding = [
        (lint.fix_one(unit, d) if d.fix is not None else None,
         lint.with_noqa(unit, d) if d.code not in SUPPRESSION_CODES else None)
        for d in targets
    ]
    return per_finding, lint.fix_all(unit) if fix_all else None


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL]),
)
async def code_actions(params: types.CodeActionParams) -> list[types.CodeAction]:
    """Quick fixes from the analysis of the current text (none while it is under way), fix-all
    from a run of its own (while the text is not yet checked, only when asked for by kind);
    the edits are computed in a child process."""
    uri = params.text_document.uri
    if not _is_open(uri):
        return []
    only = [str(getattr(kind, "value", kind)) for kind in params.context.only] if params.context.only else None
    key, unit = _unit_for(uri)
    analysis = analyses.current(key, unit)
    first, last = params.range.start.line, params.range.end.line
    targets = []
    if analysis is not None and _wanted(types.CodeActionKind.QuickFix.value, only):
        targets = [
            d for where, d in analysis.found
            if where == uri and not is_error(d) and d.line - 1 <= last and d.end_line - 1 >= first
        ]
    fix_all_kinds = [FIX_ALL] + ([NOTEBOOK_FIX_ALL] if unit.cells is not None else [])
    fix_all_kinds = [kind for kind in fix_all_kinds if _wanted(kind, only)]
    if analysis is None:  # a fix run costs a check: only when asked for by kind (on save), not for a light bulb
        fix_all_kinds = fix_all_kinds if only is not None else []
    elif not any(d.fix and d.fix.applicability == "safe" for _, d in analysis.found):
        fix_all_kinds = []
    if not targets and not fix_all_kinds:
        return []
    try:
        per_finding, fixed = await children.run_in_child(_action_texts, unit, targets, bool(fix_all_kinds))
    except children.ChildFailed as error:
        logger.error("the fixes of %s could not be computed: %s", unit.path, error)
        return []
    if _unit_for(uri)[1] != unit:  # changed meanwhile: these edits no longer apply
        return []
    actions: list[types.CodeAction] = []
    lines = _Lines(uri)
    for d, (fix_texts, noqa_texts) in zip(targets, per_finding):
        diagnostic = _lsp_diagnostic(lines, d)
        if fix_texts is not None:
            unsafe = d.fix.applicability == "unsafe"
            actions.append(types.CodeAction(
                title=f"{d.fix.description} ({d.code})" + (" (unsafe)" if unsafe else ""),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=not unsafe,
                edit=_workspace_edit(fix_texts, uri),
            ))
        if noqa_texts is not None:
            actions.append(types.CodeAction(
                title=f"Disable {d.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                edit=_workspace_edit(noqa_texts, uri),
            ))
    if fixed is not None:
        for kind in fix_all_kinds:
            where = "in this notebook" if kind == NOTEBOOK_FIX_ALL else ""
            actions.append(types.CodeAction(
                title=" ".join(filter(None, ["accumlint: fix all safe findings", where])),
                kind=kind,
                edit=_workspace_edit(fixed, uri),
            ))
    return actions


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params: types.HoverParams) -> Optional[types.Hover]:
    """The rule document of the finding under the cursor (nothing while the text is being checked)."""
    uri = params.text_document.uri
    if not _is_open(uri):
        return None
    key, unit = _unit_for(uri)
    analysis = analyses.current(key, unit)
    if analysis is None:
        return None
    lines = _Lines(uri)
    if params.position.line >= len(lines.lines):
        return None
    position = lines.document.position_codec.position_from_client_units(lines.lines, params.position)
    for where, d in analysis.found:
        if where != uri or is_error(d):
            continue
        start, end = (d.line - 1, d.column - 1), (d.end_line - 1, d.end_column - 1)
        if start <= (position.line, position.character) <= end:
            from accumlint.rules.docs import rule_document

            return types.Hover(
                contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=rule_document(d.code)),
                range=lines.range(d),
            )
    return None


def serve() -> int:
    """Speak LSP on standard input and output until the client says exit (or closes the
    input); the exit status: 0 after `shutdown`, 1 otherwise (as the LSP says)."""
    output = Output.from_stdout()
    server.protocol.output = output
    try:
        server.start_io(stdin=FramedInput(sys.stdin.buffer, output), stdout=output)
    finally:  # the event loop is gone (its tasks were cancelled, killing their children): any left over
        children.kill_all()
        output.close()
    return 0 if _session["shutdown"] else 1
