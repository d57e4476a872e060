"""Naming the likely mistake from the numbers when the runs differ.

Each known mistake leaves a signature in the recorded steps, checked most
specific first:
- no gradient at any step: zeroing between backward and step (GA104);
- step counts, per optimizer: K times as many (a step every micro-batch,
  GA102; GA108 when accelerate's `accumulate()` ran without its own K), twice
  as many with two `accumulate()` entries per micro-batch (GA404), one fewer
  with a partial last window fed (the tail never stepped, GA107);
- the full-batch run's first step sees no gradient while later ones do, or
  autograd finds the weights changed by a step before its backward: the
  backward runs after the step (GA103);
- one backward per window where K are due: the backward follows the
  micro-step loop and sees the last loss only (GA110); one backward and one
  micro-batch per step is no accumulation at all (its own explanation);
- the first differing step's accumulated gradient = K x (GA201) or 1/K x
  (GA204; 1/P under DDP with P processes: divided by the world size on top
  of DDP's mean) the full one, before clipping (the clip is undone with the
  run's own threshold and pre-clip norm);
- first accumulated gradient = 1/K of the window's *last* micro-batch
  gradient (zeroing every micro-batch, GA101) or of the *first* one with the
  next window shifted by one micro-batch (off-by-one gate, GA106), from
  reference steps computed by the oracle at the step's weights, clipping
  undone on both sides;
- per-step evidence: all-reduces per step (K: GA401; none: GA403), scheduler
  steps (GA301), learning rates that run K times ahead (set by hand every
  micro-batch: GA301) or otherwise differ (GA305), clipping calls (GA302),
  scaler calls (GA303).
A gradient signature is the primary cause and comes first; evidence of a
learning rate, a schedule or a sync never hides it.
Against the textbook reference (see `reference`): both runs' gradients 2 x
or 1/2 x the textbook's, a divisor K/2 or 2K where K is due (GA205). From a
step's own numbers: a clip that ran on gradients still multiplied by the
GradScaler's scale, and clipped (GA304).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from accumlint.verify.compare import (
    ALLREDUCE,
    LEARNING_RATE,
    PRE_CLIP_NORM,
    Comparison,
    Mismatch,
)
from accumlint.verify.instruments import (
    ACCUMULATE,
    BACKWARD,
    BACKWARD_AFTER_SYNC,
    CLIP,
    SCALER_UNSCALE,
    SCALER_UPDATE,
    SCHEDULER,
)
from accumlint.verify.reference import Held
from accumlint.verify.report import Explanation
from accumlint.verify.runs import RunRecord, StepRecord, UserCodeError

# (model state, micro-batch indices, parameter names) -> the user's function's
# step at K=1 on those micro-batches from that state (gradients, clip), or None.
StepOracle = Callable[[dict[str, torch.Tensor], list[int], frozenset], Optional[StepRecord]]
# n -> the learning rates at each step of the user's function at K=1 over the
# first n micro-batches (the full run is too short to show where a rate set
# every micro-batch has got to after K of them), or None. Trusted only where
# it agrees with the full run's own rates (see `_stands_in`).
RateProbe = Callable[[int], Optional[list[tuple[float, ...]]]]

# How close a signature must be, relative to the reference's norm: loose
# enough for float32 rounding, far tighter than any real mistake; widened for
# half-precision compute.
MATCH = 1e-3


def diagnose(
    accumulated: RunRecord,
    full: RunRecord,
    comparison: Comparison,
    accum_steps: int,
    oracle: Optional[StepOracle] = None,
    *,
    tail: int = 0,
    nproc: int = 1,
    rates: Optional[RateProbe] = None,
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
        counted = _step_count(accumulated, full, comparison, k, tail)
        if counted is not None and counted.code != "GA107":
            return [counted]
        if abs(comparison.steps_accumulated - comparison.steps_full) != 1:
            return []
        # One step more or fewer (a missing tail, shifted windows): the aligned
        # steps carry the signature.
        dropped = [counted] if counted is not None else []
    primary, secondary = _aligned(accumulated, full, comparison, k, oracle, nproc, match, rates)
    # A gradient signature is wrong at every step; a dropped tail only at the last.
    return primary + dropped + [e for e in secondary if e.code not in {d.code for d in dropped}]


def _aligned(
    accumulated: RunRecord,
    full: RunRecord,
    comparison: Comparison,
    k: int,
    oracle: Optional[StepOracle],
    nproc: int,
    match: float,
    rates: Optional[RateProbe] = None,
) -> tuple[list[Explanation], list[Explanation]]:
    """Signatures of runs whose steps pair up: the gradient's (the primary
    cause), and apart from it the evidence's (learning rate, schedule, sync)."""
    if _first_step_empty(full.steps):
        return [_GA103], []
    mismatches = {m.kind: m for m in comparison.mismatches}
    backward = mismatches.get(BACKWARD)
    if backward is not None and comparison.one_backward_per_step:
        return [_no_accumulation(accumulated, k) or _ga110(backward)], []
    primary: list[Explanation] = []
    pair = comparison.first_failure or (accumulated.steps[0], full.steps[0])
    pre_clip = mismatches.get(PRE_CLIP_NORM)
    if comparison.first_divergent_step is None and pre_clip is not None:
        # The clipped gradients matched: the clip hid a scale the pre-clip norms show.
        scaling = _named_ratio(pre_clip.accumulated / pre_clip.full, k, nproc, match) if pre_clip.full else None
        primary.extend([scaling] if scaling is not None else [])
    elif comparison.first_divergent_step is not None:
        scaling = _scaling_signature(*pair, k, nproc, match)
        if scaling is not None:
            primary.append(scaling)
        elif oracle is not None:
            found = _from_references(accumulated.steps, k, oracle, match)
            failing = comparison.first_failure[0] if comparison.first_failure is not None else None
            if not found and failing is not None and failing.index > 0 and failing.state:
                found = _at_failing_step(failing, k, oracle, match)
            primary.extend(found)
    secondary = _from_evidence(mismatches, k, accumulated, full, rates)
    return primary, [e for e in secondary if e.code not in {p.code for p in primary}]


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


