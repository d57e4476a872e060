"""The lean position pass gives LibCST's own syntactic positions."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider

from accumlint.compat.codegen import CodegenState
from accumlint.model.positions import positions_of
from accumlint.model.tree import walk_all

REPO = Path(__file__).resolve().parent.parent
# How the lean pass places nodes; without LibCST's codegen state (accumlint.compat.codegen) the providers place them all.
lean_pass = pytest.mark.skipif(CodegenState is None, reason="LibCST's codegen state is off: no lean pass")


def test_positions_match_position_provider_on_fixture_nodes() -> None:
    """Every node of every fourth fixture (all themes; the reference is slow)."""
    compared = 0
    for path in sorted((REPO / "fixtures").rglob("*.py"))[::4]:
        module = cst.parse_module(path.read_text())
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        nodes = [node for node in walk_all(module) if not isinstance(node, cst.Module)]
        found = positions_of(module, nodes)
        for node in nodes:
            # (a node LibCST never generates has no position in either: the whitespace of
            # some `match` patterns in LibCST 1.1)
            assert found.get(node) == expected.get(node), f"{path}: {type(node).__name__}"
            compared += 1
    assert compared > 10_000


def test_whitespace_inclusive_positions_match_the_provider_on_fixture_nodes() -> None:
    """Every node of every fourth fixture, the others than above."""
    compared = 0
    for path in sorted((REPO / "fixtures").rglob("*.py"))[1::4]:
        module = cst.parse_module(path.read_text())
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(WhitespaceInclusivePositionProvider)
        nodes = [node for node in walk_all(module) if not isinstance(node, cst.Module)]
        found = positions_of(module, nodes, whitespace=True)
        for node in nodes:
            assert found.get(node) == expected.get(node), f"{path}: {type(node).__name__}"
            compared += 1
    assert compared > 10_000


def test_only_requested_nodes_are_returned() -> None:
    module = cst.parse_module("a = 1\nfor x in y:\n    b = (x +\n         2)\n")
    loop = module.body[1]
    found = positions_of(module, [loop])
    assert list(found) == [loop]
    assert (found[loop].start.line, found[loop].start.column, found[loop].end.line) == (2, 0, 4)


def test_crlf_and_cr_newlines_count_as_lines() -> None:
    module = cst.parse_module("a = 1\r\nb = 2\r\nc = 3\r\n")
    third = module.body[2]
    assert positions_of(module, [third])[third].start.line == 3


def _calls(module: cst.Module) -> list[cst.Call]:
    return [node for node in walk_all(module) if isinstance(node, cst.Call)]


def test_calls_found_in_the_text_have_the_positions_of_the_pass() -> None:
    """Every call of every third fixture, located through the text where its source
    is one line occurring once, and by the module pass otherwise."""
    by_text = 0
    for path in sorted((REPO / "fixtures").rglob("*.py"))[::3]:
        text = path.read_text()
        module = cst.parse_module(text)
        calls = _calls(module)
        expected = positions_of(module, calls)
        found = positions_of(module, calls, text, calls)
        for call in calls:
            source = cst.Module(body=[]).code_for_node(call)
            assert found[call] == expected[call], f"{path}: {source}"
            by_text += "\n" not in source and text.count(source) == 1
    assert by_text > 1_000


def test_what_the_text_cannot_place_is_placed_by_the_pass() -> None:
    for text in (
        "\ufefff(x)\n",                              # LibCST drops the byte-order mark
        "a = 1\n\x0cf(x)\n",                         # and a form feed that starts a statement
        "a = 1\rf(x)\r",                             # and a last lone carriage return
        "f(x)\nf(x)\n",                              # twice: the text cannot tell which
        "y = (g(\n    1)); f(x)\n",                  # after a line break the text cannot be trusted
        "def h():\n    return g(1,\n             2)\n",  # a call over two lines
    ):
        module = cst.parse_module(text)
        calls = _calls(module)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        found = positions_of(module, calls, text, calls)
        assert found == {call: expected[call] for call in calls}, repr(text)


def test_a_call_of_another_tree_is_not_looked_for_in_the_text() -> None:
    text = "f(x)\n"
    module = cst.parse_module(text)
    foreign = cst.parse_expression("f(x)")
    assert positions_of(module, [foreign], text, _calls(module)) == {}


def _loops(module: cst.Module) -> list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
    """Every loop of the module with its ancestors, as the loop model records them."""
    found = []
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(module, ())]
    while stack:
        node, ancestors = stack.pop()
        if isinstance(node, (cst.For, cst.While)):
            found.append((node, ancestors))
        stack.extend((child, (*ancestors, node)) for child in node.children)
    return found


def test_nodes_found_through_their_loop_have_the_positions_of_the_provider() -> None:
    """Every node of every third fixture (offset by one), placed by passes over the
    outermost loops where their source occurs once, and by the module pass otherwise."""
    by_loop = 0
    for path in sorted((REPO / "fixtures").rglob("*.py"))[1::3]:
        text = path.read_text()
        module = cst.parse_module(text)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        nodes = [node for node in walk_all(module) if not isinstance(node, cst.Module)]
        loops = _loops(module)
        found = positions_of(module, nodes, text, loops=loops)
        for node in nodes:  # (LibCST 1.1 leaves some whitespace nodes unpositioned)
            assert found.get(node) == expected.get(node), f"{path}: {type(node).__name__}"
        in_loops = {id(node) for loop, _ in loops for node in walk_all(loop)}
        by_loop += sum(id(node) in in_loops for node in nodes)
    assert by_loop > 10_000


def _in_loops(text: str, monkeypatch=None) -> dict:
    """positions_of for the nodes inside the loops of `text`; with `monkeypatch`, a pass over
    the whole module fails the test."""
    module = cst.parse_module(text)
    loops = _loops(module)
    nodes = [node for loop, _ in loops for node in walk_all(loop)]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    if monkeypatch is not None:
        def no_module_pass(self, state):
            raise AssertionError("the module pass ran")

        monkeypatch.setattr(cst.Module, "_codegen", no_module_pass)
    found = positions_of(module, nodes, text, loops=loops)
    assert found == {node: expected[node] for node in nodes}, repr(text)
    return found


@lean_pass
def test_a_loop_whose_source_occurs_once_needs_no_module_pass(monkeypatch) -> None:
    for text in (
        "import x\n\nfor step, batch in enumerate(loader):\n    loss = model(batch)\n    loss.backward()\n",
        "match m:\n    case 1:\n        for x in y:\n            g(x)\n",  # a match pushes the cases' indentation
        "if a:\n\tfor x in y:\n\t\tg(x)\n",  # tabs
        "class C:\n  def f(self):\n      while x:\n          g(x)\n",  # an indentation of its own per block
        "def f():\r\n    for x in y:\r\n        g(x)\r\n",
        "def f():\n    for x in y:\n        for z in x:\n            g(z)\n\n\ndef h():\n    pass\n",  # nested
    ):
        with monkeypatch.context() as patch:
            _in_loops(text, patch)


def test_a_loop_whose_source_is_not_unique_is_placed_by_the_module_pass() -> None:
    for text in (
        "def f():\n    for x in y:\n        g(x)\n\ndef h():\n    for x in y:\n        g(x)\n",  # twice
        "for x in y:\n    g(x)\nif a:\n    for x in y:\n        g(x)\n",  # inside the other's text, not at a line's start
        "for x in y:\n    g(x)",  # the last line ends the file without a line break
    ):
        _in_loops(text)


@lean_pass
def test_a_call_is_placed_by_the_innermost_statement_whose_source_occurs_once(monkeypatch) -> None:
    """Only the calls are asked for, as findings do: each is placed by a statement around
    it, the loop itself when nothing smaller is unique, never by the module pass."""
    for text in (
        # the same line twice: the `if` around each places it
        "for x in y:\n    if a:\n        step()\n    if b:\n        step()\n",
        # an `elif` alone generates as `if`: that text stands once, in h, and must not place f's call
        (
            "def f():\n    for x in y:\n        if a:\n            f(x)\n        elif b:\n            g(x)\n\n"
            "def h():\n    for z in w:\n        if b:\n            g(x)\n"
        ),
        "for x in y:\n    match x:\n        case 1:\n            g(x)\n        case _:\n            g(x)\n",
    ):
        module = cst.parse_module(text)
        calls = _calls(module)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        with monkeypatch.context() as patch:
            patch.setattr(cst.Module, "_codegen", lambda self, state: pytest.fail("the module pass ran"))
            found = positions_of(module, calls, text, loops=_loops(module))
        assert found == {call: expected[call] for call in calls}, repr(text)
