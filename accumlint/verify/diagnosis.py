"""Naming the likely mistake from the numbers when the runs differ.

Each known mistake leaves a signature in the recorded steps, checked most
specific first:
- no gradient at any step: zeroing between backward and step (GA104);
- step counts: K times as many (a step every micro-batch, GA102; GA108 when
  accelerate's `accumulate()` ran without its own K), twice as many with two
  `accumulate()` entries per micro-batch (GA404), one fewer with a partial
  last window fed (the tail never stepped, GA107);
- the full-batch run's first step sees no gradient while later ones do, or
  autograd finds the weights changed by a step before its backward: the
  backward runs after the step (GA103);
- one backward per window where K are due: the backward follows the
  micro-step loop and sees the last loss only (GA110);
- first accumulated gradient = K x (GA201) or 1/K x (GA204; 1/P under DDP
  with P processes: divided by the world size on top of DDP's mean);
- per-step evidence: all-reduces per step (K: GA401; none: GA403), scheduler
  steps or learning rates (GA301; same calls but other rates: GA305),
  clipping calls (GA302), scaler calls (GA303);
- first accumulated gradient = 1/K of the window's *last* micro-batch
  gradient (zeroing every micro-batch, GA101) or of the *first* one with the
  next window shifted by one micro-batch (off-by-one gate, GA106), from
  reference gradients computed by the oracle at the step's weights.
"""

from __future__ import annotations

from typing import Optional

import torch

from accumlint.verify.compare import (
    ALLREDUCE,
    LEARNING_RATE,
    Comparison,
    GradientOracle,
    Mismatch,
)
from accumlint.verify.instruments import ACCUMULATE, BACKWARD, CLIP, SCALER_UNSCALE, SCALER_UPDATE, SCHEDULER
from accumlint.verify.report import Explanation
from accumlint.verify.runs import RunRecord, StepRecord, UserCodeError

# How close a signature must be, relative to the reference's norm: loose
# enough for float32 rounding, far tighter than any real mistake; widened for
# half-precision compute.
MATCH = 1e-3


def diagnose(
    accumulated: RunRecord,
    full: RunRecord,
    comparison: Comparison,
    accum_steps: int,
    oracle: Optional[GradientOracle] = None,
    *,
    tail: int = 0,
    nproc: int = 1,
) -> list[Explanation]:
    """The mistakes the numbers point at, most specific first (may be empty)."""
    k = accum_steps
    match = max(MATCH, 3 * comparison.tolerance.rtol)
    if not accumulated.steps or not full.steps:
        return []
    if not any(step.has_gradient for step in accumulated.steps):
        return [_GA104]
    dropped: list[Explanation] = []
    if not comparison.same_step_count:
        counted = _step_count(accumulated, comparison, k, tail)
        if counted is not None and counted.code != "GA107":
            return [counted]
        if abs(comparison.steps_accumulated - comparison.steps_full) != 1:
            return []
        # One step more or fewer (a missing tail, shifted windows): the aligned
        # steps carry the signature.
        dropped = [counted] if counted is not None else []
    return dropped + _aligned(accumulated, full, comparison, k, oracle, nproc, match)


def _aligned(
    accumulated: RunRecord,
    full: RunRecord,
    comparison: Comparison,
    k: int,
    oracle: Optional[GradientOracle],
    nproc: int,
    match: float,
) -> list[Explanation]:
    """Signatures of runs whose steps pair up."""
    if _first_step_empty(full.steps):
        return [_GA103]
    mismatches = {m.kind: m for m in comparison.mismatches}
    backward = mismatches.get(BACKWARD)
    if backward is not None and comparison.one_backward_per_step:
        return [_ga110(backward)]
    found: list[Explanation] = []
    if comparison.first_divergent_step is not None:
        scaling = _scaling_signature(accumulated.steps[0], full.steps[0], k, nproc, match)
        if scaling is not None:
            found.append(scaling)
    found.extend(_from_evidence(mismatches, k, _scheduler_steps(accumulated)))
    if found or oracle is None or comparison.first_divergent_step is None:
        return found
    return _from_references(accumulated.steps, k, oracle, match)


