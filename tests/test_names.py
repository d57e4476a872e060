"""Reading literals and source texts from LibCST nodes (accumlint.model.names)."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
from libcst._nodes.base import CSTCodegenError
import pytest

from accumlint.model.names import code, string_value
from accumlint.model.tree import walk, walk_all

REPO = Path(__file__).resolve().parent.parent

EDGES = [
    "''", '""', "''''''", '""""""', "'a'", '"a"', "'''a'''", '"""a"""', "'''a\nb'''", "'a\"b'", "\"a'b\"",
    "'''a'b'''", '"""a"b"""', "'''a''b'''", "r''", "R'x'", "u'x'", "U\"x\"", "b'x'", "rb'x'", "Br'x'",
    "'a\\tb'", "r'a\\tb'", "'\\''", "'''a\r\nb'''", "'caf\u00e9'", "'\\N{BULLET}'", "b''",
]


def _expected(node: cst.SimpleString):
    value = ast.literal_eval(node.value)
    return value if isinstance(value, str) else None


def _strings(text: str) -> list[cst.SimpleString]:
    return [node for node in walk(cst.parse_module(text)) if type(node) is cst.SimpleString]


@pytest.mark.parametrize("literal", EDGES)
def test_a_string_literal_reads_as_python_evaluates_it(literal: str) -> None:
    node = cst.SimpleString(literal)
    assert string_value(node) == _expected(node)


def test_every_string_literal_of_the_fixtures_reads_as_python_evaluates_it() -> None:
    nodes = []
    for path in sorted((REPO / "fixtures").rglob("*.py")):
        nodes.extend(_strings(path.read_text(encoding="utf-8")))
    assert len(nodes) > 1000
    assert [node.value for node in nodes if string_value(node) != _expected(node)] == []


def test_anything_but_a_simple_string_has_no_string_value() -> None:
    assert string_value(cst.parse_expression("f'x'")) is None
    assert string_value(cst.parse_expression("'a' 'b'")) is None
    assert string_value(cst.Name("x")) is None and string_value(None) is None


@pytest.mark.parametrize("folder", ["plain", "nanogpt", "accelerate"])
def test_the_text_of_every_node_is_what_libcst_generates_for_it(folder: str) -> None:
    """`code` generates without recording positions; the text is `Module.code_for_node`'s,
    for every node of the fixtures (statements, expressions and tokens alike)."""
    compared = 0
    for path in sorted((REPO / "fixtures" / "check" / folder).glob("*.py")):
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        reference = cst.Module(body=[])
        for node in walk_all(module):
            try:
                expected = reference.code_for_node(node).strip()
            except CSTCodegenError:  # a node that cannot stand alone (a `lambda`'s parameter)
                with pytest.raises(CSTCodegenError):
                    code(node)
                continue
            assert code(node) == expected, (path.name, type(node).__name__)
            compared += 1
    assert compared > 1000
