"""Naming the likely mistake from the numbers when the runs differ.

Each known mistake leaves a signature in the recorded steps:
- no gradient at any step: zeroing between backward and step (GA104);
- K times as many steps as the full-batch run: a step every micro-batch (GA102);
- the full-batch run's first step sees no gradient while later ones do, or
  autograd finds the weights of a graph changed by a step before its backward:
  the backward runs after the step (GA103);
- first accumulated gradient = K x (GA201) or 1/K x (GA204) the full one;
- first accumulated gradient = 1/K of the window's *last* micro-batch
  gradient: zeroing every micro-batch (GA101);
- first accumulated gradient = 1/K of the *first* micro-batch gradient, and
  the next step's gradient is the full-batch gradient of a window shifted by
  one micro-batch: an off-by-one gate (GA106).
The last two need reference gradients at the step's starting parameters; a
`GradientOracle` computes them (by running the user's own function on the
chosen micro-batches with accumulation 1, so the loss is the user's).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from accumlint.verify.compare import Comparison
from accumlint.verify.report import Explanation
from accumlint.verify.runs import RunRecord, StepRecord, UserCodeError

# (parameters at the step, micro-batch indices) -> full-batch gradients, or None.
GradientOracle = Callable[[dict[str, torch.Tensor], list[int]], Optional[dict[str, torch.Tensor]]]

# How close a signature must be, relative to the reference's norm: loose
# enough for float32 rounding, far tighter than any real mistake.
MATCH = 1e-3


def diagnose(
    accumulated: RunRecord,
    full: RunRecord,
    comparison: Comparison,
    accum_steps: int,
    oracle: Optional[GradientOracle] = None,
) -> list[Explanation]:
    """The mistakes the numbers point at, most specific first (may be empty)."""
    k = accum_steps
    if not accumulated.steps or not full.steps:
        return []
    if not any(step.has_gradient() for step in accumulated.steps):
        return [_GA104]
    if not comparison.same_step_count:
        if comparison.steps_accumulated == k * comparison.steps_full:
            return [_ga102(comparison)]
        return []
    if _first_step_empty(full.steps):
        return [_GA103]
    first_a, first_b = accumulated.steps[0].gradients, full.steps[0].gradients
    ratio = _scalar_ratio(first_a, first_b)
    if ratio is not None and k > 1:
        if abs(ratio - k) <= MATCH * k:
            return [_scaling("GA201", "missing-loss-scaling", ratio, f"K = {k}",
                             "The loss is not divided by K before backward; backpropagate loss / K.")]
        if abs(ratio * k - 1) <= MATCH:
            return [_scaling("GA204", "double-loss-scaling", ratio, f"1/K = {1 / k:.4g}",
                             "The loss is divided by K twice (or by K on top of a framework's own 1/K); "
                             "divide once.")]
    if oracle is None or k == 1:
        return []
    return _from_references(accumulated.steps, k, oracle)


def diagnose_error(error: UserCodeError) -> Optional[Explanation]:
    """The mistake behind an error of the user's code, when it has a signature:
    autograd refusing a graph whose weights an optimizer step already changed
    in place is a backward running after the step (GA103)."""
    if error.steps_before > 0 and "modified by an inplace operation" in str(error.error):
        return _GA103
    return None


def _from_references(steps: list[StepRecord], k: int, oracle: GradientOracle) -> list[Explanation]:
    first = steps[0]
    scaled = {name: g * k for name, g in _dense(first.gradients).items()}
    last_share = oracle(first.parameters, [k - 1])
    if last_share is not None and _close(scaled, last_share):
        return [_GA101]
    first_share = oracle(first.parameters, [0])
    if first_share is not None and _close(scaled, first_share):
        if len(steps) < 2:
            return [_GA106]
        shifted = oracle(steps[1].parameters, list(range(1, k + 1)))
        if shifted is not None and _close(_dense(steps[1].gradients), shifted):
            return [_GA106]
    return []


def _first_step_empty(steps: list[StepRecord]) -> bool:
    return not steps[0].has_gradient() and any(step.has_gradient() for step in steps[1:])


def _dense(gradients: dict[str, Optional[torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {name: g for name, g in gradients.items() if g is not None}


def _flat(gradients: dict[str, Optional[torch.Tensor]], names: list[str]) -> torch.Tensor:
    parts = [gradients[name].double().flatten() for name in names if gradients.get(name) is not None]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _scalar_ratio(actual: dict, expected: dict) -> Optional[float]:
    """The scalar r with actual ≈ r * expected, or None when no scalar fits."""
    names = sorted(name for name in actual if actual[name] is not None and expected.get(name) is not None)
    a, b = _flat(actual, names), _flat(expected, names)
    denominator = float(b @ b)
    if not names or denominator == 0.0:
        return None
    ratio = float(a @ b) / denominator
    if float((a - ratio * b).norm()) > MATCH * float(a.norm()):
        return None
    return ratio


def _close(actual: dict, expected: dict) -> bool:
    names = sorted(set(actual) | set(expected))
    if any(actual.get(name) is None or expected.get(name) is None for name in names):
        return False
    a, b = _flat(actual, names), _flat(expected, names)
    return float((a - b).norm()) <= MATCH * max(float(b.norm()), 1e-30)


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


def _ga102(comparison: Comparison) -> Explanation:
    return Explanation(
        code="GA102",
        name="step-every-micro-batch",
        summary=f"the accumulated run stepped {comparison.steps_accumulated} times, K times the full-batch "
        f"run's {comparison.steps_full}.",
        detail="The optimizer steps on every micro-batch; step once per window, under the gate.",
    )


def _scaling(code: str, name: str, ratio: float, expected: str, detail: str) -> Explanation:
    """GA201/GA204: the first accumulated gradient is a multiple of the full one."""
    summary = f"the accumulated gradient is {ratio:.4g} x the full-batch gradient ({expected})."
    return Explanation(code=code, name=name, summary=summary, detail=detail)
