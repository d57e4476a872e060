"""Messages stay on one line: code a message quotes is quoted as one line, in every output format.

A gate continued with a backslash, or a call whose brackets span lines, is
quoted as its first line and an ellipsis (`diagnostics.one_line`, applied
where every finding becomes a diagnostic). These run the real analysis.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from accumlint.cli import cli
from accumlint.diagnostics import ELLIPSIS, one_line, syntax_error

SPREAD = """\
import torch


def train(model, loader, optimizer, accum_steps):
    optimizer.zero_grad()
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if step % accum_steps \\
                == 0:
            optimizer.step()
            optimizer.zero_grad()


def train_steps(model, loader, optimizer, accum_steps):
    optimizer.zero_grad()
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y) / accum_steps
        loss.backward()
        optimizer.step(
        )
        optimizer.zero_grad()
"""

GATE = f"`step % accum_steps {ELLIPSIS}` fires after the first micro-batch"
STEP = f"`optimizer.step( {ELLIPSIS}` runs on every micro-batch"


@pytest.fixture
def spread(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SPREAD)


def check(*args: str) -> str:
    return CliRunner().invoke(cli, ["check", "--no-cache", "train.py", *args], catch_exceptions=False).stdout


@pytest.mark.parametrize("output_format", ["concise", "full", "text", "github"])
def test_line_formats_quote_spread_code_on_one_line(spread, output_format):
    lines = check("--output-format", output_format).replace("%25", "%").splitlines()  # (github escapes `%`)
    assert any(GATE in line and "GA106" in line for line in lines)
    assert any(STEP in line and "GA102" in line for line in lines)
    assert not any(line.lstrip().startswith("== 0` fires") for line in lines)


def test_json_and_sarif_messages_are_one_line(spread):
    found = json.loads(check("--output-format", "json"))
    texts = {d["code"]: d["message"] for d in found}
    assert texts["GA106"].startswith(GATE) and texts["GA102"].startswith(STEP)
    assert not any("\n" in d["message"] or "\n" in d["help"] or "\n" in (d["fix"] or {}).get("message", "") for d in found)
    results = json.loads(check("--output-format", "sarif"))["runs"][0]["results"]
    assert len(results) == len(found)
    assert not any("\n" in result["message"]["text"] for result in results)


def test_one_line_keeps_one_line_code_and_drops_a_continuations_backslash():
    assert one_line("`a % k` fires") == "`a % k` fires"
    assert one_line("`a % k \\\n    == 0` fires, `b`") == f"`a % k {ELLIPSIS}` fires, `b`"
    assert one_line("`(\n    a\n)` and `f(\r\n)`") == f"`( {ELLIPSIS}` and `f( {ELLIPSIS}`"
    assert one_line("`\nx` here") == f"`{ELLIPSIS}` here"


def test_an_error_text_over_several_lines_becomes_one():
    assert syntax_error("t.py", 1, 1, "bad input\n  at this place").message == "bad input at this place"
