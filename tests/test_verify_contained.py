"""The verifier contains the code it runs: exits, crashes, exceptions, endless
loops and forks of the user's code end as "could not run" reports, and the
user's own argv and output stay the user's."""

from __future__ import annotations

import inspect
import json
import os
import textwrap

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from accumlint.verify import check_equivalence  # noqa: E402
from accumlint.verify.command import verify_command  # noqa: E402
from accumlint.verify.report import COULD_NOT_RUN, EQUIVALENT  # noqa: E402

LOOP = """
def train(model, optimizer, loader, accum_steps, loss_fn):
    {before}
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
"""


def apart() -> CliRunner:
    """A runner keeping stderr apart from stdout (click 8.1 mixes them unless told)."""
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        return CliRunner(mix_stderr=False)
    return CliRunner()


def loop_file(tmp_path, before: str, header: str = "", name: str = "loop.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(header) + LOOP.format(before=before))
    return f"{path}::train"


@pytest.mark.parametrize(
    "before, said",
    [
        ("import sys; sys.exit(0)", "called sys.exit(0) at"),
        ("import sys; sys.exit(3)", "called sys.exit(3) at"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("import os; os._exit(0)", "exited with status 0 while running train()"),
        ("import ctypes; ctypes.string_at(0)", "killed by SIGSEGV"),
    ],
)
def test_an_exit_crash_or_interrupt_of_the_code_could_not_run(tmp_path, before, said):
    report = check_equivalence(loop_file(tmp_path, before))
    assert report.verdict == COULD_NOT_RUN and report.exit_code == 2, report.format_text()
    assert said in report.reason


def test_the_command_exits_2_when_the_code_exits_0_or_3(tmp_path):
    for code in (0, 3):
        result = CliRunner().invoke(verify_command, [loop_file(tmp_path, f"import sys; sys.exit({code})")])
        assert result.exit_code == 2, result.output
        assert f"COULD NOT RUN: the training function called sys.exit({code})" in result.output


def test_a_segfault_names_the_line_it_happened_on(tmp_path):
    report = check_equivalence(loop_file(tmp_path, "import ctypes; ctypes.string_at(0)"))
    assert "loop.py:3" in report.reason, report.reason
    assert "Fatal Python error" in report.stderr


def test_an_endless_loop_is_stopped_at_the_time_limit(tmp_path):
    report = check_equivalence(loop_file(tmp_path, "while True: pass"), timeout=1)
    assert report.verdict == COULD_NOT_RUN
    assert "time limit of 1 s while running train()" in report.reason and "--timeout" in report.reason


def test_a_fork_in_the_code_leaves_no_process_behind(tmp_path):
    pid_file = tmp_path / "pid"
    before = (
        "import os, time\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        time.sleep(600)\n"
        f"    open({str(pid_file)!r}, 'w').write(str(pid))"
    )
    report = check_equivalence(loop_file(tmp_path, before))
    assert report.verdict == EQUIVALENT, report.format_text()
    forked = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(forked, 0)  # killed and reaped: not even a zombie


def test_timeout_is_an_option_and_a_setting(tmp_path, monkeypatch):
    target = loop_file(tmp_path, "while True: pass")
    result = CliRunner().invoke(verify_command, [target, "--timeout", "0.5"])
    assert result.exit_code == 2 and "time limit of 0.5 s" in result.output
    (tmp_path / "pyproject.toml").write_text("[tool.accumlint.verify]\ntimeout = 0.5\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(verify_command, ["loop.py::train"])
    assert result.exit_code == 2 and "time limit of 0.5 s" in result.output


ARGV_HEADER = """
import argparse
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
ARGS = parser.parse_args()
SEEN_AT_IMPORT = list(sys.argv)
"""


def test_argv_is_the_scripts_own_while_it_is_imported_and_runs(tmp_path):
    seen = tmp_path / "seen.json"
    before = f"import json, sys; json.dump([SEEN_AT_IMPORT, sys.argv, ARGS.lr], open({str(seen)!r}, 'w'))"
    target = loop_file(tmp_path, before, ARGV_HEADER)
    result = CliRunner().invoke(verify_command, [target, "-k", "2", "--script-args", "--lr 0.5"])
    assert result.exit_code == 0, result.output
    path = str(tmp_path / "loop.py")
    assert json.loads(seen.read_text()) == [[path, "--lr", "0.5"], [path, "--lr", "0.5"], 0.5]


def test_script_args_come_from_the_configuration_too(tmp_path, monkeypatch):
    loop_file(tmp_path, "assert ARGS.lr == 0.5, ARGS", ARGV_HEADER)
    (tmp_path / "pyproject.toml").write_text('[tool.accumlint.verify]\nscript-args = ["--lr", "0.5"]\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(verify_command, ["loop.py::train"])
    assert result.exit_code == 0, result.output
    (tmp_path / "pyproject.toml").write_text("[tool.accumlint.verify]\nscript-args = 5\n")
    result = CliRunner().invoke(verify_command, ["loop.py::train"])
    assert result.exit_code == 2 and "`script-args` must be a list of strings" in result.output


def test_a_script_that_rejects_the_arguments_says_how_to_pass_its_own(tmp_path):
    target = loop_file(tmp_path, "pass", ARGV_HEADER.replace('"--lr"', '"lr"'))
    report = check_equivalence(target)
    assert report.verdict == COULD_NOT_RUN
    assert "called sys.exit(2)" in report.reason and "--script-args" in report.reason
    assert "the following arguments are required: lr" in report.stderr


def test_the_codes_output_is_kept_apart_from_the_report(tmp_path):
    header = "import sys\nprint('hello at import')\nprint('warned', file=sys.stderr)\n"
    target = loop_file(tmp_path, "print('loss 1.0'); import os; os.write(1, b'from C\\n')", header)
    result = apart().invoke(verify_command, [target, "--output-format", "json"])
    data = json.loads(result.stdout)
    assert data["verdict"] == "equivalent"
    assert "hello at import" in data["stdout"] and "loss 1.0" in data["stdout"] and "from C" in data["stdout"]
    assert data["stderr"] == "warned"
    text = apart().invoke(verify_command, [target])
    assert "hello at import" not in text.stdout and "EQUIVALENT" in text.stdout
    assert "--- the training code's stdout" in text.stderr and "loss 1.0" in text.stderr


def test_in_this_process_when_cuda_is_initialized_here(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    target = loop_file(tmp_path, "print('in process')")
    report = check_equivalence(target)
    assert report.passed and "in process" in report.stdout
    assert any("ran in this process" in note and "CUDA" in note for note in report.notes)


def test_an_equivalent_verdict_flags_nothing(tmp_path):
    report = check_equivalence(loop_file(tmp_path, "pass"))
    assert report.passed and report.final is not None and not report.final.ok
    assert "DIFFERS" not in report.format_text()


def test_a_setup_factory_that_exits_could_not_run(tmp_path):
    def setup():
        raise SystemExit(4)

    report = check_equivalence(loop_file(tmp_path, "pass"), setup=setup)
    assert report.verdict == COULD_NOT_RUN and report.reason == "the setup factory raised SystemExit: 4"


def test_in_this_process_where_the_platform_cannot_fork(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "fork")
    target = loop_file(tmp_path, "print('no fork here')")
    report = check_equivalence(target)
    assert report.passed and "no fork here" in report.stdout
    assert any("ran in this process" in note and "cannot fork" in note for note in report.notes)
    distributed = check_equivalence(target, nproc=2, tail=0)
    assert distributed.verdict == COULD_NOT_RUN and "needs os.fork" in distributed.reason


def _fresh_python(code: str) -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          check=True, timeout=600).stdout


def test_what_training_loads_is_loaded_once_here_not_in_every_child():
    # torch imports its compiler when the first optimizer is built; a child that had to do it
    # again would pay for it on every verification
    gated = os.path.join(os.path.dirname(__file__), "..", "fixtures", "verify", "correct_gated.py")
    out = _fresh_python(f"""
        import sys
        import torch
        from accumlint.verify import check_equivalence
        before = "torch._dynamo" in sys.modules
        report = check_equivalence({os.path.abspath(gated) + "::train"!r}, windows=2)
        print(before, "torch._dynamo" in sys.modules, report.passed)
    """)
    assert out.split() == ["False", "True", "True"]


def test_the_runs_threads_compute_with_torchs_thread_count(tmp_path):
    import glob

    libraries = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*.so*"))
    if not libraries or (os.cpu_count() or 1) < 2:
        pytest.skip("needs torch's GNU OpenMP and two cores")
    seen = tmp_path / "threads"
    target = loop_file(tmp_path, f"import ctypes; open({str(seen)!r}, 'a').write("
                                 f"str(ctypes.CDLL({libraries[0]!r}).omp_get_max_threads()) + ' ')")
    out = _fresh_python(f"""
        import torch
        torch.set_num_threads(1)
        from accumlint.verify.equivalence import verify_here
        print(verify_here({target!r}).passed)
    """)
    assert out.strip() == "True" and set(seen.read_text().split()) == {"1"}