def _step_count(
    accumulated: RunRecord, full: RunRecord, comparison: Comparison, k: int, tail: int
) -> Optional[Explanation]:
    a, b = comparison.steps_accumulated, comparison.steps_full
    entries = sum(step.events.get(ACCUMULATE, 0) for step in accumulated.steps)
    backwards = sum(step.events.get(BACKWARD, 0) for step in accumulated.steps)
    if k > 1 and (a == k * b or (tail and a == comparison.used and b > 1)):
        return _ga108(a, b) if entries else _ga102(a, b)
    optimizers = sorted({step.optimizer for step in (*accumulated.steps, *full.steps)})
    if len(optimizers) > 1 and k > 1:
        for index in optimizers:
            a_i = sum(step.optimizer == index for step in accumulated.steps)
            b_i = sum(step.optimizer == index for step in full.steps)
            if b_i and (a_i == k * b_i or (tail and a_i == comparison.used and b_i > 1)):
                which = f"optimizer {index + 1} of {len(optimizers)}"
                return _ga108(a_i, b_i, which) if entries else _ga102(a_i, b_i, which)
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
    # Clipping scales each run's gradient by its own coefficient: undo both.
    ratio *= _clip_coefficient(first_b) / _clip_coefficient(first_a)
    return _named_ratio(ratio, k, nproc, match)


def _named_ratio(ratio: float, k: int, nproc: int, match: float) -> Optional[Explanation]:
    """GA201/GA204 when the accumulated gradient is K x or 1/K x (1/P) the full one."""
    if abs(ratio - k) <= match * k:
        return _scaling("GA201", ratio, f"K = {k}",
                        "The loss is not divided by K before backward; backpropagate loss / K.")
    if abs(ratio * k - 1) <= match:
        return _scaling("GA204", ratio, f"1/K = {1 / k:.4g}",
                        "The loss is divided by K twice (or by K on top of a framework's own 1/K); divide once.")
    if nproc > 1 and abs(ratio * nproc - 1) <= match:
        return _scaling("GA204", ratio, f"1/P = {1 / nproc:.4g} for P = {nproc} processes",
                        "The loss is divided by the world size although DDP already averages the ranks' "
                        "gradients; do not divide by the world size.")
    return None


