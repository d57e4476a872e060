"""Properties over K, micro-batch size and number of windows: correct loops always
pass, and each mistake keeps its diagnosis whatever the sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from accumlint.verify import check_equivalence  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"

sizes = dict(
    accum_steps=st.integers(min_value=2, max_value=5),
    micro_batch=st.integers(min_value=1, max_value=4),
    windows=st.integers(min_value=1, max_value=3),
    seed=st.integers(min_value=0, max_value=2**16),
)
fast = settings(max_examples=20, deadline=None)


def check(name: str, **options):
    return check_equivalence(f"{FIXTURES / name}.py::train", **options)


@pytest.mark.parametrize("name", ["correct_gated", "correct_inner_micro_steps", "correct_manual_counter"])
@fast
@given(**sizes)
def test_correct_loops_pass_for_any_sizes(name, accum_steps, micro_batch, windows, seed):
    # The micro-step loop steps whole windows only (by design): no partial window for it.
    tail = 0 if name == "correct_inner_micro_steps" else None
    report = check(name, accum_steps=accum_steps, micro_batch=micro_batch, windows=windows, seed=seed, tail=tail)
    assert report.passed, report.format_text()
    assert report.steps_accumulated == report.steps_full == windows + (tail != 0)


@pytest.mark.parametrize(
    "name, code",
    [
        ("bug_missing_scaling", "GA201"),
        ("bug_double_scaling", "GA204"),
        ("bug_zero_every_micro_batch", "GA101"),
        ("bug_step_every_micro_batch", "GA102"),
        ("bug_off_by_one", "GA106"),
        ("bug_zero_before_step", "GA104"),
    ],
)
@fast
@given(**sizes)
def test_mistakes_keep_their_diagnosis(name, code, accum_steps, micro_batch, windows, seed):
    report = check(name, accum_steps=accum_steps, micro_batch=micro_batch, windows=windows, seed=seed)
    assert report.codes == [code], report.format_text()


@fast
@given(**sizes)
def test_float32_passes_with_its_looser_tolerance(accum_steps, micro_batch, windows, seed):
    report = check("correct_gated", accum_steps=accum_steps, micro_batch=micro_batch, windows=windows,
                   seed=seed, dtype="float32")
    assert report.fed == report.used == windows * accum_steps + max(1, accum_steps // 2)
    assert report.passed, report.format_text()


def test_accumulation_steps_of_one_are_refused():
    report = check("correct_gated", accum_steps=1)
    assert report.verdict == "could not run" and "proves nothing" in report.reason
