"""The textbook loop's first update, built from the setup, to hold both of the user's runs against.

The user's two runs are compared with each other, which cannot see a mistake
both share: a constant factor on the loss (`loss / (K/2)` is twice the mean at
every K), or clipping before the GradScaler unscales (both runs clip the
scaled gradients). The reference is the textbook loop on the same model, loss
and micro-batches: zero once per window, forward, loss / K, backward, clip
after unscale with the user's own threshold, step once. At the first
optimizer step every run starts from the same weights, so the reference's
gradient there is what the user's first steps must hold: the accumulated one
(K micro-batches, each loss / K) for run A, the one batch (K = 1) for run B.
Later steps are not held against it: the user's learning-rate schedule, which
the reference does not know, moves the weights apart.

The one-batch reference is computed before the runs, on a copy of the model
that is freed before they start, and kept as a `Fingerprint` (each
parameter's norm and an even sample of its elements), so it adds no
model-sized memory while the runs execute. The accumulated one is computed
only where run B's first step differs from the textbook's: elsewhere run A,
compared step by step with run B, is held against it through run B. The user's clipping is undone from the user's own numbers
(the clip's threshold and the pre-clip norm it returned): the result must be
the reference's gradient. (A clip before `unscale_` needs no reference: the
run's own numbers show it, see `diagnosis.clip_before_unscale`.) A user gradient that is no multiple of the
reference (the loop computes its loss otherwise: a regulariser, another loss,
several models) proves nothing about the loop: it is reported as not
comparable, never as a failure.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import nn

from accumlint.verify.batches import concatenate
from accumlint.verify.instruments import CLIP
from accumlint.verify.layers import batch_dependent_layers, pin_eval_mode
from accumlint.verify.runs import StepRecord, device_of, seeded

# Elements kept per parameter: enough that a gradient which is no multiple of
# the reference shows it, few enough to cost nothing.
SAMPLE = 256
# torch's clip_grad_norm_ divides by the norm plus this.
_CLIP_EPSILON = 1e-6


class ReferenceUnavailable(Exception):
    """Why the textbook loop cannot be built from this setup."""


@dataclass(frozen=True)
class Fingerprint:
    """A gradient in brief: each parameter's norm and SAMPLE of its elements at even positions."""

    norms: dict[str, float]
    samples: dict[str, torch.Tensor]

    @property
    def norm(self) -> float:
        return math.sqrt(sum(n * n for n in self.norms.values()))

    def scaled(self, factor: float) -> "Fingerprint":
        return Fingerprint({n: abs(factor) * v for n, v in self.norms.items()},
                           {n: factor * s for n, s in self.samples.items()})


def fingerprint(gradients: dict[str, Optional[torch.Tensor]]) -> Fingerprint:
    """The gradients' fingerprint (dense gradients only)."""
    norms, samples = {}, {}
    for name, gradient in gradients.items():
        if gradient is None or gradient.layout != torch.strided:
            continue  # no gradient, or a sparse one: left out on both sides alike
        flat = gradient.detach().reshape(-1)
        count = min(flat.numel(), SAMPLE)
        positions = torch.arange(count, device=flat.device) * max(flat.numel() - 1, 0) // max(count - 1, 1)
        samples[name] = flat.index_select(0, positions).to("cpu", torch.float64)
        norms[name] = float(torch.linalg.vector_norm(flat, dtype=torch.float64))
    return Fingerprint(norms, samples)


def multiple_of(actual: Fingerprint, reference: Fingerprint, match: float) -> Optional[float]:
    """The scalar c with actual = c x reference over actual's parameters, or
    None when no scalar fits (within `match`, relative) or the reference is zero."""
    names = sorted(actual.norms)
    if not names or any(name not in reference.norms for name in names):
        return None
    a = torch.cat([actual.samples[name] for name in names])
    b = torch.cat([reference.samples[name] for name in names])
    denominator = float(b @ b)
    if denominator == 0.0:
        return None
    ratio = float(a @ b) / denominator
    if float((a - ratio * b).norm()) > match * max(float(a.norm()), float(ratio * b.norm())):
        return None
    for name in names:
        expected = abs(ratio) * reference.norms[name]
        if abs(actual.norms[name] - expected) > match * max(actual.norms[name], expected, 1e-30):
            return None
    return ratio


