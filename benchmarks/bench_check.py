"""Benchmark of `accumlint check` over a tree (default: the CPython standard library).

Not a test: it prints figures, measured in one run so that ratios compare
like with like on the same machine:

- files/s and MB/s with and without the text prefilter,
- with the prefilter off (every file parsed): 1 job vs all cores, and a cold
  vs a warm cache,
- the start-up time of `accumlint --version` against a bare `python -c pass`.

Each figure runs the real command line in a subprocess, with `-v` so that
the counts of analysed and cached files are printed next to it (a warm run
that is not all cache hits means accumlint's own code changed in between:
the cache is keyed by it). Test folders are excluded (through a temporary
config).

    python benchmarks/bench_check.py [TREE] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from accumlint.check.config import Overrides, Resolver
from accumlint.source.files import discover

EXCLUDE = ["test/", "tests/", "idle_test/"]


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall time of a command, and its stderr (errors of single files exit 2: they count)."""
    started = time.perf_counter()
    result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1, 2) or "accumlint: error" in result.stderr:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return elapsed, result.stderr


def _tree_size(tree: str, config: Path) -> tuple[int, int]:
    resolver = Resolver(Overrides(config_path=config))
    settings = resolver.settings_for(tree)
    files = [s.display for s in discover([tree], lambda path, is_dir: settings.is_excluded(path, is_dir))]
    return len(files), sum(os.path.getsize(path) for path in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--repeat", type=int, default=10, help="start-up timings to take (median)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1

    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "pyproject.toml"
        config.write_text("[tool.accumlint]\nexclude = [%s]\n" % ", ".join(f'"{p}"' for p in EXCLUDE))
        files, size = _tree_size(args.tree, config)
        megabytes = size / 1e6
        print(f"tree: {args.tree}: {files} files, {megabytes:.1f} MB (excluding {', '.join(EXCLUDE)}); {cores} cores")

        check = [sys.executable, "-m", "accumlint.cli", "check", args.tree, "--config", str(config), "-q", "-v"]

        def measure(label: str, *options: str, cache: str | None = None) -> float:
            env = {**os.environ, "ACCUMLINT_CACHE_DIR": cache or os.path.join(scratch, "unused")}
            extra = list(options) if cache else [*options, "--no-cache"]
            seconds, stderr = _timed(check + extra, env)
            counts = re.search(r"(\d+) analysed, (\d+) from cache", stderr)
            detail = f"({counts.group(1)} analysed, {counts.group(2)} from cache)" if counts else ""
            print(f"  {label:<38} {seconds:7.2f} s {files / seconds:8.1f} files/s {megabytes / seconds:6.2f} MB/s {detail}")
            return seconds

        print("prefilter (all cores, no cache):")
        with_prefilter = measure("with prefilter")
        without_prefilter = measure("without prefilter (every file parsed)", "--no-prefilter")
        print("cores (no prefilter, no cache):")
        one_job = measure("--jobs 1", "--no-prefilter", "--jobs", "1")
        all_jobs = measure(f"--jobs {cores}", "--no-prefilter", "--jobs", str(cores))
        print("cache (no prefilter, all cores):")
        cache = os.path.join(scratch, "cache")
        cold = measure("cold cache", "--no-prefilter", cache=cache)
        warm = measure("warm cache", "--no-prefilter", cache=cache)

        env = dict(os.environ)
        startup = statistics.median(
            _timed([sys.executable, "-m", "accumlint.cli", "--version"], env)[0] for _ in range(args.repeat)
        )
        bare = statistics.median(_timed([sys.executable, "-c", "pass"], env)[0] for _ in range(args.repeat))
        print(f"start-up (median of {args.repeat}): accumlint --version {startup * 1000:.0f} ms, python -c pass {bare * 1000:.0f} ms")

    print("ratios:")
    print(f"  prefilter speed-up           {without_prefilter / with_prefilter:6.1f}x")
    print(f"  {cores} cores vs 1 job            {one_job / all_jobs:6.2f}x")
    print(f"  warm vs cold cache speed-up  {cold / warm:6.1f}x")
    print(f"  start-up vs bare python      {startup / bare:6.2f}x")


if __name__ == "__main__":
    main()
