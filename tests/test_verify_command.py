"""`accumlint verify` as a click command: options, output formats, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from accumlint.verify.command import verify_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"


def invoke(*args: str):
    return CliRunner().invoke(verify_command, list(args))


def test_help_says_it_imports_and_runs_the_file():
    result = invoke("--help")
    assert result.exit_code == 0
    assert "IMPORTS AND RUNS" in result.output and "--bind" in result.output


def test_equivalent_exits_0():
    result = invoke(f"{FIXTURES}/correct_gated.py::train", "--accum-steps", "2", "--windows", "2")
    assert result.exit_code == 0, result.output
    assert "EQUIVALENT" in result.output and "optimizer steps: 2 accumulated (K=2), 2 full batch" in result.output


def test_not_equivalent_exits_1_with_diagnosis():
    result = invoke(f"{FIXTURES}/bug_missing_scaling.py::train")
    assert result.exit_code == 1
    assert "NOT EQUIVALENT" in result.output and "GA201 missing-loss-scaling" in result.output


def test_could_not_run_exits_2_with_the_reason():
    result = invoke(f"{FIXTURES}/correct_no_sync.py::train")
    assert result.exit_code == 2
    assert "COULD NOT RUN" in result.output and "correct_no_sync.py:11" in result.output


def test_json_output():
    result = invoke(f"{FIXTURES}/bug_zero_every_micro_batch.py::train", "--output-format", "json",
                    "--dtype", "float32", "--seed", "7", "--micro-batch", "3")
    data = json.loads(result.output)
    assert result.exit_code == 1 and data["exit_code"] == 1
    assert data["verdict"] == "not equivalent" and data["dtype"] == "float32"
    assert data["explanations"][0]["code"] == "GA101"
    assert data["steps_accumulated"] == data["steps_full"] == 3
    assert {"worst_parameter", "max_abs_error", "max_rel_error", "steps", "final"} <= data.keys()
    assert data["binding"]["loader"] == "loader" and "passed to enumerate()" in data["binding_evidence"]["loader"]


def test_bind_and_setup_options(tmp_path, monkeypatch):
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
    result = invoke("loop.py::fit", "--setup", "factory:make", "--bind", "score=loss_fn", "-k", "2")
    assert result.exit_code == 0, result.output
    assert "float32" in result.output and "3 windows" in result.output


def test_bad_bind_is_a_usage_error():
    result = invoke(f"{FIXTURES}/correct_gated.py::train", "--bind", "model=banana")
    assert result.exit_code == 2 and "unknown role" in result.output


def test_emit_test_writes_a_passing_guard(tmp_path):
    out = tmp_path / "test_guard.py"
    result = invoke(f"{FIXTURES}/correct_gated.py::train", "--emit-test", str(out), "-k", "2")
    assert result.exit_code == 0
    text = out.read_text()
    assert "assert_accumulation_equivalent(TARGET, accum_steps=2" in text
    namespace: dict = {"__file__": str(out)}
    exec(compile(text, str(out), "exec"), namespace)
    namespace["test_train_accumulation_is_equivalent"]()


def test_emit_test_is_not_written_when_not_equivalent(tmp_path):
    out = tmp_path / "test_guard.py"
    invoke(f"{FIXTURES}/bug_off_by_one.py::train", "--emit-test", str(out))
    assert not out.exists()
