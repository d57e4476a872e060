"""Comparing the two runs step by step: gradients, learning rates and the work done per step.

Accumulating K micro-batches and backpropagating their concatenation add the
same terms in a different order, so gradients agree only up to rounding: the
tolerance follows the *compute* dtype (the loosest of the parameters' dtype
and the dtype the model's layers produced, so autocast bf16/fp16 counts), or
the user's `rtol`/`atol`. An element passes when |a - b| <= atol + rtol * max|b|
over its tensor.

From the second step on, the runs' weights may differ by amplified rounding
(Adam turns the rounding of a near-zero gradient into an O(lr) update). A
step whose gradient misses is then re-judged against the full-batch gradient
*at the accumulated run's own weights* (the oracle runs the user's function
once on the window's concatenation), so rounding never becomes a failure and
a real mistake still is one. For the same reason the final parameters are
reported relative to the size of the updates and are not part of the
verdict when every step matched.

The last window may be partial (r < K micro-batches, compared with one batch
of r micro-batches): a loop that divides by K there steps with r/K of the
full gradient. That is accepted and said, not failed.

Each step also compares the learning rate of every param group and the
events since the previous step: clipping, scaler and scheduler calls must be
the same in both runs, backward calls (and accelerate `accumulate()` entries)
the window's size times the full run's, under DDP exactly one all-reduce per
step, and the pre-clip gradient norm of a full window the same in both runs
(clipping hides a wrong gradient scale when both runs' gradients exceed the
threshold). The first steps' gradients are kept in brief (`reference.Fingerprint`)
to hold against the textbook loop, and the first failing pair of steps in
full, for the diagnosis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Optional

import torch

from accumlint.verify.instruments import (
    ACCUMULATE,
    ALLREDUCE,
    BACKWARD,
    BACKWARD_AFTER_SYNC,
    CLIP,
    SCALER_UNSCALE,
    SCALER_UPDATE,
    SCHEDULER,
)
from accumlint.verify.reference import Fingerprint, fingerprint
from accumlint.verify.runs import RunRecord, StepRecord

Tensors = dict[str, Optional[torch.Tensor]]
LEARNING_RATE = "learning rate"
PRE_CLIP_NORM = "pre-clip gradient norm"
SAME_COUNT_EVENTS = (CLIP, SCALER_UPDATE, SCALER_UNSCALE, SCHEDULER)
PER_MICRO_BATCH_EVENTS = (BACKWARD, ACCUMULATE)


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


_TOLERANCES = {
    torch.float64: Tolerance(rtol=1e-7, atol=1e-10),
    torch.float32: Tolerance(rtol=1e-4, atol=1e-6),
    torch.float16: Tolerance(rtol=1e-2, atol=1e-3),
    torch.bfloat16: Tolerance(rtol=5e-2, atol=1e-2),
}
_UNKNOWN = Tolerance(rtol=5e-2, atol=1e-2)


def tolerance_for(*dtypes: torch.dtype) -> Tolerance:
    """The loosest tolerance among `dtypes` (floating-point ones)."""
    chosen = [_TOLERANCES.get(d, _UNKNOWN) for d in dtypes if d.is_floating_point]
    if not chosen:
        return _TOLERANCES[torch.float32]
    return Tolerance(max(t.rtol for t in chosen), max(t.atol for t in chosen))


@dataclass(frozen=True)
class Difference:
    """The worst parameter of a comparison and how far apart it is."""

    parameter: str
    max_abs_error: float
    max_rel_error: float
    within_tolerance: bool


@dataclass(frozen=True)
class StepDifference:
    """One step's gradient comparison; `judged` says against what it passed
    ("full batch", "full batch at the accumulated weights", "partial window at r/K")."""

    step: int
    difference: Difference
    judged: str = "full batch"


@dataclass(frozen=True)
class Mismatch:
    """Evidence that differs at a step (1-based) although it must not."""

    step: int
    kind: str
    accumulated: object
    full: object
    expected: object = None


@dataclass
class Comparison:
    """Everything the verdict is made of."""

    steps_accumulated: int
    steps_full: int
    steps: list[StepDifference]
    mismatches: list[Mismatch]
    final: Optional[Difference]
    tolerance: Tolerance
    fed: int = 0
    used: int = 0
    partial_window_scaled: Optional[float] = None
    one_backward_per_step: bool = False
    # The first steps' gradients in brief (run A's, run B's), and the first pair
    # of steps whose gradients differ (run A's with its weights, run B's gradients only).
    first_steps: Optional[tuple[Fingerprint, Fingerprint]] = None
    first_failure: Optional[tuple[StepRecord, StepRecord]] = None

    @property
    def same_step_count(self) -> bool:
        return self.steps_accumulated == self.steps_full

    @property
    def first_divergent_step(self) -> Optional[StepDifference]:
        return next((s for s in self.steps if not s.difference.within_tolerance), None)

    @property
    def equivalent(self) -> bool:
        return (
            self.used > 0
            and self.same_step_count
            and self.first_divergent_step is None
            and not self.mismatches
        )

    @property
    def worst(self) -> Optional[Difference]:
        """The first divergent step's worst parameter, else the final one's."""
        divergent = self.first_divergent_step
        return divergent.difference if divergent is not None else self.final


# (model state, micro-batch indices, parameter names) -> full-batch gradients there, or None.
GradientOracle = Callable[[dict[str, torch.Tensor], list[int], frozenset], Optional[dict[str, torch.Tensor]]]


class StepComparer:
    """Called with each pair of steps as the runs reach them (lockstep), and
    builds the Comparison. `windows` full windows of `accum_steps` micro-batches
    and a partial one of `tail` were fed; `compute_dtypes()` returns the dtypes
    seen so far; `expected_allreduces` is 1 under DDP, None otherwise."""

    def __init__(
        self,
        accum_steps: int,
        windows: int,
        tail: int,
        compute_dtypes: Callable[[], Iterable[torch.dtype]],
        override: Optional[Tolerance] = None,
        oracle: Optional[GradientOracle] = None,
        expected_allreduces: Optional[int] = None,
    ) -> None:
        self.k, self.windows, self.tail = accum_steps, windows, tail
        self.compute_dtypes = compute_dtypes
        self.override = override
        self.oracle = oracle
        self.expected_allreduces = expected_allreduces
        self.tolerance: Optional[Tolerance] = override
        self.steps: list[StepDifference] = []
        self.mismatches: list[Mismatch] = []
        self.partial_window_scaled: Optional[float] = None
        self.first_steps: Optional[tuple[Fingerprint, Fingerprint]] = None
        self.first_failure: Optional[tuple[StepRecord, StepRecord]] = None
        self._seen_kinds: set[str] = set()
        self._failed = False
        self._backward_steps = 0
        self._single_backward_steps = 0
        self._optimizers: set[int] = set()

    @property
    def failed(self) -> bool:
        """Whether a step's gradients have failed so far."""
        return self._failed

    # --- one step -------------------------------------------------------------

    def __call__(self, a: StepRecord, b: StepRecord) -> None:
        if self.tolerance is None:
            self.tolerance = tolerance_for(*self.compute_dtypes(), *_dtypes(b.gradients))
        window = self._window_of(b)
        size = len(window)
        fraction = size / self.k if size < self.k else None
        difference, judged = self._judge(a.gradients, b.gradients, fraction)
        if not difference.within_tolerance and not self._failed and self.oracle is not None:
            if not _same_state(a.state, b.state):
                reference = self.oracle(a.state, window, frozenset(n for n, g in a.gradients.items() if g is not None))
                if reference is not None:
                    rejudged, how = self._judge(a.gradients, reference, fraction)
                    if rejudged.within_tolerance:
                        difference, judged = rejudged, f"{how} at the accumulated run's weights"
        if a.index == 0:
            self.first_steps = (fingerprint(a.gradients), fingerprint(b.gradients))
        if not difference.within_tolerance and not self._failed:
            self.first_failure = (a.kept(), replace(b, state={}).kept())
        self._failed |= not difference.within_tolerance
        self.steps.append(StepDifference(a.index, difference, judged))
        self._compare_evidence(a, b, size)

    def _window_of(self, b: StepRecord) -> list[int]:
        """Indices of the micro-batches whose concatenation run B's step used.

        The full-batch run steps once per batch, so its step index is the batch
        it used, unless it stepped more often than it took batches (then the
        count says which); the count alone would mislead with a loader that
        prefetches (accelerate's prepared loader, Lightning's fetcher): it runs
        one batch ahead of the batch in use. Later epochs start over."""
        batches = self.windows + (1 if self.tail else 0)
        batch = min(b.consumed - 1, b.index) if b.consumed > 0 else b.index
        batch %= max(batches, 1)
        start = batch * self.k
        end = min(start + self.k, self.windows * self.k + self.tail)
        return list(range(start, max(end, start + 1)))

    def _judge(self, actual: Tensors, expected: Tensors, fraction: Optional[float]) -> tuple[Difference, str]:
        """Against `expected`; for a partial window also against any multiple
        of it between r/K (the loss divided by K over r micro-batches) and 1
        (clipping the smaller gradient less)."""
        assert self.tolerance is not None
        difference = compare_tensors(actual, expected, self.tolerance)
        if difference.within_tolerance or fraction is None:
            return difference, "full batch"
        ratio = scalar_ratio(actual, expected)
        if ratio is None or not fraction - self.tolerance.rtol <= ratio <= 1 + self.tolerance.rtol:
            return difference, "full batch"
        scaled = compare_tensors(actual, expected, self.tolerance, scale=ratio)
        if scaled.within_tolerance:
            self.partial_window_scaled = ratio
            return scaled, f"partial window at {ratio:.4g} x"
        return difference, "full batch"

    def _compare_evidence(self, a: StepRecord, b: StepRecord, size: int) -> None:
        step = a.index + 1
        self._optimizers |= {a.optimizer, b.optimizer}
        if not _same_numbers(a.lrs, b.lrs):
            self._note(Mismatch(step, LEARNING_RATE, a.lrs, b.lrs))
        for kind in SAME_COUNT_EVENTS:
            if a.events.get(kind, 0) != b.events.get(kind, 0):
                self._note(Mismatch(step, kind, a.events.get(kind, 0), b.events.get(kind, 0)))
        if b.events.get(BACKWARD, 0):
            self._backward_steps += 1
            self._single_backward_steps += a.events.get(BACKWARD, 0) == b.events[BACKWARD]
        for kind in PER_MICRO_BATCH_EVENTS:
            full = b.events.get(kind, 0)
            if full and a.events.get(kind, 0) != size * full:
                self._note(Mismatch(step, kind, a.events.get(kind, 0), full, size * full))
        if size == self.k and a.clip_norm is not None and b.clip_norm is not None and not math.isclose(
            a.clip_norm, b.clip_norm, rel_tol=max(10 * (self.tolerance.rtol if self.tolerance else 0.0), 1e-6)
        ):
            self._note(Mismatch(step, PRE_CLIP_NORM, a.clip_norm, b.clip_norm))
        if self.expected_allreduces is not None and a.events.get(ALLREDUCE, 0) != self.expected_allreduces:
            self._note(Mismatch(step, ALLREDUCE, a.events.get(ALLREDUCE, 0), None, self.expected_allreduces))
        elif self.expected_allreduces is not None and a.events.get(BACKWARD_AFTER_SYNC, 0):
            self._note(Mismatch(step, BACKWARD_AFTER_SYNC, a.events[BACKWARD_AFTER_SYNC], None, 0))

    def _note(self, mismatch: Mismatch) -> None:
        if mismatch.kind not in self._seen_kinds:
            self._seen_kinds.add(mismatch.kind)
            self.mismatches.append(mismatch)

    # --- the whole runs -------------------------------------------------------

    def result(self, accumulated: RunRecord, full: RunRecord, initial: dict[str, torch.Tensor], fed: int) -> Comparison:
        tolerance = self.tolerance or self.override or tolerance_for(*self.compute_dtypes())
        several = len(self._optimizers) > 1
        if several:
            # Each step's events count since the previous step of *any* optimizer: with
            # several, a window's backward calls are split between their steps.
            self.mismatches = [m for m in self.mismatches if m.kind not in PER_MICRO_BATCH_EVENTS]
        final = None
        if accumulated.final and full.final:
            final = compare_updates(accumulated.final, full.final, initial, tolerance)
        return Comparison(
            steps_accumulated=len(accumulated.steps),
            steps_full=len(full.steps),
            steps=self.steps,
            mismatches=self.mismatches,
            final=final,
            tolerance=tolerance,
            fed=fed,
            used=accumulated.consumed,
            partial_window_scaled=self.partial_window_scaled,
            one_backward_per_step=not several and self.k > 1 and 0 < self._backward_steps == self._single_backward_steps,
            first_steps=self.first_steps,
            first_failure=self.first_failure,
        )


