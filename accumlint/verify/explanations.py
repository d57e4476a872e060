"""Known reasons, read from the setup, why accumulation cannot match the full batch.

These are properties of the model, the loss or the data, not mistakes of the
loop: when the runs differ and one of them holds, the report says so instead
of a bare failure. Deterministic ones (the loss, the data) replace a guess
from numbers they explain; random or batch-dependent layers (dropout,
batch-norm) do not hide an exact signature, they are added to it as a caveat.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import nn

from accumlint.verify.batches import batch_size, tensor_leaves, windows_of
from accumlint.verify.layers import batch_dependent_layers
from accumlint.verify.report import Explanation


def noise_sources(model: nn.Module, *, eval_mode: bool) -> list[Explanation]:
    """Layers that make the runs differ by batch composition (batch-norm in
    training mode; dropout is always off in both runs): an exact numeric
    signature still names the mistake, with these as a caveat."""
    return [] if eval_mode else _batch_dependent_layers(model)


def data_sources(loss_fn: Optional[Callable], micro_batches: list[Any], accum_steps: int) -> list[Explanation]:
    """Properties of the loss and the data that change the gradient by a
    deterministic factor (a summed loss, unequal micro-batches, unequal token
    counts): they explain a signature that would otherwise look like a mistake."""
    windows = windows_of(micro_batches, accum_steps)
    return [*_sum_reduction(loss_fn), *_unequal_sizes(windows), *_token_counts(loss_fn, windows)]


def _batch_dependent_layers(model: nn.Module) -> list[Explanation]:
    layers = [(name, kind) for name, kind in batch_dependent_layers(model) if kind != "dropout"]
    if not layers:
        return []
    listed = ", ".join(f"{name or '<model>'} ({kind})" for name, kind in layers)
    return [
        Explanation(
            summary=f"the model has layers that depend on the batch in training mode: {listed}.",
            detail=(
                "Batch-norm statistics differ between micro-batches and their concatenation, so "
                "accumulation cannot match the large batch with them in training mode. Rerun with "
                "--eval-mode (API: eval_mode=True) to pin these layers in eval mode and check the "
                "loop's own logic."
            ),
        )
    ]


def _sum_reduction(loss_fn: Optional[Callable]) -> list[Explanation]:
    if getattr(loss_fn, "reduction", None) != "sum":
        return []
    return [
        Explanation(
            summary='the loss function reduces with reduction="sum".',
            detail=(
                "The full-batch gradient of a summed loss is the sum of the micro-batch gradients, so "
                "dividing each micro-batch's loss by K gives 1/K of it; for a summed loss do not divide "
                "by K, or normalise by the window's element count."
            ),
        )
    ]


def _unequal_sizes(windows: list[list[Any]]) -> list[Explanation]:
    for index, window in enumerate(windows, start=1):
        sizes = [batch_size(micro_batch) for micro_batch in window]
        if len(set(sizes)) > 1:
            return [
                Explanation(
                    summary=f"micro-batch sizes differ within window {index}: {sizes}.",
                    detail=(
                        "The mean of per-micro-batch means weighs the small micro-batches more than the "
                        "full batch's mean does; weight each micro-batch's loss by its share of the "
                        "window's samples, or use equal sizes."
                    ),
                )
            ]
    return []


def _token_counts(loss_fn: Optional[Callable], windows: list[list[Any]]) -> list[Explanation]:
    ignore_index = getattr(loss_fn, "ignore_index", None)
    if ignore_index is None or getattr(loss_fn, "reduction", "mean") != "mean":
        return []
    for index, window in enumerate(windows, start=1):
        counts = [_counted_targets(micro_batch, ignore_index) for micro_batch in window]
        if any(count is None for count in counts):
            return []
        if len(set(counts)) > 1 and any(_has_ignored(mb, ignore_index) for mb in window):
            return [
                Explanation.of_rule(
                    "GA206",
                    summary=f"the number of counted targets differs within window {index}: {counts}.",
                    detail=(
                        f"The loss averages over targets that are not ignore_index={ignore_index}, per "
                        "micro-batch; micro-batches with fewer real tokens weigh more. Sum the loss over "
                        "tokens and divide by the window's token count."
                    ),
                )
            ]
    return []


def _integer_leaves(micro_batch: Any) -> list[torch.Tensor]:
    return [t for t in tensor_leaves(micro_batch) if not t.is_floating_point() and t.dtype != torch.bool]


def _counted_targets(micro_batch: Any, ignore_index: int) -> Optional[int]:
    leaves = _integer_leaves(micro_batch)
    if not leaves:
        return None
    return int((leaves[-1] != ignore_index).sum())


def _has_ignored(micro_batch: Any, ignore_index: int) -> bool:
    return any(bool((leaf == ignore_index).any()) for leaf in _integer_leaves(micro_batch))
