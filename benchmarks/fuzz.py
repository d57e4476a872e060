"""The larger fuzz run: many generated and mutated programs,
every combination of spliced mistakes, and a report of what went wrong.

    python benchmarks/fuzz.py --examples 2000            # mutated fixtures + hypothesmith
    python benchmarks/fuzz.py --pairs                     # every mistake combination (tests/mistakes.py)
    python benchmarks/fuzz.py --examples 500 --save out/  # keep the failing inputs
    python benchmarks/fuzz.py --endings 500               # fixtures with mixed CR / CRLF / LF line endings

The properties are those of tests/fuzzing.py (CI runs a few examples of them in
tests/test_fuzz.py). Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from fuzzing import (  # noqa: E402
    FIXTURE_TEXTS,
    grammar_programs,
    line_ending_problems,
    mixed_line_endings,
    mutated_fixtures,
    problems,
)
from mistakes import MISTAKES, spliced  # noqa: E402


class Run:
    """Counts inputs and keeps the failures (first line of each problem as its kind)."""

    def __init__(self, save: Path | None) -> None:
        self.inputs = 0
        self.failures: list[tuple[str, list[str]]] = []
        self.kinds: Counter = Counter()
        self.save = save

    def check(self, text: str, property=problems) -> None:
        self.inputs += 1
        found = property(text)
        if found:
            self.failures.append((text, found))
            for problem in found:
                self.kinds[problem.splitlines()[0][:100]] += 1
            if self.save is not None:
                self.save.mkdir(parents=True, exist_ok=True)
                (self.save / f"failure_{len(self.failures):04d}.py").write_text(
                    text + "\n# " + "\n# ".join("\n".join(found).splitlines()) + "\n", encoding="utf-8")


def fuzz(run: Run, examples: int) -> None:
    budget = settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))

    @budget
    @given(mutated_fixtures())
    def mutated(text: str) -> None:
        run.check(text)

    @settings(budget, max_examples=max(examples // 4, 1))
    @given(grammar_programs())
    def generated(text: str) -> None:
        run.check(text)

    mutated()
    generated()


def endings(run: Run, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(mixed_line_endings())
    def mixed(text: str) -> None:
        run.check(text, line_ending_problems)

    mixed()


def pairs(run: Run) -> None:
    for text in FIXTURE_TEXTS:
        for size in (1, 2):
            for combo in itertools.permutations(MISTAKES, size):
                made = spliced(text, *combo)
                if made is not None:
                    run.check(made)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=0, help="hypothesis examples of mutated fixtures")
    parser.add_argument("--pairs", action="store_true", help="every ordered pair of spliced mistakes on every fixture")
    parser.add_argument("--endings", type=int, default=0, help="hypothesis examples of fixtures with mixed line endings")
    parser.add_argument("--save", type=Path, help="folder for the failing inputs")
    args = parser.parse_args()
    run = Run(args.save)
    start = time.perf_counter()
    if args.pairs:
        pairs(run)
    if args.examples:
        fuzz(run, args.examples)
    if args.endings:
        endings(run, args.endings)
    elapsed = time.perf_counter() - start
    print(f"{run.inputs} inputs in {elapsed:.0f} s, {len(run.failures)} failed")
    for kind, count in run.kinds.most_common():
        print(f"  {count:5d}  {kind}")
    return 1 if run.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
