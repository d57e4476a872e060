"""Real-code check (the idea of ruff's ecosystem check): accumlint against hand labels.

`benchmarks/ecosystem/repos.toml` lists public repositories pinned to commits
and, for each labelled file, the findings a reader of the code expects
(path, code, line, a one-line reason; an empty list means the file is
correct) and how the file was judged. This script runs `accumlint check` over
LOCAL checkouts of them and prints every finding not on the list, every
expected finding that is missing, precision, recall and run times. It never
downloads anything: pass each checkout's folder on the command line.

    python benchmarks/ecosystem.py owner+name=/path/to/checkout ... [--root DIR]

`--root DIR` takes every listed repository found at `DIR/owner+name`.
Repositories without a checkout are skipped and said so. A checkout that is a
git work tree at another commit than the pinned one is flagged: its lines may
have moved. Each repository's labelled files are checked in one `accumlint`
process; when that takes longer than its budget, each file is timed alone so
that a slow file shows. Not part of CI (CI has no network to get the
repositories).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Iterable, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (accumlint's oldest): the same parser from PyPI
    import tomli as tomllib

LABELS = Path(__file__).with_name("ecosystem") / "repos.toml"
# A file slower than this (CPU seconds) is reported: a pre-commit hook checks one file at a time.
SLOW_FILE_SECONDS = 3.0
# A repository's run slower than this budget per file (plus one slow file) is timed file by file.
BUDGET_PER_FILE_SECONDS = 0.5
ERROR_CODES = {"syntax-error", "internal-error"}


@dataclass(frozen=True)
class Finding:
    """One diagnostic, as accumlint reports it or as a label expects it."""

    path: str
    code: str
    line: int
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.path, self.code, self.line)


@dataclass(frozen=True)
class LabelledFile:
    """`doubtful`: findings a careful reader could argue either way; never counted."""

    path: str
    judged: str
    expected: tuple[Finding, ...]
    doubtful: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class Repository:
    name: str
    commit: str
    files: tuple[LabelledFile, ...]

    @property
    def folder_name(self) -> str:
        """`owner+name`, the form used on the command line and under `--root`."""
        return self.name.replace("/", "+")


@dataclass
class Comparison:
    """Found against expected, over the labelled files of one or more repositories."""

    matched: list[Finding] = field(default_factory=list)
    unexpected: list[Finding] = field(default_factory=list)
    missing: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)
    doubtful: list[Finding] = field(default_factory=list)

    def extend(self, other: "Comparison") -> None:
        self.matched += other.matched
        self.unexpected += other.unexpected
        self.missing += other.missing
        self.errors += other.errors
        self.doubtful += other.doubtful

    @property
    def precision(self) -> Optional[float]:
        reported = len(self.matched) + len(self.unexpected)
        return len(self.matched) / reported if reported else None

    @property
    def recall(self) -> Optional[float]:
        expected = len(self.matched) + len(self.missing)
        return len(self.matched) / expected if expected else None


def load_labels(path: Path = LABELS) -> list[Repository]:
    """The committed list; a malformed entry stops the run (labels are data we own)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    repositories = []
    for repo in data.get("repo", []):
        files = []
        for entry in repo.get("file", []):
            if "findings" not in entry or not entry.get("judged"):
                raise SystemExit(f"{path}: {repo['name']}:{entry.get('path')}: needs `findings` and `judged`")
            expected, doubtful = (
                tuple(Finding(entry["path"], item["code"], int(item["line"]), item.get("reason", "")) for item in items)
                for items in (entry["findings"], entry.get("doubtful", []))
            )
            files.append(LabelledFile(entry["path"], entry["judged"], expected, doubtful))
        paths = [f.path for f in files]
        if len(paths) != len(set(paths)):
            raise SystemExit(f"{path}: {repo['name']}: a file is labelled twice")
        repositories.append(Repository(repo["name"], repo["commit"], tuple(files)))
    return repositories


