"""Python's cyclic garbage collector, paused while a tree is built.

A parse (LibCST's or Python's own `ast`) allocates hundreds of thousands of
nodes that form a tree: nothing the cyclic collector could free, since
reference counting frees a tree. Yet their allocation sets off collection
after collection, each traversing every young object, and every few of them
every object the process holds, so a parse runs much slower with the
collector on (README, "Speed"). So the collector pauses while a tree is built, and resumes (with whatever it deferred) as soon as it is.
"""

from __future__ import annotations

import gc


class collector_paused:
    """`with collector_paused():` the block runs without cyclic collections (nestable)."""

    __slots__ = ("_resume",)

    def __enter__(self) -> None:
        self._resume = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._resume:
            gc.enable()