def _scheduler_steps(record: RunRecord) -> bool:
    """Whether the run stepped an LR scheduler (its schedule counts steps)."""
    return any(step.events.get(SCHEDULER) for step in record.steps) or bool(record.trailing_events.get(SCHEDULER))


def _clip_coefficient(step: StepRecord) -> float:
    """What the run's clip multiplied the gradient by (1 without a norm clip):
    torch's min(1, max_norm / (norm + 1e-6)) from the run's own numbers."""
    if step.clip_norm is None or step.max_norm is None or step.max_norm <= 0:
        return 1.0
    return min(1.0, step.max_norm / (step.clip_norm + 1e-6))


def _unclipped(step: StepRecord) -> dict[str, torch.Tensor]:
    coefficient = _clip_coefficient(step)
    gradients = _dense(step.gradients)
    return gradients if coefficient == 1.0 else {name: g / coefficient for name, g in gradients.items()}


def _from_evidence(
    mismatches: dict[str, Mismatch], k: int, accumulated: RunRecord, full: RunRecord, rates: Optional[RateProbe] = None
) -> list[Explanation]:
    found = []
    allreduce = mismatches.get(ALLREDUCE)
    if allreduce is not None:
        found.append(_ga401(allreduce) if allreduce.accumulated > 1 else _ga403(allreduce))
    elif BACKWARD_AFTER_SYNC in mismatches:
        late = mismatches[BACKWARD_AFTER_SYNC]
        found.append(Explanation.of_rule(
            "GA403",
            f"DDP all-reduced before the window's last backward at step {late.step}: {late.accumulated} "
            "micro-batch(es) after the sync stayed on their own rank.",
            "The sync control is toggled on the wrong micro-batch: run every micro-batch but the last of "
            "each window under model.no_sync(), and let the last one synchronise.",
        ))
    scheduler = mismatches.get(SCHEDULER)
    if scheduler is not None:
        found.append(_ga301(scheduler))
    elif LEARNING_RATE in mismatches:
        full_rates = [step.lrs for step in full.steps]
        ahead = _rate_runs_ahead(accumulated.steps, full_rates, k)
        if ahead is None and rates is not None and len(full.steps) < len(accumulated.steps) * k:
            longer = rates(len(accumulated.steps) * k)
            ahead = _rate_runs_ahead(accumulated.steps, longer, k) if _stands_in(longer, full_rates) else None
        scheduled = _scheduler_steps(accumulated)
        found.append(_ga301_by_hand(*ahead) if ahead is not None else _ga305(mismatches[LEARNING_RATE], scheduled))
    if CLIP in mismatches:
        found.append(_per_step("GA302", mismatches[CLIP], "gradient clipping",
                               "Clipping runs on partial gradients every micro-batch; clip once per window, "
                               "under the gate, before the step."))
    scaler = mismatches.get(SCALER_UPDATE) or mismatches.get(SCALER_UNSCALE)
    if scaler is not None:
        found.append(_per_step("GA303", scaler, f"GradScaler.{scaler.kind.split('.')[1]}()",
                               "The AMP scaler is updated every micro-batch; call it once per window, under "
                               "the gate."))
    return found


def _rate_runs_ahead(a_steps: list[StepRecord], k1_rates: list[tuple[float, ...]], k: int) -> Optional[tuple[int, int]]:
    """(step, K=1 step) when run A's learning rate at each step is a K=1 run's
    K times further on (`lr = f(micro-batch index)` set by hand every
    micro-batch): the last micro-batch of window s is index (s+1)K - 1.
    None unless some such rate differs from the K=1 run's at the same step."""
    pairs = [(s, (s + 1) * k - 1) for s in range(len(a_steps)) if (s + 1) * k - 1 < len(k1_rates)]
    if not pairs or not all(_same_rates(a_steps[s].lrs, k1_rates[j]) for s, j in pairs):
        return None
    telling = [(s, j) for s, j in pairs if not _same_rates(k1_rates[s], k1_rates[j])]
    return (telling[0][0] + 1, telling[0][1] + 1) if telling else None