def diagnose_error(error: UserCodeError) -> Optional[Explanation]:
    """The mistake behind an error of the user's code, when it has a signature:
    autograd refusing a graph whose weights an optimizer step already changed
    in place is a backward running after the step (GA103); the GradScaler
    refusing an update or unscale without a step in between is GA303."""
    message = str(error.error)
    if error.steps_before > 0 and "modified by an inplace operation" in message:
        return _GA103
    if "No inf checks were recorded prior to update" in message or "unscale_() has already been called" in message:
        return _GA303_RAISED
    return None


def _step_count(accumulated: RunRecord, comparison: Comparison, k: int, tail: int) -> Optional[Explanation]:
    a, b = comparison.steps_accumulated, comparison.steps_full
    entries = sum(step.events.get(ACCUMULATE, 0) for step in accumulated.steps)
    backwards = sum(step.events.get(BACKWARD, 0) for step in accumulated.steps)
    if k > 1 and (a == k * b or (tail and a == comparison.used and b > 1)):
        return _ga108(a, b) if entries else _ga102(a, b)
    if k > 2 and entries and entries == 2 * backwards and a > b:
        return _ga404(a, b)
    if tail and a == b - 1:
        return _ga107(tail)
    return None


def _first_step_empty(steps: list[StepRecord]) -> bool:
    return not steps[0].has_gradient and any(step.has_gradient for step in steps[1:])


def _scaling_signature(first_a: StepRecord, first_b: StepRecord, k: int, nproc: int, match: float) -> Optional[Explanation]:
    ratio = _scalar_ratio(first_a.gradients, first_b.gradients, match)
    if ratio is None:
        return None
    if abs(ratio - k) <= match * k:
        return _scaling("GA201", "missing-loss-scaling", ratio, f"K = {k}",
                        "The loss is not divided by K before backward; backpropagate loss / K.")
    if abs(ratio * k - 1) <= match:
        return _scaling("GA204", "double-loss-scaling", ratio, f"1/K = {1 / k:.4g}",
                        "The loss is divided by K twice (or by K on top of a framework's own 1/K); divide once.")
    if nproc > 1 and abs(ratio * nproc - 1) <= match:
        return _scaling("GA204", "double-loss-scaling", ratio, f"1/P = {1 / nproc:.4g} for P = {nproc} processes",
                        "The loss is divided by the world size although DDP already averages the ranks' "
                        "gradients; do not divide by the world size.")
    return None


def _scheduler_steps(record: RunRecord) -> bool:
    """Whether the run stepped an LR scheduler (its schedule counts steps)."""
    return any(step.events.get(SCHEDULER) for step in record.steps) or bool(record.trailing_events.get(SCHEDULER))


def _from_evidence(mismatches: dict[str, Mismatch], k: int, scheduled: bool) -> list[Explanation]:
    found = []
    allreduce = mismatches.get(ALLREDUCE)
    if allreduce is not None:
        found.append(_ga401(allreduce) if allreduce.accumulated > 1 else _ga403(allreduce))
    scheduler = mismatches.get(SCHEDULER)
    if scheduler is not None:
        found.append(_ga301(scheduler))
    elif LEARNING_RATE in mismatches:
        found.append(_ga305(mismatches[LEARNING_RATE], scheduled))
    if CLIP in mismatches:
        found.append(_per_step("GA302", "clip-every-micro-batch", mismatches[CLIP], "gradient clipping",
                               "Clipping runs on partial gradients every micro-batch; clip once per window, "
                               "under the gate, before the step."))
    scaler = mismatches.get(SCALER_UPDATE) or mismatches.get(SCALER_UNSCALE)
    if scaler is not None:
        found.append(_per_step("GA303", "scaler-every-micro-batch", scaler, f"GradScaler.{scaler.kind.split('.')[1]}()",
                               "The AMP scaler is updated every micro-batch; call it once per window, under "
                               "the gate."))
    return found


