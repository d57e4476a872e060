"""The language server: LSP messages in, accumlint's findings and fixes out (pygls, lsprotocol).

- Diagnostics on open and save at once, on change after a short pause
  (typing must not run a check per keystroke), for `.py` files and notebook
  documents (one diagnostic list per cell).
- Code actions: per finding, its fix ("(unsafe)" in the title of unsafe ones,
  which are never preferred) and "Disable GAxxx for this line" (`# noqa`);
  `source.fixAll.accumlint` applies the safe fixes only, as the LSP expects
  of fix-all actions that editors run on save.
- Hover over a finding shows its rule document.
- The configuration is read on every check; a changed `pyproject.toml`
  (watched files) re-checks every open document.
"""

from __future__ import annotations

import asyncio
import os
from typing import Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

import accumlint
from accumlint.diagnostics import Diagnostic
from accumlint.engine import is_error
from accumlint.noqa import NAMES as SUPPRESSION_CODES
from accumlint.server import lint

SOURCE = "accumlint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
DEBOUNCE_SECONDS = float(os.environ.get("ACCUMLINT_LSP_DEBOUNCE", "0.3"))

server = LanguageServer(
    SOURCE,
    accumlint.__version__,
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
_pending: dict[str, asyncio.Task] = {}


# ---------------------------------------------------------------- documents and units


def _path(uri: str, suffix: str) -> str:
    path = to_fs_path(uri)
    return path if path else os.path.join(os.getcwd(), f"untitled{suffix}")


def _unit_for(uri: str) -> tuple[str, lint.Unit]:
    """(key, unit): a notebook (by a cell's or its own uri) or a file."""
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


def _range(uri: str, d: Diagnostic) -> types.Range:
    document = server.workspace.get_text_document(uri)
    start = ServerTextPosition(max(d.line - 1, 0), max(d.column - 1, 0))
    end = ServerTextPosition(max(d.end_line - 1, 0), max(d.end_column - 1, 0))
    return document.range_to_client_units(ServerTextRange(start, end))


def _lsp_diagnostic(uri: str, d: Diagnostic) -> types.Diagnostic:
    error = is_error(d)
    return types.Diagnostic(
        range=_range(uri, d),
        message=d.message + (f"\n{d.help}" if d.help else ""),
        severity=types.DiagnosticSeverity.Error if error else types.DiagnosticSeverity.Warning,
        code=d.code if not error else d.name,
        source=SOURCE,
        data={"fix": d.fix.applicability if d.fix else None},
    )


def _located(uri: str) -> tuple[str, lint.Unit, list[tuple[str, Diagnostic]]]:
    key, unit = _unit_for(uri)
    result = lint.findings(unit)
    return key, unit, [(unit.uri_of(d, key), d) for d in result.diagnostics]


def publish(uri: str) -> None:
    """Check the document (or the notebook holding it) and publish one list per editor document."""
    key, unit, found = _located(uri)
    for target in _uris(key, unit):
        diagnostics = [_lsp_diagnostic(target, d) for where, d in found if where == target]
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=target, diagnostics=diagnostics))


def _later(uri: str) -> None:
    """Publish after a pause; a newer change of the same document restarts the pause."""
    key = _unit_for(uri)[0]
    previous = _pending.pop(key, None)
    if previous is not None:
        previous.cancel()

    async def wait_then_publish() -> None:
        await asyncio.sleep(DEBOUNCE_SECONDS)
        _pending.pop(key, None)
        publish(uri)

    _pending[key] = asyncio.ensure_future(wait_then_publish())


def _clear(uris: list[str]) -> None:
    for uri in uris:
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# ---------------------------------------------------------------- document events


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(params: types.DidOpenTextDocumentParams) -> None:
    publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
async def did_change(params: types.DidChangeTextDocumentParams) -> None:
    _later(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(params: types.DidSaveTextDocumentParams) -> None:
    """Check the saved module, then the other open modules: the analysis reads saved
    modules of the project (SPEC section 2), so an importer's findings, or a helper's
    that a loop elsewhere makes, may change with this one."""
    from accumlint.project.importers import forget

    forget()
    saved = params.text_document.uri
    publish(saved)
    seen = {_unit_for(saved)[0]}
    for uri in list(server.workspace.text_documents):
        if uri.endswith(".py"):
            key = _unit_for(uri)[0]
            if key not in seen:
                seen.add(key)
                publish(uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(params: types.DidCloseTextDocumentParams) -> None:
    _clear([params.text_document.uri])


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def notebook_did_open(params: types.DidOpenNotebookDocumentParams) -> None:
    publish(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
async def notebook_did_change(params: types.DidChangeNotebookDocumentParams) -> None:
    _later(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
def notebook_did_save(params: types.DidSaveNotebookDocumentParams) -> None:
    publish(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(params: types.DidCloseNotebookDocumentParams) -> None:
    _clear([cell.uri for cell in params.cell_text_documents])


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
    seen: set[str] = set()
    for uri in list(server.workspace.text_documents):
        key = _unit_for(uri)[0]
        if key not in seen:
            seen.add(key)
            publish(uri)


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


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]),
)
def code_actions(params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    only = [str(getattr(kind, "value", kind)) for kind in params.context.only] if params.context.only else None
    key, unit, found = _located(uri)
    actions: list[types.CodeAction] = []
    first, last = params.range.start.line, params.range.end.line
    if _wanted(types.CodeActionKind.QuickFix.value, only):
        for where, d in found:
            if where != uri or is_error(d) or not (d.line - 1 <= last and d.end_line - 1 >= first):
                continue
            diagnostic = _lsp_diagnostic(uri, d)
            if d.fix is not None:
                texts = lint.fix_one(unit, d)
                if texts is not None:
                    unsafe = d.fix.applicability == "unsafe"
                    actions.append(types.CodeAction(
                        title=f"{d.fix.description} ({d.code})" + (" (unsafe)" if unsafe else ""),
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=not unsafe,
                        edit=_workspace_edit(texts, uri),
                    ))
            texts = lint.with_noqa(unit, d) if d.code not in SUPPRESSION_CODES else None
            if texts is not None:
                actions.append(types.CodeAction(
                    title=f"Disable {d.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=_workspace_edit(texts, uri),
                ))
    if _wanted(FIX_ALL, only) and any(d.fix and d.fix.applicability == "safe" for _, d in found):
        texts = lint.fix_all(unit)
        if texts is not None:
            actions.append(types.CodeAction(
                title="accumlint: fix all safe findings", kind=FIX_ALL, edit=_workspace_edit(texts, uri)
            ))
    return actions


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params: types.HoverParams) -> Optional[types.Hover]:
    """The rule document of the finding under the cursor."""
    uri = params.text_document.uri
    document = server.workspace.get_text_document(uri)
    position = document.position_from_client_units(params.position)
    for where, d in _located(uri)[2]:
        if where != uri or is_error(d):
            continue
        start, end = (d.line - 1, d.column - 1), (d.end_line - 1, d.end_column - 1)
        if start <= (position.line, position.character) <= end:
            from accumlint.docs import rule_document

            return types.Hover(
                contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=rule_document(d.code)),
                range=_range(uri, d),
            )
    return None


def serve() -> None:
    """Speak LSP on standard input and output until the client says exit."""
    server.start_io()
