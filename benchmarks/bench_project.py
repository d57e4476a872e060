"""Issue 22's speed limits for the project index, measured side by side in one run.

Not a test: it prints figures. Each workload runs this checkout's accumlint and a
baseline (another checkout's, `--baseline PATH`, run with `PYTHONPATH=PATH`) as
separate processes, alternately, `--repeat` times; a ratio is the median of the
pairs' ratios of CPU seconds (user + system of the process and its children), so
that a machine whose speed drifts sees each pair at one speed. Both checkouts
first get what an installed copy has (`installed.prepare`: compiled bytecode and
the code `dataclasses` writes), so that neither pays on every run for compiling
its own source.

| workload | limit |
|---|---|
| whole tree: torch's installed sources (or `--torch-subset` folders of them), `--no-cache` | 1.3 |
| whole tree: each folder under `--eco` (the ecosystem checkouts), `--no-cache` | 1.3 |
| one file in a generated 500-module project, result cache warm: the loop module | 1.5 |
| the same, the helper module the loop calls (its importers are asked) | 1.5 |
| the same two, cold (`--no-cache`): shown, no limit | - |

    python benchmarks/bench_project.py --baseline /work/wt-before [--repeat 5]
        [--torch-subset optim nn/modules utils/data] [--eco /work/eco-seen] [--skip-torch]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from installed import prepare

REPO = Path(__file__).resolve().parent.parent
LIMIT_TREE = 1.3
LIMIT_ONE_FILE = 1.5
MODULES = 500

# Runs a command and prints its children's CPU seconds as JSON (the workers are counted).
_MEASURE = r"""
import json, resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime}))
"""

_HELPERS = '''import torch.nn.functional as F


def backward_step(loss, optimizer, accum_steps):
    (loss / accum_steps).backward()


def batch_objective(model, batch):
    return F.cross_entropy(model(batch[0]), batch[1])
'''
_LOOP = '''import torch

from pkg.steps import backward_step, batch_objective
from pkg.m0 import transform0


def train(model, loader, accum_steps=8):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    for i, batch in enumerate(loader):
        loss = batch_objective(model, transform0(batch))
        backward_step(loss, optimizer, accum_steps)
        if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
            optimizer.step()
            optimizer.zero_grad()
'''
# An ordinary module of the project: imports, a class, loops that are not training loops.
_MODULE = '''"""Module {i} of a generated project."""
import os
import json
from pkg.m{next} import transform{next} as following

LIMIT = {i}


class Record{i}:
    def __init__(self, values):
        self.values = list(values)
        self.total = 0

    def update(self, value):
        self.values.append(value)
        self.total += value
        return self.total


def transform{i}(batch):
    out = []
    for item in batch:
        if isinstance(item, dict):
            out.append({{key: value for key, value in item.items() if key != "skip"}})
        else:
            out.append(item)
    return out


def load{i}(path):
    with open(os.path.join(path, "data{i}.json")) as handle:
        rows = json.load(handle)
    while rows and rows[-1] is None:
        rows.pop()
    return [following(row) for row in rows[:LIMIT]]
'''


def generate(root: Path) -> tuple[Path, Path]:
    """A project of MODULES modules; returns its loop module and its helper module."""
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'generated'\n")
    (root / "pkg" / "__init__.py").write_text("")
    for i in range(MODULES):
        (root / "pkg" / f"m{i}.py").write_text(_MODULE.format(i=i, next=(i + 1) % MODULES))
    helper = root / "pkg" / "steps.py"
    helper.write_text(_HELPERS)
    loop = root / "train.py"
    loop.write_text(_LOOP)
    return loop, helper


def _measure(command: list[str], env: dict, cwd: Path) -> float:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], env=env, cwd=cwd,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["cpu"]


def _environments(baseline: Path) -> tuple[dict, dict]:
    mine = {**os.environ, "PYTHONPATH": str(REPO)}
    theirs = {**os.environ, "PYTHONPATH": str(baseline)}
    return mine, theirs


def pair(name: str, arguments: list[str], cwd: Path, baseline: Path, repeat: int, limit: float | None,
         warm: bool = False) -> None:
    """Run both sides `repeat` times, alternately; print the medians and the ratio."""
    mine_env, base_env = _environments(baseline)
    command = [sys.executable, "-m", "accumlint", "check", "--exit-zero", *arguments]
    caches = {}
    for side, env in (("mine", mine_env), ("base", base_env)):
        if warm:  # a cache of each side's own, filled once before measuring
            caches[side] = Path(tempfile.mkdtemp(prefix=f"bench-{side}-"))
            subprocess.run(command + ["--cache-dir", str(caches[side])], env=env, cwd=cwd, capture_output=True)
    mine, base = [], []
    for _ in range(repeat):
        for side, env, found in (("mine", mine_env, mine), ("base", base_env, base)):
            extra = ["--cache-dir", str(caches[side])] if warm else ["--no-cache"]
            found.append(_measure(command + extra, env, cwd))
    ratio = statistics.median(m / b for m, b in zip(mine, base) if b > 0)
    verdict = "" if limit is None else ("  ok" if ratio <= limit else f"  OVER the limit {limit}")
    print(f"{name:<46} {statistics.median(mine):8.3f}s {statistics.median(base):8.3f}s  x{ratio:.2f}{verdict}",
          flush=True)
    for folder in caches.values():
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the baseline's code")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--torch-subset", nargs="*", default=None,
                        help="folders under torch/ to check instead of all of it")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--eco", type=Path, default=None, help="a folder of checkouts, each checked as a tree")
    args = parser.parse_args()
    print(f"{'workload':<46} {'this':>9} {'baseline':>9}  ratio", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        loop, helper = generate(Path(folder) / "project")
        cwd = loop.parent
        for checkout in (REPO, args.baseline):
            prepare(checkout, loop)
        for warm in (True, False):
            state = "cache warm" if warm else "cold"
            pair(f"one file, loop module ({state})", [str(loop)], cwd, args.baseline, args.repeat,
                 LIMIT_ONE_FILE if warm else None, warm)
            pair(f"one file, helper module ({state})", [str(helper)], cwd, args.baseline, args.repeat,
                 LIMIT_ONE_FILE if warm else None, warm)
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin is not None and not args.skip_torch:
        torch = Path(spec.origin).parent
        targets = [str(torch / sub) for sub in args.torch_subset] if args.torch_subset else [str(torch)]
        pair("whole tree: torch" + (f" ({' '.join(args.torch_subset)})" if args.torch_subset else ""),
             targets, torch.parent, args.baseline, args.repeat, LIMIT_TREE)
    if args.eco is not None:
        for checkout in sorted(p for p in args.eco.iterdir() if p.is_dir()):
            pair(f"whole tree: {checkout.name}", [str(checkout)], checkout, args.baseline, args.repeat, LIMIT_TREE)


if __name__ == "__main__":
    main()
