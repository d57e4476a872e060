"""Every buggy verify fixture, once fixed by accumlint's fixer, passes the runtime verifier
(SPEC section 6: "the fixed loop passes the runtime verifier")."""

from __future__ import annotations

from pathlib import Path

import pytest

from accumlint.analysis import AnalysisOptions
from accumlint.fixes import fix_text
from accumlint.verify import check_equivalence
from accumlint.verify.fixcheck import verify_fixed_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"
BUGGY = sorted(p for p in FIXTURES.glob("bug_*.py") if not p.name.endswith(".fixed.py"))
REVIEWED = sorted(FIXTURES.glob("*.fixed.py"))


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_fixed_fixture_is_equivalent(path, tmp_path):
    fixed = tmp_path / path.name
    outcome = fix_text(path.read_text(), str(fixed), AnalysisOptions(), unsafe=True)
    assert outcome.text != path.read_text(), "the fixer changed nothing"
    fixed.write_text(outcome.text)
    report = check_equivalence(f"{fixed}::train")
    assert report.passed, f"{outcome.text}\n{report.format_text()}"
    assert [v.status for v in verify_fixed_file(str(fixed))] == ["verified"]


@pytest.mark.parametrize("path", REVIEWED, ids=lambda p: p.stem)
def test_reviewed_fixed_forms_are_equivalent(path):
    report = check_equivalence(f"{path}::train")
    assert report.passed, report.format_text()
