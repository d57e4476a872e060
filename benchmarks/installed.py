"""Make a checkout of accumlint run as an installed copy does, before a benchmark times it.

An installed copy has its bytecode (pip compiles it on install) and, after its
first run, the code `dataclasses` writes for LibCST's node types
(`accumlint.compat.generated_code`). A checkout run where PYTHONDONTWRITEBYTECODE
is set has neither, and would pay for compiling every module on each run: a cost
that grows with accumlint's source, not with what a check does, and that no user
pays. Every benchmark that compares two checkouts prepares both the same way.
"""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
from pathlib import Path


def prepare(checkout: Path, sample: Path) -> None:
    """Compile `checkout`'s accumlint package, then run one check of `sample` with bytecode
    writing allowed and that checkout first on the module path."""
    compileall.compile_dir(checkout / "accumlint", quiet=1)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    subprocess.run([sys.executable, "-m", "accumlint.cli", "check", "--no-cache", "-q", str(sample)],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
