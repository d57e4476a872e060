"""The composite GitHub Action (action.yml): its steps run as GitHub would run them.

GitHub substitutes `${{ inputs.x }}` into each step's `env` and runs the
step's script with bash; this test does the same with the installed
accumlint (the install step itself is pip, and is not run here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())

BUGGY = """\
import torch


def train(model, loader, optimizer, accum_steps):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


def _substitute(value: str, inputs: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        expression = match.group(1).strip()
        if expression == "github.action_path":
            return str(ROOT)
        assert expression.startswith("inputs."), expression
        return inputs[expression[len("inputs."):]]

    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def _inputs(**given: str) -> dict[str, str]:
    values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
    values.update({name.replace("_", "-"): value for name, value in given.items()})
    return values


def _step(name: str) -> dict:
    return next(step for step in ACTION["runs"]["steps"] if step.get("name") == name)


def _run_step(name: str, inputs: dict[str, str], cwd: Path, path_first: Path | None = None) -> subprocess.CompletedProcess:
    step = _step(name)
    environment = dict(os.environ)
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
    if path_first is not None:
        environment["PATH"] = f"{path_first}{os.pathsep}{environment['PATH']}"
    environment.update({key: _substitute(str(value), inputs) for key, value in step.get("env", {}).items()})
    assert "${{" not in step["run"], "inputs reach scripts through env, never pasted into the script"
    return subprocess.run(["bash", "-e", "-c", step["run"]], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=300)


def test_action_is_composite_and_every_input_is_used():
    assert ACTION["runs"]["using"] == "composite"
    text = (ROOT / "action.yml").read_text()
    for name in ACTION["inputs"]:
        assert f"inputs.{name}" in text, f"input {name} is never used"
    for step in ACTION["runs"]["steps"]:
        if "run" in step:
            assert step["shell"] == "bash"


def test_install_step_installs_this_checkout():
    step = _step("Install accumlint")
    assert _substitute(step["env"]["ACTION_PATH"], _inputs()) == str(ROOT)
    assert "pip install" in step["run"] and '"$ACTION_PATH"' in step["run"]


def test_check_step_annotates_and_fails_on_findings(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    result = _run_step("Check", _inputs(args="--no-cache"), tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("::error file=train.py,line=8,col=9,")
    assert "title=GA201::missing-loss-scaling:" in result.stdout


def test_check_step_passes_clean_code_and_honours_args(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    assert _run_step("Check", _inputs(args="--no-cache --ignore GA201"), tmp_path).returncode == 0


def _run_action(inputs: dict[str, str], cwd: Path, shims: Path) -> tuple[list[subprocess.CompletedProcess], list[str]]:
    """Every step that runs a script, after the install, in order (as GitHub does until one fails),
    with `python3` a shim that logs its arguments: what each step ran, and the logged command lines."""
    shims.mkdir()
    log = shims / "calls.log"
    (shims / "python3").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{sys.executable}" "$@"\n')
    (shims / "python3").chmod(0o755)
    results = []
    for step in ACTION["runs"]["steps"]:
        if "run" not in step or step.get("name") == "Install accumlint":
            continue
        if "if" in step:  # the one form of condition GitHub evaluates that these steps may use
            (name,) = re.fullmatch(r"inputs\.([\w-]+) != ''", step["if"].strip()).groups()
            if not inputs[name]:
                continue
        results.append(_run_step(step["name"], inputs, cwd, path_first=shims))
        if results[-1].returncode != 0:
            break
    return results, log.read_text().splitlines() if log.exists() else []


def test_one_check_writes_the_sarif_file_and_the_annotations(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BUGGY)
    inputs = _inputs(paths="src", args="--no-cache", sarif_file="out.sarif")
    results, calls = _run_action(inputs, tmp_path, tmp_path / "shims")
    assert [call for call in calls if " check " in f" {call} "] == [
        "-m accumlint check src --no-cache --output-format github,sarif:out.sarif"
    ]
    assert results[-1].returncode == 1  # the findings fail the job...
    assert results[-1].stdout.startswith("::error file=src/train.py,line=8,col=9,")
    sarif = json.loads((tmp_path / "out.sarif").read_text())  # ...once the SARIF is written
    (found,) = sarif["runs"][0]["results"]
    assert found["ruleId"] == "GA201"
    assert found["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/train.py"


def test_without_a_sarif_file_only_the_annotations_are_printed(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    results, calls = _run_action(_inputs(args="--no-cache"), tmp_path, tmp_path / "shims")
    assert calls == ["-m accumlint check . --no-cache --output-format github"]
    assert results[-1].returncode == 1 and results[-1].stdout.startswith("::error file=train.py,")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["shims", "train.py"]
