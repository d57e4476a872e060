"""Where a statement that must run once per window goes, for the fixes that move it.

Three cases, in this order: after the window's optimizer step (a manual gate or
the step after a micro-step loop); at the top of the loop's existing
`if accelerator.sync_gradients:` block after the step and the statement; or, inside `accelerator.accumulate()`
with no such block, wrapped in a new one where it stands. A statement alone
under a configuration test (`if model_ema is not None:`) moves with its test.
"""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from accumlint.fix.edits import Edit, insert_after, insert_before, remove, replace
from accumlint.model.cadence import accumulate_accelerator, is_flag
from accumlint.model.loop import Statement
from accumlint.model.names import code
from accumlint.model.window import Window
from accumlint.rules.base import movable, movable_to


def sync_block(window: Window, after: int) -> Optional[cst.If]:
    """The loop's own `if accelerator.sync_gradients:` block after statement `after`, if any."""
    for statement in window.loop.statements:
        gate = statement.gate
        if statement.order <= after:
            continue
        if gate is not None and gate.kind == "sync" and statement.helper is None and type(statement.gate_if) is cst.If:
            if type(statement.gate_if.body) is cst.IndentedBlock and statement.gate_if.test is gate.whole_test:
                return statement.gate_if
    return None


def movable_unit(statement: Statement) -> Optional[Union[cst.SimpleStatementLine, cst.If]]:
    """The statement, or the flag `if` it stands alone in, when it can be moved as a whole."""
    if not movable(statement):
        return None
    unit: Union[cst.SimpleStatementLine, cst.If] = statement.node
    path = list(statement.block)
    while (
        len(path) >= 3 and type(path[-1]) is cst.IndentedBlock and type(path[-2]) is cst.If
        and path[-2].orelse is None and len(path[-1].body) == 1 and path[-1].body[0] is unit
        and is_flag(path[-2].test) and type(path[-3]) is cst.IndentedBlock
    ):
        unit = path[-2]
        path = path[:-2]
    return unit


def once_per_window(window: Window, statement: Statement, anchor: Optional[Statement]) -> tuple[Edit, ...]:
    """Edits that make `statement` run once per window (empty when no safe place is known)."""
    unit = movable_unit(statement)
    if unit is None:
        return ()
    if anchor is not None:
        return (remove(unit), insert_after(anchor.node, unit)) if movable_to(statement, anchor) else ()
    accelerator = accumulate_accelerator(window)
    if accelerator is None:
        return ()
    steps = [event.order for event in window.loop.steps]
    block = sync_block(window, max(steps + [statement.order]))
    if block is not None:
        first = block.body.body[0]
        return (remove(unit), insert_before(first, unit.with_changes(leading_lines=())))
    wrapped = cst.If(
        test=cst.parse_expression(f"{code(accelerator)}.sync_gradients"),
        body=cst.IndentedBlock(body=[unit.with_changes(leading_lines=())]),
        leading_lines=unit.leading_lines,
    )
    return (replace(unit, wrapped),)
