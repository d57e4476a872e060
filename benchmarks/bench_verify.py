"""The verifier's overhead over the two plain training runs it performs.

For each setup, times `check_equivalence` (load, bind, deep copies, hooks
recording every step, comparison, all in a contained child process) against
running run A and run B by hand (same function, model copies, fresh
optimizers, no hooks), in the same process, and prints the ratio; beside it,
the same verification in this process (`verify_here`, no child), so that the
containment's own cost shows. Medians of several repeats, after a warm-up.
Before the plain runs, nothing has built an optimizer in this process (as in
a caller that verifies first), so the first verification pays for what torch
loads then.
Then, each in a fresh process, the peak memory (max RSS) of the plain runs
and of the verifier on a ~100 MB model over many windows, in MB and in
multiples of the model's size (the verifier's figure is the larger of its
own process and the child it trains in).

    python benchmarks/bench_verify.py [--repeats 5] [--memory-windows 100]
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

from accumlint.verify import Setup, check_equivalence, synthetic_setup
from accumlint.verify.batches import concatenate, windows_of
from accumlint.verify.equivalence import verify_here
from accumlint.verify.loading import load_function

TARGET = str(Path(__file__).resolve().parents[1] / "fixtures" / "verify" / "correct_gated.py") + "::train"
K, WINDOWS = 4, 8


def wide_setup(width: int, batch: int) -> Setup:
    """An MLP of `width` hidden units: big enough that recording costs show."""
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(64, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 10))
    batches = [
        (torch.randn(batch, 64, generator=generator), torch.randint(0, 10, (batch,), generator=generator))
        for _ in range(K * WINDOWS)
    ]
    return Setup(model, lambda params: torch.optim.Adam(params, lr=1e-3), batches, nn.CrossEntropyLoss())


def plain_runs(setup: Setup) -> None:
    """Runs A and B as a user would, with no recording."""
    train = load_function(TARGET)
    groups = windows_of(setup.batches, K)
    for batches, k in ((setup.batches, K), ([concatenate(g) for g in groups], 1)):
        model = copy.deepcopy(setup.model)
        torch.manual_seed(0)
        train(model, setup.optimizer_factory(model.parameters()), batches, k, setup.loss_fn)


def median_time(action, repeats: int) -> float:
    action()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


BIG_WIDTH = 5000  # one 5000 x 5000 float32 layer: 100 MB of parameters


def big_setup(windows: int) -> Setup:
    generator = torch.Generator().manual_seed(0)
    model = nn.Linear(BIG_WIDTH, BIG_WIDTH)
    batches = [(torch.randn(2, BIG_WIDTH, generator=generator), torch.randn(2, BIG_WIDTH, generator=generator))
               for _ in range(K * (windows + 1))]
    return Setup(model, lambda params: torch.optim.SGD(params, lr=1e-3), batches, nn.MSELoss())


def memory_child(mode: str, windows: int) -> None:
    """Run one measurement and print its peak RSS (MB) as JSON."""
    torch.set_num_threads(1)
    setup = big_setup(windows)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if mode == "plain":
        plain_runs(setup)
        passed = None
    else:
        report = check_equivalence(TARGET, setup=setup, accum_steps=K, windows=windows)
        passed = report.passed
    # The verifier trains in a child process: its peak counts (the largest of
    # this process and its children; the child's resident pages include those
    # it shares with this process, so the figure is not an undercount).
    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
    print(json.dumps({"before": base, "peak": peak, "passed": passed}))


def memory_table(windows: int) -> None:
    model_mb = BIG_WIDTH * (BIG_WIDTH + 1) * 4 / 2**20
    print(f"\npeak memory, {model_mb:.0f} MB model (Linear {BIG_WIDTH}x{BIG_WIDTH}, SGD), K={K}, {windows} windows")
    print(f"{'run':<14} {'setup+data':>11} {'peak':>9} {'peak - setup':>13} {'x model':>8}")
    for mode in ("plain", "verify"):
        started = time.perf_counter()
        output = subprocess.run([sys.executable, __file__, "--memory-child", mode, "--memory-windows", str(windows)],
                                capture_output=True, text=True, check=True).stdout
        data = json.loads(output.strip().splitlines()[-1])
        grown = data["peak"] - data["before"]
        label = f"{mode} ({time.perf_counter() - started:.0f}s)"
        print(f"{label:<14} {data['before']:>9.0f}MB {data['peak']:>7.0f}MB {grown:>11.0f}MB {grown / model_mb:>7.1f}x"
              + ("" if data["passed"] is None else f"  equivalent={data['passed']}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-windows", type=int, default=100)
    parser.add_argument("--memory-child", choices=["plain", "verify"], help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.memory_child:
        memory_child(arguments.memory_child, arguments.memory_windows)
        return
    repeats = arguments.repeats
    torch.set_num_threads(1)
    setups = {
        "synthetic 8-16-4, float64, b=4": lambda: synthetic_setup(accum_steps=K, windows=WINDOWS, micro_batch=4, seed=0),
        "MLP 64-256-256-10, float32, b=32": lambda: wide_setup(256, 32),
        "MLP 64-1024-1024-10, float32, b=32": lambda: wide_setup(1024, 32),
    }
    print(f"K={K}, {WINDOWS} windows, median of {repeats}, 1 thread")
    first = synthetic_setup(accum_steps=K, windows=WINDOWS, micro_batch=4, seed=0)
    started = time.perf_counter()
    check_equivalence(TARGET, setup=first, accum_steps=K, windows=WINDOWS)
    print(f"first verification in this process: {(time.perf_counter() - started) * 1e3:.0f}ms")
    print(f"{'setup':<38} {'plain A+B':>11} {'verify':>11} {'ratio':>7} {'in process':>11} {'ratio':>7}")
    for label, make in setups.items():
        setup = make()
        plain = median_time(lambda: plain_runs(setup), repeats)
        verify = median_time(lambda: check_equivalence(TARGET, setup=setup, accum_steps=K, windows=WINDOWS), repeats)
        here = median_time(lambda: verify_here(TARGET, setup=setup, accum_steps=K, windows=WINDOWS), repeats)
        assert check_equivalence(TARGET, setup=setup, accum_steps=K, windows=WINDOWS).passed
        print(f"{label:<38} {plain * 1e3:>9.1f}ms {verify * 1e3:>9.1f}ms {verify / plain:>6.2f}x"
              f" {here * 1e3:>9.1f}ms {here / plain:>6.2f}x")
    memory_table(arguments.memory_windows)


if __name__ == "__main__":
    main()
