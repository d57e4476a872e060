"""Fixes compose.

Two mistakes spliced into one loop (tests/mistakes.py) are fixed together by
`fix_text(..., unsafe=True)`; the result must be stable, add no undefined name,
leave no finding the fixer could still fix nor any the fixes made (what may
remain is a mistake of the input that a fix revealed and that has no fix), and,
for the verifier's canonical loop, pass the runtime verifier. A fix that repeats
a node another fix of its round changes waits for the next round.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.check.fixes import fix_text

from expectations import read_expect
from mistakes import CODES, MISTAKES, spliced
from namecheck import new_undefined_names
from sampling import in_sample
from silence import assert_silent, window_ks

REPO = Path(__file__).resolve().parent.parent
OPTIONS = AnalysisOptions()

CANONICAL = '''\
"""The verifier's canonical accumulation loop, correct."""

import torch
import torch.nn.functional as F


def train(model, optimizer, loader, accum_steps):
    model.train()
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y)
        (loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
'''

def _buggy_pairs() -> list[tuple[str, str]]:
    """Pairs that leave a buggy accumulation loop (`unscaled_loss` with
    `step_every_micro_batch` makes a correct plain loop)."""
    pairs = []
    for pair in itertools.combinations(MISTAKES, 2):
        text = spliced(CANONICAL, *pair)
        if text is not None and analyze(text, "train.py", OPTIONS):
            pairs.append(pair)
    return pairs


PAIRS = _buggy_pairs()


def _expected_codes(fixture: Path) -> set[str]:
    return {entry.code for entry in read_expect(fixture)}


def check_fixed(text: str, mistakes: tuple[str, ...], allowed: frozenset = frozenset()) -> str:
    """Fix `text` with unsafe fixes and check the result; returns the fixed text."""
    before = analyze(text, "train.py", OPTIONS)
    fixed = fix_text(text, "train.py", OPTIONS, unsafe=True).text
    assert fix_text(fixed, "train.py", OPTIONS, unsafe=True).text == fixed, "a second fix changed the text"
    added = new_undefined_names(text, fixed)
    assert not added, f"the fixes made {dict(added)} undefined:\n{fixed}"
    may_remain = {d.code for d in before if d.fix is None} | {CODES[m] for m in mistakes} | set(allowed)
    left = [d for d in analyze(fixed, "train.py", OPTIONS) if d.fix is not None or d.code not in may_remain]
    assert not left, "after --fix --unsafe-fixes a fresh check reports:\n" + "\n".join(
        f"  {d.line} {d.code} {d.message}" for d in left) + f"\n{fixed}"
    # what is left counts only on the loops that the input's findings were on
    loops_before, loops_after = window_ks(text, "train.py", OPTIONS), window_ks(fixed, "train.py", OPTIONS)
    assert len(loops_after) == len(loops_before), (
        f"the model finds {len(loops_before)} training loops in the input and {len(loops_after)} after the fixes:\n{fixed}")
    _sync_conditions_follow_the_gate(fixed)
    return fixed


_SYNC_CONDITION = re.compile(r"(?:nullcontext\(\) if (.+?) else \S+\.no_sync\(|require_backward_grad_sync = \((.+)\))")
_GATE_TEST = re.compile(r"^\s*if (.+):\s*$", re.M)


def _sync_conditions_follow_the_gate(fixed: str) -> None:
    """A no-sync condition written by a fix repeats a gate of the fixed text, not an old one."""
    gates = set(_GATE_TEST.findall(fixed))
    for match in _SYNC_CONDITION.finditer(fixed):
        condition = match.group(1) or match.group(2)
        if "== " in condition and " - 1" not in condition:
            assert condition in gates, f"sync condition `{condition}` is no gate of the fixed file:\n{fixed}"


@pytest.mark.parametrize("pair", PAIRS, ids="+".join)
def test_two_mistakes_in_the_canonical_loop_fix_to_a_verified_loop(pair, tmp_path) -> None:
    text = spliced(CANONICAL, *pair)
    fixed = check_fixed(text, pair)
    assert_silent(fixed, k="accum_steps", options=OPTIONS)
    pytest.importorskip("torch")
    from accumlint.verify import check_equivalence

    path = tmp_path / "train.py"
    path.write_text(fixed, encoding="utf-8")
    # GA102's gate has no last-batch clause over a loader of unknown size: whole windows only then
    tail = None if "len(loader)" in fixed else 0
    report = check_equivalence(f"{path}::train", tail=tail)
    assert report.passed, f"{fixed}\n{report.format_text()}"


def _fixture_cases() -> list[tuple[Path, tuple[str, ...]]]:
    """Every fixture with the mistakes that fit it: pairs on correct fixtures, one more
    mistake on buggy ones."""
    cases = []
    for fixture in sorted((REPO / "fixtures").rglob("*.py")):
        if fixture.name.endswith(".fixed.py"):
            continue
        text = fixture.read_text(encoding="utf-8")
        fitting = [name for name in MISTAKES if MISTAKES[name](text) is not None]
        combos = [(name,) for name in fitting] if _expected_codes(fixture) else itertools.combinations(fitting, 2)
        cases.extend((fixture, combo) for combo in combos if spliced(text, *combo) is not None)
    return cases


def _case_id(case: tuple[Path, tuple[str, ...]]) -> str:
    return f"{case[0].relative_to(REPO).as_posix()}:{'+'.join(case[1])}"


CASES = _fixture_cases()
# CI takes about one case in twelve, each in or out by its own name (tests/sampling.py), so that
# a new fixture moves no other case in or out (the fuzz script, benchmarks/fuzz.py --pairs, runs them all)
SAMPLE = [case for case in CASES if in_sample(_case_id(case), 12)]


@pytest.mark.parametrize("case", SAMPLE, ids=_case_id)
def test_mistakes_spliced_into_fixtures_fix_cleanly(case) -> None:
    fixture, mistakes = case
    text = spliced(fixture.read_text(encoding="utf-8"), *mistakes)
    check_fixed(text, mistakes, frozenset(_expected_codes(fixture)))


def test_there_are_many_combinations() -> None:
    assert len(PAIRS) >= 20 and len(CASES) >= 300 and len(SAMPLE) >= 40


def test_the_gate_is_corrected_before_the_sync_fix_repeats_it() -> None:
    fixture = REPO / "fixtures/check/ddp/bug_ddp_sync_every_micro_batch.py"
    text = spliced(fixture.read_text(encoding="utf-8"), "off_by_one")
    assert sorted(d.code for d in analyze(text, "train.py", OPTIONS)) == ["GA106", "GA401"]
    outcome = fix_text(text, "train.py", OPTIONS, unsafe=True)
    assert [d.code for d in outcome.fixed] == ["GA106", "GA401"]  # GA401 waited a round
    assert outcome.rounds == 2
    assert "if (step + 1) % GRAD_ACCUM_STEPS == 0 else model.no_sync()" in outcome.text
    assert "step % GRAD_ACCUM_STEPS" not in outcome.text
    check_fixed(text, ("off_by_one",), frozenset({"GA401"}))


def test_fix_rounds_go_on_until_nothing_is_left_to_fix(monkeypatch) -> None:
    """As in ruff, the rounds stop when no fix is left, not after a handful: a chain of twelve
    findings, each revealed by the fix of the one before, settles in twelve rounds."""
    import accumlint.check.fixes as fixes
    from accumlint.check.analysis import Located
    from accumlint.diagnostics import Diagnostic, FixInfo

    class Module:  # what `fix_text` reads of a parsed module: its code (which round-trips, so nothing is lost)
        def __init__(self, text: str) -> None:
            self.code = text

    def find(module, text, path, options):
        done = text.count("fixed\n")
        if done == 12:
            return []
        fix = FixInfo("safe", "fix it")
        return [Located(None, Diagnostic(path, done + 1, 1, done + 1, 2, "GA201", "name", f"finding {done}", fix))]

    monkeypatch.setattr(fixes, "parse", Module)
    monkeypatch.setattr(fixes, "lost_by_libcst", lambda module, text: "")
    monkeypatch.setattr(fixes, "find", find)
    monkeypatch.setattr(fixes, "_non_overlapping", lambda candidates: candidates)
    monkeypatch.setattr(fixes, "_apply", lambda module, text, chosen: text + "fixed\n")
    outcome = fixes.fix_text("", "t.py", OPTIONS, unsafe=False)
    assert outcome.converged and outcome.rounds == 12 and len(outcome.fixed) == 12
    assert outcome.text == "fixed\n" * 12 and outcome.remaining == []
