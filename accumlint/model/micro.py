"""Micro-step loops whose losses never reach a backward.

An inner loop that runs the forward over micro-batches and assigns each one's
loss to a name, followed (outside that loop) by one backward on that name,
backpropagates only the last micro-batch. The inner loop is a micro-step loop
when it runs `range(K)` over an accumulation count, walks micro-batches or
chunks, or divides the loss by an accumulation count. A loss added up across
the loop (`total = total + loss`, `+=`, a list) reaches the backward and is
not this shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from accumlint.model.facts import Loop
from accumlint.model.loop import Event, Statement
from accumlint.model.loss import UNKNOWN
from accumlint.model.names import call_name, code, dotted, last_part, positional
from accumlint.model.scopes import target_chains
from accumlint.model.tree import walk
from accumlint.model.window import Window
from accumlint.source.patterns import LazyPattern

_MICRO_ITERABLE = LazyPattern(r"micro|chunk|split|shard", re.IGNORECASE)


@dataclass(frozen=True, eq=False)
class LostLosses:
    """A backward after a micro-step loop that only sees its last loss."""

    backward: Event
    definition: Statement
    micro_loop: Loop


def lost_micro_losses(window: Window) -> list[LostLosses]:
    if window.has_micro_loop:
        return []
    found = []
    for flow in window.flows:
        backward = flow.backward
        if flow.name is None or flow.reduction == UNKNOWN and "loss" not in flow.name.lower():
            continue
        definition = _last_assignment(window, backward.statement, flow.name)
        if definition is None:
            continue
        inner = [loop for loop in definition.loops if loop not in backward.statement.loops]
        if not inner:
            continue
        micro = inner[0]
        if any(micro in s.loops and s.order > backward.order for s in window.loop.statements):
            continue
        if _micro_step_loop(window, micro, definition):
            found.append(LostLosses(backward, definition, micro))
    return found


def _last_assignment(window: Window, before: Statement, name: str) -> Optional[Statement]:
    """The last statement before `before` that binds `name` afresh (None when the
    last one adds to it: `+=`, or `name = name + ...`)."""
    found: Optional[Statement] = None
    for statement in window.earlier_in_scope(before):
        for small in statement.node.body:
            if type(small) is cst.AugAssign and dotted(small.target) == name:
                found = None if type(small.operator) not in (cst.DivideAssign, cst.MultiplyAssign) else found
            elif type(small) is cst.Assign and any(name in target_chains(t.target) for t in small.targets):
                found = None if _adds_to_itself(small.value, name) else statement
    return found


def _adds_to_itself(value: cst.BaseExpression, name: str) -> bool:
    """`total = total + loss` accumulates; `loss = loss / K` only rescales."""
    return any(
        type(node) is cst.BinaryOperation and type(node.operator) in (cst.Add, cst.Subtract)
        and any(dotted(side) == name for side in walk(node))
        for node in walk(value)
    )


def _micro_step_loop(window: Window, loop: Loop, definition: Statement) -> bool:
    if type(loop) is cst.For:
        iterable = loop.iter
        if type(iterable) is cst.Call and last_part(call_name(iterable) or "") == "range":
            count = positional(iterable, 0) if positional(iterable, 1) is None else None
            if count is not None and window.is_accumulation_name(count):
                return True
        elif _MICRO_ITERABLE.search(code(iterable)):
            return True
    return any(
        s.op == "div" and window.is_accumulation_name(s.factor) and s.statement is definition
        for flow in window.flows for s in flow.scalings
    )
