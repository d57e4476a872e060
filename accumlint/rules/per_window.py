"""GA3xx: work that belongs once per window (LR schedule, clipping, AMP scaler)."""

from __future__ import annotations

from typing import Iterable, Optional, TypeVar

import libcst as cst

from accumlint.fix.edits import Edit, filled_statement, insert_after, insert_before, remove
from accumlint.model.budgets import micro_batch_budgets
from accumlint.model.cadence import every_micro_batch
from accumlint.model.loop import Event, Statement
from accumlint.model.names import code, last_part
from accumlint.model.roles import RoleKind
from accumlint.model.schedules import (holds_rate, known_schedule, length_arguments, length_is_loop_budget, referenced_names,
                                      scheduler_constructors, sized_in_micro_batches, told_position)
from accumlint.model.window import Window
from accumlint.rules.base import Finding, after_every_world, leaves_world, movable, movable_to, sync_gated
from accumlint.rules.catalog import Rule
from accumlint.rules.placement import once_per_window
from accumlint.rules.window import steps_every_micro_batch, window_step

_SELF_UNSCALING_CLIPS = ("accelerator", "fabric", "self", "engine", "model_engine")


_Holder = TypeVar("_Holder", cst.If, cst.For)


def _per_micro_batch(window: Window, kind: RoleKind) -> list[Event]:
    """Events of `kind` that run on every micro-batch of a window whose step does not."""
    # a clip beside a DeepSpeed engine whose step the loop gates clips the engine's partial sums
    engine_window = kind == "clip" and window.deepspeed and window.gated_engine_step is not None
    if not (window.accumulates or engine_window) or steps_every_micro_batch(window):
        return []
    if not window.steps_once_per_window and not engine_window:
        return []
    return [
        event for event in window.loop.of_kind(kind)
        if not window.framework_managed(event)
        and (window.runs_every_micro_batch(event.statement) or window.runs_with_backward(event.statement))
        and not (kind in ("update", "unscale") and window.scaler_steps_every_micro_batch(event))
        and not (kind == "clip" and window.clip_serves_other_update(event))
    ]


def _move(window: Window, event: Event, anchor: Optional[Event], *, before: bool) -> tuple[Edit, ...]:
    """Move the statement next to the window's step (inside `accumulate()`, under
    `if accelerator.sync_gradients:`)."""
    if anchor is None or not movable_to(event.statement, anchor.statement):
        return ()
    place = insert_before if before else insert_after
    at = anchor.statement.node if before else after_every_world(anchor.statement)
    loop = _sole_loop(event.statement)
    if loop is not None:  # `for m in models: clip_grad_norm_(m.parameters(), c)`: the loop moves whole
        if leaves_world(event.statement, anchor.statement) or window.accumulate_call(event.statement) is not None:
            return ()
        return (remove(loop), place(at, loop))
    if leaves_world(event.statement, anchor.statement):
        guard = _sole_guard(event.statement, anchor.statement)
        if guard is None or window.accumulate_call(event.statement) is not None:
            return ()  # inside `accumulate()` the step's place runs on every micro-batch too
        # `if max_norm > 0: clip_grad_norm_(...)`: the test moves with the clip, which keeps its world
        return (remove(guard), place(at, guard))
    moved = sync_gated(window, event, anchor) or event.statement.node
    return (remove(event.statement.node), place(at, moved))


def _sole_loop(statement: Statement) -> Optional[cst.For]:
    """The `for` (no `else`) whose body is this statement alone, itself in an indented block,
    so that the whole loop can move where the statement belongs."""
    loop = _sole_holder(statement, cst.For)
    outer = statement.block[-3] if loop is not None else None
    return loop if type(outer) is cst.IndentedBlock and any(s is loop for s in outer.body) else None


def _sole_guard(statement: Statement, anchor: Statement) -> Optional[cst.If]:
    """The `if` (no `else`) whose body is this statement alone, in a block that also holds the
    anchor, so that the whole `if` can move next to the anchor."""
    guard = _sole_holder(statement, cst.If)
    if guard is None:
        return None
    outer = statement.block[-3]
    outside = {world for world in statement.worlds if world[0] != id(guard)}  # its worlds but the guard's own
    if not any(block is outer for block in anchor.block) or not outside <= set(anchor.worlds):
        return None
    return guard


