"""The language server, end to end: pygls's own LSP client drives `accumlint server` in a process.

Each test is one editor session over stdio: initialize, open documents,
receive published diagnostics, ask for code actions and hovers, apply the
returned edits the way an editor does, and shut down.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")
from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

BUGGY = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    accum_steps = 4
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=4)
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""
TIMEOUT = 60


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP text edits (ASCII text: UTF-16 columns are characters) from the last to the first."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(position: types.Position) -> int:
        return offsets[min(position.line, len(lines))] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


class Session:
    """One client, its server process, and what the server published."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.client = LanguageClient("accumlint-tests", "1")
        self.published: dict[str, list[types.Diagnostic]] = {}
        self.versions: dict[str, int] = {}
        self.registrations: list[types.Registration] = []

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.published[params.uri] = params.diagnostics
            self.versions[params.uri] = self.versions.get(params.uri, 0) + 1

        @self.client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: types.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

    async def start(self) -> None:
        environment = dict(os.environ, ACCUMLINT_LSP_DEBOUNCE="0.2")
        await self.client.start_io(sys.executable, "-m", "accumlint.cli", "server", cwd=self.root, env=environment)
        capabilities = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(
                did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True)
            ),
        )
        result = await self.client.initialize_async(
            types.InitializeParams(capabilities=capabilities, root_uri=from_fs_path(str(self.root)))
        )
        assert result.server_info.name == "accumlint"
        self.client.initialized(types.InitializedParams())

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def diagnostics(self, uri: str, after: int = 0) -> list[types.Diagnostic]:
        """The diagnostics of the next publication for `uri` after `after` of them."""
        for _ in range(TIMEOUT * 20):
            if self.versions.get(uri, 0) > after:
                return self.published[uri]
            await asyncio.sleep(0.05)
        raise AssertionError(f"no diagnostics published for {uri}")

    def open(self, path: Path, text: str) -> str:
        path.write_text(text)
        uri = from_fs_path(str(path))
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        ))
        return uri

    async def actions(self, uri: str, diagnostic=None, only=None) -> list[types.CodeAction]:
        where = diagnostic.range if diagnostic else types.Range(types.Position(0, 0), types.Position(0, 0))
        context = types.CodeActionContext(diagnostics=[diagnostic] if diagnostic else [], only=only)
        return await self.client.text_document_code_action_async(
            types.CodeActionParams(text_document=types.TextDocumentIdentifier(uri=uri), range=where, context=context)
        )


def run_session(root: Path, body) -> None:
    async def main() -> None:
        session = Session(root)
        await session.start()
        try:
            await body(session)
        finally:
            await session.stop()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_diagnostics_quick_fixes_fix_all_noqa_and_hover(tmp_path):
    async def body(session: Session) -> None:
        uri = session.open(tmp_path / "train.py", BUGGY)
        diagnostics = await session.diagnostics(uri)
        by_code = {d.code: d for d in diagnostics}
        assert sorted(by_code) == ["GA107", "GA201"]
        ga201 = by_code["GA201"]
        assert (ga201.range.start.line, ga201.range.start.character) == (12, 8)
        assert ga201.source == "accumlint" and ga201.severity == types.DiagnosticSeverity.Warning

        actions = await session.actions(uri, ga201, only=[types.CodeActionKind.QuickFix])
        titles = [action.title for action in actions]
        fix = next(action for action in actions if action.title.endswith("(GA201)"))
        assert fix.is_preferred and "(unsafe)" not in fix.title
        fixed = apply_edits(BUGGY, fix.edit.changes[uri])
        assert "        (loss / accum_steps).backward()\n" in fixed
        assert fixed.replace("(loss / accum_steps).backward()", "loss.backward()") == BUGGY
        assert "Disable GA201 for this line" in titles
        noqa = next(action for action in actions if action.title == "Disable GA201 for this line")
        assert "        loss.backward()  # noqa: GA201\n" in apply_edits(BUGGY, noqa.edit.changes[uri])

        unsafe = next(a for a in await session.actions(uri, by_code["GA107"]) if "(GA107)" in a.title)
        assert unsafe.title.endswith("(unsafe)") and not unsafe.is_preferred
        assert "or (i + 1) == len(loader)" in apply_edits(BUGGY, unsafe.edit.changes[uri])

        (fix_all,) = await session.actions(uri, only=["source.fixAll.accumlint"])
        assert fix_all.kind == "source.fixAll.accumlint"
        after = apply_edits(BUGGY, fix_all.edit.changes[uri])
        assert "(loss / accum_steps).backward()" in after  # the safe fix
        assert "len(loader)" not in after  # the unsafe one is not applied

        hover = await session.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(12, 12)
        ))
        assert hover.contents.value.startswith("# GA201 missing-loss-scaling")

    run_session(tmp_path, body)


