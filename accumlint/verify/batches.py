"""Micro-batches as nested structures: concatenating, sizing, mapping.

Run B feeds one batch per window made of the window's K micro-batches, so a
batch of any shape a loop may unpack (a tensor, a tuple, a list or a dict of
tensors, nested) must be joined leaf by leaf along the first dimension.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch


def map_tensors(batch: Any, function: Callable[[torch.Tensor], Any]) -> Any:
    """`batch` with `function` applied to every tensor leaf, structure kept."""
    if isinstance(batch, torch.Tensor):
        return function(batch)
    if isinstance(batch, dict):
        return type(batch)((key, map_tensors(value, function)) for key, value in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(map_tensors(value, function) for value in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(map_tensors(value, function) for value in batch)
    return batch


def concatenate(micro_batches: Sequence[Any]) -> Any:
    """Join micro-batches of one structure into one batch along dimension 0.

    Non-tensor leaves must agree across micro-batches (they are kept once).
    """
    first = micro_batches[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(list(micro_batches), dim=0)
    if isinstance(first, dict):
        return type(first)((key, concatenate([mb[key] for mb in micro_batches])) for key in first)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(concatenate([mb[i] for mb in micro_batches]) for i in range(len(first))))
    if isinstance(first, (tuple, list)):
        return type(first)(concatenate([mb[i] for mb in micro_batches]) for i in range(len(first)))
    if any(mb != first for mb in micro_batches[1:]):
        raise ValueError(f"cannot concatenate differing non-tensor values of type {type(first).__name__}")
    return first


def windows_of(micro_batches: Sequence[Any], accum_steps: int) -> list[list[Any]]:
    """Consecutive groups of `accum_steps` micro-batches (a partial tail dropped)."""
    count = len(micro_batches) // accum_steps
    return [list(micro_batches[w * accum_steps : (w + 1) * accum_steps]) for w in range(count)]


def batch_size(batch: Any) -> int | None:
    """The first dimension of the batch's first tensor leaf, or None."""
    sizes: list[int] = []

    def note(tensor: torch.Tensor) -> torch.Tensor:
        if not sizes and tensor.dim() > 0:
            sizes.append(tensor.shape[0])
        return tensor

    map_tensors(batch, note)
    return sizes[0] if sizes else None


def tensor_leaves(batch: Any) -> list[torch.Tensor]:
    """Every tensor in the batch, depth first."""
    leaves: list[torch.Tensor] = []
    map_tensors(batch, lambda tensor: leaves.append(tensor))
    return leaves