def _stands_in(rerun: Optional[list[tuple[float, ...]]], full_rates: list[tuple[float, ...]]) -> bool:
    """Whether the K=1 rerun over the micro-batches shows the full run's rates
    at the steps both took, so that it may stand in for the full run further
    on. A rate computed from the loader's length (a fraction of the epoch)
    differs there: the rerun's loader holds K times the full run's batches."""
    return bool(rerun) and all(_same_rates(a, b) for a, b in zip(rerun, full_rates))


def _same_rates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(abs(x), abs(y), 1e-12) for x, y in zip(a, b))


def _no_accumulation(accumulated: RunRecord, k: int) -> Optional[Explanation]:
    """One backward per step where K are due and, by the loader's count, about
    one micro-batch per step: the loop does not accumulate at all (GA110's
    loop pulls K micro-batches per step and backpropagates only the last)."""
    steps = accumulated.steps
    if len(steps) < 2 or not steps[-1].consumed:
        return None
    per_step = (steps[-1].consumed - steps[0].consumed) / (len(steps) - 1)
    if per_step > 1.5 or k < 2:
        return None
    return Explanation(
        summary=f"the loop does not accumulate: each of its {len(steps)} optimizer steps took one micro-batch "
        f"and one backward, where K = {k} of each were due.",
        detail="The function runs one micro-batch per update whatever K is (an update-driven loop that pulls "
        "a single batch per step, or a K that reaches no loop). Pull K micro-batches per update, "
        "backpropagate each loss / K, then step.",
        name="no-accumulation",
    )


def _from_references(steps: list[StepRecord], k: int, oracle: StepOracle, match: float) -> list[Explanation]:
    """GA101/GA106 from the user's own function at K=1 on single micro-batches,
    at the step's weights; each side's clip is undone with its own numbers."""
    first = steps[0]
    if not first.gradients or k == 1:
        return []
    names = frozenset(name for name, g in first.gradients.items() if g is not None)
    scaled = {name: g * k for name, g in _unclipped(first).items()}
    last_share = oracle(first.state, [k - 1], names)
    if last_share is not None and _close(scaled, _unclipped(last_share), match):
        return [_GA101]
    first_share = oracle(first.state, [0], names)
    if first_share is not None and _close(scaled, _unclipped(first_share), match):
        if len(steps) < 2 or not steps[1].gradients:
            return [_GA106]
        shifted = oracle(steps[1].state, list(range(1, k + 1)), names)
        if shifted is not None and _close(_unclipped(steps[1]), _unclipped(shifted), match):
            return [_GA106]
    return []


def clip_before_unscale(steps: list[StepRecord]) -> Optional[Explanation]:
    """GA304 from a step's own numbers: its clip ran on gradients the GradScaler
    had multiplied by its scale S > 1 and not yet divided (the order of the
    calls says so), and it clipped (pre-clip norm above max_norm), so the update
    shrank by min(1, max_norm / norm) where the unscaled gradients called for
    min(1, max_norm * S / norm)."""
    for step in steps:
        scale, norm, max_norm = step.scale_at_clip, step.clip_norm, step.max_norm
        if scale is None or norm is None or max_norm is None or scale <= 1 or norm <= max_norm:
            continue
        applied, due = max_norm / (norm + 1e-6), min(1.0, max_norm * scale / norm)
        return Explanation.of_rule(
            "GA304",
            f"at step {step.index + 1} the clip saw a pre-clip norm of {norm:.6g}, the gradients still multiplied "
            f"by the GradScaler's scale {scale:.6g} (their own norm {norm / scale:.4g}): it scaled the update by "
            f"{applied:.3g} where clipping the unscaled gradients to max_norm {max_norm:g} scales it by {due:.3g}.",
            "Clipping before unscale_ compares the threshold with scaled gradients; call "
            "scaler.unscale_(optimizer) before clip_grad_norm_.",
        )
    return None


