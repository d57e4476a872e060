"""`--nproc P`: P ranks accumulating against one process over the global batch.

A global window is P x K micro-batches. Run A starts P processes (gloo, the
model wrapped in DistributedDataParallel); rank r trains on its K consecutive
micro-batches of each window with accumulation K. Run B is one process (a
world of one, so `model.no_sync()` still exists) training on each global
window's concatenation with accumulation 1. DDP averages the ranks'
gradients, so a correct loop steps with the gradient of the whole window;
gradients are recorded on rank 0 and compared with run B's, step by step.
A communication hook counts DDP's all-reduces: a correct loop all-reduces
once per optimizer step (K times is GA401, never is a sync bug).

Processes are started with the *fork* method: a setup holds lambdas and the
function comes from a file imported under a private name, neither of which
pickles for the spawn method.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from datetime import timedelta
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from accumlint.verify.batches import concatenate, windows_of
from accumlint.verify.binding import Binding
from accumlint.verify.compare import ALLREDUCE, Comparison, StepComparer, Tolerance
from accumlint.verify.instruments import instrumented
from accumlint.verify.runs import RunInputs, RunRecord, RunRecorder, UserCodeError, prepare_run, seeded, user_namespaces
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
    override: Optional[Tolerance] = None,
    lookahead: bool = False,
) -> tuple[RunRecord, RunRecord, Comparison]:
    """Run A on `nproc` processes, run B on one; rank 0's records and the
    comparison. With `lookahead` (a loop pulling one micro-batch ahead), each
    rank gets one micro-batch more and run B one batch more, from the next
    global window, never trained on. Raises UserCodeError."""
    window = accum_steps * nproc
    all_groups = windows_of(setup.batches, window)
    groups = all_groups[:windows]
    shares = [[group[r * accum_steps:(r + 1) * accum_steps] for group in groups] for r in range(nproc)]
    full_batches = [concatenate(group) for group in groups]
    if lookahead:
        ahead = all_groups[windows]
        shares = [[*share, [ahead[r * accum_steps]]] for r, share in enumerate(shares)]
        full_batches.append(concatenate(ahead))
    with tempfile.TemporaryDirectory() as folder:
        accumulated_file = os.path.join(folder, "accumulated.pt")
        _start(_accumulating_worker, nproc,
               (function, binding, setup, shares, accum_steps, seed, eval_mode, accumulated_file))
        accumulated = _outcome(accumulated_file)
        full_file = os.path.join(folder, "full.pt")
        _start(_full_worker, 1,
               (function, binding, setup, full_batches, accumulated, accum_steps, windows * nproc, seed, eval_mode,
                override, accum_steps * windows + int(lookahead), full_file))
        full, comparison = _outcome(full_file)
    return accumulated, full, comparison


def _start(worker: Callable[..., None], nproc: int, args: tuple) -> None:
    torch.multiprocessing.start_processes(
        worker, args=(nproc, _free_port(), *args), nprocs=nproc, start_method="fork"
    )


def _outcome(path: str) -> Any:
    outcome = torch.load(path, weights_only=False)
    if outcome[0] == "error":
        _, where, type_name, message, steps_before = outcome
        raise UserCodeError(where, type(type_name, (Exception,), {})(message), steps_before)
    return outcome[1]


def _init(rank: int, nproc: int, port: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nproc, timeout=TIMEOUT
    )


def _counting_ddp(holder: list) -> Callable[[torch.nn.Module], torch.nn.Module]:
    """DDP with a communication hook that counts all-reduces (once per synced backward)."""

    def hook(state, bucket):  # noqa: ANN001, ANN202 - DDP rejects string annotations (postponed evaluation)
        if bucket.is_last() and holder:
            holder[0].event(ALLREDUCE)
        return allreduce_hook(state, bucket)

    def wrap(model: torch.nn.Module) -> torch.nn.Module:
        wrapped = DistributedDataParallel(model)
        wrapped.register_comm_hook(None, hook)
        return wrapped

    return wrap


def _run(
    function: Callable[..., Any],
    binding: Binding,
    inputs: RunInputs,
    seed: int,
    eval_mode: bool,
    keep: int,
    on_step: Any = None,
) -> RunRecord:
    holder: list[RunRecorder] = []
    run = prepare_run(function, binding, inputs, eval_mode=eval_mode, wrap=_counting_ddp(holder),
                      on_step=on_step, keep=keep)
    holder.append(run.recorder)
    with seeded(seed, torch.device("cpu")), instrumented(user_namespaces(function)):
        run.call()
    return run.recorder.finish()


def _accumulating_worker(
    rank: int, nproc: int, port: int, function: Callable[..., Any], binding: Binding, setup: Setup,
    shares: list, accum_steps: int, seed: int, eval_mode: bool, result: str,
) -> None:
    _init(rank, nproc, port)
    try:
        mine = [mb for window in shares[rank] for mb in window]
        inputs = RunInputs(setup.model, setup.optimizer_factory, mine, accum_steps, setup.loss_fn,
                           as_dataloader=setup.as_dataloader, named=setup.objects)
        outcome = _guarded(lambda: _run(function, binding, inputs, seed, eval_mode, keep=sys.maxsize))
        if rank == 0:
            torch.save(outcome, result)
    finally:
        dist.destroy_process_group()


def _full_worker(
    rank: int, nproc: int, port: int, function: Callable[..., Any], binding: Binding, setup: Setup,
    batches: list, accumulated: RunRecord, accum_steps: int, windows: int, seed: int, eval_mode: bool,
    override: Optional[Tolerance], fed_per_rank: int, result: str,
) -> None:
    _init(rank, nproc, port)
    try:
        records: list[RunRecord] = [accumulated]
        # Rank 0 takes K micro-batches per step: its backward count is judged against K.
        comparer = StepComparer(accum_steps, windows, 0, compute_dtypes=lambda: _dtypes(records),
                                override=override, expected_allreduces=1)

        def against_a(step: Any) -> None:
            if step.index < len(accumulated.steps):
                comparer(accumulated.steps[step.index], step)

        inputs = RunInputs(setup.model, setup.optimizer_factory, batches, 1, setup.loss_fn,
                           as_dataloader=setup.as_dataloader, named=setup.objects)

        def both() -> tuple:
            full = _run(function, binding, inputs, seed, eval_mode, keep=1, on_step=against_a)
            initial = {name: p.detach() for name, p in setup.model.named_parameters()}
            return full, comparer.result(accumulated, full, initial, fed=fed_per_rank if full.steps else 0)

        outcome = _guarded(both)
        torch.save(outcome, result)
    finally:
        dist.destroy_process_group()


def _dtypes(records: list[RunRecord]) -> set:
    found: set = set()
    for record in records:
        found |= record.compute_dtypes
    return found


def _guarded(action: Callable[[], Any]) -> tuple:
    try:
        return ("records", action())
    except UserCodeError as error:
        return ("error", error.where, type(error.error).__name__, str(error.error), error.steps_before)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
