"""Signals and broken output: a run stops promptly, cleans up, and exits as CLIs do.

Real processes: `python -m accumlint.cli` in a subprocess, signalled while
its worker analyses a large generated file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from samples import UNSCALED_LOOP as TRAIN

COMMAND = [sys.executable, "-m", "accumlint.cli", "check", "--no-cache"]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux's /proc")
@pytest.mark.parametrize("number, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_run_ends_the_workers_and_leaves_no_files(tmp_path, number, status):
    (tmp_path / "big.py").write_text(TRAIN * 3000)  # many seconds of analysis
    before = set(os.listdir(tmp_path))
    process = subprocess.Popen([*COMMAND, "--fix", "big.py"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not _children(process.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = _children(process.pid)
    assert workers, "the worker never started"
    time.sleep(0.2)
    sent = time.monotonic()
    process.send_signal(number)
    _, stderr = process.communicate(timeout=10)
    assert time.monotonic() - sent < 5  # promptly, not at the end of the analysis
    assert process.returncode == status
    assert f"accumlint: interrupted ({signal.Signals(number).name})" in stderr
    assert not any(_alive(worker) for worker in workers)
    assert set(os.listdir(tmp_path)) == before
    assert (tmp_path / "big.py").read_text() == TRAIN * 3000


def test_a_full_standard_output_is_one_line_and_exit_2(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    (tmp_path / "train.py").write_text(TRAIN)
    with open("/dev/full", "w") as full:
        result = subprocess.run([*COMMAND, "train.py"], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 2
    assert result.stderr == "accumlint: error: cannot write to standard output: No space left on device\n"


def test_a_closed_standard_output_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    result = subprocess.run(
        [*COMMAND, "train.py"], cwd=tmp_path, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1)
    )
    assert result.returncode == 2
    assert result.stderr == "accumlint: error: cannot write to standard output: it is closed\n"
