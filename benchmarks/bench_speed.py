"""The four speed ratios accumlint is held to, measured side by side in one run.

Not a test: it prints figures. Each workload runs accumlint and its baseline
as separate processes, alternately, `--repeat` times, and reports the median
CPU seconds (user + system of the process and its children), the median wall
seconds and the peak resident memory of the largest process. The ratio is the
median of each pair's ratio (a run of accumlint against the baseline run right
after it): on a shared machine whose speed drifts over minutes, a pair sees the
same speed, where two medians taken apart need not:

| workload | accumlint | baseline |
|---|---|---|
| stdlib without tests (no training loops) | `check` | `ruff check --select E9,F` |
| loop-dense code (the fixtures), one process | `check --jobs 1` | LibCST `parse_module` of the same files |
| a large ML tree (torch's installed sources) | `check` | `ruff check --select E9,F` |
| one training file | `check FILE` | `python -c "import libcst"` |

accumlint's own figures are measured twice in each pair's turn: as it runs, and
with its speed-ups off (`ACCUMLINT_NO_SPEEDUPS=1`, the public paths of
`accumlint.compat`), so the table shows what they win, measured in the same run.

accumlint always runs with `--no-cache` (a warm cache would measure nothing)
and with test folders excluded from the stdlib, as in the issue that set the
targets. Before measuring, accumlint's bytecode is compiled (`compileall`, as
pip does when it installs a package): where PYTHONDONTWRITEBYTECODE is set,
every run would otherwise recompile its ~50 modules, about 80 ms, a cost no
installed copy pays. For the same reason one check runs first with bytecode
writing allowed, which keeps the code `dataclasses` writes for LibCST's node
types (`accumlint.compat.generated_code`), as any installed copy's first run does.
ruff must be on PATH (`pip install ruff`); torch must be installed for the
third workload (it is skipped otherwise).

    python benchmarks/bench_speed.py [--repeat N] [--skip-torch]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from installed import prepare

REPO = Path(__file__).resolve().parent.parent
# Tests and the installed third-party packages are not "the standard library".
TEST_FOLDERS = ["test/", "tests/", "idle_test/", "site-packages/"]
TARGETS = {"stdlib": 1.0, "loop-dense": 1.5, "ML tree": 5.0, "one file": 1.3}

# Runs a command and prints its children's CPU seconds and peak RSS (KiB) as JSON,
# so that every measured process (and the pool workers it waits for) is counted.
_MEASURE = r"""
import json, resource, subprocess, sys, time
started = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "rss_kib": usage.ru_maxrss}))
"""

_PARSE_ONLY = r"""
import sys, libcst
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        libcst.parse_module(handle.read())
"""


@dataclass
class Sample:
    cpu: float
    wall: float
    rss_mib: float


# accumlint's environment with its speed-ups off (accumlint.compat's kill switch).
NO_SPEEDUPS = {**os.environ, "ACCUMLINT_NO_SPEEDUPS": "1"}


def measure(command: list[str], env: dict[str, str] | None = None) -> Sample:
    output = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, check=True, env=env
    )
    figures = json.loads(output.stdout)
    return Sample(figures["cpu"], figures["wall"], figures["rss_kib"] / 1024)


def median(samples: list[Sample]) -> Sample:
    return Sample(
        statistics.median(s.cpu for s in samples),
        statistics.median(s.wall for s in samples),
        max(s.rss_mib for s in samples),
    )


@dataclass
class Row:
    ours: Sample
    plain: Sample  # accumlint without its speed-ups
    theirs: Sample
    ratio: float  # the median of the pairs' CPU ratios, accumlint / baseline
    speedup: float  # the median of the turns' CPU ratios, without / with the speed-ups


def side_by_side(ours: list[str], baseline: list[str], repeat: int) -> Row:
    """Alternate the commands (accumlint, accumlint without its speed-ups, the baseline)
    so that machine load hits them alike; the medians, and the medians of the turns' ratios."""
    mine: list[Sample] = []
    plain: list[Sample] = []
    theirs: list[Sample] = []
    for _ in range(repeat):
        mine.append(measure(ours))
        plain.append(measure(ours, NO_SPEEDUPS))
        theirs.append(measure(baseline))
    ratios = [a.cpu / b.cpu if b.cpu else float("inf") for a, b in zip(mine, theirs)]
    speedups = [b.cpu / a.cpu if a.cpu else float("inf") for a, b in zip(mine, plain)]
    return Row(median(mine), median(plain), median(theirs), statistics.median(ratios), statistics.median(speedups))


