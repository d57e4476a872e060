"""The loader a run receives: the micro-batches, counting what the loop takes.

The count says how many micro-batches the loop used (reported next to how
many were fed) and which window an optimizer step closed; a loop that never
takes one has not been verified at all. When the setup gave a `DataLoader`,
the run gets a `DataLoader` too (over the same prepared micro-batches, in
order, without re-collation), so `isinstance` checks and framework
`prepare()` calls see the type they expect.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from torch.utils.data import DataLoader, Dataset


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


class CountingDataLoader(DataLoader):
    """A DataLoader yielding prepared batches as they are, counting them where
    they are fetched (its dataset): a framework that rebuilds the loader around
    the same dataset (accelerate's `prepare`, Lightning's sampler injection) is
    counted too."""

    @property
    def taken(self) -> int:
        return self.dataset.taken


def counting_loader(batches: Sequence[Any], as_dataloader: bool = False) -> Any:
    """The batches as a counting list, or as a counting DataLoader."""
    if as_dataloader:
        return CountingDataLoader(_Items(batches), batch_size=None, shuffle=False)
    return CountingBatches(batches)
