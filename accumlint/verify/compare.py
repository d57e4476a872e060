"""Comparing the two runs: per-step gradients and final parameters.

Accumulating K micro-batches and backpropagating their concatenation add the
same terms in a different order, so the results agree only up to rounding:
the tolerance follows the dtype (float64 tight, float32 looser, half types
loose). An element passes when |a - b| <= atol + rtol * max|b| over its tensor.
Final parameters have passed through the optimizer, which may amplify
rounding (Adam divides by the root of the second moment, so a near-zero
gradient's rounding becomes an O(lr) update), so they get FINAL_LOOSENING
times the tolerance; the per-step gradients carry the tight check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from accumlint.verify.runs import RunRecord

Tensors = dict[str, Optional[torch.Tensor]]


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


_TOLERANCES = {
    torch.float64: Tolerance(rtol=1e-7, atol=1e-10),
    torch.float32: Tolerance(rtol=1e-4, atol=1e-6),
}
_HALF_TOLERANCE = Tolerance(rtol=2e-2, atol=1e-3)
FINAL_LOOSENING = 10.0


def tolerance_for(dtype: torch.dtype) -> Tolerance:
    """The tolerance for tensors of `dtype`."""
    return _TOLERANCES.get(dtype, _HALF_TOLERANCE)


@dataclass(frozen=True)
class Difference:
    """The worst parameter of a comparison and how far apart it is."""

    parameter: str
    max_abs_error: float
    max_rel_error: float
    within_tolerance: bool


@dataclass(frozen=True)
class StepDifference:
    step: int
    difference: Difference


@dataclass(frozen=True)
class Comparison:
    """Everything the verdict is made of."""

    steps_accumulated: int
    steps_full: int
    steps: tuple[StepDifference, ...]
    final: Optional[Difference]

    @property
    def same_step_count(self) -> bool:
        return self.steps_accumulated == self.steps_full

    @property
    def first_divergent_step(self) -> Optional[StepDifference]:
        return next((s for s in self.steps if not s.difference.within_tolerance), None)

    @property
    def equivalent(self) -> bool:
        return (
            self.same_step_count
            and self.first_divergent_step is None
            and (self.final is None or self.final.within_tolerance)
        )

    @property
    def worst(self) -> Optional[Difference]:
        """The first divergent step's worst parameter, else the final one's."""
        divergent = self.first_divergent_step
        if divergent is not None:
            return divergent.difference
        return self.final


def compare_runs(accumulated: RunRecord, full: RunRecord) -> Comparison:
    """Compare step by step (as far as both runs go) and the final parameters."""
    steps = tuple(
        StepDifference(index, compare_tensors(a.gradients, b.gradients))
        for index, (a, b) in enumerate(zip(accumulated.steps, full.steps))
    )
    final = compare_tensors(accumulated.final, full.final, FINAL_LOOSENING) if accumulated.final else None
    return Comparison(len(accumulated.steps), len(full.steps), steps, final)


def compare_tensors(actual: Tensors, expected: Tensors, loosening: float = 1.0) -> Difference:
    """The parameter furthest out of `loosening` times the dtype's tolerance
    (a missing gradient counts as zeros)."""
    worst: Optional[tuple[float, Difference]] = None
    for name in expected.keys() | actual.keys():
        a, b = actual.get(name), expected.get(name)
        if a is None and b is None:
            continue
        a = torch.zeros_like(b) if a is None else a
        b = torch.zeros_like(a) if b is None else b
        tolerance = tolerance_for(b.dtype)
        abs_error = float((a - b).abs().max()) if b.numel() else 0.0
        scale = float(b.abs().max()) if b.numel() else 0.0
        allowed = (tolerance.atol + tolerance.rtol * scale) * loosening
        difference = Difference(name, abs_error, abs_error / scale if scale else abs_error, abs_error <= allowed)
        excess = abs_error / allowed
        if worst is None or excess > worst[0]:
            worst = (excess, difference)
    return worst[1] if worst is not None else Difference("", 0.0, 0.0, True)