def _sole_holder(statement: Statement, kind: type[_Holder]) -> Optional[_Holder]:
    """The compound statement of `kind` (with no `else`) right around the statement, when
    its body is that statement alone, in the loop's own code."""
    if len(statement.block) < 3 or statement.helper is not None:
        return None
    suite, holder = statement.block[-1], statement.block[-2]
    if type(holder) is not kind or holder.orelse is not None or type(suite) is not cst.IndentedBlock:
        return None
    return holder if len(suite.body) == 1 and suite.body[0] is statement.node else None


def scheduler_every_micro_batch(window: Window) -> Iterable[Finding]:
    for event in _per_micro_batch(window, "sched"):
        constructors = scheduler_constructors(window.facts, window.objects, event.role.receiver)
        if not constructors or not all(known_schedule(window.facts, call) for call in constructors):
            continue  # built elsewhere: whether its length counts micro-batches is unknown
        if all(holds_rate(call) for call in constructors):
            continue  # a constant rate: stepping it K times as often changes nothing
        if sized_in_micro_batches(window.facts, window.objects, event.role.receiver, window.is_k):
            continue
        if length_is_loop_budget(window.facts, window.loop.node, window.loop.function, event.role.receiver, constructors):
            continue
        if _length_is_micro_batch_budget(window, constructors):
            continue
        if told_position(event.role.call):
            continue  # `scheduler.step(i)`: the schedule is told where it is, so its pace follows the index
        anchor = window_step(window, event)
        yield Finding(
            event.role.call,
            f"`{code(event.role.call)}` advances the LR schedule on every micro-batch",
            _move(window, event, anchor, before=False),
            "Move the scheduler step after the optimizer step, inside the window",
            help="the optimizer steps once per window ({related}), so the schedule runs K times too fast; "
            "step the scheduler after the optimizer",
            related=anchor.role.call if anchor is not None else None,
        )


def _length_is_micro_batch_budget(window: Window, constructors: list[cst.Call]) -> bool:
    """The schedule's length is the budget the loop compares its count of micro-batches with
    (`if n_step >= config.n_training_steps: break`): the schedule spans the run's micro-batches."""
    budgets = micro_batch_budgets(window)
    if not budgets:
        return False
    for call in constructors:
        here = window.facts.enclosing_function(call) is window.loop.function
        for argument in length_arguments(call, window.facts):
            if any(("." in name or here) and name in budgets for name in referenced_names(argument, keyed=True)):
                return True
    return False


def clip_every_micro_batch(window: Window) -> Iterable[Finding]:
    for event in _per_micro_batch(window, "clip"):
        anchor = window_step(window, event)
        yield Finding(
            event.role.call,
            "gradients are clipped on every micro-batch, on partial sums",
            _move(window, event, anchor, before=True),
            "Move the clipping before the optimizer step, inside the window",
            help="clip once per window, right before the optimizer step ({related})",
            related=anchor.role.call if anchor is not None else None,
        )


def scaler_every_micro_batch(window: Window) -> Iterable[Finding]:
    anchor = window_step(window)
    gated_clip = next((e for e in window.loop.of_kind("clip") if e.gate is not None), None)
    for event in _per_micro_batch(window, "update") + _per_micro_batch(window, "unscale"):
        if event.kind == "update":
            edits = _move(window, event, anchor, before=False)
        elif any(clip.order > event.order for clip in _per_micro_batch(window, "clip")):
            # a clip after it that runs on every micro-batch moves first (GA302's fix), and this
            # call then goes before it; moved alone, the clip would run on still-scaled gradients (GA304)
            edits = ()
        else:
            edits = _move(window, event, gated_clip or anchor, before=True)
        yield Finding(
            event.role.call,
            f"`{code(event.role.call)}` runs on every micro-batch",
            edits,
            "Move the scaler call inside the window",
            help="the scaler steps once per window ({related}); this call belongs inside the window",
            related=anchor.role.call if anchor is not None else None,
        )


