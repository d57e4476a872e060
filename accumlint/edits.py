"""Tree edits that fixes are made of, and the transformer that applies them.

An edit names a node of the parsed module by identity and says what becomes of
it: replaced, removed, or with statements inserted before or after it. Applying
edits through LibCST keeps every comment and all formatting outside the nodes
they touch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import libcst as cst

REPLACE, REMOVE, BEFORE, AFTER = "replace", "remove", "before", "after"


@dataclass(frozen=True, eq=False)
class Edit:
    target: cst.CSTNode
    action: str
    nodes: tuple[cst.CSTNode, ...] = ()


def replace(target: cst.CSTNode, node: cst.CSTNode) -> Edit:
    return Edit(target, REPLACE, (node,))


def remove(target: cst.CSTNode) -> Edit:
    return Edit(target, REMOVE)


def insert_after(target: cst.CSTNode, *nodes: cst.CSTNode) -> Edit:
    return Edit(target, AFTER, tuple(nodes))


def insert_before(target: cst.CSTNode, *nodes: cst.CSTNode) -> Edit:
    return Edit(target, BEFORE, tuple(nodes))


def move_after(statement: cst.CSTNode, anchor: cst.CSTNode) -> tuple[Edit, ...]:
    """Move a statement (with its own comments) to just after `anchor`."""
    return (remove(statement), insert_after(anchor, statement))


class _Applier(cst.CSTTransformer):
    def __init__(self, edits: Sequence[Edit]) -> None:
        super().__init__()
        self.edits: dict[int, list[Edit]] = {}
        for edit in edits:
            self.edits.setdefault(id(edit.target), []).append(edit)
        self.targets = {id(edit.target): edit.target for edit in edits}

    def on_leave(self, original_node, updated_node):
        edits = self.edits.get(id(original_node))
        if not edits or self.targets.get(id(original_node)) is not original_node:
            return updated_node
        before: list[cst.CSTNode] = []
        after: list[cst.CSTNode] = []
        current: Union[cst.CSTNode, None] = updated_node
        for edit in edits:
            if edit.action == REPLACE:
                current = edit.nodes[0]
            elif edit.action == REMOVE:
                current = None
            elif edit.action == BEFORE:
                before.extend(edit.nodes)
            else:
                after.extend(edit.nodes)
        nodes = before + ([current] if current is not None else []) + after
        if not nodes:
            return cst.RemovalSentinel.REMOVE
        if len(nodes) == 1:
            return nodes[0]
        return cst.FlattenSentinel(nodes)

    def leave_IndentedBlock(self, original_node, updated_node):
        if original_node.body and not updated_node.body:
            return updated_node.with_changes(body=[cst.SimpleStatementLine(body=[cst.Pass()])])
        return updated_node


def apply_edits(module: cst.Module, edits: Sequence[Edit]) -> cst.Module:
    return module.visit(_Applier(edits))


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` wrapped in parentheses unless it binds tighter than any operator."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def divided(value: cst.BaseExpression, k: cst.BaseExpression, *, wrap: bool = True) -> cst.BaseExpression:
    """`value / K`, parenthesized so it can stand as a receiver (`(loss / K).backward()`)."""
    operation = cst.BinaryOperation(
        left=parenthesized(value.with_changes(lpar=[], rpar=[]) if value.lpar and _simple(value) else value),
        operator=cst.Divide(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
        ),
        right=parenthesized(k),
    )
    return parenthesized(operation) if wrap else operation


def _simple(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
