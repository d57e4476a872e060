"""Python's cyclic garbage collector, paused while a tree is built, and frozen after the analysis loads.

A parse (LibCST's or Python's own `ast`) allocates hundreds of thousands of
nodes that form a tree: nothing the cyclic collector could free, since
reference counting frees a tree. Yet their allocation sets off collection
after collection, each traversing every young object, and every few of them
every object the process holds, so a parse runs much slower with the
collector on (README, "Speed"). So the collector pauses while a tree is built, and resumes (with whatever it deferred) as soon as it is.

The collector is the whole process's: both run only in accumlint's own
command (`accumlint.compat.enable`), never in a library user's process or the
editor server, where they do nothing.
"""

from __future__ import annotations

import gc

from accumlint.compat import process_wide


class collector_paused:
    """`with collector_paused():` the block runs without cyclic collections (nestable), in
    accumlint's own command; elsewhere the collector runs as usual."""

    __slots__ = ("_resume",)

    def __enter__(self) -> None:
        self._resume = process_wide() and gc.isenabled()
        if self._resume:
            gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._resume:
            gc.enable()


def freeze() -> None:
    """Move every object tracked now out of the collector's reach (`gc.freeze`), in
    accumlint's own command: later collections no longer scan what lives as long as the
    process. Does nothing elsewhere, or where `gc.freeze` is missing."""
    if process_wide() and hasattr(gc, "freeze"):
        gc.freeze()
