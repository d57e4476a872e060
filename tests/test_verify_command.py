"""`accumlint verify` as a click command: options, output formats, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from notorch import without_torch

from accumlint.verify.command import verify_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"


def invoke(*args: str):
    return CliRunner().invoke(verify_command, list(args))


def test_help_says_it_imports_and_runs_the_file():
    result = invoke("--help")
    assert result.exit_code == 0
    assert "IMPORTS AND RUNS" in result.output and "--bind" in result.output


def test_equivalent_exits_0():
    pytest.importorskip("torch")
    result = invoke(f"{FIXTURES}/correct_gated.py::train", "--accum-steps", "2", "--windows", "2")
    assert result.exit_code == 0, result.output
    # 2 windows of 2 and a partial window of 1.
    assert "EQUIVALENT" in result.output and "optimizer steps: 3 accumulated (K=2), 3 full batch" in result.output
    assert "micro-batches: 5 fed, 5 used" in result.output


def test_not_equivalent_exits_1_with_diagnosis():
    pytest.importorskip("torch")
    result = invoke(f"{FIXTURES}/bug_missing_scaling.py::train")
    assert result.exit_code == 1
    assert "NOT EQUIVALENT" in result.output and "GA201 missing-loss-scaling" in result.output


def test_could_not_run_exits_2_with_the_reason():
    pytest.importorskip("torch")
    result = invoke(f"{FIXTURES}/correct_no_sync.py::train")
    assert result.exit_code == 2
    assert "COULD NOT RUN" in result.output and "correct_no_sync.py:11" in result.output


def test_json_output():
    pytest.importorskip("torch")
    result = invoke(f"{FIXTURES}/bug_zero_every_micro_batch.py::train", "--output-format", "json",
                    "--dtype", "float32", "--seed", "7", "--micro-batch", "3")
    data = json.loads(result.output)
    assert result.exit_code == 1 and data["exit_code"] == 1
    assert data["verdict"] == "not equivalent" and data["dtype"] == "float32"
    assert data["explanations"][0]["code"] == "GA101"
    assert data["steps_accumulated"] == data["steps_full"] == 4
    assert {"worst_parameter", "max_abs_error", "max_rel_error", "steps", "final"} <= data.keys()
    assert data["binding"]["loader"] == "loader" and "passed to enumerate()" in data["binding_evidence"]["loader"]


def test_bind_and_setup_options(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "loop.py").write_text(
        "def fit(mdl, o, items, every, score):\n"
        "    for i, (x, y) in enumerate(items):\n"
        "        (score(mdl(x), y) / every).backward()\n"
        "        if (i + 1) % every == 0:\n"
        "            o.step()\n"
        "            o.zero_grad()\n"
    )
    (tmp_path / "factory.py").write_text(
        "import torch\n"
        "def make():\n"
        "    g = torch.Generator().manual_seed(0)\n"
        "    data = [(torch.randn(3, 5, generator=g), torch.randn(3, 2, generator=g)) for _ in range(8)]\n"
        "    return {'model': torch.nn.Linear(5, 2), 'optimizer': lambda p: torch.optim.Adam(p),\n"
        "            'batches': data, 'loss_fn': torch.nn.MSELoss()}\n"
    )
    monkeypatch.chdir(tmp_path)
    result = invoke("loop.py::fit", "--setup", "factory:make", "--bind", "score=loss_fn", "-k", "2", "--tail", "0")
    assert result.exit_code == 0, result.output
    assert "float32" in result.output and "3 windows" in result.output


def test_bad_bind_is_a_usage_error():
    result = invoke(f"{FIXTURES}/correct_gated.py::train", "--bind", "model=banana")
    assert result.exit_code == 2 and "unknown role" in result.output


def test_emit_test_writes_a_passing_guard(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "test_guard.py"
    result = invoke(f"{FIXTURES}/correct_gated.py::train", "--emit-test", str(out), "-k", "2")
    assert result.exit_code == 0
    text = out.read_text()
    assert "assert_accumulation_equivalent(TARGET, accum_steps=2" in text
    namespace: dict = {"__file__": str(out)}
    exec(compile(text, str(out), "exec"), namespace)
    namespace["test_train_accumulation_is_equivalent"]()


def test_emit_test_is_not_written_when_not_equivalent(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "test_guard.py"
    result = invoke(f"{FIXTURES}/bug_off_by_one.py::train", "--emit-test", str(out))
    assert result.exit_code == 1, result.output
    assert not out.exists()


def test_accum_steps_one_exits_2_with_a_one_line_reason():
    pytest.importorskip("torch")
    result = invoke(f"{FIXTURES}/correct_gated.py::train", "-k", "1")
    assert result.exit_code == 2
    assert "COULD NOT RUN: accum_steps=1 compares the loop with itself and proves nothing" in result.output


def test_configuration_supplies_the_defaults_and_the_command_line_wins(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "loop.py").write_text((FIXTURES / "correct_gated.py").read_text())
    (tmp_path / "pyproject.toml").write_text(
        "[tool.accumlint.verify]\naccum-steps = 3\nwindows = 2\ntail = 0\nrtol = 1e-5\n"
    )
    monkeypatch.chdir(tmp_path)
    data = json.loads(invoke("loop.py::train", "--output-format", "json").output)
    assert (data["accum_steps"], data["windows"], data["tail"], data["tolerance"]["rtol"]) == (3, 2, 0, 1e-5)
    data = json.loads(invoke("loop.py::train", "--output-format", "json", "-k", "2", "--tail", "1").output)
    assert (data["accum_steps"], data["windows"], data["tail"]) == (2, 2, 1)


def test_bad_configuration_exits_2(tmp_path, monkeypatch):
    (tmp_path / "loop.py").write_text((FIXTURES / "correct_gated.py").read_text())
    (tmp_path / "pyproject.toml").write_text("[tool.accumlint.verify]\ntail = -1\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("loop.py::train")
    assert result.exit_code == 2 and "`tail` must be a non-negative int" in result.output


def test_without_torch_verify_exits_2_with_the_install_hint(tmp_path):
    import subprocess
    import sys

    env = without_torch(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "accumlint.cli", "verify", f"{FIXTURES}/correct_gated.py::train"],
        capture_output=True, text=True, env=env,
    )
    assert result.returncode == 2, result.stderr
    assert "needs torch: pip install 'accumlint[verify]'" in result.stderr
    assert "Traceback" not in result.stderr
