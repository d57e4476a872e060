"""The language server, end to end: pygls's own LSP client drives `accumlint server` in a process.

Each test is one editor session over stdio: initialize, open documents,
receive published diagnostics, ask for code actions and hovers, apply the
returned edits the way an editor does, and shut down.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

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

    def __init__(self, root: Path, pull: bool = False) -> None:
        self.root = root
        self.pulls = pull
        self.client = LanguageClient("accumlint-tests", "1")
        self.published: dict[str, list[types.Diagnostic]] = {}
        self.versions: dict[str, int] = {}
        self.registrations: list[types.Registration] = []
        self.messages: list[types.ShowMessageParams] = []

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.published[params.uri] = params.diagnostics
            self.versions[params.uri] = self.versions.get(params.uri, 0) + 1

        @self.client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: types.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(params: types.ShowMessageParams) -> None:
            self.messages.append(params)

    async def start(self) -> None:
        environment = dict(os.environ, ACCUMLINT_LSP_DEBOUNCE="0.2")
        await self.client.start_io(sys.executable, "-m", "accumlint.cli", "server", cwd=self.root, env=environment)
        capabilities = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(
                did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True)
            ),
            text_document=types.TextDocumentClientCapabilities(
                diagnostic=types.DiagnosticClientCapabilities(code_description_support=True)
            ) if self.pulls else None,
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


    async def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        return await self.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, character)
        ))

    def replace(self, uri: str, version: int, text: str) -> None:
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        ))

    async def pull(self, uri: str, previous: str | None = None):
        return await self.client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=previous
        ))


def run_session(root: Path, body, pull: bool = False) -> None:
    async def main() -> None:
        session = Session(root, pull)
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
        document = Path(url2pathname(urlparse(ga201.code_description.href).path))  # the rule's document
        assert document.name == "GA201.md" and document.read_text().startswith("# GA201 missing-loss-scaling")

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


# ---------------------------------------------------------------- the process: exit status, malformed input


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def request(message_id: int, method: str, params=None) -> bytes:
    return frame({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})


def notification(method: str, params=None) -> bytes:
    return frame({"jsonrpc": "2.0", "method": method, "params": params})


START = request(1, "initialize", {"capabilities": {}}) + notification("initialized", {})
STOP = request(99, "shutdown") + notification("exit")


def exchange(root: Path, data: bytes) -> tuple[int, list[dict], str]:
    """Run the server on raw bytes: (exit status, the messages it wrote, its standard error)."""
    process = subprocess.run(
        [sys.executable, "-m", "accumlint.cli", "server"], input=data, capture_output=True, cwd=root, timeout=TIMEOUT
    )
    messages, rest = [], process.stdout
    while rest:
        header, _, rest = rest.partition(b"\r\n\r\n")
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        messages.append(json.loads(rest[:length]))
        rest = rest[length:]
    return process.returncode, messages, process.stderr.decode()


def test_exit_status_is_0_after_shutdown_and_1_without(tmp_path):
    status, messages, errors = exchange(tmp_path, START + STOP)
    assert status == 0, errors
    assert "Traceback" not in errors
    assert {"jsonrpc": "2.0", "id": 99, "result": None} in messages
    status, _, errors = exchange(tmp_path, START + notification("exit"))
    assert status == 1 and "Traceback" not in errors


def test_malformed_messages_get_errors_and_the_server_goes_on(tmp_path):
    uri = from_fs_path(str(tmp_path / "train.py"))
    (tmp_path / "train.py").write_text(BUGGY)
    hover = {"textDocument": {"uri": uri}, "position": {"line": 12, "character": 8}}
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": hover}).encode()
    data = (
        START
        + b"Content-Length: abc\r\n\r\n" + body  # an unreadable header: its body's length is unknown
        + request(3, "textDocument/hover", 5)
        + request(4, "textDocument/hover", dict(hover, position={"line": -1, "character": 0}))
        + b"Content-Length: 9\r\n\r\n{not json"
        + frame([1, 2])
        + request(5, "textDocument/hover", hover)  # a valid request of a never-opened document
        + notification("textDocument/didSave", {"textDocument": {"uri": uri + ".missing"}})  # nor opened
        + STOP
    )
    status, messages, errors = exchange(tmp_path, data)
    by_id = {}
    for message in messages:
        by_id.setdefault(message.get("id"), []).append(message)
    assert [m["error"]["code"] for m in by_id[None]] == [-32700, -32700, -32600]
    assert by_id[3][0]["error"]["code"] == -32602 and by_id[4][0]["error"]["code"] == -32602
    assert 2 not in by_id  # the body of the unreadable header is skipped, not guessed at
    assert by_id[5] == [{"jsonrpc": "2.0", "id": 5, "result": None}]
    assert by_id[99] == [{"jsonrpc": "2.0", "id": 99, "result": None}]
    assert [m for m in messages if m.get("method") == "window/showMessage"] == []  # no "Error in server"
    assert status == 0, errors


# ---------------------------------------------------------------- sessions: unknown documents, pull, configuration


def test_requests_about_documents_never_opened_or_out_of_range(tmp_path):
    async def body(session: Session) -> None:
        missing = from_fs_path(str(tmp_path / "missing.py"))
        assert await session.hover(missing, 0, 0) is None
        assert not await session.actions(missing)
        uri = session.open(tmp_path / "train.py", BUGGY)
        await session.diagnostics(uri)
        assert await session.hover(uri, 500, 3) is None  # past the last line
        assert await session.hover(uri, 0, 500) is None  # past the end of a line (clamped to it)

    run_session(tmp_path, body)


def test_pull_diagnostics(tmp_path):
    async def body(session: Session) -> None:
        uri = session.open(tmp_path / "train.py", BUGGY)
        report = await session.pull(uri)
        assert report.kind == "full" and sorted(d.code for d in report.items) == ["GA107", "GA201"]
        assert all(d.code_description.href.endswith(f"/{d.code}.md") for d in report.items)
        again = await session.pull(uri, report.result_id)
        assert again.kind == "unchanged" and again.result_id == report.result_id
        session.replace(uri, 2, BUGGY.replace("loss.backward()", "(loss / accum_steps).backward()"))
        changed = await session.pull(uri, report.result_id)
        assert changed.kind == "full" and [d.code for d in changed.items] == ["GA107"]
        assert session.published == {}  # a client that pulls is not sent diagnostics as well

    run_session(tmp_path, body, pull=True)


def test_a_broken_configuration_is_shown_once_and_the_defaults_apply(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.accumlint\nselect = [")

    async def body(session: Session) -> None:
        uri = session.open(tmp_path / "train.py", BUGGY)
        found = {d.code: d for d in await session.diagnostics(uri)}
        assert sorted(found) == ["GA107", "GA201"]
        assert (await session.hover(uri, 12, 12)).contents.value.startswith("# GA201")
        assert any(action.title.endswith("(GA201)") for action in await session.actions(uri, found["GA201"]))
        count = session.versions[uri]
        session.replace(uri, 2, BUGGY + "\n")
        assert len(await session.diagnostics(uri, count)) == 2
        (message,) = session.messages  # one message, not one per check
        assert message.type == types.MessageType.Warning
        assert "pyproject.toml" in message.message and "invalid TOML" in message.message

    run_session(tmp_path, body)


def test_a_notebook_is_fixed_whole(tmp_path):
    setup = "import torch\nmodel = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    loop = (
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "    loss.backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        optimizer.step()\n"
        "        optimizer.zero_grad()\n"
    )

    async def body(session: Session) -> None:
        notebook_uri = from_fs_path(str(tmp_path / "nb.ipynb"))
        cells = [f"{notebook_uri}#cell{index}" for index in range(3)]
        texts = [setup, loop, loop.replace("loader", "other_loader")]
        session.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook_uri, notebook_type="jupyter-notebook", version=1,
                cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=cell) for cell in cells],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=cell, language_id="python", version=1, text=text)
                for cell, text in zip(cells, texts)
            ],
        ))
        for cell in cells[1:]:
            assert "GA201" in [d.code for d in await session.diagnostics(cell)]
        (action,) = await session.actions(cells[0], only=["notebook.source.fixAll"])
        assert action.kind == "notebook.source.fixAll.accumlint"
        assert sorted(action.edit.changes) == cells[1:]  # both loops' cells, from a request on the first
        for cell, text in zip(cells[1:], texts[1:]):
            assert "(loss / 4).backward()" in apply_edits(text, action.edit.changes[cell])

    run_session(tmp_path, body)


# ---------------------------------------------------------------- analysis off the request path


def big_module() -> str:
    """About 1.5 MB of training functions: seconds of analysis."""
    head, function = BUGGY.split("def main():\n")
    return head + "".join(f"def main{index}():\n{function}\n\n" for index in range(3200))


def analysis_processes(root: Path) -> list[int]:
    """The server's analysis processes: those working in `root` other than the server itself."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") != str(root):
                continue
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone, a zombie, or not ours
        if parent != os.getpid():
            found.append(int(entry.name))
    return found


