"""What the tests of "no process outlives its owner" share: kill an owner outright, then look."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from accumlint.check.workers import python_command

# The environment variable naming the file where the owner's process under test writes its pid.
MARKER_VARIABLE = "ACCUMLINT_TEST_MARKER"


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def survives_its_owner_killed(module: str, function: str, marker: Path, wait: float = 20.0) -> bool:
    """Run `module.function()` as an owner in a process of its own (MARKER_VARIABLE naming
    `marker` in its environment), wait until a process it started writes its pid there,
    kill the owner outright (SIGKILL), and say whether that process is still there after
    `wait` seconds. The process is killed before this returns, whatever the answer."""
    owner = subprocess.Popen(python_command(module, function), env=dict(os.environ, **{MARKER_VARIABLE: str(marker)}))
    started = None
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        started = int(marker.read_text())
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + wait
        while not gone(started) and time.monotonic() < deadline:
            time.sleep(0.05)
        return not gone(started)
    finally:
        owner.kill()
        owner.wait()
        if started is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(started, signal.SIGKILL)
