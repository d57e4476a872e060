"""A stand-in for the analysis and the fixer, for tests of what surrounds them.

It reports three patterns line by line (a safe fix, an unsafe fix, no fix),
raises ParseFailure on code `compile` rejects and an exception on `BOOM`, so
engine, report and CLI tests do not depend on what the real rules find.
Use the `fake_analysis` fixture (import it into the test module).

The analysis runs in worker processes, so the calls it saw are kept in a
file (one JSON line per call), not in this process's memory. A spawned
worker (ACCUMLINT_START_METHOD=spawn) inherits no patch of this process: the
engine hands its workers a `PatchedTask`, which installs the fake there.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

import accumlint.check.analysis
import accumlint.check.engine
import accumlint.check.fixes
from accumlint.check.analysis import AnalysisOptions, ParseFailure
from accumlint.diagnostics import Diagnostic, FixInfo
from accumlint.check.fixes import FixOutcome

# pattern: (code, name, fix applicability or None, replacement)
PATTERNS = {
    "loss.backward()": ("GA201", "missing-loss-scaling", "safe", "(loss / 4).backward()"),
    "optimizer.step()": ("GA102", "step-every-micro-batch", "unsafe", "step_when_due(optimizer)"),
    "retain_graph=True": ("GA502", "retain-graph-in-loop", None, None),
}


class FakeAnalysis:
    def __init__(self, log: Path) -> None:
        self.log = log

    def _entries(self) -> list[list]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    @property
    def calls(self) -> list[str]:
        return [entry[0] for entry in self._entries()]

    @property
    def options(self) -> list[AnalysisOptions]:
        return [AnalysisOptions(tuple(entry[1]), tuple(entry[2])) for entry in self._entries()]

    def analyze(self, text: str, path: str, options: AnalysisOptions = AnalysisOptions()) -> list[Diagnostic]:
        with open(self.log, "a") as handle:
            handle.write(json.dumps([path, options.optimizer_names, options.accumulation_names]) + "\n")
        if "BOOM" in text:
            raise RuntimeError("boom")
        try:
            compile(text, path, "exec")
        except SyntaxError as error:
            raise ParseFailure(error.lineno or 1, error.offset or 1, error.msg) from None
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            for pattern, (code, name, applicability, _) in PATTERNS.items():
                column = line.find(pattern)
                if column >= 0:
                    fix = FixInfo(applicability, f"fix {code}") if applicability else None
                    found.append(
                        Diagnostic(path, number, column + 1, number, column + 1 + len(pattern), code, name,
                                   f"fake finding {code}", fix, help=f"fake help {code}")
                    )
        return found

    def fix_text(self, text, path, options, *, unsafe, keep=lambda text, d: True, fixable=None) -> FixOutcome:
        fixed: list[Diagnostic] = []
        for rounds in range(10):
            found = [d for d in self.analyze(text, path, options) if keep(text, d)]
            todo = [
                d for d in found
                if d.fix and (unsafe or d.fix.applicability == "safe") and (fixable is None or d.code in fixable)
            ]
            if not todo:
                return FixOutcome(text, fixed, found, True, rounds)
            lines = text.splitlines(keepends=True)
            for d in todo:
                pattern = next(p for p, rule in PATTERNS.items() if rule[0] == d.code)
                lines[d.line - 1] = lines[d.line - 1].replace(pattern, PATTERNS[pattern][3], 1)
            text = "".join(lines)
            fixed += todo
        return FixOutcome(text, fixed, found, False, 10)


_RUN_TASK = accumlint.check.engine.run_task  # the engine's own, before any test patches it


class PatchedTask:
    """The engine's `run_task` with module attributes set first ("module.name" -> value), in
    whatever process it runs: pickled with its values (each picklable, functions by name)."""

    def __init__(self, patches: list[tuple[str, object]]) -> None:
        self.patches = patches

    def __call__(self, task):
        for target, value in self.patches:
            module, _, name = target.rpartition(".")
            setattr(importlib.import_module(module), name, value)
        return _RUN_TASK(task)


def patch_in_workers(monkeypatch, target: str, value) -> None:
    """`monkeypatch.setattr(target, value)` here and in the check's workers, spawned ones too."""
    monkeypatch.setattr(target, value)
    task = accumlint.check.engine.run_task
    patches = task.patches if isinstance(task, PatchedTask) else []
    monkeypatch.setattr(accumlint.check.engine, "run_task", PatchedTask([*patches, (target, value)]))


@pytest.fixture
def fake_analysis(monkeypatch, tmp_path_factory) -> FakeAnalysis:
    fake = FakeAnalysis(tmp_path_factory.mktemp("fake") / "calls.jsonl")
    patch_in_workers(monkeypatch, "accumlint.check.analysis.analyze", fake.analyze)
    patch_in_workers(monkeypatch, "accumlint.check.fixes.fix_text", fake.fix_text)
    return fake
