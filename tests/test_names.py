"""Reading literals and source texts from LibCST nodes, and what a name suggests (accumlint.model.names)."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
from libcst._nodes.base import CSTCodegenError
import pytest

from accumlint.model.names import adds_one, code, looks_like_accumulation, module_text, string_value
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


MODULE_TEXTS = [
    "def f():\n\treturn 1\n",  # a tab indentation
    "if x:\r\n   y = 1\r\n",  # CR LF newlines, three-space indentation
    "x = a + \\\n    b\n",  # a backslash continuation
    "def f(a,\n\tb):\n  return [a,\n b]\n",  # continuation lines indented otherwise
    "x = 1\n\x0c\ny = 2",  # a form feed, no final newline
    "\ufeffimport os\n",  # a byte-order mark
]


@pytest.mark.parametrize("text", MODULE_TEXTS)
def test_a_module_is_written_back_as_libcst_writes_it(text: str) -> None:
    """`module_text` generates a whole module without recording positions; the text is
    `Module.code`'s, with the module's own indentation and newline."""
    module = cst.parse_module(text)
    assert module_text(module) == module.code


def test_every_fixture_module_is_written_back_as_libcst_writes_it() -> None:
    compared = 0
    for path in sorted((REPO / "fixtures").rglob("*.py")):
        try:
            module = cst.parse_module(path.read_text(encoding="utf-8"))
        except (cst.ParserSyntaxError, UnicodeDecodeError):
            continue
        assert module_text(module) == module.code, path.name
        compared += 1
    assert compared > 100


@pytest.mark.parametrize("name", ["gradient_accumulation_steps", "args.grad_accum", "cfg.update_freq", "self.accum_iter",
                                  "num_micro_batches", "gas"])
def test_a_count_of_micro_batches_is_named_as_k(name: str) -> None:
    assert looks_like_accumulation(name)


@pytest.mark.parametrize("name", ["is_gradient_accumulation_boundary", "engine.is_gradient_accumulation_boundary()",
                                  "should_accumulate", "do_accumulation", "need_accum_sync", "accumulation_sync",
                                  "self.Is_Accumulating"])
def test_a_yes_or_no_of_the_window_is_not_k_whatever_words_it_shares(name: str) -> None:
    assert not looks_like_accumulation(name)


def test_a_name_the_configuration_lists_as_k_is_k_even_when_it_reads_as_a_yes_or_no() -> None:
    assert looks_like_accumulation("cfg.should_accumulate_n", ("should_accumulate_n",))


@pytest.mark.parametrize("line, counter", [("step += 1", "step"), ("j = j + 1", "j"), ("self.n = 1 + self.n", "self.n")])
def test_a_count_up_by_one_names_its_counter(line: str, counter: str) -> None:
    assert adds_one(cst.parse_statement(line).body[0]) == counter


@pytest.mark.parametrize("line", ["step += 2", "j = k + 1", "j = j - 1", "a = b = a + 1", "step -= 1", "total += loss"])
def test_other_updates_count_nothing(line: str) -> None:
    assert adds_one(cst.parse_statement(line).body[0]) is None
