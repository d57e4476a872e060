"""`nproc=2`: both runs under torch.distributed (gloo, DDP) on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from accumlint.verify import check_equivalence  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo")


def check(name: str, **options):
    return check_equivalence(f"{FIXTURES / name}.py::train", nproc=2, **options)


def test_no_sync_loop_is_equivalent_under_ddp():
    report = check("correct_no_sync", accum_steps=2, windows=2)
    assert report.passed, report.format_text()
    assert report.steps_accumulated == report.steps_full == 2


def test_missing_scaling_is_diagnosed_under_ddp():
    # No no_sync either: every micro-batch all-reduces (GA401) as well.
    report = check("bug_missing_scaling", accum_steps=2, windows=2)
    assert report.codes == ["GA201", "GA401"], report.format_text()


def test_all_reduce_every_micro_batch_is_ga401_although_gradients_match():
    report = check("correct_gated", accum_steps=2, windows=2, tail=0)
    assert all(step.ok for step in report.steps), report.format_text()
    assert report.verdict == "not equivalent" and report.codes == ["GA401"]


def test_no_sync_at_the_boundary_is_ga403(tmp_path):
    source = (FIXTURES / "correct_no_sync.py").read_text().replace(
        "contextlib.nullcontext() if boundary else model.no_sync()", "model.no_sync()"
    )
    (tmp_path / "never_syncs.py").write_text(source)
    report = check_equivalence(f"{tmp_path / 'never_syncs.py'}::train", nproc=2, accum_steps=2, windows=2)
    assert report.codes == ["GA403"], report.format_text()


def test_user_error_in_a_worker_is_reported_with_its_location():
    report = check("bug_backward_after_step", accum_steps=2, windows=1)
    assert "bug_backward_after_step.py:12" in report.reason
    assert report.codes == ["GA103"]


def test_no_sync_on_the_wrong_micro_batch_is_ga403(tmp_path):
    """The sync runs on the window's first micro-batch, the last one stays local: one all-reduce per step, wrong gradient."""
    source = (FIXTURES / "correct_no_sync.py").read_text().replace(
        "contextlib.nullcontext() if boundary else model.no_sync()", "model.no_sync() if boundary else contextlib.nullcontext()"
    )
    (tmp_path / "syncs_first.py").write_text(source)
    report = check_equivalence(f"{tmp_path / 'syncs_first.py'}::train", nproc=2, accum_steps=2, windows=2)
    assert not report.passed and report.codes[:1] == ["GA403"], report.format_text()
