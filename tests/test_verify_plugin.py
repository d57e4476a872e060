"""The pytest plugin as a user's test suite sees it (through pytester)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"


def test_fixture_and_helper_in_a_user_suite(pytester):
    pytest.importorskip("torch")
    pytester.makepyfile(
        f"""
        import pytest
        from accumlint.verify import AccumulationNotEquivalent, assert_accumulation_equivalent

        GOOD = {str(FIXTURES / "correct_gated.py")!r} + "::train"
        BAD = {str(FIXTURES / "bug_missing_scaling.py")!r} + "::train"

        def test_fixture_passes(accumulation_equivalence):
            report = accumulation_equivalence(GOOD, accum_steps=2)
            assert report.passed

        def test_helper_passes():
            assert_accumulation_equivalent(GOOD, accum_steps=4, windows=2)

        def test_helper_fails_with_the_report():
            with pytest.raises(AccumulationNotEquivalent) as caught:
                assert_accumulation_equivalent(BAD, accum_steps=4)
            assert "GA201" in str(caught.value)
            assert caught.value.report.codes == ["GA201"]

        def test_a_failing_guard_fails(accumulation_equivalence):
            accumulation_equivalence(BAD)
        """
    )
    result = pytester.runpytest_subprocess()  # the plugin loads through its entry point
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*NOT EQUIVALENT*", "*GA201 missing-loss-scaling*"])


def test_plugin_load_does_not_import_torch():
    code = (
        "import sys, accumlint.verify.pytest_plugin\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_failure_shows_what_the_training_code_printed(tmp_path):
    pytest.importorskip("torch")
    from accumlint.verify import AccumulationNotEquivalent, assert_accumulation_equivalent

    source = (FIXTURES / "bug_missing_scaling.py").read_text().replace(
        "def train(", "print('epoch 1 starting')\n\n\ndef train(", 1)
    (tmp_path / "loud.py").write_text(source)
    try:
        assert_accumulation_equivalent(f"{tmp_path / 'loud.py'}::train")
    except AccumulationNotEquivalent as failure:
        message = str(failure)
    else:
        raise AssertionError("the missing 1/K passed")
    assert "GA201" in message and "--- the training code's stdout ---\nepoch 1 starting" in message