class Reference:
    """The textbook loop's gradient at the initial weights over the first
    window: as one batch (K = 1, computed when built) and accumulated over
    its K micro-batches, each loss / K (computed when first asked for: it
    matters only where run B's first step already differs from the textbook)."""

    def __init__(self, full: Fingerprint, accumulate: Callable[[], Fingerprint]) -> None:
        self.full = full
        self._accumulate = accumulate
        self._accumulated: Optional[Fingerprint] = None

    def accumulated(self) -> Fingerprint:
        """Raises ReferenceUnavailable."""
        if self._accumulated is None:
            self._accumulated = self._accumulate()
        return self._accumulated


def build_reference(
    model: nn.Module,
    loss_fn: Optional[Callable],
    window: list[Any],
    *,
    seed: int,
    eval_mode: bool,
) -> Reference:
    """The textbook loop over the first window; raises ReferenceUnavailable."""
    if not eval_mode:
        layers = [layer for layer in batch_dependent_layers(model) if layer[1] != "dropout"]
        if layers:
            raise ReferenceUnavailable(
                f"the model has layers that depend on the batch in training mode ({layers[0][1]})"
            )
    if not any(p.requires_grad for p in model.parameters()):
        raise ReferenceUnavailable("the model has no trainable parameters")

    def gradients(batches: list[Any], divide: int) -> Fingerprint:
        # Its own copy each time, freed on return: nothing model-sized outlives the call.
        copied = copy.deepcopy(model)
        pin_eval_mode(copied, batch_norm=eval_mode)
        try:
            with seeded(seed, device_of(copied)), torch.enable_grad():
                for batch in batches:
                    (_loss(copied, loss_fn, batch) / divide).backward()
        except ReferenceUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 - a model or batch the textbook call does not fit
            raise ReferenceUnavailable(
                f"the textbook forward failed ({type(error).__name__}: {' '.join(str(error).split())[:120]})"
            ) from error
        return fingerprint({name: p.grad for name, p in copied.named_parameters() if p.requires_grad})

    return Reference(full=gradients([concatenate(window)], 1), accumulate=lambda: gradients(window, len(window)))


def _loss(model: nn.Module, loss_fn: Optional[Callable], batch: Any) -> torch.Tensor:
    """loss_fn(model(x), y) for an (x, y) batch; without a loss function, the
    loss the model returns from model(*batch) or model(**batch) (a scalar, a
    `.loss`, or the one scalar of a tuple)."""
    if loss_fn is not None:
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ReferenceUnavailable("the batches are not (input, target) pairs for the setup's loss function")
        return loss_fn(model(batch[0]), batch[1])
    output = model(**batch) if isinstance(batch, dict) else model(*batch) if isinstance(batch, (tuple, list)) else None
    if output is None:
        raise ReferenceUnavailable("the setup has no loss function and its batches are no tuple or dict")
    if isinstance(getattr(output, "loss", None), torch.Tensor):
        output = output.loss
    if isinstance(output, (tuple, list)):
        scalars = [t for t in output if isinstance(t, torch.Tensor) and t.dim() == 0 and t.is_floating_point()]
        output = scalars[0] if len(scalars) == 1 else None
    if not isinstance(output, torch.Tensor) or output.dim() != 0 or not output.requires_grad:
        raise ReferenceUnavailable("the setup has no loss function and the model does not return a loss")
    return output


@dataclass(frozen=True)
class Held:
    """One of the user's first steps held against the reference: `factor` is
    its unclipped gradient over the reference's (None: no multiple, not
    comparable)."""

    factor: Optional[float]


def hold(step: StepRecord, actual: Fingerprint, reference: Fingerprint, match: float) -> Held:
    """`step` (its live gradients fingerprinted as `actual`) against the reference."""
    if step.events.get(CLIP, 0) and (step.clip_norm is None or step.max_norm is None):
        return Held(None)  # clipped by value, or clipped with a norm it did not return
    unclipped = actual
    if step.clip_norm is not None and step.max_norm is not None:
        # Undo the user's clip with the user's own numbers; whatever was
        # clipped, the rest is the gradient the loop computed.
        coefficient = min(1.0, step.max_norm / (step.clip_norm + _CLIP_EPSILON))
        unclipped = actual.scaled(1.0 / coefficient) if coefficient > 0 else actual
    return Held(multiple_of(unclipped, reference, match))
