"""scripts/gpu_check.sh on a machine without CUDA: a clear SKIPPED line and a clean exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the script runs its checks")


def _run(**environment: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, **environment}
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)


def test_without_cuda_it_says_skipped_and_exits_0():
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SKIPPED: no CUDA device" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_without_cuda_a_required_check_fails():
    result = _run(GPU_CHECK_REQUIRE="1")
    assert result.returncode == 1 and "SKIPPED: no CUDA device" in result.stdout