def _from_references(steps: list[StepRecord], k: int, oracle: GradientOracle, match: float) -> list[Explanation]:
    first = steps[0]
    if not first.gradients or k == 1:
        return []
    names = frozenset(name for name, g in first.gradients.items() if g is not None)
    scaled = {name: g * k for name, g in _dense(first.gradients).items()}
    last_share = oracle(first.state, [k - 1], names)
    if last_share is not None and _close(scaled, last_share, match):
        return [_GA101]
    first_share = oracle(first.state, [0], names)
    if first_share is not None and _close(scaled, first_share, match):
        if len(steps) < 2 or not steps[1].gradients:
            return [_GA106]
        shifted = oracle(steps[1].state, list(range(1, k + 1)), names)
        if shifted is not None and _close(_dense(steps[1].gradients), shifted, match):
            return [_GA106]
    return []


def _dense(gradients: dict[str, Optional[torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {name: g for name, g in gradients.items() if g is not None}


def _flat(gradients: dict[str, Optional[torch.Tensor]], names: list[str]) -> torch.Tensor:
    parts = [gradients[name].double().flatten() for name in names if gradients.get(name) is not None]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _scalar_ratio(actual: dict, expected: dict, match: float) -> Optional[float]:
    """The scalar r with actual ≈ r * expected, or None when no scalar fits."""
    names = sorted(name for name in actual if actual[name] is not None and expected.get(name) is not None)
    a, b = _flat(actual, names), _flat(expected, names)
    denominator = float(b @ b)
    if not names or denominator == 0.0:
        return None
    ratio = float(a @ b) / denominator
    if float((a - ratio * b).norm()) > match * float(a.norm()):
        return None
    return ratio


def _close(actual: dict, expected: dict, match: float) -> bool:
    names = sorted(set(actual) | set(expected))
    if any(actual.get(name) is None or expected.get(name) is None for name in names):
        return False
    a, b = _flat(actual, names), _flat(expected, names)
    return float((a - b).norm()) <= match * max(float(b.norm()), 1e-30)


_GA104 = Explanation(
    code="GA104",
    name="zero-grad-before-step",
    summary="no gradient reached any optimizer step.",
    detail="The gradients are zeroed between the backward and the step, so every step applies zeros; "
    "zero them after the step.",
)
_GA103 = Explanation(
    code="GA103",
    name="backward-after-step",
    summary="a micro-batch's backward runs after the optimizer step of its window.",
    detail="The backward runs after the step and zeroing, so each micro-batch lands in the next window "
    "and the last one is lost; run the backward before the gate.",
)
_GA303_RAISED = Explanation(
    code="GA303",
    name="scaler-every-micro-batch",
    summary="the AMP GradScaler refused a call: update() or unscale_() ran on a micro-batch without a step.",
    detail="The scaler is updated (or unscaled) every micro-batch while the optimizer steps every K; call "
    "scaler.unscale_/step/update once per window, under the gate.",
)
_GA101 = Explanation(
    code="GA101",
    name="zero-grad-every-micro-batch",
    summary="the accumulated gradient equals only the last micro-batch's share (1/K of its gradient).",
    detail="The gradients are zeroed on every micro-batch, erasing the K-1 earlier ones; zero them once "
    "per window, after the step.",
)
_GA106 = Explanation(
    code="GA106",
    name="off-by-one-boundary",
    summary="the first step comes after one micro-batch and every later window is shifted by one.",
    detail="A 0-based counter is tested with `i % K == 0`; test `(i + 1) % K == 0`.",
)


def _ga102(a: int, b: int) -> Explanation:
    return Explanation(
        code="GA102",
        name="step-every-micro-batch",
        summary=f"the accumulated run stepped {a} times, once per micro-batch, where the full-batch run stepped {b}.",
        detail="The optimizer steps on every micro-batch (or the function ignores K); step once per window, "
        "under the gate.",
    )


def _ga108(a: int, b: int) -> Explanation:
    return Explanation(
        code="GA108",
        name="accumulate-without-steps",
        summary=f"the accumulated run stepped {a} times, once per micro-batch, where the full-batch run stepped "
        f"{b}, inside accelerate's accumulate().",
        detail="`accelerator.accumulate()` syncs and steps on every micro-batch when the Accelerator was built "
        "without gradient_accumulation_steps; pass gradient_accumulation_steps=K.",
    )


def _ga404(a: int, b: int) -> Explanation:
    return Explanation(
        code="GA404",
        name="repeated-accumulate-context",
        summary=f"the accumulated run stepped {a} times where the full-batch run stepped {b}, and each micro-batch "
        "entered accumulate() twice.",
        detail="Each entry advances accelerate's micro-batch counter, so windows close after K/2 micro-batches; "
        "pass all models to one accumulate(model_a, model_b).",
    )


def _ga107(tail: int) -> Explanation:
    return Explanation(
        code="GA107",
        name="dropped-tail-window",
        summary=f"the last, partial window ({tail} micro-batch{'es' * (tail != 1)}) never reached an optimizer step.",
        detail="The gate never fires for a partial last window, so its gradients are lost or leak into the next "
        "epoch; add `or (i + 1) == len(loader)` to the gate. If dropping it is intended (drop_last), "
        "verify with --tail 0.",
    )


def _ga110(mismatch: Mismatch) -> Explanation:
    return Explanation(
        code="GA110",
        name="backward-outside-micro-loop",
        summary=f"step {mismatch.step} followed {mismatch.accumulated} backward call(s) where "
        f"{mismatch.expected} were due: the update holds one micro-batch's gradient.",
        detail="The backward follows the micro-step loop and only sees the last micro-batch's loss; run it "
        "inside the loop, once per micro-batch.",
    )


def _ga401(mismatch: Mismatch) -> Explanation:
    return Explanation(
        code="GA401",
        name="sync-every-micro-batch",
        summary=f"DDP all-reduced {mismatch.accumulated} times before step {mismatch.step}, where once per "
        "optimizer step is enough.",
        detail="Every micro-batch's backward synchronises the ranks: K times the traffic for the same "
        "gradients. Run non-boundary micro-batches under model.no_sync().",
    )


def _ga403(mismatch: Mismatch) -> Explanation:
    return Explanation(
        code="GA403",
        name="sync-control-misplaced",
        summary=f"DDP never all-reduced before step {mismatch.step}: the step applied each rank's own gradients.",
        detail="The boundary micro-batch also runs under no_sync (or the sync control comes after the forward); "
        "let the last micro-batch of each window synchronise.",
    )


def _ga301(mismatch: Mismatch) -> Explanation:
    return Explanation(
        code="GA301",
        name="scheduler-every-micro-batch",
        summary=f"the LR scheduler stepped {mismatch.accumulated} times before step {mismatch.step}, the full-batch "
        f"run {mismatch.full}.",
        detail="The schedule advances every micro-batch and runs K times too fast; step the scheduler under the "
        "gate, after the optimizer.",
    )


def _ga305(mismatch: Mismatch, scheduled: bool) -> Explanation:
    if scheduled:
        counted = "with the scheduler stepped as often in both."
        advice = ("The schedule's length is computed in micro-batches (len(loader)) while it steps once per "
                  "window; divide the length by K.")
    else:
        counted = "set by the loop itself, not by an LR scheduler."
        advice = ("The rate is computed from a count that differs between the runs (micro-batches, or a fraction "
                  "of the epoch in micro-batches); compute it from the optimizer steps taken, or from the "
                  "windows, so that it does not depend on K.")
    return Explanation(
        code="GA305",
        name="schedule-counts-micro-batches",
        summary=f"the learning rates differ at step {mismatch.step}: {_rates(mismatch.accumulated)} accumulated, "
        f"{_rates(mismatch.full)} full batch, {counted}",
        detail=advice,
    )


def _rates(values: object) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]" if isinstance(values, tuple) else str(values)


def _per_step(code: str, name: str, mismatch: Mismatch, what: str, detail: str) -> Explanation:
    return Explanation(
        code=code,
        name=name,
        summary=f"{what} ran {mismatch.accumulated} times before step {mismatch.step}, the full-batch run "
        f"{mismatch.full}.",
        detail=detail,
    )


def _scaling(code: str, name: str, ratio: float, expected: str, detail: str) -> Explanation:
    """GA201/GA204: the first accumulated gradient is a multiple of the full one."""
    summary = f"the accumulated gradient is {ratio:.4g} x the full-batch gradient ({expected})."
    return Explanation(code=code, name=name, summary=summary, detail=detail)