def clip_before_unscale(window: Window) -> Iterable[Finding]:
    scales = window.loop.of_kind("scale")
    if not scales:
        return
    scaler = scales[0].role.receiver
    scaler_steps = [e for e in window.loop.steps if e.role.flavor == "scaler"]
    for clip in window.loop.of_kind("clip"):
        receiver = clip.role.receiver or ""
        if receiver.split(".")[0] in _SELF_UNSCALING_CLIPS or last_part(receiver) in _SELF_UNSCALING_CLIPS:
            continue
        if any(u.order <= clip.order for u in window.loop.of_kind("unscale")) or window.clip_reads_loss_scale(clip):
            continue
        if not any(window.loop.reaches(scale, clip) for scale in scales):
            continue  # no scaled backward reaches it (`else: loss.backward(); clip(...)` beside an AMP arm)
        step = next((s for s in scaler_steps if clip.precedes(s)), None)
        if step is None:
            continue
        if window.clip_serves_other_update(clip):
            continue  # another optimizer's plain update uses the clipped, unscaled gradients first
        edits: tuple[Edit, ...] = ()
        optimizer = step.role.target
        # a clip that runs on every micro-batch (GA302) would unscale there too (GA303): its
        # move under the gate comes first, and the unscale then goes before it
        every_micro_batch = clip in _per_micro_batch(window, "clip")
        if optimizer is not None and scaler is not None and movable(clip.statement) and not every_micro_batch:
            unscale = filled_statement(f"{scaler}.unscale_(__optimizer__)\n", __optimizer__=optimizer)
            edits = (insert_before(clip.statement.node, unscale),)
        yield Finding(
            clip.role.call,
            "gradients are clipped while still scaled by the GradScaler",
            edits,
            f"Insert `{scaler}.unscale_(...)` before the clip",
            help=f"the threshold applies to scaled gradients; call `{scaler}.unscale_(...)` first",
        )


def ema_every_micro_batch(window: Window) -> Iterable[Finding]:
    """GA306: the weight average moves on every micro-batch while the weights move once per window."""
    if not window.accumulates or steps_every_micro_batch(window):
        return
    # an inner loop inside `accumulate()` (over datasets, pieces) leaves the window accelerate's
    manual = window.gated_step or window.has_micro_loop and window.accumulate_k is None
    if not manual and window.accumulate_k is None:
        return
    anchor = window_step(window) if manual else None
    if manual and anchor is None:
        return
    for event in window.loop.of_kind("ema"):
        if not every_micro_batch(window, event.statement):
            continue
        yield Finding(
            event.role.call,
            f"`{code(event.role.call)}` updates the weight average on every micro-batch",
            once_per_window(window, event.statement, anchor.statement if anchor is not None else None)
            if every_micro_batch(window, event.statement, stretches=False) else (),
            "Move the EMA update after the optimizer step, inside the window",
            help="the optimizer steps once per window ({related}): the average decays K times too fast, "
            "over unchanged weights; update it right after the step",
            related=anchor.role.call if anchor is not None else None,
        )


SCHEDULER_EVERY_MICRO_BATCH = Rule(
    code="GA301",
    name="scheduler-every-micro-batch",
    fix="safe",
    summary="The LR scheduler steps on every micro-batch while the optimizer steps every K.",
    check=scheduler_every_micro_batch,
)

CLIP_EVERY_MICRO_BATCH = Rule(
    code="GA302",
    name="clip-every-micro-batch",
    fix="safe",
    summary="Gradients are clipped on every micro-batch, on partial sums.",
    check=clip_every_micro_batch,
)

SCALER_EVERY_MICRO_BATCH = Rule(
    code="GA303",
    name="scaler-every-micro-batch",
    fix="safe",
    summary="The AMP GradScaler updates or unscales on every micro-batch.",
    check=scaler_every_micro_batch,
)

CLIP_BEFORE_UNSCALE = Rule(
    code="GA304",
    name="clip-before-unscale",
    fix="safe",
    summary="Gradients are clipped while still multiplied by the GradScaler's scale.",
    any_loop=True,
    check=clip_before_unscale,
)

EMA_EVERY_MICRO_BATCH = Rule(
    code="GA306",
    name="ema-every-micro-batch",
    fix="safe",
    summary="An EMA of the weights updates on every micro-batch while the optimizer steps every K.",
    check=ema_every_micro_batch,
)
