"""Both runs at once, compared step by step as they go.

Run A and run B execute in two threads that pass a baton: A runs until its
next optimizer step and pauses there, B runs until its own step with the same
index, the two steps are compared while both runs are paused (their live
gradients and weights, no copies), then A continues. Only one thread runs at
a time, and each keeps its own random state (torch, CUDA, `random`, numpy),
handed over with the baton, so each run draws exactly what it would draw
alone. Memory holds the two runs' models and optimizers, never a history of
steps. When one run ends first, the other runs to its end without waiting.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

import torch

from accumlint.verify.instruments import instrumented
from accumlint.verify.runs import (
    PreparedRun,
    RunRecord,
    StepRecord,
    UserCodeError,
    VerifierFault,
    guarded,
    rng_state,
    seed_all,
    set_rng_state,
)

A, B = "accumulated", "full"

StepComparer = Callable[[StepRecord, StepRecord], None]


class _Baton:
    def __init__(self, device: torch.device, seed: int) -> None:
        self.device = device
        self.condition = threading.Condition()
        self.turn = A
        self.done = {A: False, B: False}
        saved = rng_state(device)
        seed_all(seed, device)
        start = rng_state(device)
        set_rng_state(saved, device)
        self.states = {A: start, B: start}
        self.pending: Optional[StepRecord] = None

    def take(self, me: str) -> None:
        with self.condition:
            self.condition.wait_for(lambda: self.turn == me)
        set_rng_state(self.states[me], self.device)

    def give(self, me: str) -> None:
        """Hand over to the other run unless it has ended (then keep going)."""
        other = B if me == A else A
        with self.condition:
            if self.done[other]:
                return
            self.states[me] = rng_state(self.device)
            self.turn = other
            self.condition.notify_all()
        self.take(me)

    def finish(self, me: str) -> None:
        other = B if me == A else A
        with self.condition:
            self.done[me] = True
            self.states[me] = rng_state(self.device)
            self.turn = other
            self.condition.notify_all()


def run_lockstep(
    accumulated: PreparedRun,
    full: PreparedRun,
    compare: StepComparer,
    *,
    seed: int,
    device: torch.device,
    user_globals: tuple[dict, ...] = (),
) -> tuple[RunRecord, RunRecord]:
    """Run both, calling `compare(step_a, step_b)` for every pair of steps with
    the same index. Raises the first run's UserCodeError (A's first)."""
    saved = rng_state(device)
    baton = _Baton(device, seed)
    errors: dict[str, BaseException] = {}

    def on_a_step(step: StepRecord) -> None:
        if baton.done[B]:
            return
        baton.pending = step
        baton.give(A)

    def on_b_step(step: StepRecord) -> None:
        pending, baton.pending = baton.pending, None
        if pending is not None and pending.index == step.index:
            guarded(compare, pending, step)
            baton.give(B)

    accumulated.recorder.on_step = on_a_step
    full.recorder.on_step = on_b_step

    threads_per_op = torch.get_num_threads()

    def body(me: str, run: PreparedRun) -> None:
        # A new thread's OpenMP starts at one thread per core, not at torch's setting:
        # the runs' small ops would each wake a team that spins between them.
        torch.set_num_threads(threads_per_op)
        try:
            baton.take(me)
            run.call()
        except BaseException as error:  # noqa: BLE001 - handed to the caller below
            errors[me] = error
        finally:
            baton.finish(me)

    threads = [
        threading.Thread(target=body, args=(A, accumulated), name="accumlint-run-A", daemon=True),
        threading.Thread(target=body, args=(B, full), name="accumlint-run-B", daemon=True),
    ]
    try:
        with instrumented(user_globals):
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        set_rng_state(saved, device)
    for error in (errors.get(B), errors.get(A)):
        if isinstance(error, VerifierFault):
            raise error
    for me in (A, B):
        error = errors.get(me)
        if error is not None:
            if isinstance(error, UserCodeError) or not isinstance(error, Exception):
                raise error
            raise VerifierFault(error) from error
    return accumulated.recorder.finish(), full.recorder.finish()
