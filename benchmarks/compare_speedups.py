"""Whether accumlint's speed-ups change anything it says: the same checks with and without them.

Not a test: it prints, for each tree, whether the output of `accumlint check`
run as is and with `ACCUMLINT_NO_SPEEDUPS=1` (every reach of `accumlint.compat`
on its public path) is byte-identical, for the findings (`--output-format
json`) and for the fixes (`--diff --unsafe-fixes`, nothing written), exit
statuses included. The trees: the fixtures (fixtures/check, and each project of
fixtures/projects), the standard library of the running Python and, when it is
installed, torch's sources. Exits 1 when any output differs, showing the first
differing line.

    python benchmarks/compare_speedups.py [--skip-torch] [--no-prefilter] [TREE ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODES = {"findings": ["--output-format", "json"], "fixes": ["--diff", "--unsafe-fixes"]}


def trees(skip_torch: bool) -> list[Path]:
    found = [REPO / "fixtures" / "check", *sorted(p for p in (REPO / "fixtures" / "projects").iterdir() if p.is_dir())]
    found.append(Path(sysconfig.get_paths()["stdlib"]))
    torch = importlib.util.find_spec("torch")
    if torch is not None and torch.origin and not skip_torch:
        found.append(Path(torch.origin).parent)
    return found


def check(tree: Path, mode: list[str], speedups: bool, extra: list[str]) -> tuple[int, bytes, bytes, float]:
    """Exit status, standard output and error, and wall seconds of one check of `tree`."""
    env = {key: value for key, value in os.environ.items() if key != "ACCUMLINT_NO_SPEEDUPS"}
    if not speedups:
        env["ACCUMLINT_NO_SPEEDUPS"] = "1"
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "accumlint.cli", "check", "--no-cache", *extra, *mode, str(tree)],
        capture_output=True, env=env, cwd=REPO,
    )
    return run.returncode, run.stdout, run.stderr, time.perf_counter() - started


def first_difference(a: bytes, b: bytes) -> str:
    for number, (left, right) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if left != right:
            return f"line {number}:\n  with:    {left[:200]!r}\n  without: {right[:200]!r}"
    return f"one output is longer ({len(a)} vs {len(b)} bytes)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path, help="trees to compare (default: see above)")
    parser.add_argument("--skip-torch", action="store_true", help="leave torch's sources out")
    parser.add_argument("--no-prefilter", action="store_true", help="parse every file, not only those the text prefilter keeps")
    args = parser.parse_args()
    extra = ["--no-prefilter"] if args.no_prefilter else []
    print(f"Python {sys.version.split()[0]}, LibCST {_libcst_version()}")
    identical = True
    for tree in [tree.resolve() for tree in args.trees] or trees(args.skip_torch):
        for name, mode in MODES.items():
            with_them = check(tree, mode, True, extra)
            without = check(tree, mode, False, extra)
            same = with_them[:3] == without[:3]
            identical &= same
            print(
                f"{'identical' if same else 'DIFFERENT':<9} {name:<8} {tree}  "
                f"(exit {with_them[0]}, {len(with_them[1])} bytes; {with_them[3]:.1f} s with speed-ups, "
                f"{without[3]:.1f} s without)",
                flush=True,
            )
            if not same:
                if with_them[0] != without[0]:
                    print(f"  exit status {with_them[0]} with, {without[0]} without")
                for label, index in (("output", 1), ("errors", 2)):
                    if with_them[index] != without[index]:
                        print(f"  {label} differ at {first_difference(with_them[index], without[index])}")
    print("all identical" if identical else "SOME OUTPUT DIFFERS")
    sys.exit(0 if identical else 1)


def _libcst_version() -> str:
    from importlib.metadata import version

    return version("libcst")


if __name__ == "__main__":
    main()
