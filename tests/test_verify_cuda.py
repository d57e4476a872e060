"""The verifier on CUDA with mixed precision (run by scripts/gpu_check.sh on a
GPU machine; skipped where CUDA is absent)."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from accumlint.verify import check_equivalence  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

AMP = """
    import torch
    def train(model, optimizer, loader, accum_steps, loss_fn):
        scaler = torch.amp.GradScaler("cuda", enabled={scaled})
        for i, (x, y) in enumerate(loader):
            with torch.autocast("cuda", dtype=torch.{dtype}):
                loss = loss_fn(model(x), y){scaling}
            scaler.scale(loss).backward()
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize("dtype, scaled", [("bfloat16", False), ("float16", True)])
def test_amp_loops_pass_and_a_missing_scaling_is_named(tmp_path, dtype, scaled):
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent(AMP.format(dtype=dtype, scaled=scaled, scaling=" / accum_steps")))
    report = check_equivalence(f"{good}::train", device="cuda", dtype="float32")
    assert report.passed, report.format_text()
    assert dtype in report.compute_dtypes
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent(AMP.format(dtype=dtype, scaled=scaled, scaling="")))
    assert check_equivalence(f"{bad}::train", device="cuda", dtype="float32").codes == ["GA201"]


CLIPPED = """
    import torch
    def train(model, optimizer, loader, accum_steps, loss_fn):
        scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 10)
        for i, (x, y) in enumerate(loader):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y) / accum_steps
            scaler.scale(loss).backward()
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                {clip}
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
"""
CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)"


def test_fp16_scaler_clip_after_unscale_passes_and_before_is_ga304(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent(CLIPPED.format(clip=f"scaler.unscale_(optimizer); {CLIP}")))
    report = check_equivalence(f"{good}::train", device="cuda", dtype="float32")
    assert report.passed, report.format_text()
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent(CLIPPED.format(clip=f"{CLIP}; scaler.unscale_(optimizer)")))
    report = check_equivalence(f"{bad}::train", device="cuda", dtype="float32")
    assert not report.passed and report.codes[:1] == ["GA304"], report.format_text()


def test_bf16_constant_factor_is_ga205(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent(AMP.format(dtype="bfloat16", scaled=False, scaling=" / (accum_steps / 2)")))
    report = check_equivalence(f"{bad}::train", device="cuda", dtype="float32")
    assert not report.passed and report.codes[:1] == ["GA205"], report.format_text()
