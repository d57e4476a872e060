"""Every buggy verify fixture, once fixed by accumlint's fixer, passes the runtime verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from accumlint.check.analysis import AnalysisOptions  # noqa: E402
from accumlint.check.fixes import fix_text  # noqa: E402
from accumlint.verify import check_equivalence  # noqa: E402
from accumlint.verify.fixcheck import verify_fixed_file  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"
BUGGY = sorted(p for p in FIXTURES.glob("bug_*.py") if not p.name.endswith(".fixed.py"))
REVIEWED = sorted(FIXTURES.glob("*.fixed.py"))


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_fixed_fixture_is_equivalent(path, tmp_path):
    fixed = tmp_path / path.name
    outcome = fix_text(path.read_text(), str(fixed), AnalysisOptions(), unsafe=True)
    assert outcome.text != path.read_text(), "the fixer changed nothing"
    fixed.write_text(outcome.text)
    # A fix proves the mistake it fixed; a fixed gate over a loader of unknown
    # length is not expected to flush a partial last window.
    report = check_equivalence(f"{fixed}::train", tail=0)
    assert report.passed, f"{outcome.text}\n{report.format_text()}"
    assert [v.status for v in verify_fixed_file(str(fixed))] == ["verified"]


@pytest.mark.parametrize("path", REVIEWED, ids=lambda p: p.stem)
def test_reviewed_fixed_forms_are_equivalent(path):
    report = check_equivalence(f"{path}::train", tail=0)
    assert report.passed, report.format_text()


def test_every_loop_is_listed_with_why_it_could_not_be_verified(tmp_path):
    source = (FIXTURES / "correct_gated.py").read_text() + '''

class Trainer:
    def __init__(self, mystery):
        self.mystery = mystery

    def fit(self, model, optimizer, loader, accum_steps, loss_fn):
        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum_steps).backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()


def opaque(thing, other):
    for batch in thing:
        other(batch).backward()
'''
    path = tmp_path / "loops.py"
    path.write_text(source)
    outcomes = {v.function: v for v in verify_fixed_file(str(path))}
    assert set(outcomes) == {"train", "Trainer.fit", "opaque"}
    assert outcomes["train"].status == "verified"
    assert outcomes["Trainer.fit"].status == "not verifiable" and "'mystery'" in outcomes["Trainer.fit"].reason
    assert outcomes["opaque"].status == "not verifiable" and "--bind" in outcomes["opaque"].reason


def test_settings_of_the_file_are_used(tmp_path):
    from accumlint.check.config import VerifySettings

    path = tmp_path / "loop.py"
    path.write_text((FIXTURES / "correct_gated.py").read_text().replace(" or (i + 1) == len(loader)", ""))
    assert [v.status for v in verify_fixed_file(str(path))] == ["verified"]
    outcome = verify_fixed_file(str(path), settings=VerifySettings(accum_steps=3, tail=1))
    assert outcome[0].status == "not equivalent" and "GA107" in outcome[0].reason


def test_the_verify_settings_time_limit_and_script_args_apply_to_fixed_loops():
    from accumlint.check.config import VerifySettings
    from accumlint.verify.fixcheck import _options

    options = _options(VerifySettings(timeout=5.0, script_args="--lr 1"), accum_steps=4)
    assert options["timeout"] == 5.0 and options["script_args"] == "--lr 1"
