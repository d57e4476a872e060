"""The loader a run receives: the micro-batches, counting what the loop takes.

The count says how many micro-batches the loop used (reported next to how
many were fed) and which window an optimizer step closed; a loop that never
takes one has not been verified at all. When the setup gave a `DataLoader`,
the run gets a `DataLoader` too, so `isinstance` checks and framework
`prepare()` calls see the type they expect. Where every batch splits into
samples (tensors sharing one first dimension), that DataLoader is over a
dataset of samples with the run's batch size, so a loop that rebuilds its
loader from `loader.dataset` and `loader.batch_size` gets the same batches;
one that asks for another batch size is noted (`foreign_batch_size`), since
both runs would then train on the same batches. Otherwise it is over the
prepared batches as they are (`batch_size=None`).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

import torch
from torch.utils.data import DataLoader, Dataset

from accumlint.verify.batches import concatenate, map_tensors


class CountingBatches(list):
    """A list of batches that counts the items the loop takes from it."""

    taken = 0

    def __iter__(self) -> Iterator[Any]:
        for item in list.__iter__(self):
            self.taken += 1
            yield item

    def __getitem__(self, index: Any) -> Any:
        item = list.__getitem__(self, index)
        self.taken += len(item) if isinstance(index, slice) else 1
        return item


class _Items(Dataset):
    """The prepared batches as a dataset that counts the items fetched from it."""

    taken = 0

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        self.taken += 1
        return self.items[index]


class _Samples(Dataset):
    """The prepared batches split into samples; counts the samples fetched and
    notes a fetch of another size than the batches' (a rebuilt loader)."""

    def __init__(self, batches: Sequence[Any], batch_size: int) -> None:
        self.samples = [map_tensors(batch, lambda t, i=i: t[i]) for batch in batches for i in range(_size(batch))]
        self.batch_size = batch_size
        self.fetched = 0
        self.foreign_batch_size: Optional[int] = None

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Any:
        self._note(1)
        return self.samples[index]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        self._note(len(indices))
        return [self.samples[i] for i in indices]

    def _note(self, count: int) -> None:
        last = len(self.samples) % self.batch_size
        if count != self.batch_size and count != last and self.foreign_batch_size is None:
            self.foreign_batch_size = count
        self.fetched += count

    @property
    def taken(self) -> int:
        """Batches of the run's size taken (a last, smaller one counted whole)."""
        return -(-self.fetched // self.batch_size)


def stack_samples(samples: list[Any]) -> Any:
    """The batch of `samples`, structure kept (the inverse of the split)."""
    return concatenate([map_tensors(sample, lambda t: t.unsqueeze(0)) for sample in samples])


class CountingDataLoader(DataLoader):
    """A DataLoader counting batches where they are fetched (its dataset): a
    framework that rebuilds the loader around the same dataset (accelerate's
    `prepare`, Lightning's sampler injection) is counted too."""

    @property
    def taken(self) -> int:
        return self.dataset.taken

    @property
    def foreign_batch_size(self) -> Optional[int]:
        return getattr(self.dataset, "foreign_batch_size", None)


def counting_loader(batches: Sequence[Any], as_dataloader: bool = False) -> Any:
    """The batches as a counting list, or as a counting DataLoader (over
    samples where every batch splits into them, see the module docstring)."""
    if not as_dataloader:
        return CountingBatches(batches)
    sizes = {_size(batch) for batch in batches}
    if batches and None not in sizes:
        size = _size(batches[0])
        if all(_size(batch) == size for batch in batches[:-1]) and _size(batches[-1]) <= size:
            return CountingDataLoader(_Samples(batches, size), batch_size=size, shuffle=False,
                                      collate_fn=stack_samples)
    return CountingDataLoader(_Items(batches), batch_size=None, shuffle=False)


def _size(batch: Any) -> Optional[int]:
    """The first dimension every leaf of the batch shares, None when a leaf is
    not a tensor with one (then the batch does not split into samples)."""
    sizes: set = set()
    plain: list[bool] = []

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            sizes.add(value.shape[0] if value.dim() > 0 else None)
        elif isinstance(value, (dict, tuple, list)):
            for item in value.values() if isinstance(value, dict) else value:
                walk(item)
        else:
            plain.append(True)

    walk(batch)
    if plain or len(sizes) != 1:
        return None
    return next(iter(sizes))