def scalar_ratio(actual: Tensors, expected: Tensors) -> Optional[float]:
    """The least-squares r in actual ≈ r * expected over all parameters (None
    when expected is zero)."""
    dot, norm = 0.0, 0.0
    for name, b in expected.items():
        a = actual.get(name)
        if a is None or b is None:
            continue
        dot += float(torch.sum(a * b.to(a.dtype), dtype=torch.float64))
        norm += float(torch.sum(b * b, dtype=torch.float64))
    return dot / norm if norm else None


def _dtypes(tensors: Tensors) -> set[torch.dtype]:
    return {t.dtype for t in tensors.values() if t is not None}


def _same_numbers(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    if len(a) != len(b):
        return False
    return all((math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-12) for x, y in zip(a, b))


def _same_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def compare_tensors(actual: Tensors, expected: Tensors, tolerance: Tolerance, scale: float = 1.0) -> Difference:
    """The parameter furthest out of tolerance when `actual` should equal
    `scale` times `expected` (a missing gradient counts as zeros)."""
    worst: Optional[tuple[float, Difference]] = None
    for name in sorted(expected.keys() | actual.keys()):
        a, b = actual.get(name), expected.get(name)
        if a is None and b is None:
            continue
        a = torch.zeros_like(b) if a is None else a
        b = torch.zeros_like(a) if b is None else (b if scale == 1.0 else b * scale)
        difference = _difference(name, a, b, tolerance)
        excess = _excess(difference.max_abs_error, tolerance.atol + tolerance.rtol * _max_abs(b))
        if worst is None or excess > worst[0]:
            worst = (excess, difference)
    return worst[1] if worst is not None else Difference("", 0.0, 0.0, True)


def compare_updates(
    actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], initial: dict[str, torch.Tensor], tolerance: Tolerance
) -> Difference:
    """Final parameters, each error relative to how far the full run moved that tensor."""
    worst: Optional[tuple[float, Difference]] = None
    for name in sorted(expected.keys() & actual.keys()):
        a, b = actual[name], expected[name]
        start = initial.get(name)
        moved = _max_abs(torch.sub(b, start.to(b.device, b.dtype))) if start is not None and start.shape == b.shape else _max_abs(b)
        abs_error = _max_abs(torch.sub(a, b.to(a.dtype)))
        allowed = tolerance.atol + tolerance.rtol * moved
        difference = Difference(name, abs_error, abs_error / moved if moved else abs_error, abs_error <= allowed)
        if worst is None or _excess(abs_error, allowed) > worst[0]:
            worst = (_excess(abs_error, allowed), difference)
    return worst[1] if worst is not None else Difference("", 0.0, 0.0, True)


def _excess(error: float, allowed: float) -> float:
    if allowed > 0:
        return error / allowed
    return math.inf if error > 0 else 0.0


def _max_abs(tensor: torch.Tensor) -> float:
    return float(tensor.abs().max()) if tensor.numel() else 0.0


def _difference(name: str, a: torch.Tensor, b: torch.Tensor, tolerance: Tolerance) -> Difference:
    # One temporary of the tensor's size, in the wider of the two dtypes (no
    # float64 copies of a large model's gradients at every step).
    wider = torch.promote_types(a.dtype, b.dtype)
    abs_error = _max_abs(torch.sub(a.to(wider), b.to(wider)).abs_())
    scale = _max_abs(b)
    allowed = tolerance.atol + tolerance.rtol * scale
    return Difference(name, abs_error, abs_error / scale if scale else abs_error, abs_error <= allowed)