needs_proc = pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs Linux's /proc")


async def until(condition) -> None:
    for _ in range(TIMEOUT * 20):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never met")


@needs_proc
def test_requests_are_answered_while_a_big_file_is_checked(tmp_path):
    async def body(session: Session) -> None:
        big = session.open(tmp_path / "big.py", big_module())
        await until(lambda: analysis_processes(tmp_path))
        small = session.open(tmp_path / "train.py", BUGGY)
        ga201 = next(d for d in await session.diagnostics(small) if d.code == "GA201")
        assert (await session.hover(small, 12, 12)).contents.value.startswith("# GA201")
        assert await session.hover(big, 12, 12) is None  # not known yet, and said at once
        assert not await session.actions(big)  # a light bulb's request: no fix run before the check
        assert any("(GA201)" in action.title for action in await session.actions(small, ga201))
        assert big not in session.published and analysis_processes(tmp_path)  # still being checked

    run_session(tmp_path, body)  # `shutdown` is answered and the server exits with the check under way
    assert analysis_processes(tmp_path) == []


@needs_proc
def test_a_new_text_ends_the_check_of_the_old_one(tmp_path):
    async def body(session: Session) -> None:
        uri = session.open(tmp_path / "train.py", big_module())
        await until(lambda: analysis_processes(tmp_path))
        session.replace(uri, 2, BUGGY)
        assert sorted(d.code for d in await session.diagnostics(uri)) == ["GA107", "GA201"]
        assert session.versions[uri] == 1  # the big text's findings are never published
        assert analysis_processes(tmp_path) == []  # its check was ended, not left to run

    run_session(tmp_path, body)


