"""The checker never imports torch, and imports libcst only for files worth parsing.

Run in fresh interpreters with `-X importtime`, which reports every import
on the standard error of the process and of the worker processes it forks
(the analysis runs in those).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from notorch import without_torch
from samples import UNSCALED_LOOP as TRAIN

TESTS = Path(__file__).resolve().parent


def python(code: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], cwd=cwd, env={**os.environ, **(env or {})},
        capture_output=True, text=True,
    )


def imported_after(code: str, cwd: Path) -> set[str]:
    """Which of torch and libcst the code imported, in its own process or a forked worker
    (`-X importtime` reports those; a spawned worker is a fresh interpreter without it)."""
    environment = {key: value for key, value in os.environ.items() if key != "ACCUMLINT_START_METHOD"}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], cwd=cwd, env=environment, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    return imported & {"torch", "libcst"}


def run_cli(args: list[str]) -> str:
    return (
        "from click.testing import CliRunner\nfrom accumlint.cli import cli\n"
        f"result = CliRunner().invoke(cli, {args!r})\nassert result.exit_code in (0, 1), result.output\n"
    )


def test_importing_the_cli_imports_neither_torch_nor_libcst(tmp_path):
    assert imported_after("import accumlint.cli", tmp_path) == set()


def test_help_and_rules_import_neither(tmp_path):
    assert imported_after(run_cli(["--help"]) + run_cli(["rules"]), tmp_path) == set()


def test_files_failing_the_prefilter_are_never_parsed(tmp_path):
    (tmp_path / "plain.py").write_text("def add(a, b):\n    return a + b\n")
    assert imported_after(run_cli(["check", "--no-cache", "plain.py"]), tmp_path) == set()


def test_files_without_training_code_are_never_given_to_libcst(tmp_path):
    # `backward(` passes the text prefilter; Python's own parser then sees no loop, helper or hook
    (tmp_path / "turtle_like.py").write_text("def backward(distance):\n    return -distance\n\nbackward(3)\n")
    assert imported_after(run_cli(["check", "--no-cache", "turtle_like.py"]), tmp_path) == set()


def test_checking_training_code_imports_libcst_but_not_torch(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    assert imported_after(run_cli(["check", "--no-cache", "train.py"]), tmp_path) == {"libcst"}


def test_check_and_fix_work_with_torch_unimportable(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('torch must not be imported by accumlint check')\n")
    (tmp_path / "train.py").write_text(TRAIN)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")]))}
    command = "import sys\nfrom accumlint.cli import main\nsys.argv = ['accumlint'] + sys.argv[1:]\nmain()"
    for args in (["check", "--no-cache", "train.py"], ["check", "--fix", "--no-cache", "train.py"]):
        result = subprocess.run(
            [sys.executable, "-c", command, *args], cwd=tmp_path, env={**os.environ, **env},
            capture_output=True, text=True,
        )
        assert result.returncode in (0, 1), result.stdout + result.stderr
        assert "torch must not be imported" not in result.stderr


def test_every_test_module_loads_without_torch(tmp_path):
    """Where torch is missing, a test module that needs it skips (pytest.importorskip)
    instead of failing to import, so the checker's suite runs whole without torch."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(TESTS)],
        cwd=TESTS.parent, env=without_torch(tmp_path), capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
