"""What a rule's check returns: a finding on a node, with the edits of its fix (if any)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from accumlint.fix.edits import Edit
from accumlint.model.tree import walk
from accumlint.model.loop import Event, Statement
from accumlint.model.names import code
from accumlint.model.window import Window


@dataclass(frozen=True, eq=False)
class Finding:
    """What a check found. It names no code: the registry gives it its rule's (`code`)."""

    node: cst.CSTNode
    message: str
    edits: tuple[Edit, ...] = ()
    fix_description: str = ""
    related: Optional[cst.CSTNode] = None  # `{related}` in the message or help becomes "line N"
    # Why it matters and what to do, shown under the finding (`--output-format full`, editors):
    # `message` says what is wrong in a line short enough to read in a terminal.
    help: str = ""
    code: str = ""


def k_text(window: Window) -> str:
    return code(window.k) if window.k is not None else "K"


def movable(statement: Statement) -> bool:
    """A statement a fix may move: alone on its line, in an indented block that holds it."""
    if not statement.alone or not statement.block:
        return False
    block = statement.block[-1]
    return type(block) is cst.IndentedBlock and any(s is statement.node for s in block.body)


def movable_to(statement: Statement, anchor: Statement) -> bool:
    """Both movable, and the move does not go into a helper the statement does not
    belong to (the helper may run elsewhere, and its names differ)."""
    into_helper = anchor.helper is not None and statement.helper is not anchor.helper
    return movable(statement) and movable(anchor) and not into_helper


def leaves_world(statement: Statement, anchor: Statement) -> bool:
    """Moving the statement alone next to `anchor` takes it out of its world (the arm of
    `if args.fp16:` it sits in), so it would run in every run."""
    return not set(statement.worlds) <= set(anchor.worlds)


def same_block(statement: Statement, node: cst.CSTNode) -> bool:
    block = statement.block[-1] if statement.block else None
    return type(block) is cst.IndentedBlock and any(s is node for s in block.body)


def contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return any(node is inner for node in walk(outer))


def sync_gated(window: Window, event: Event, anchor: Event) -> Optional[cst.If]:
    """`event`'s statement under `if accelerator.sync_gradients:`, for a call inside
    `accumulate()` that accelerate does not hold back (None when the anchor already
    runs on sync steps only, or outside `accumulate()`)."""
    call = window.accumulate_call(event.statement)
    if call is None or type(call.func) is not cst.Attribute or anchor.statement.gate is not None:
        return None
    test = cst.parse_expression(f"{code(call.func.value)}.sync_gradients")
    body = cst.IndentedBlock(body=[event.statement.node.with_changes(leading_lines=())])
    return cst.If(test=test, body=body, leading_lines=event.statement.node.leading_lines)


def after_every_world(statement: Statement) -> cst.CSTNode:
    """Where a statement moved after `statement` (a window's step) goes: after it, or after the
    outermost test of a run constant (`if args.fp16: scaler.step(opt) else: opt.step()`) that
    holds it inside its gate's block, each arm being a world with a window of its own: the
    moved statement must follow the step in every world."""
    block = list(statement.block)
    start = next((i + 1 for i, node in enumerate(block) if node is statement.gate_if), 0)
    inside = {id(node) for node in block[start:]}
    return next((test for test in statement.world_tests if id(test) in inside), statement.node)
