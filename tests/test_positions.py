"""The lean position pass gives LibCST's own syntactic positions."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider

from accumlint.model.positions import positions_of
from accumlint.model.tree import walk_all

REPO = Path(__file__).resolve().parent.parent


def test_positions_match_position_provider_on_fixture_nodes() -> None:
    """Every node of every fourth fixture (all themes; the reference is slow)."""
    compared = 0
    for path in sorted((REPO / "fixtures").rglob("*.py"))[::4]:
        module = cst.parse_module(path.read_text())
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        nodes = [node for node in walk_all(module) if not isinstance(node, cst.Module)]
        found = positions_of(module, nodes)
        for node in nodes:
            assert found[node] == expected[node], f"{path}: {type(node).__name__}"
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
            assert found[node] == expected[node], f"{path}: {type(node).__name__}"
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
