"""Issue 24's speed limit on loop-dense code checked in place, measured side by side in one run.

Not a test: it prints figures. The files named in `FILE_LIST` (one path a line, checked
where they stand, so that their project is the tree around them) are checked with
`check --jobs 1 --no-cache` and parsed with LibCST's `parse_module`, as separate processes,
alternately, `--repeat` times; with `--baseline PATH` a third process checks them with
another checkout's code (`PYTHONPATH=PATH`). A ratio is the median of the rounds' ratios
of CPU seconds (user + system of the process and its children), so that a machine whose
speed drifts sees each round at one speed. The limit: check / parse at most 1.5.

    python benchmarks/bench_dense.py FILE_LIST [--repeat 3] [--baseline /work/wt-before]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT = 1.5

# Runs a command and prints its children's CPU seconds as JSON (the workers are counted).
_MEASURE = r"""
import json, resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime}))
"""
_PARSE = """import libcst, sys
for path in sys.argv[1:]:
    try:
        libcst.parse_module(open(path, "rb").read())
    except Exception:
        pass
"""


def _cpu(command: list[str], env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], env=env, cwd=os.path.dirname(os.path.abspath(os.sep)),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["cpu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file_list", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout of the baseline's code")
    args = parser.parse_args()
    files = [line.strip() for line in args.file_list.read_text().splitlines() if line.strip()]
    check = [sys.executable, "-m", "accumlint", "check", "--jobs", "1", "--no-cache", "--exit-zero", "-q", *files]
    mine_env = {**os.environ, "PYTHONPATH": str(REPO)}
    rounds: list[dict[str, float]] = []
    for _ in range(args.repeat):
        found = {"check": _cpu(check, mine_env), "parse": _cpu([sys.executable, "-c", _PARSE, *files], os.environ)}
        if args.baseline is not None:
            found["baseline"] = _cpu(check, {**os.environ, "PYTHONPATH": str(args.baseline)})
        rounds.append(found)
    for side in rounds[0]:
        print(f"{side:<9} {statistics.median(r[side] for r in rounds):8.2f}s cpu (median of {len(rounds)})")
    ratio = statistics.median(r["check"] / r["parse"] for r in rounds)
    verdict = "ok" if ratio <= LIMIT else f"OVER the limit {LIMIT}"
    print(f"check / parse          x{ratio:.2f}  {verdict}")
    if args.baseline is not None:
        print(f"check / baseline check x{statistics.median(r['check'] / r['baseline'] for r in rounds):.2f}")
        print(f"baseline / parse       x{statistics.median(r['baseline'] / r['parse'] for r in rounds):.2f}")


if __name__ == "__main__":
    main()
