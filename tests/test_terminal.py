"""On a terminal the output has colour and a progress bar; piped, it has neither.

The command runs as a real process whose standard output and error are
pseudo-terminals (or pipes), so what is tested is what a user's terminal gets.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("pty")

BUGGY = (
    "import torch\n\n"
    "def train(model, loader, optimizer, accum_steps):\n"
    "    optimizer.zero_grad()\n"
    "    for i, (x, y) in enumerate(loader):\n"
    "        loss = torch.nn.functional.mse_loss(model(x), y)\n"
    "        loss.backward()\n"
    "        if (i + 1) % accum_steps == 0:\n"
    "            optimizer.step()\n"
    "            optimizer.zero_grad()\n"
)


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def _run(tmp_path, terminal: bool, *options: str, **variables: str) -> tuple[int, str, str]:
    for index in range(4):
        (tmp_path / f"train_{index}.py").write_text(BUGGY)
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    environment["TERM"] = "xterm-256color"
    environment.update(variables)
    environment["ACCUMLINT_PROGRESS_DELAY"] = "0"  # the bar waits a second on real runs
    command = [sys.executable, "-m", "accumlint.cli", "check", "--no-cache", "--jobs", "1", *options, str(tmp_path)]
    if not terminal:
        result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)
        return result.returncode, result.stdout, result.stderr
    out_master, out_slave = os.openpty()
    err_master, err_slave = os.openpty()
    process = subprocess.Popen(command, stdout=out_slave, stderr=err_slave, stdin=subprocess.DEVNULL, env=environment)
    os.close(out_slave)
    os.close(err_slave)
    stdout, stderr = _read_all(out_master), _read_all(err_master)
    return process.wait(timeout=120), stdout, stderr


def test_terminal_gets_colour_and_a_progress_bar(tmp_path):
    code, stdout, stderr = _run(tmp_path, terminal=True)
    assert code == 1
    assert "\x1b[" in stdout and "GA201" in stdout
    assert "Checking" in stderr and "4/4" in stderr
    assert "#" in stderr  # the bar itself


def test_pipes_get_neither(tmp_path):
    code, stdout, stderr = _run(tmp_path, terminal=False)
    assert code == 1
    assert "GA201" in stdout and "\x1b[" not in stdout
    assert stderr == ""


def test_the_progress_bar_is_erased_before_the_findings(tmp_path):
    code, stdout, stderr = _run(tmp_path, terminal=True)
    assert code == 1
    last_bar = stderr[stderr.rindex("4/4"):]
    # the bar's line is overwritten with blanks and the cursor goes back to its start:
    # no line is left holding the bar above the findings
    assert "\n" not in last_bar
    assert re.search(r"\r +\r(\x1b\[\?25h)?$", last_bar), repr(last_bar)


def test_a_dumb_terminal_gets_no_colour(tmp_path):
    code, stdout, stderr = _run(tmp_path, terminal=True, TERM="dumb")
    assert code == 1
    assert "GA201" in stdout and "\x1b[" not in stdout


def test_force_color_wins_over_a_dumb_terminal(tmp_path):
    code, stdout, stderr = _run(tmp_path, terminal=False, TERM="dumb", FORCE_COLOR="1")
    assert "\x1b[" in stdout


def test_a_diff_is_coloured_on_a_terminal_only(tmp_path):
    code, stdout, stderr = _run(tmp_path, True, "--diff")
    assert code == 1
    assert "\x1b[31m-        loss.backward()\x1b[0m" in stdout and "\x1b[32m+" in stdout
    code, stdout, stderr = _run(tmp_path, False, "--diff")
    assert code == 1 and "-        loss.backward()\n" in stdout and "\x1b[" not in stdout
