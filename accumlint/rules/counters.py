"""GA109: a counter of optimizer steps that counts micro-batches."""

from __future__ import annotations

from typing import Iterable

from accumlint.fix.edits import Edit
from accumlint.model.budgets import step_budget, step_counter_increments
from accumlint.model.cadence import every_micro_batch
from accumlint.model.names import code
from accumlint.model.window import Window
from accumlint.rules.base import Finding
from accumlint.rules.catalog import Rule
from accumlint.rules.placement import once_per_window
from accumlint.rules.window import steps_every_micro_batch, window_step


def step_counter_counts_micro_batches(window: Window) -> Iterable[Finding]:
    """GA109. A loop whose Accelerator has K but no window (GA111) is read as the window
    `accumulate()` gives it: its step counter must count windows there too, so the fix
    of GA111 leaves no counter behind."""
    unwindowed = window.unwindowed_framework_backward is not None
    if not unwindowed and (not window.steps_once_per_window or steps_every_micro_batch(window)):
        return
    anchor = None if unwindowed else window_step(window)
    if anchor is None and window.accumulate_k is None and not unwindowed:
        return
    for increment in step_counter_increments(window):
        if not every_micro_batch(window, increment.statement):
            continue
        budget = step_budget(window, increment.counter, window.is_k)
        if budget is None:
            continue
        edits: tuple[Edit, ...] = ()
        # inside a stretch of micro-batches (`if step < resume_step:`) the move would drop its tests
        # a counter that a step's or zeroing's own gate tests cannot move under that gate
        if increment.counter not in window.gate_counters and not unwindowed \
                and every_micro_batch(window, increment.statement, stretches=False):
            edits = once_per_window(window, increment.statement, anchor.statement if anchor is not None else None)
        yield Finding(
            increment.statement.node,
            f"`{increment.counter}` counts micro-batches but is compared with a budget in optimizer steps "
            "({related})",
            edits,
            f"Increment `{increment.counter}` once per window, with the optimizer step",
            help=f"`{code(budget)}` is computed in optimizer steps (divided by K), so training stops, saves, "
            "evaluates or logs K times too early; increment the counter under the gate",
            related=budget,
        )


STEP_COUNTER_COUNTS_MICRO_BATCHES = Rule(
    code="GA109",
    name="step-counter-counts-micro-batches",
    fix="unsafe",
    summary="An optimizer-step counter is incremented on every micro-batch but compared with a budget in steps.",
    check=step_counter_counts_micro_batches,
)
