"""What a rule returns: a finding on a node, with the edits of its fix (if any)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import libcst as cst

from accumlint.edits import Edit
from accumlint.model.tree import walk
from accumlint.model.loop import Statement
from accumlint.model.names import code
from accumlint.model.window import Window


@dataclass(frozen=True, eq=False)
class Finding:
    code: str
    node: cst.CSTNode
    message: str
    edits: tuple[Edit, ...] = ()
    fix_description: str = ""
    related: Optional[cst.CSTNode] = None  # `{related}` in the message or help becomes "line N"
    # Why it matters and what to do, shown under the finding (`--output-format full`, editors):
    # `message` says what is wrong in a line short enough to read in a terminal.
    help: str = ""


Rule = Callable[[Window], Iterable[Finding]]


def k_text(window: Window) -> str:
    return code(window.k) if window.k is not None else "K"


def movable(statement: Statement) -> bool:
    """A statement a fix may move: alone on its line, in an indented block that holds it."""
    if not statement.alone or not statement.block:
        return False
    block = statement.block[-1]
    return isinstance(block, cst.IndentedBlock) and any(s is statement.node for s in block.body)


def same_block(statement: Statement, node: cst.CSTNode) -> bool:
    block = statement.block[-1] if statement.block else None
    return isinstance(block, cst.IndentedBlock) and any(s is node for s in block.body)


def contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return any(node is inner for node in walk(outer))