def compare(expected: Iterable[Finding], found: Iterable[Finding], doubtful: Iterable[Finding] = ()) -> Comparison:
    """Match on (path, code, line); errors and doubtful findings are kept apart, never counted.

    A key is one place: two findings of one code on one line (a scheduler's warmup and
    total lengths written on the same line) count once, as the labels, keyed the same
    way, do."""
    result = Comparison()
    wanted = {finding.key: finding for finding in expected}
    arguable = {finding.key: finding for finding in doubtful}
    seen: set[tuple[str, str, int]] = set()
    reported: set[tuple[str, str, int]] = set()
    for finding in found:
        if finding.code in ERROR_CODES:
            result.errors.append(finding)
            continue
        if finding.key in reported:
            continue
        reported.add(finding.key)
        if finding.key in arguable:
            result.doubtful.append(arguable[finding.key])
        elif finding.key in wanted and finding.key not in seen:
            seen.add(finding.key)
            result.matched.append(wanted[finding.key])
        else:
            result.unexpected.append(finding)
    result.missing = [finding for key, finding in wanted.items() if key not in seen]
    return result


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_accumlint(checkout: Path, paths: list[str], config: Path) -> tuple[list[Finding], float, str]:
    """accumlint's JSON findings for some files of a checkout, its CPU time and any stderr.

    CPU time, not wall time: on a shared machine the wall time says more
    about the neighbours than about accumlint.
    """
    command = [
        sys.executable, "-m", "accumlint.cli", "check", *paths,
        "--output-format", "json", "--select", "ALL", "--no-cache", "--exit-zero",
        "--jobs", "1", "--config", str(config),
    ]  # fmt: skip
    started = _children_cpu_seconds()
    result = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
    elapsed = _children_cpu_seconds() - started
    try:
        diagnostics = json.loads(result.stdout or "[]")
    except json.JSONDecodeError:
        message = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return [Finding(path, "internal-error", 1, message[0]) for path in paths], elapsed, result.stderr
    findings = [Finding(d["path"], d["code"], int(d["line"]), d.get("message", "")) for d in diagnostics]
    return findings, elapsed, result.stderr if result.returncode not in (0, 1) else ""


def checkout_commit(checkout: Path) -> Optional[str]:
    """HEAD of a git work tree, or None for a plain copy (e.g. `git archive` output)."""
    if not (checkout / ".git").exists():
        return None
    result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True)
    return result.stdout.strip() or None


def _ratio(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.3f}"


@dataclass
class RepositoryRun:
    """One repository's comparison and times (`file_seconds` only when it went over its budget)."""

    name: str
    files: int
    comparison: Comparison
    seconds: float = 0.0
    file_seconds: list[tuple[float, str]] = field(default_factory=list)


def check_repository(repo: Repository, checkout: Path, config: Path) -> RepositoryRun:
    """Compare one repository's labelled files in one accumlint run.

    When the run goes over its budget every file is timed alone, so that a
    slow one shows.
    """
    total = Comparison()
    present = [f for f in repo.files if (checkout / f.path).is_file()]
    for labelled in repo.files:
        if labelled not in present:
            total.errors.append(Finding(labelled.path, "missing-file", 0, "not in this checkout"))
    run = RepositoryRun(repo.name, len(present), total)
    if not present:
        return run
    found, run.seconds, stderr = run_accumlint(checkout, [f.path for f in present], config)
    if stderr.strip():
        total.errors.append(Finding(present[0].path, "stderr", 0, stderr.strip().splitlines()[-1]))
    if run.seconds > SLOW_FILE_SECONDS + BUDGET_PER_FILE_SECONDS * len(present):
        run.file_seconds = [(run_accumlint(checkout, [f.path], config)[1], f.path) for f in present]
    by_path: dict[str, list[Finding]] = {}
    for finding in found:
        by_path.setdefault(finding.path, []).append(finding)
    for labelled in present:
        total.extend(compare(labelled.expected, by_path.pop(labelled.path, []), labelled.doubtful))
    total.unexpected += [finding for stray in by_path.values() for finding in stray]  # a path not as given
    return run


def parse_checkouts(values: list[str], root: Optional[str], repositories: list[Repository]) -> dict[str, Path]:
    """`owner+name=/path` (or `owner/name=/path`) arguments, plus what `--root` holds."""
    checkouts: dict[str, Path] = {}
    if root:
        for repo in repositories:
            folder = Path(root) / repo.folder_name
            if folder.is_dir():
                checkouts[repo.folder_name] = folder
    for value in values:
        name, separator, folder = value.partition("=")
        if not separator or not folder:
            raise SystemExit(f"expected owner+name=/path, got {value!r}")
        checkouts[name.replace("/", "+")] = Path(folder)
    known = {repo.folder_name for repo in repositories}
    for name in checkouts:
        if name not in known:
            raise SystemExit(f"{name}: not in {LABELS.name}")
    return checkouts


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", help="owner+name=/path/to/checkout")
    parser.add_argument("--root", help="a folder holding checkouts named owner+name")
    parser.add_argument("--labels", type=Path, action="append",
                        help="a list of labelled repositories (repeatable; default: the committed list)")
    parser.add_argument("--codes", help="only these code prefixes, comma-separated (e.g. GA1,GA201)")
    parser.add_argument("--scores-only", action="store_true",
                        help="print only the figures (precision, recall, per code), never a file, line or "
                        "repository: for a frozen test half that whoever tunes the checker must not see")
    args = parser.parse_args(argv)

    repositories = [repo for labels in (args.labels or [LABELS]) for repo in load_labels(labels)]
    checkouts = parse_checkouts(args.checkouts, args.root, repositories)
    if not checkouts:
        parser.error("no checkout given (owner+name=/path or --root DIR)")
    prefixes = tuple(p.strip().upper() for p in args.codes.split(",")) if args.codes else None

    runs: list[RepositoryRun] = []
    skipped = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "pyproject.toml"  # the checkouts' own configs must not apply
        config.write_text("[tool.accumlint]\n")
        for repo in repositories:
            checkout = checkouts.get(repo.folder_name)
            if checkout is None:
                skipped += 1
                if not args.scores_only:
                    print(f"skipped {repo.name}: no checkout given")
                continue
            head = checkout_commit(checkout)
            if head and head != repo.commit and not args.scores_only:
                print(f"warning: {repo.name} is at {head[:12]}, labels are for {repo.commit[:12]}")
            run = check_repository(repo, checkout, config)
            if prefixes:
                run.comparison = _only(run.comparison, prefixes)
            runs.append(run)
    elapsed = time.perf_counter() - started
    if skipped and args.scores_only:
        print(f"skipped {skipped} repositories without a checkout")
    print(scores(runs, elapsed) if args.scores_only else report(runs, elapsed))
    return 0


