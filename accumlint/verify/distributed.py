"""`--nproc P`: both runs under torch.distributed (gloo on CPU, DDP-wrapped model).

A global window is P x K micro-batches: rank r trains on its K consecutive
ones per window, with accumulation K in run A and as one concatenated batch
with accumulation 1 in run B. DDP averages the ranks' gradients, so both runs
should step with the gradient of the whole window, which proves a loop that
skips the all-reduce with `model.no_sync()` equivalent. Gradients are
recorded on rank 0.

Processes are started with the *fork* method: a setup holds lambdas and the
function comes from a file imported under a private name, neither of which
pickles for the spawn method.
"""

from __future__ import annotations

import os
import socket
import tempfile
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from accumlint.verify.batches import concatenate, windows_of
from accumlint.verify.binding import Binding
from accumlint.verify.runs import RunInputs, RunRecord, UserCodeError, run_training
from accumlint.verify.setup import Setup

TIMEOUT = timedelta(seconds=120)


def run_distributed(
    function: Callable[..., Any],
    binding: Binding,
    setup: Setup,
    *,
    accum_steps: int,
    windows: int,
    seed: int,
    eval_mode: bool,
    nproc: int,
) -> tuple[RunRecord, RunRecord]:
    """Runs A and B on `nproc` processes; rank 0's records. Raises UserCodeError."""
    groups = windows_of(setup.batches, accum_steps * nproc)[:windows]
    shares = [[group[r * accum_steps : (r + 1) * accum_steps] for group in groups] for r in range(nproc)]
    with tempfile.TemporaryDirectory() as folder:
        result = os.path.join(folder, "records.pt")
        torch.multiprocessing.start_processes(
            _worker,
            args=(nproc, _free_port(), function, binding, setup, shares, accum_steps, seed, eval_mode, result),
            nprocs=nproc,
            start_method="fork",
        )
        outcome = torch.load(result, weights_only=False)
    if outcome[0] == "error":
        _, where, type_name, message, steps_before = outcome
        raise UserCodeError(where, type(type_name, (Exception,), {})(message), steps_before)
    return outcome[1], outcome[2]


def _worker(
    rank: int,
    nproc: int,
    port: int,
    function: Callable[..., Any],
    binding: Binding,
    setup: Setup,
    shares: list[list[list[Any]]],
    accum_steps: int,
    seed: int,
    eval_mode: bool,
    result: str,
) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nproc, timeout=TIMEOUT
    )
    try:
        mine = shares[rank]

        def run(batches: list, k: int) -> RunRecord:
            inputs = RunInputs(setup.model, setup.optimizer_factory, batches, k, setup.loss_fn)
            return run_training(function, binding, inputs, seed=seed, eval_mode=eval_mode, wrap=DistributedDataParallel)

        try:
            outcome: tuple = (
                "records",
                run([mb for window in mine for mb in window], accum_steps),
                run([concatenate(window) for window in mine], 1),
            )
        except UserCodeError as error:
            outcome = ("error", error.where, type(error.error).__name__, str(error.error), error.steps_before)
        if rank == 0:
            torch.save(outcome, result)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
