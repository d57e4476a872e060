"""The model's fast tree walk against LibCST's own `children`.

`accumlint.model.tree` reads node fields in a table of LibCST's visiting
order instead of calling the slow `CSTNode.children`. These tests derive that
order from LibCST's source, so a LibCST release that changes it fails here
rather than silently reordering what the model sees.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import libcst as cst
import pytest

from accumlint.fix.guard import FixGuard
from accumlint.model.facts import collect_facts
from accumlint.model.tree import LEAVES, children, content_fields, is_token_field, walk, walk_all

from sampling import in_sample

REPO = Path(__file__).resolve().parent.parent
NODE_TYPES = sorted(
    (
        kind
        for kind in vars(cst).values()
        if isinstance(kind, type) and issubclass(kind, cst.CSTNode) and not inspect.isabstract(kind)
        and dataclasses.is_dataclass(kind) and hasattr(kind, "_visit_and_replace_children")
    ),
    key=lambda kind: kind.__name__,
)


def _libcst_visit_order(kind: type) -> list[str]:
    """The node-holding fields in the order LibCST's `_visit_and_replace_children`
    visits them (each `visit_*(self, "field", ...)` call names its field)."""
    source = inspect.getsource(kind._visit_and_replace_children)
    order: list[str] = []
    for name in re.findall(r'visit_\w+\(\s*self,\s*"(\w+)"', source):
        if name not in order and not is_token_field(name):
            order.append(name)
    return order


@pytest.mark.parametrize("kind", NODE_TYPES, ids=lambda kind: kind.__name__)
def test_content_fields_follow_libcst_visiting_order(kind: type) -> None:
    assert list(content_fields(kind)) == _libcst_visit_order(kind)


def _fixture_modules() -> list[cst.Module]:
    """About one fixture in five, each in or out by its own path (tests/sampling.py), from
    every theme (`children` is slow on the rest)."""
    paths = [path for path in sorted((REPO / "fixtures").rglob("*.py")) if in_sample(path.relative_to(REPO).as_posix(), 5)]
    return [cst.parse_module(path.read_text()) for path in paths]


def test_children_are_libcst_children_without_tokens() -> None:
    modules = _fixture_modules()
    assert len(modules) > 40
    compared = 0
    for module in modules:
        for node in walk_all(module):
            expected = [child for child in node.children if not _is_token(child)]
            assert children(node) == expected, f"{type(node).__name__}: {children(node)} != {expected}"
            compared += 1
    assert compared > 10_000


def _is_token(node: cst.CSTNode) -> bool:
    return isinstance(node, _TOKEN_TYPES)


# What the fast walk leaves out: nodes that are nothing but tokens. A bare `*` (ParamStar)
# is not among them: it sits in `Parameters.star_arg`, a content field that may hold a
# Param, and the walk yields it as a leaf (`LEAVES`); so is `from m import *`'s ImportStar,
# in `ImportFrom.names`, a content field that may hold the imported aliases.
_TOKEN_TYPES = (
    cst.BaseParenthesizableWhitespace, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline, cst.Comment,
    cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp,
    cst.Asynchronous, cst.ParamSlash,
)


def test_walk_is_preorder_source_order_and_iterative() -> None:
    module = cst.parse_module("x = f(a, g(b))\n")
    names = [node.value for node in walk(module) if isinstance(node, cst.Name)]
    assert names == ["x", "f", "a", "g", "b"]
    deep = cst.parse_module("y = " + "(" * 400 + "1" + ")" * 400 + "\n")
    assert sum(1 for _ in walk(deep)) > 3  # no RecursionError on deep trees


def test_leaves_are_the_content_nodes_without_content_children() -> None:
    """Walks skip pushing LEAVES: each must have nothing below it, and every node type
    that holds no content is either one of them or a token the walks never yield."""
    assert all(content_fields(kind) == () for kind in LEAVES)
    childless = {kind for kind in NODE_TYPES if content_fields(kind) == ()}
    assert [kind.__name__ for kind in childless - LEAVES if not issubclass(kind, _TOKEN_TYPES)] == []
    assert cst.Name in LEAVES and cst.Call not in LEAVES


def test_the_module_facts_hold_every_content_nodes_parent() -> None:
    """The facts walk skips leaves and string literals' insides for its recorders, yet
    its parent map is the fix guard's own walk: every content node below the module."""
    modules = _fixture_modules()
    modules.append(cst.parse_module("x = f'{a.b(c)!r:>{w}}' + 'plain'\nfor b in d:\n    pass\n"))
    for module in modules:
        facts = collect_facts(module, module.code)
        assert facts.parents == FixGuard(module).parents
    assert len(facts.parents) > 10


_EXACT_TYPE_TEST = re.compile(r"type\((?:[^()]|\([^()]*\))*\) (?:is not|is|not in|in) \(?((?:cst\.\w+(?:, )?)+)\)?")


def test_exact_type_tests_name_classes_without_subclasses() -> None:
    """The model tests LibCST nodes with `type(node) is cst.Call` (isinstance goes through
    ABCMeta's Python-level check): right only while the class has no subclass."""
    named = set()
    for path in (REPO / "accumlint").rglob("*.py"):
        for group in _EXACT_TYPE_TEST.findall(path.read_text()):
            named.update(re.findall(r"cst\.(\w+)", group))
    assert len(named) > 30
    with_subclasses = [name for name in sorted(named) if getattr(cst, name).__subclasses__()]
    assert with_subclasses == []
