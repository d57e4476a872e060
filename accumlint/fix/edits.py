"""Tree edits that fixes are made of, and the transformer that applies them.

An edit names a node of the parsed module by identity and says what becomes of
it: replaced, removed, or with statements inserted before or after it. Applying
edits through LibCST keeps every comment and all formatting outside the nodes
they touch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Mapping, Optional, Sequence, Union

import libcst as cst

# What an edit does with its target: replaced by its node, removed, or with its nodes inserted before or after it.
EditAction = Literal["replace", "remove", "before", "after"]
REPLACE: Final = "replace"
REMOVE: Final = "remove"
BEFORE: Final = "before"
AFTER: Final = "after"

# The new code an edit holds: nodes, and for a replacement of a node that sits in a
# sequence of statements also several nodes in a FlattenSentinel (a gate's `if` replaced
# by its own body).
NewCode = Union[cst.CSTNode, cst.FlattenSentinel[cst.CSTNode]]


@dataclass(frozen=True, eq=False)
class Edit:
    target: cst.CSTNode
    action: EditAction
    nodes: tuple[NewCode, ...] = ()


def replace(target: cst.CSTNode, node: NewCode) -> Edit:
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
    """Applies the edits in one pass. With `descend` (the ids of the targets' strict
    ancestors) it enters only those nodes: every other subtree is kept as it is, the
    very objects, instead of rebuilt into an equal copy."""

    def __init__(self, edits: Sequence[Edit], descend: Optional[set[int]] = None) -> None:
        super().__init__()
        self.edits: dict[int, list[Edit]] = {}
        for edit in edits:
            self.edits.setdefault(id(edit.target), []).append(edit)
        self.targets = {id(edit.target): edit.target for edit in edits}
        self.descend = descend

    def on_visit(self, node: cst.CSTNode) -> bool:
        return self.descend is None or id(node) in self.descend

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


def apply_edits(
    module: cst.Module, edits: Sequence[Edit], parents: Optional[Mapping[int, cst.CSTNode]] = None
) -> cst.Module:
    """The module with the edits applied. `parents` (id of each content node -> its
    parent, as `FixGuard.parents` holds) lets the pass rebuild only the edited nodes'
    ancestors; a target outside that map (a token) makes it rebuild everything."""
    return module.visit(_Applier(edits, _ancestors(module, edits, parents)))


def _ancestors(module: cst.Module, edits: Sequence[Edit], parents: Optional[Mapping[int, cst.CSTNode]]) -> Optional[set[int]]:
    """The ids of the targets' strict ancestors, or None (visit every node)."""
    if parents is None:
        return None
    found: set[int] = set()
    for edit in edits:
        node = parents.get(id(edit.target))
        if node is None:
            return None  # the module itself, a token, or a node of another tree
        while node is not None and id(node) not in found:
            found.add(id(node))
            node = parents.get(id(node))
    return found


class _Fill(cst.CSTTransformer):
    def __init__(self, nodes: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.nodes = nodes

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        node = self.nodes.get(original_node.value)
        if node is None:
            return updated_node
        if original_node.lpar:
            return node.with_changes(lpar=original_node.lpar, rpar=original_node.rpar)
        return node


def filled_expression(template: str, **nodes: cst.BaseExpression) -> cst.BaseExpression:
    """`template` parsed, each placeholder name replaced by the given node itself.

    New code that repeats an expression of the file holds that very node (not a
    re-parsed copy of its text), so the fixer sees which nodes a fix repeats: a
    fix that repeats a gate must wait for the fix that corrects the gate.
    """
    return cst.parse_expression(template).visit(_Fill(nodes))


def filled_statement(template: str, **nodes: cst.BaseExpression) -> cst.BaseStatement:
    """`filled_expression` for a statement (`template` ends with a newline)."""
    return cst.parse_statement(template).visit(_Fill(nodes))


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` wrapped in parentheses unless it binds tighter than any operator."""
    if type(node) in (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float) or node.lpar:
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
    return type(node) in (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