def _at_failing_step(step: StepRecord, k: int, oracle: StepOracle, match: float) -> list[Explanation]:
    """GA101/GA106 from the first step that failed, when an earlier one passed
    (a tight clip or a loose tolerance can hide the first window): window s
    is micro-batches sK..sK+K-1; zeroing every micro-batch leaves 1/K of its
    last, an off-by-one gate steps on (s-1)K+1..sK."""
    s, names = step.index, frozenset(name for name, g in step.gradients.items() if g is not None)
    if not names:
        return []
    last = oracle(step.state, [s * k + k - 1], names)
    if last is not None and _close({n: g * k for n, g in _unclipped(step).items()}, _unclipped(last), match):
        return [_GA101]
    shifted = oracle(step.state, list(range(s * k - k + 1, s * k + 1)), names)
    if shifted is not None and _close(_unclipped(step), _unclipped(shifted), match):
        return [_GA106]
    return []


def from_reference(held_a: Held, held_b: Held, k: int, match: float) -> list[Explanation]:
    """What both runs share against the textbook loop, where the numbers show it."""
    found = []
    a, b = held_a.factor, held_b.factor
    if a is not None and b is not None and abs(a - b) <= match * max(abs(a), abs(b)):
        divisor = next((text for value, text in _k_divisors(k) if abs(b - value) <= match * value), None)
        if divisor is not None:
            found.append(Explanation.of_rule(
                "GA205",
                f"both runs' gradients are {b:.4g} x the textbook loop's, at K={k} and at K=1 alike: the loss is "
                f"divided by {divisor} where K is due.",
                "The divisor is not K, so every update is scaled by the same wrong factor; divide each "
                "micro-batch's loss by K exactly (a deliberate loss weight belongs in the loss function).",
            ))
    return found


def _k_divisors(k: int) -> list[tuple[float, str]]:
    """(factor, divisor) for the wrong divisors of K that scale both runs alike:
    K/2 doubles every gradient at every K, 2K halves it. Only these: any other
    constant may be a deliberate loss weight (and K - 1 or K + 1 change with K,
    which the two runs' comparison sees)."""
    return [(2.0, "K/2"), (0.5, "2K")]


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


_GA104 = Explanation.of_rule(
    "GA104",
    summary="no gradient reached any optimizer step.",
    detail="The gradients are zeroed between the backward and the step, so every step applies zeros; "
    "zero them after the step.",
)
_GA103 = Explanation.of_rule(
    "GA103",
    summary="a micro-batch's backward runs after the optimizer step of its window.",
    detail="The backward runs after the step and zeroing, so each micro-batch lands in the next window "
    "and the last one is lost; run the backward before the gate.",
)
_GA303_RAISED = Explanation.of_rule(
    "GA303",
    summary="the AMP GradScaler refused a call: update() or unscale_() ran on a micro-batch without a step.",
    detail="The scaler is updated (or unscaled) every micro-batch while the optimizer steps every K; call "
    "scaler.unscale_/step/update once per window, under the gate.",
)
_GA101 = Explanation.of_rule(
    "GA101",
    summary="the accumulated gradient equals only the last micro-batch's share (1/K of its gradient).",
    detail="The gradients are zeroed on every micro-batch, erasing the K-1 earlier ones; zero them once "
    "per window, after the step.",
)
_GA106 = Explanation.of_rule(
    "GA106",
    summary="the first step comes after one micro-batch and every later window is shifted by one.",
    detail="A 0-based counter is tested with `i % K == 0`; test `(i + 1) % K == 0`.",
)


def _ga102(a: int, b: int, which: str = "") -> Explanation:
    whose = f" {which}" if which else ""
    return Explanation.of_rule(
        "GA102",
        summary=f"the accumulated run stepped{whose} {a} times, once per micro-batch, where the full-batch run "
        f"stepped it {b}.",
        detail="The optimizer steps on every micro-batch (or the function ignores K); step once per window, "
        "under the gate.",
    )


