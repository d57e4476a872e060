"""GA305: an LR schedule sized in micro-batches but stepped once per window."""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from accumlint.edits import Edit, insert_before, replace
from accumlint.model.cadence import accumulates_with_k, accumulate_accelerator
from accumlint.model.loop import Event
from accumlint.model.names import code, dotted, last_part
from accumlint.model.schedules import length_arguments, micro_batch_length, scheduler_constructors
from accumlint.model.scope import in_scope
from accumlint.model.window import Window
from accumlint.rules.base import Finding


def schedule_counts_micro_batches(window: Window) -> Iterable[Finding]:
    if not window.accumulates:
        return
    k = _k(window)
    for event in window.loop.of_kind("sched"):
        if not _once_per_window(window, event):
            continue
        for constructor in scheduler_constructors(window.facts, window.objects, event.role.receiver):
            for argument in length_arguments(constructor):
                length = micro_batch_length(window.facts, window.objects, argument, window.is_k)
                if length is None:
                    continue
                loader = code(length.length.args[0].value)
                k_text = code(k) if k is not None else "K"
                yield Finding(
                    "GA305",
                    length.carrier,
                    f"the schedule's length counts micro-batches (`len({loader})`), not optimizer steps",
                    _edits(window, length.length, k),
                    f"Count optimizer steps: `math.ceil(len({loader}) / {k_text})`",
                    help=f"`{code(event.role.call)}` steps once per window of `{k_text}`: warmup lasts K times too "
                    f"long and the decay never finishes; use `math.ceil(len({loader}) / {k_text})`",
                )


def _k(window: Window) -> Optional[cst.BaseExpression]:
    if window.k is not None:
        return window.k
    accelerator = accumulate_accelerator(window)
    info = window.objects.accelerator(accelerator) if accelerator is not None else None
    return info.steps if info is not None else None


def _once_per_window(window: Window, event: Event) -> bool:
    """The scheduler steps once per window: under the gate, after a micro-step loop, or
    (prepared by accelerate) inside `accumulate()` on an Accelerator with K."""
    if window.has_micro_loop:
        return not window.loop.in_micro_loop(event.statement)
    if event.gate is not None:
        return event.gate.kind != "sync" or accumulates_with_k(window)
    if window.accumulate_context(event.statement):
        return accumulates_with_k(window) and _prepared(window, event.role.receiver)
    return False


def _prepared(window: Window, name: Optional[str]) -> bool:
    for binding in window.facts.bindings.get(name or "", ()):
        value = binding.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "prepare":
            if window.objects.kind_of(value.func.value) == "accelerator":
                return True
    return False


def _edits(window: Window, length: cst.Call, k: Optional[cst.BaseExpression]) -> tuple[Edit, ...]:
    if k is None or not in_scope(window.facts, k, length, window.loop.function):
        return ()
    ceil = cst.parse_expression(f"math.ceil({code(length)} / {code(k)})")
    edits: tuple[Edit, ...] = (replace(length, ceil),)
    if window.facts.imports.get("math") != "math":
        anchor = _first_import(window.facts.module)
        if anchor is None:
            return ()
        edits += (insert_before(anchor, cst.parse_statement("import math\n")),)
    return edits


def _first_import(module: cst.Module) -> Optional[cst.CSTNode]:
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Import, cst.ImportFrom)):
            small = statement.body[0]
            if isinstance(small, cst.ImportFrom) and dotted(small.module) == "__future__":
                continue
            return statement
    return None


RULES = {"GA305": schedule_counts_micro_batches}
