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
from accumlint.rules.base import after_every_world, movable, movable_to


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


# What a fix moves: a statement line, or the flag `if` / `with` that holds only it.
_Unit = Union[cst.SimpleStatementLine, cst.If, cst.With]


def movable_unit(statement: Statement) -> Optional[_Unit]:
    """The statement, or the flag `if` it stands alone in, when it can be moved as a whole."""
    if not movable(statement):
        return None
    unit, _ = _unit_and_path(statement)
    return unit


def _unit_and_path(statement: Statement) -> tuple[_Unit, list[cst.CSTNode]]:
    """The unit `movable_unit` moves and the blocks around it. A `with` holding only the
    statement (`with timers["ema"]:`) goes along when a flag test above it does."""
    unit: _Unit = statement.node
    path = list(statement.block)
    taken, taken_path = unit, path
    while (
        len(path) >= 3 and type(path[-1]) is cst.IndentedBlock and len(path[-1].body) == 1
        and path[-1].body[0] is unit and type(path[-3]) is cst.IndentedBlock
    ):
        holder = path[-2]
        if type(holder) is cst.If and holder.orelse is None and is_flag(holder.test):
            unit, path = holder, path[:-2]
            taken, taken_path = unit, path
        elif type(holder) is cst.With:
            unit, path = holder, path[:-2]
        else:
            break
    return taken, taken_path


def keeps_flags(statement: Statement, anchor: Statement) -> bool:
    """Moving the statement's unit next to `anchor` keeps it under every flag test it runs
    under (`if ema is not None:` around `with timer: update_ema(...)`): each such test the
    unit cannot take along also holds the anchor."""
    _, path = _unit_and_path(statement)
    held = {id(node) for node in anchor.block}
    return all(
        id(node) in held for node in path if type(node) is cst.If and is_flag(node.test)
    )


def once_per_window(window: Window, statement: Statement, anchor: Optional[Statement]) -> tuple[Edit, ...]:
    """Edits that make `statement` run once per window (empty when no safe place is known)."""
    unit = movable_unit(statement)
    if unit is None:
        return ()
    if anchor is not None:
        if not movable_to(statement, anchor) or not keeps_flags(statement, anchor):
            return ()
        return (remove(unit), insert_after(after_every_world(anchor), unit))
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