def test_changes_are_checked_and_the_configuration_is_reread(tmp_path):
    async def body(session: Session) -> None:
        uri = session.open(tmp_path / "train.py", BUGGY)
        assert len(await session.diagnostics(uri)) == 2
        assert [r.method for r in session.registrations] == [types.WORKSPACE_DID_CHANGE_WATCHED_FILES]

        fixed = BUGGY.replace("loss.backward()", "(loss / accum_steps).backward()")
        count = session.versions[uri]
        for version, text in enumerate([BUGGY.replace("loss.backward()", "loss.backward(  "), fixed], 2):
            session.client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            ))
        after = await session.diagnostics(uri, count)
        assert [d.code for d in after] == ["GA107"]
        assert session.versions[uri] == count + 1  # two quick changes, one check (debounced)

        (tmp_path / "pyproject.toml").write_text('[tool.accumlint]\nignore = ["GA107"]\n')
        count = session.versions[uri]
        session.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
            types.FileEvent(uri=from_fs_path(str(tmp_path / "pyproject.toml")), type=types.FileChangeType.Created)
        ]))
        assert list(await session.diagnostics(uri, count)) == []

    run_session(tmp_path, body)


def test_notebook_cells_get_their_own_diagnostics_and_fixes(tmp_path):
    setup = "import torch\nmodel = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    loop = (
        "for i, (x, y) in enumerate(loader):\n"
        "    optimizer.zero_grad()\n"
        "    loss = torch.nn.functional.mse_loss(model(x), y) / 4\n"
        "    loss.backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        optimizer.step()\n"
    )

    async def body(session: Session) -> None:
        notebook_uri = from_fs_path(str(tmp_path / "nb.ipynb"))
        cells = [f"{notebook_uri}#cell{index}" for index in range(3)]
        texts = ["# Training\n", setup, loop]
        kinds = [types.NotebookCellKind.Markup, types.NotebookCellKind.Code, types.NotebookCellKind.Code]
        session.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook_uri, notebook_type="jupyter-notebook", version=1,
                cells=[types.NotebookCell(kind=kind, document=cell) for kind, cell in zip(kinds, cells)],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=cell, language_id="markdown" if index == 0 else "python", version=1, text=text)
                for index, (cell, text) in enumerate(zip(cells, texts))
            ],
        ))
        (zeroing,) = await session.diagnostics(cells[2])
        assert zeroing.code == "GA101" and zeroing.range.start.line == 1
        assert "(line 6)" in zeroing.message
        assert list(await session.diagnostics(cells[1])) == []
        actions = await session.actions(cells[2], zeroing, only=[types.CodeActionKind.QuickFix])
        fix = next(action for action in actions if action.title.endswith("(GA101)"))
        assert list(fix.edit.changes) == [cells[2]]  # the fix stays in the loop's cell
        fixed = apply_edits(loop, fix.edit.changes[cells[2]])
        assert fixed.startswith("optimizer.zero_grad()\nfor i, (x, y)")

    run_session(tmp_path, body)


def test_saving_a_helper_module_rechecks_the_modules_that_import_it(tmp_path):
    """SPEC section 2: a change to a module re-checks the modules that import it."""
    helper = tmp_path / "objectives.py"
    helper.write_text("import torch.nn.functional as F\n\n\ndef batch_objective(model, batch):\n"
                      "    return F.cross_entropy(model(batch[0]), batch[1], reduction='sum')\n")
    loop = ("import torch\nfrom objectives import batch_objective\n\n\ndef train(model, loader, accum_steps=8):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    optimizer.zero_grad()\n"
            "    for i, batch in enumerate(loader):\n        loss = batch_objective(model, batch)\n"
            "        loss.backward()\n        if (i + 1) % accum_steps == 0 or i + 1 == len(loader):\n"
            "            optimizer.step()\n            optimizer.zero_grad()\n")
    (tmp_path / "pyproject.toml").write_text("")

    async def body(session: Session) -> None:
        train = session.open(tmp_path / "train.py", loop)
        assert list(await session.diagnostics(train)) == []  # a sum-reduced loss: nothing to divide
        mean = helper.read_text().replace(", reduction='sum'", "")
        helper_uri = session.open(helper, mean)  # written to disk as a save would
        count = session.versions[train]
        session.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=helper_uri)
        ))
        assert [d.code for d in await session.diagnostics(train, count)] == ["GA201"]

    run_session(tmp_path, body)