def _only(result: Comparison, prefixes: tuple[str, ...]) -> Comparison:
    """The comparison restricted to some codes (errors are always kept)."""
    lists = {name: [f for f in items if f.code.startswith(prefixes)] for name, items in _lists(result)}
    return Comparison(**{**lists, "errors": result.errors})


def _named(result: Comparison, repo: str) -> Comparison:
    """The same findings with the repository in the path, for the overall lists."""
    return Comparison(
        **{name: [replace(f, path=f"{repo}:{f.path}") for f in items] for name, items in _lists(result)}
    )


def _lists(result: Comparison) -> list[tuple[str, list[Finding]]]:
    return [(item.name, getattr(result, item.name)) for item in fields(result)]


def report(runs: list[RepositoryRun], elapsed: float) -> str:
    """The lists of differences, the per-repository and per-code counts, and the figures."""
    overall = Comparison()
    for run in runs:
        overall.extend(_named(run.comparison, run.name))
    lines = ["per repository: files, matched, unexpected, missing, errors, CPU seconds"]
    for run in runs:
        c = run.comparison
        lines.append(
            f"  {run.name:<40} {run.files:3d} {len(c.matched):4d} {len(c.unexpected):4d}"
            f" {len(c.missing):4d} {len(c.errors):3d} {run.seconds:7.2f}"
        )
    sections = [
        ("unexpected findings (false positives: not on the list)", overall.unexpected),
        ("missing findings (expected, not reported)", overall.missing),
        ("errors (internal errors, syntax errors, missing files, stderr)", overall.errors),
        ("doubtful findings reported (labelled arguable: not counted)", overall.doubtful),
    ]
    for title, items in sections:
        lines.append(f"\n{title}: {len(items)}")
        for finding in sorted(items, key=lambda f: (f.path, f.line, f.code)):
            reason = f" -- {finding.reason}" if finding.reason else ""
            lines.append(f"  {finding.path}:{finding.line}: {finding.code}{reason}")
    file_seconds = [(s, f"{run.name}:{path}") for run in runs for s, path in run.file_seconds]
    lines += [f"slow file: {path}: {s:.1f} s" for s, path in sorted(file_seconds, reverse=True) if s > SLOW_FILE_SECONDS]
    lines.append("\n" + scores(runs, elapsed, overall))
    return "\n".join(lines)


def scores(runs: list[RepositoryRun], elapsed: float, overall: Optional[Comparison] = None) -> str:
    """The figures alone: per-code counts, totals, precision, recall and times."""
    if overall is None:
        overall = Comparison()
        for run in runs:
            overall.extend(_named(run.comparison, run.name))
    lines = []
    expected = Counter(f.code for f in overall.matched + overall.missing)
    matched = Counter(f.code for f in overall.matched)
    unexpected = Counter(f.code for f in overall.unexpected)
    codes = sorted(set(expected) | set(unexpected))
    lines.append("per code (found/expected, unexpected): " + ", ".join(
        f"{code} {matched[code]}/{expected[code]} +{unexpected[code]}" for code in codes
    ))  # fmt: skip
    in_accumlint = sum(run.seconds for run in runs)
    lines.append(
        f"\nrepositories {len(runs)}, files {sum(run.files for run in runs)}, matched {len(overall.matched)}, "
        f"unexpected {len(overall.unexpected)}, missing {len(overall.missing)}, errors {len(overall.errors)}"
        + (" (" + ", ".join(f"{kind} {count}" for kind, count in sorted(Counter(e.code for e in overall.errors).items())) + ")"
           if overall.errors else "")
        + f"\nprecision {_ratio(overall.precision)}, recall {_ratio(overall.recall)}\n"
        f"run time {elapsed:.1f} s wall, {in_accumlint:.1f} s CPU in accumlint runs"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