def test_saving_a_helper_module_rechecks_the_modules_that_import_it(tmp_path):
    """A change to a module re-checks the modules that import it."""
    helper = tmp_path / "objectives.py"
    helper.write_text("import torch.nn as nn\n\n\nbatch_objective = nn.CrossEntropyLoss(reduction='sum')\n")
    loop = ("import torch\nfrom objectives import batch_objective\n\n\ndef train(model, loader, accum_steps=8):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    optimizer.zero_grad()\n"
            "    for i, batch in enumerate(loader):\n        loss = batch_objective(model(batch[0]), batch[1])\n"
            "        loss.backward()\n        if (i + 1) % accum_steps == 0 or i + 1 == len(loader):\n"
            "            optimizer.step()\n            optimizer.zero_grad()\n")
    (tmp_path / "pyproject.toml").write_text("")

    async def body(session: Session) -> None:
        train = session.open(tmp_path / "train.py", loop)
        assert list(await session.diagnostics(train)) == []  # a sum-reduced loss: nothing to divide
        mean = helper.read_text().replace("reduction='sum'", "")
        helper_uri = session.open(helper, mean)  # written to disk as a save would
        count = session.versions[train]
        session.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=helper_uri)
        ))
        assert [d.code for d in await session.diagnostics(train, count)] == ["GA201"]

    run_session(tmp_path, body)


def test_saving_a_new_importer_rechecks_the_helper_module_it_calls(tmp_path):
    """SPEC section 2: a finding a loop elsewhere makes on a helper appears in the helper's
    open document when a module that starts calling it is saved."""
    helper = ("def backward_step(loss, optimizer, accum_steps):\n    optimizer.zero_grad()\n"
              "    (loss / accum_steps).backward()\n")
    loop = ("import torch\nfrom steps import backward_step\n\n\ndef train(model, loader, k=4):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    for i, (x, y) in enumerate(loader):\n"
            "        loss = torch.nn.functional.mse_loss(model(x), y)\n        backward_step(loss, optimizer, k)\n"
            "        if (i + 1) % k == 0 or i + 1 == len(loader):\n            optimizer.step()\n")
    (tmp_path / "pyproject.toml").write_text("")

    async def body(session: Session) -> None:
        steps = session.open(tmp_path / "steps.py", helper)
        assert list(await session.diagnostics(steps)) == []  # nothing calls it yet
        count = session.versions[steps]
        train = session.open(tmp_path / "train.py", loop)
        session.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=train)
        ))
        assert [(d.code, d.range.start.line) for d in await session.diagnostics(steps, count)] == [("GA101", 1)]

    run_session(tmp_path, body)
