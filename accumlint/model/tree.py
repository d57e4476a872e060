"""Fast iteration over the nodes of a LibCST tree that the model reads.

`CSTNode.children` rebuilds a copy of the node on every access (it runs the
node's `_visit_and_replace_children` with a collecting visitor), and most of
what it returns is whitespace, punctuation and operator tokens that no rule
reads. The model's walks instead read a node's fields directly: only the
fields that can hold expressions, statements or names ("content" fields), in
the order LibCST itself visits them, so a walk meets nodes in source order
exactly as `children` would, minus the tokens.

Tokens are never yielded: whitespace, comments and empty lines, parentheses,
brackets, commas, colons, dots, `=` and every operator (`BinaryOperation.
operator`, `Comparison`'s `ComparisonTarget.operator`...). Code that needs an
operator reads it from its parent (`node.operator`), which is how the model
always does it. Anything that must see every node (the fixer's overlap test)
uses `walk_all`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterator, cast

import libcst as cst

# Field names that hold only tokens (or plain strings and flags) in every node type.
_TOKEN_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header", "footer",
    "colon", "equal", "first_colon", "second_colon", "lbrace", "rbrace", "lbracket", "rbracket", "dot",
    "operator", "asynchronous", "newline", "trailing_whitespace", "leading_whitespace", "indent", "star",
    "default_indent", "default_newline", "encoding", "has_trailing_newline", "trailing_comma", "relative",
    "posonly_ind", "whitespace", "first_line", "empty_lines", "last_line", "comment",
})

# Node types whose content fields LibCST visits in another order than it declares
# them (tests/test_tree.py derives this table from LibCST's own source and fails
# when a LibCST release changes it). Every other type visits in declaration order.
_VISIT_ORDER: dict[str, tuple[str, ...]] = {
    "Arg": ("keyword", "value"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "ExceptHandler": ("type", "name", "body"),
    "ExceptStarHandler": ("type", "name", "body"),
    "FunctionDef": ("decorators", "name", "type_parameters", "params", "returns", "body"),
    "IfExp": ("body", "test", "orelse"),
    "MatchCase": ("pattern", "guard", "body"),
    "Parameters": ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "TypeAlias": ("name", "type_parameters", "value"),
}

# content_fields' answers so far (walks that inline `children` read it directly)
KNOWN_CONTENT_FIELDS: dict[type, tuple[str, ...]] = {}
SEQUENCES = (tuple, list)
_NOT_A_NODE = re.compile(r"\b(str|bool|Literal)\b")


def is_token_field(name: str) -> bool:
    """A field that never holds anything but tokens, strings or flags."""
    return name in _TOKEN_FIELDS or name.startswith("whitespace")


def _holds_nodes(field: dataclasses.Field[Any]) -> bool:
    """Declared as a node, nodes or no node (`Name.value: str` and `Param.star` hold text)."""
    return not is_token_field(field.name) and _NOT_A_NODE.search(str(field.type)) is None


def content_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that can hold content nodes, in LibCST's visiting order."""
    fields = KNOWN_CONTENT_FIELDS.get(kind)
    if fields is None:
        holding = {field.name for field in dataclasses.fields(kind) if _holds_nodes(field)}
        order = _VISIT_ORDER.get(kind.__name__) or tuple(field.name for field in dataclasses.fields(kind))
        fields = KNOWN_CONTENT_FIELDS[kind] = tuple(name for name in order if name in holding)
    return fields


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The content children of a node, in source order (tokens left out).

    A content field holds a node, a sequence of nodes, None or LibCST's
    `MaybeSentinel.DEFAULT`; identity tests tell them apart without
    `isinstance` against LibCST's ABCs."""
    found: list[cst.CSTNode] = []
    fields = KNOWN_CONTENT_FIELDS.get(type(node))
    for name in content_fields(type(node)) if fields is None else fields:
        value = getattr(node, name)
        if type(value) in SEQUENCES:
            found.extend(value)
        elif value is not None and value is not ABSENT:
            found.append(value)
    return found


ABSENT = cst.MaybeSentinel.DEFAULT  # what an optional content field holds when empty

# Content nodes without content children (`children` returns nothing for them): a
# walk that only looks for other kinds need not push them. tests/test_tree.py checks
# the table against LibCST's node classes.
LEAVES = frozenset({
    cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis, cst.FormattedStringText,
    cst.Pass, cst.Break, cst.Continue, cst.ImportStar, cst.ParamStar, cst.ParamSlash,
    *(getattr(cst, name) for name in ("TemplatedStringText",) if hasattr(cst, name)),  # LibCST 1.8's t-strings
})


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every content node below `node` (itself first), pre-order, without recursion
    (deeply nested generated code exists)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        kind = type(current)
        for name in reversed(KNOWN_CONTENT_FIELDS.get(kind) or content_fields(kind)):  # `children`, last first
            value = getattr(current, name)
            if type(value) in SEQUENCES:
                stack.extend(reversed(value))
            elif value is not None and value is not ABSENT:
                stack.append(value)


def record_parents(parents: dict[int, cst.CSTNode], root: cst.CSTNode) -> None:
    """Put id(node) -> parent into `parents` for every content node below `root`."""
    stack = [root]
    while stack:
        node = stack.pop()
        kind = type(node)
        for name in KNOWN_CONTENT_FIELDS.get(kind) or content_fields(kind):  # `children`, inlined
            value = getattr(node, name)
            if type(value) in SEQUENCES:
                for child in value:
                    parents[id(child)] = node
                    if type(child) not in LEAVES:
                        stack.append(child)
            elif value is not None and value is not ABSENT:
                parents[id(value)] = node
                if type(value) not in LEAVES:
                    stack.append(value)


def walk_all(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node below `node`, tokens included, pre-order (slow: `children` copies)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(tuple(current.children)))


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    """Calls inside a statement, innermost first (the order Python evaluates them);
    nested functions, lambdas and classes are not entered (they run elsewhere)."""
    # post-order without recursion: a pre-order walk that takes the children right
    # to left meets every node after the nodes that follow it in post-order
    found: list[cst.CSTNode] = []  # calls only (mypy does not narrow `current` by `kind`)
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Call:
            found.append(current)
        elif kind in _OPAQUE:
            continue
        for name in KNOWN_CONTENT_FIELDS.get(kind) or content_fields(kind):  # `children`, inlined
            value = getattr(current, name)
            if type(value) in SEQUENCES:
                stack.extend([child for child in value if type(child) not in LEAVES])
            elif value is not None and value is not ABSENT and type(value) not in LEAVES:
                stack.append(value)
    found.reverse()
    return cast("list[cst.Call]", found)


_OPAQUE = frozenset({cst.Lambda, cst.FunctionDef, cst.ClassDef})