def python_files(tree: Path, excluded: list[str]) -> list[str]:
    files = []
    for path in sorted(tree.rglob("*.py")):
        relative = path.relative_to(tree).as_posix() + ("/" if path.is_dir() else "")
        if not any(f"/{folder}" in f"/{relative}" for folder in excluded):
            files.append(str(path))
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (median)")
    parser.add_argument("--skip-torch", action="store_true", help="skip the large ML tree")
    args = parser.parse_args()
    ruff = shutil.which("ruff")
    if ruff is None:
        raise SystemExit("ruff is not on PATH: pip install ruff")
    one = REPO / "fixtures" / "check" / "plain" / "bug_backward_after_step.py"
    if not one.is_file():
        raise SystemExit(f"missing benchmark file {one}")
    prepare(REPO, one)  # what an installed copy has
    accumlint = [sys.executable, "-m", "accumlint.cli", "check", "--no-cache", "-q"]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    fixtures = REPO / "fixtures"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"ruff: {subprocess.run([ruff, '--version'], capture_output=True, text=True).stdout.strip()}")

    rows: list[tuple[str, str, str, Row]] = []
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "pyproject.toml"
        config.write_text("[tool.accumlint]\nexclude = [%s]\n" % ", ".join(f'"{p}"' for p in TEST_FOLDERS))
        ruff_exclude = ",".join(folder.rstrip("/") for folder in TEST_FOLDERS)

        row = side_by_side(
            [*accumlint, str(stdlib), "--config", str(config)],
            [ruff, "check", "--no-cache", "--select", "E9,F", "--exit-zero", "--extend-exclude", ruff_exclude, str(stdlib)],
            args.repeat,
        )
        rows.append(("stdlib", f"{len(python_files(stdlib, TEST_FOLDERS))} files", "ruff E9,F", row))

        dense = python_files(fixtures, [])
        row = side_by_side(
            [*accumlint, "--jobs", "1", str(fixtures)],
            [sys.executable, "-c", _PARSE_ONLY, *dense],
            args.repeat,
        )
        rows.append(("loop-dense", f"{len(dense)} files, 1 process", "LibCST parse", row))

        torch_spec = importlib.util.find_spec("torch")
        if torch_spec is not None and torch_spec.origin and not args.skip_torch:
            torch_tree = Path(torch_spec.origin).parent
            row = side_by_side(
                [*accumlint, str(torch_tree)],
                [ruff, "check", "--no-cache", "--select", "E9,F", "--exit-zero", str(torch_tree)],
                args.repeat,
            )
            rows.append(("ML tree", f"torch {len(python_files(torch_tree, []))} files", "ruff E9,F", row))

        row = side_by_side(
            [*accumlint, str(one)],
            [sys.executable, "-c", "import libcst"],
            max(args.repeat, 5),
        )
        rows.append(("one file", one.name, "import libcst", row))

    print()
    print(
        f"{'workload':<11} {'what':<22} {'accumlint cpu/wall/MiB':>24} {'no speed-ups cpu/wall':>22} "
        f"{'speed-ups':>9} {'baseline':<14} {'cpu/wall/MiB':>20} {'cpu ratio':>9} {'target':>7}"
    )
    for label, what, baseline, row in rows:
        ours, plain, theirs = row.ours, row.plain, row.theirs
        verdict = "ok" if row.ratio <= TARGETS[label] else "MISSED"
        print(
            f"{label:<11} {what:<22} {ours.cpu:8.2f} {ours.wall:7.2f} {ours.rss_mib:7.0f} "
            f"{plain.cpu:14.2f} {plain.wall:7.2f} {row.speedup:8.2f}x "
            f"{baseline:<14} {theirs.cpu:6.2f} {theirs.wall:6.2f} {theirs.rss_mib:6.0f} "
            f"{row.ratio:8.2f}x {TARGETS[label]:5.1f}x {verdict}"
        )


if __name__ == "__main__":
    main()