def _ga108(a: int, b: int, which: str = "") -> Explanation:
    whose = f" {which}" if which else ""
    return Explanation.of_rule(
        "GA108",
        summary=f"the accumulated run stepped{whose} {a} times, once per micro-batch, where the full-batch run "
        f"stepped it {b}, inside accelerate's accumulate().",
        detail="`accelerator.accumulate()` syncs and steps on every micro-batch when the Accelerator was built "
        "without gradient_accumulation_steps; pass gradient_accumulation_steps=K.",
    )


def _ga404(a: int, b: int) -> Explanation:
    return Explanation.of_rule(
        "GA404",
        summary=f"the accumulated run stepped {a} times where the full-batch run stepped {b}, and each micro-batch "
        "entered accumulate() twice.",
        detail="Each entry advances accelerate's micro-batch counter, so windows close after K/2 micro-batches; "
        "pass all models to one accumulate(model_a, model_b).",
    )


def _ga107(tail: int) -> Explanation:
    return Explanation.of_rule(
        "GA107",
        summary=f"the last, partial window ({tail} micro-batch{'es' * (tail != 1)}) never reached an optimizer step.",
        detail="The gate never fires for a partial last window, so its gradients are lost or leak into the next "
        "epoch; add `or (i + 1) == len(loader)` to the gate. If dropping it is intended (drop_last), "
        "verify with --tail 0.",
    )


def _ga110(mismatch: Mismatch) -> Explanation:
    return Explanation.of_rule(
        "GA110",
        summary=f"step {mismatch.step} followed {mismatch.accumulated} backward call(s) where "
        f"{mismatch.expected} were due: the update holds one micro-batch's gradient.",
        detail="The backward follows the micro-step loop and only sees the last micro-batch's loss; run it "
        "inside the loop, once per micro-batch.",
    )


def _ga401(mismatch: Mismatch) -> Explanation:
    return Explanation.of_rule(
        "GA401",
        summary=f"DDP all-reduced {mismatch.accumulated} times before step {mismatch.step}, where once per "
        "optimizer step is enough.",
        detail="Every micro-batch's backward synchronises the ranks: K times the traffic for the same "
        "gradients. Run non-boundary micro-batches under model.no_sync().",
    )


def _ga403(mismatch: Mismatch) -> Explanation:
    return Explanation.of_rule(
        "GA403",
        summary=f"DDP never all-reduced before step {mismatch.step}: the step applied each rank's own gradients.",
        detail="The boundary micro-batch also runs under no_sync (or the sync control comes after the forward); "
        "let the last micro-batch of each window synchronise.",
    )


def _ga301(mismatch: Mismatch) -> Explanation:
    return Explanation.of_rule(
        "GA301",
        summary=f"the LR scheduler stepped {mismatch.accumulated} times before step {mismatch.step}, the full-batch "
        f"run {mismatch.full}.",
        detail="The schedule advances every micro-batch and runs K times too fast; step the scheduler under the "
        "gate, after the optimizer.",
    )


def _ga301_by_hand(step: int, full_step: int) -> Explanation:
    return Explanation.of_rule(
        "GA301",
        f"the learning rate at step {step} is the one a K=1 run has at its step {full_step}: it advances every "
        "micro-batch, K times too fast.",
        "The rate is set from a counter of micro-batches; compute it from the number of optimizer steps, "
        "under the gate.",
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
    return Explanation.of_rule(
        "GA305",
        summary=f"the learning rates differ at step {mismatch.step}: {_rates(mismatch.accumulated)} accumulated, "
        f"{_rates(mismatch.full)} full batch, {counted}",
        detail=advice,
    )


def _rates(values: object) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]" if isinstance(values, tuple) else str(values)


def _per_step(code: str, mismatch: Mismatch, what: str, detail: str) -> Explanation:
    return Explanation.of_rule(
        code,
        summary=f"{what} ran {mismatch.accumulated} times before step {mismatch.step}, the full-batch run "
        f"{mismatch.full}.",
        detail=detail,
    )


def _scaling(code: str, ratio: float, expected: str, detail: str) -> Explanation:
    """GA201/GA204: the first accumulated gradient is a multiple of the full one."""
    summary = f"the accumulated gradient is {ratio:.4g} x the full-batch gradient ({expected})."
    return Explanation.of_rule(code, summary=summary, detail=detail)
