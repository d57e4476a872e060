"""The `accumlint` command line: exit codes, streams, selection, fixes, stdin, verify.

Most tests replace the analysis with `fake_analysis` (they test what
surrounds it); the end-to-end tests at the bottom run the real analysis.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

from fake_analysis import patch_in_workers
import pytest
from click.testing import CliRunner
from fake_analysis import fake_analysis  # noqa: F401 - fixture
from silence import window_ks

from accumlint.cli import cli
from accumlint.rules.catalog import RULES

BUGGY = "def train(loader):\n    for x in loader:\n        loss = x\n        loss.backward()\n"
UNSAFE = "def train(loader):\n    for x in loader:\n        x.backward()\n        optimizer.step()\n"
CLEAN = "def train(loader):\n    for x in loader:\n        pass\n"
# What the real analysis reports (GA201 on line 4), for tests that run it.
REAL_BUGGY = textwrap.dedent("""\
    def train(model, loader, optimizer, criterion):
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
    """)


def run(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------- exit codes and text


def test_clean_tree_passes(project, fake_analysis):
    write(project, "train.py", CLEAN + "# backward()\n")
    result = run("check")
    assert result.exit_code == 0
    assert result.stdout == "All checks passed!\n"


def test_finding_exits_1_with_ruff_like_line(project, fake_analysis):
    write(project, "train.py", BUGGY)
    result = run("check", "train.py")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "train.py:4:9: GA201 missing-loss-scaling: fake finding GA201 [*]"
    assert lines[1] == "Found 1 error."
    assert lines[2] == "[*] 1 fixable with the `--fix` option."


def test_exit_zero_turns_findings_into_success_but_not_errors(project, fake_analysis):
    write(project, "train.py", BUGGY)
    assert run("check", "--exit-zero").exit_code == 0
    write(project, "broken.py", "def f(:\n    loss.backward()\n")
    assert run("check", "--exit-zero").exit_code == 2


def test_syntax_error_is_reported_and_other_files_still_checked(project, fake_analysis):
    write(project, "a_broken.py", "def f(:\n    loss.backward()\n")
    write(project, "b_train.py", BUGGY)
    result = run("check")
    assert result.exit_code == 2
    assert result.stdout.startswith("a_broken.py:1:")
    assert ": syntax error: " in result.stdout.splitlines()[0]
    assert "b_train.py:4:9: GA201" in result.stdout
    assert "Found 2 errors." in result.stdout


def test_internal_error_in_one_file_names_it_and_the_run_goes_on(project, fake_analysis):
    write(project, "a.py", BUGGY + "x = 'BOOM'\n")
    write(project, "b.py", BUGGY)
    result = run("check")
    assert result.exit_code == 2
    assert "a.py:1:1: internal error: internal error while checking this file: RuntimeError: boom" in result.stdout
    assert "b.py:4:9: GA201" in result.stdout


def test_missing_file_is_an_error(project, fake_analysis):
    result = run("check", "nope.py")
    assert result.exit_code == 2
    assert result.stdout.startswith("nope.py:1:1: io error: no such file or directory")


def test_paths_are_printed_as_given(project, fake_analysis):
    write(project, "pkg/sub/train.py", BUGGY)
    assert run("check", "pkg").stdout.startswith("pkg/sub/train.py:4:9:")
    assert run("check", "pkg/").stdout.startswith("pkg/sub/train.py:4:9:")
    assert run("check", "./pkg/sub/train.py").stdout.startswith("./pkg/sub/train.py:4:9:")
    assert run("check").stdout.startswith("pkg/sub/train.py:4:9:")


def test_quiet_prints_only_findings(project, fake_analysis):
    write(project, "train.py", BUGGY)
    result = run("check", "-q")
    assert result.stdout.splitlines() == ["train.py:4:9: GA201 missing-loss-scaling: fake finding GA201 [*]"]


def test_verbose_reports_counts_on_stderr(project, fake_analysis):
    write(project, "train.py", BUGGY)
    write(project, "other.py", "x = 1\n")
    result = run("check", "-v")
    assert "2 files checked, 1 analysed" in result.stderr


FULL_BLOCK = """\
train.py:4:9: GA201 missing-loss-scaling: fake finding GA201 [*]
  |
2 |     for x in loader:
3 |         loss = x
4 |         loss.backward()
  |         ^^^^^^^^^^^^^^^ GA201
  |
  = help: fake help GA201
  = fix: fix GA201 (safe fix)
  = docs: accumlint explain GA201

Found 1 error.
"""


@pytest.mark.parametrize("options", [("--output-format", "full"), ("--show-source",)])
def test_full_format_shows_context_carets_help_and_fix(project, fake_analysis, options):
    write(project, "train.py", BUGGY)
    out = run("check", *options).stdout
    assert out.startswith(FULL_BLOCK)


def test_full_format_marks_unsafe_fixes_that_need_the_flag(project, fake_analysis):
    write(project, "train.py", UNSAFE)
    out = run("check", "--output-format", "full").stdout
    assert "  = fix: fix GA102 (unsafe fix, needs --unsafe-fixes)\n" in out
    out = run("check", "--output-format", "full", "--unsafe-fixes").stdout
    assert "  = fix: fix GA102 (unsafe fix)\n" in out


def test_statistics_are_aligned_with_a_total(project, fake_analysis):
    write(project, "a.py", BUGGY)
    write(project, "b.py", BUGGY + "        loss.backward(retain_graph=True)\n" * 9)
    result = run("check", "--statistics")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        " 9  GA502  [ ] retain-graph-in-loop",
        " 2  GA201  [*] missing-loss-scaling",
        "11  total",
    ]


ANSI = "\x1b["


def test_no_colour_when_not_a_terminal(project, fake_analysis, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    write(project, "train.py", BUGGY)
    assert ANSI not in run("check").stdout


@pytest.mark.parametrize(
    "environment, flag, coloured",
    [
        ({"FORCE_COLOR": "1"}, (), True),
        ({}, ("--color", "always"), True),
        ({"FORCE_COLOR": "1"}, ("--color", "never"), False),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, (), False),
        ({"NO_COLOR": "1"}, ("--color", "always"), True),
    ],
)
def test_colour_flags_and_environment(project, fake_analysis, monkeypatch, environment, flag, coloured):
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    write(project, "train.py", BUGGY)
    out = run("check", *flag).stdout
    assert (ANSI in out) is coloured
    plain = out.replace("\x1b[0m", "")
    assert "GA201" in plain


def test_colour_never_reaches_json(project, fake_analysis):
    write(project, "train.py", BUGGY)
    assert json.loads(run("check", "--output-format", "json", "--color", "always").stdout)[0]["code"] == "GA201"


def test_no_files_found_warns(project, fake_analysis):
    result = run("check")
    assert result.exit_code == 0
    assert "no Python files" in result.stderr


# ---------------------------------------------------------------- selection


@pytest.mark.parametrize(
    "args, codes",
    [
        ((), {"GA201", "GA102", "GA502"}),
        (("--select", "GA2"), {"GA201"}),
        (("--select", "GA2,GA5"), {"GA201", "GA502"}),
        (("--select", "GA2", "--select", "GA5"), {"GA201", "GA502"}),
        (("--ignore", "GA1"), {"GA201", "GA502"}),
        (("--select", "GA", "--ignore", "GA20"), {"GA102", "GA502"}),
        (("--select", "GA201", "--ignore", "GA2"), {"GA201"}),
        (("--select", "GA1", "--extend-select", "GA502"), {"GA102", "GA502"}),
    ],
)
def test_selection_by_code_and_prefix(project, fake_analysis, args, codes):
    write(project, "train.py", BUGGY + "        optimizer.step()\n        loss.backward(retain_graph=True)\n")
    found = json.loads(run("check", "--output-format", "json", *args).stdout)
    assert {d["code"] for d in found} == codes


def test_unknown_selector_is_a_usage_error(project, fake_analysis):
    write(project, "train.py", BUGGY)
    result = run("check", "--select", "XY9")
    assert result.exit_code == 2
    assert "unknown rule selector 'XY9'" in result.stderr


# ---------------------------------------------------------------- fixes


def test_fix_rewrites_and_reports(project, fake_analysis):
    path = write(project, "train.py", BUGGY)
    result = run("check", "--fix")
    assert result.exit_code == 0
    assert result.stdout == "Fixed 1 error.\n"
    assert "(loss / 4).backward()" in path.read_text()
    assert run("check", "--fix").stdout == "All checks passed!\n"


def test_unsafe_fixes_are_hidden_until_asked(project, fake_analysis):
    path = write(project, "train.py", UNSAFE)
    result = run("check")
    assert "GA102 step-every-micro-batch: fake finding GA102\n" in result.stdout
    assert "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in result.stdout
    result = run("check", "--fix")
    assert result.exit_code == 1 and path.read_text() == UNSAFE
    result = run("check", "--unsafe-fixes")
    assert "fake finding GA102 [*]" in result.stdout
    result = run("check", "--fix", "--unsafe-fixes")
    assert result.exit_code == 0 and "step_when_due(optimizer)" in path.read_text()


def test_fix_with_remaining_findings(project, fake_analysis):
    write(project, "train.py", BUGGY + "        loss.backward(retain_graph=True)\n")
    result = run("check", "--fix")
    assert result.exit_code == 1
    assert "Found 2 errors (1 fixed, 1 remaining)." in result.stdout


def test_diff_prints_and_changes_nothing(project, fake_analysis):
    path = write(project, "train.py", BUGGY)
    result = run("check", "--diff")
    assert result.exit_code == 1
    assert result.stdout.startswith("--- train.py\n+++ train.py\n")
    assert "-        loss.backward()\n+        (loss / 4).backward()\n" in result.stdout
    assert "Would fix 1 error (0 remaining)." in result.stderr
    assert path.read_text() == BUGGY


def test_diff_with_nothing_to_fix_exits_0(project, fake_analysis):
    write(project, "train.py", CLEAN)
    result = run("check", "--diff")
    assert result.exit_code == 0 and result.stdout == ""


def test_diff_exits_0_when_findings_remain_but_nothing_is_fixable(project, fake_analysis):
    write(project, "train.py", BUGGY.replace("loss.backward()", "loss.backward(retain_graph=True)"))
    result = run("check", "--diff")
    assert result.exit_code == 0 and result.stdout == ""
    assert "GA502" in result.stderr


def test_diff_is_coloured_when_asked(project, fake_analysis):
    write(project, "train.py", BUGGY)
    plain = run("check", "--diff").stdout
    coloured = run("check", "--diff", "--color", "always").stdout
    assert "\x1b[31m-        loss.backward()\x1b[0m\n\x1b[32m+        (loss / 4).backward()\x1b[0m\n" in coloured
    import click

    assert click.unstyle(coloured) == plain and ANSI not in plain


# ---------------------------------------------------------------- reports to files


def test_output_file_takes_the_report(project, fake_analysis):
    write(project, "train.py", BUGGY)
    result = run("check", "--output-format", "json", "--output-file", "out/report.json")
    assert result.exit_code == 2 and "out/report.json: cannot write the report" in result.stderr
    (project / "out").mkdir()
    result = run("check", "--output-format", "json", "--output-file", "out/report.json", "--color", "auto")
    assert result.exit_code == 1 and result.stdout == ""
    assert [d["code"] for d in json.loads((project / "out" / "report.json").read_text())] == ["GA201"]
    umask = os.umask(0o022)
    try:
        run("check", "--output-format", "json", "--output-file", "out/new.json")
    finally:
        os.umask(umask)
    assert (project / "out" / "new.json").stat().st_mode & 0o777 == 0o644  # as `open` makes it
    run("check", "-o", "out/report.txt", "--color", "always")
    assert ANSI in (project / "out" / "report.txt").read_text()  # --color always is obeyed
    run("check", "--diff", "-o", "out/fixes.diff")
    assert (project / "out" / "fixes.diff").read_text().startswith("--- train.py\n+++ train.py\n")


def test_several_reports_from_one_run(project, fake_analysis):
    write(project, "train.py", BUGGY)
    result = run("check", "--output-format", "github,sarif:a.sarif,junit:b.xml")
    assert result.exit_code == 1
    assert result.stdout.startswith("::error file=train.py,line=4,col=9,")
    assert json.loads((project / "a.sarif").read_text())["runs"][0]["results"][0]["ruleId"] == "GA201"
    assert "<testsuites " in (project / "b.xml").read_text()
    assert len(fake_analysis.calls) == 1  # one analysis for all of them
    result = run("check", "--output-format", "sarif:only.sarif")
    assert result.exit_code == 1 and result.stdout == ""
    assert (project / "only.sarif").exists()


@pytest.mark.parametrize(
    "value, message",
    [
        ("xml", "'xml' is not one of concise"),
        ("json,github", "at most one format can be printed"),
        ("json:a.json,nope:b", "'nope' is not one of"),
    ],
)
def test_bad_output_formats_are_usage_errors(project, value, message):
    result = run("check", "--output-format", value)
    assert result.exit_code == 2 and message in result.stderr


# ---------------------------------------------------------------- stdin


def test_stdin_with_filename(project, fake_analysis):
    result = run("check", "-", "--stdin-filename", "src/train.py", stdin=BUGGY.encode())
    assert result.exit_code == 1
    assert result.stdout.startswith("src/train.py:4:9: GA201")


def test_stdin_without_filename_is_dash(project, fake_analysis):
    result = run("check", "-", stdin=BUGGY.encode())
    assert result.stdout.startswith("-:4:9: GA201")


def test_stdin_fix_prints_fixed_code(project, fake_analysis):
    result = run("check", "--fix", "--stdin-filename", "t.py", stdin=BUGGY.encode())
    assert result.exit_code == 0
    assert result.stdout == BUGGY.replace("loss.backward()", "(loss / 4).backward()")
    assert "Fixed 1 error." in result.stderr


def test_stdin_cannot_mix_with_paths(project, fake_analysis):
    assert run("check", "-", "a.py", stdin=b"").exit_code == 2


# ---------------------------------------------------------------- jobs and cache


def test_process_pool_gives_the_same_results(project, fake_analysis):
    for index in range(6):
        write(project, f"t{index}.py", BUGGY)
    serial = run("check", "--jobs", "1", "--no-cache").stdout
    parallel = run("check", "--jobs", "2", "--no-cache", "-v")
    assert parallel.stdout == serial
    assert "2 processes" in parallel.stderr


def test_cache_serves_unchanged_files(project, fake_analysis):
    path = write(project, "train.py", BUGGY)
    first = run("check")
    assert fake_analysis.calls == ["train.py"]
    second = run("check", "-v")
    assert fake_analysis.calls == ["train.py"] and "1 from cache" in second.stderr
    assert second.stdout == first.stdout
    assert json.loads(run("check", "--select", "GA5", "--output-format", "json").stdout) == []
    path.write_text(BUGGY + "\n")
    run("check")
    assert len(fake_analysis.calls) == 2
    run("check", "--no-cache")
    assert len(fake_analysis.calls) == 3


def test_cached_result_respects_noqa_added_later(project, fake_analysis):
    path = write(project, "train.py", BUGGY)
    run("check")
    path.write_text(BUGGY.replace("loss.backward()", "loss.backward()  # noqa: GA201"))
    assert run("check").exit_code == 0


# ---------------------------------------------------------------- rules, explain, verify, help


def test_rules_table_and_json():
    text = run("rules").stdout.split("\n\n")[0].splitlines()  # the GA rules; the noqa checks follow apart
    assert text[0].split() == ["code", "name", "fix", "summary"]
    assert text[1].startswith("GA101  zero-grad-every-micro-batch")
    rows = json.loads(run("rules", "--output-format", "json").stdout)
    assert [row["code"] for row in rows] == [rule.code for rule in RULES]
    assert [line.split()[0] for line in text[1:] if line.startswith("GA")] == [rule.code for rule in RULES]
    by_code = {row["code"]: row for row in rows}
    assert {"code": "GA201", "name": "missing-loss-scaling", "fix": "safe"}.items() <= by_code["GA201"].items()
    assert {"code": "GA601", "name": "logged-loss-scaled", "fix": "unsafe"}.items() <= by_code["GA601"].items()


def test_explain_prints_the_document_and_rejects_unknown_codes():
    pytest.importorskip("accumlint.rules.docs")
    result = run("explain", "ga201")
    assert result.exit_code == 0 and "GA201" in result.stdout
    result = run("explain", "GA999")
    assert result.exit_code == 2
    assert "unknown rule 'GA999'" in result.stderr


def test_explain_by_rule_name_and_suppression_codes():
    pytest.importorskip("accumlint.rules.docs")
    by_name = run("explain", "missing-loss-scaling")
    assert by_name.exit_code == 0 and by_name.stdout == run("explain", "GA201").stdout
    assert run("explain", "unused-noqa").stdout.startswith("# AL002 unused-noqa\n")
    assert run("explain", "no-such-rule").exit_code == 2


def test_rule_is_another_name_of_explain_and_hidden_from_the_help():
    pytest.importorskip("accumlint.rules.docs")
    result = run("rule", "GA106")
    assert result.exit_code == 0 and result.stdout == run("explain", "GA106").stdout
    assert result.stdout.startswith("# GA106 ")
    assert run("rule", "GA999").exit_code == 2
    assert "  rule " not in run("--help").stdout


def test_python_dash_m_accumlint_is_the_command(tmp_path):
    write(tmp_path, "train.py", REAL_BUGGY)
    done = subprocess.run(
        [sys.executable, "-m", "accumlint", "check", "--no-cache", "--output-format", "json", "train.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert [d["code"] for d in json.loads(done.stdout)] == ["GA201"]
    version = subprocess.run([sys.executable, "-m", "accumlint", "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("accumlint ")


def _environment_without(module: str, folder: Path) -> dict[str, str]:
    """The environment of a process in which `import module` fails as if it were not installed."""
    (folder / "sitecustomize.py").write_text(
        "import sys\nclass _Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r} or name.startswith({module + '.'!r}):\n"
        f"            raise ModuleNotFoundError(\"No module named {module!r}\", name={module!r})\n"
        "sys.meta_path.insert(0, _Missing())\n"
    )
    return {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_a_missing_extra_is_installed_from_the_checkout(tmp_path):
    done = subprocess.run([sys.executable, "-m", "accumlint", "server"], capture_output=True, text=True,
                          env=_environment_without("pygls", tmp_path), stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 2
    assert "needs pygls: from a checkout of accumlint, pip install -e '.[lsp]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_rules_lists_suppression_checks_apart():
    text = run("rules").stdout
    rules_part, suppression_part = text.split("\n\nChecks of the suppression comments")
    assert "AL00" not in rules_part
    assert "AL001  malformed-noqa" in suppression_part and "AL002  unused-noqa" in suppression_part
    assert all(row["code"].startswith("GA") for row in json.loads(run("rules", "--output-format", "json").stdout))


def test_version():
    result = run("--version")
    assert result.stdout.startswith("accumlint ")


def test_help_lists_verify_without_importing_it():
    code = "import sys; from accumlint.cli import main; sys.argv=['accumlint','--help']\ntry: main()\nexcept SystemExit: pass\nprint('torch' in sys.modules, 'accumlint.verify.command' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "verify" in out and out.strip().endswith("False False")


def test_verify_needs_fix(project, fake_analysis):
    result = run("check", "--verify")
    assert result.exit_code == 2 and "--verify needs --fix" in result.stderr


def test_fix_verify_reports_each_loop(project, fake_analysis, monkeypatch):
    write(project, "train.py", BUGGY)
    outcome = types.SimpleNamespace
    fixcheck = types.ModuleType("accumlint.verify.fixcheck")
    fixcheck.verify_fixed_file = lambda path, **_: [
        outcome(function="train", status="verified", reason=None),
        outcome(function="other", status="not verifiable", reason="no loader parameter"),
    ]
    monkeypatch.setitem(sys.modules, "accumlint.verify.fixcheck", fixcheck)
    result = run("check", "--fix", "--verify")
    assert result.exit_code == 0
    assert "train.py::train: verified\n" in result.stdout
    assert "train.py::other: not verifiable (no loader parameter)\n" in result.stdout


def test_fix_verify_not_equivalent_fails(project, fake_analysis, monkeypatch):
    write(project, "train.py", BUGGY)
    fixcheck = types.ModuleType("accumlint.verify.fixcheck")
    fixcheck.verify_fixed_file = lambda path, **_: [
        types.SimpleNamespace(function="train", status="not equivalent", reason="ratio 4")
    ]
    monkeypatch.setitem(sys.modules, "accumlint.verify.fixcheck", fixcheck)
    result = run("check", "--fix", "--verify")
    assert result.exit_code == 1
    assert "train.py::train: not equivalent" in result.stdout


def test_fix_verify_without_the_verifier_says_so(project, fake_analysis, monkeypatch):
    write(project, "train.py", BUGGY)
    monkeypatch.setitem(sys.modules, "accumlint.verify.fixcheck", None)
    result = run("check", "--fix", "--verify")
    assert result.exit_code == 2 and "--verify is not available" in result.stderr


# ---------------------------------------------------------------- end to end, real analysis

MISSING_SCALING = textwrap.dedent(
    """\
    import torch
    from torch import nn


    def train(loader, accum_steps=4):
        model = nn.Linear(8, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        criterion = nn.MSELoss()
        optimizer.zero_grad()
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
)


def test_end_to_end_missing_loss_scaling(project):
    write(project, "train.py", MISSING_SCALING)
    result = run("check", "--no-cache", "train.py")
    assert result.exit_code == 1
    assert result.stdout.startswith("train.py:12:9: GA201 missing-loss-scaling: ")


def test_end_to_end_fix_then_clean(project):
    path = write(project, "train.py", MISSING_SCALING)
    result = run("check", "--fix", "--no-cache", "train.py")
    assert result.exit_code == 0, result.stdout
    assert "accum_steps" in path.read_text().splitlines()[11]
    assert run("check", "--no-cache", "train.py").exit_code == 0


def test_end_to_end_json_and_noqa(project):
    write(project, "train.py", MISSING_SCALING)
    found = json.loads(run("check", "--output-format", "json", "train.py").stdout)
    assert [(d["line"], d["code"], d["fix"]["applicability"]) for d in found] == [(12, "GA201", "safe")]
    write(project, "train.py", MISSING_SCALING.replace("loss.backward()", "loss.backward()  # noqa: GA201"))
    assert run("check", "train.py").exit_code == 0


def test_end_to_end_correct_loop_is_silent(project):
    source = MISSING_SCALING.replace("loss.backward()", "(loss / accum_steps).backward()")
    assert window_ks(source, "train.py") == ["accum_steps"], "the loop must be modelled for its silence to count"
    write(project, "train.py", source)
    result = run("check", "train.py")
    assert result.exit_code == 0, result.stdout


# ---------------------------------------------------------------- robustness and integrations


def _recurse_without_end(text, path, options):
    raise RecursionError()


def _run_out_of_memory(text, path, options):
    raise MemoryError()


def _fixes_that_never_settle(text, path, options, *, unsafe, keep, fixable=None):
    from accumlint.check.fixes import FixOutcome

    return FixOutcome(text + "#\n", [], [], converged=False)


@pytest.mark.parametrize(
    "explode, message",
    [(_recurse_without_end, "exceeded the recursion limit"), (_run_out_of_memory, "ran out of memory")],
)
def test_recursion_and_memory_errors_are_per_file(project, monkeypatch, explode, message):
    patch_in_workers(monkeypatch, "accumlint.check.analysis.analyze", explode)
    write(project, "deep.py", BUGGY)
    result = run("check")
    assert result.exit_code == 2
    assert result.stdout.startswith("deep.py:1:1: internal error: analysis " + message), result.stdout + result.stderr


def test_unfixable_rules_are_not_fixed_by_the_real_fixer(project):
    path = write(project, "train.py", REAL_BUGGY)
    result = run("check", "--no-cache", "--fix", "--unfixable", "GA201")
    assert result.exit_code == 1 and path.read_text() == REAL_BUGGY
    assert "GA201" in result.stdout and "[*]" not in result.stdout
    assert run("check", "--no-cache", "--fix").exit_code == 0 and path.read_text() != REAL_BUGGY


def test_unsettled_fixes_are_reported(project, fake_analysis, monkeypatch):
    patch_in_workers(monkeypatch, "accumlint.check.fixes.fix_text", _fixes_that_never_settle)
    write(project, "train.py", BUGGY)
    result = run("check", "--fix")
    assert "train.py: fixes did not settle" in result.stderr


def test_ci_script_runs_the_readme_test_command():
    root = Path(__file__).resolve().parent.parent
    command = "pip install torch==2.13.0 && pip install -e '.[verify,test,frameworks]' && python -m pytest -q"
    assert command in (root / "README.md").read_text()
    script = (root / ".ci" / "run").read_text()
    lines = [line.split("  #")[0] for line in script.strip().splitlines()]
    assert "set -euo pipefail" in script and command in lines
    # after the tests, the type check that README's development section names
    assert "python -m mypy" in lines[lines.index(command):] and "`python -m mypy`" in (root / "README.md").read_text()
    assert (root / ".ci" / "run").stat().st_mode & 0o111
    readme = (root / "README.md").read_text()
    for name, python, setting in (("oldest", "3.10", '"libcst==$LIBCST"'),
                                  ("newest", "3.13", "ACCUMLINT_NO_SPEEDUPS=1")):
        assert f"\nbash .ci/{name}-python\n" in script and f"bash .ci/{name}-python" in readme
        checker = (root / ".ci" / f"{name}-python").read_text()
        assert "set -euo pipefail" in checker and f"find-python {python}" in checker
        assert setting in checker and "-m pytest" in checker
        # both ends run on the path where fork is missing; the suite after them forks
        assert "ACCUMLINT_START_METHOD=spawn" in next(line for line in checker.splitlines() if "-m pytest" in line)


def test_readme_gives_the_cpu_wheel_first_and_the_suite_duration_and_installs_extras_from_a_checkout():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    command = "pip install torch==2.13.0 && pip install -e '.[verify,test,frameworks]' && python -m pytest -q"
    assert readme.index("download.pytorch.org/whl/cpu") < readme.index(command)
    assert re.search(r"The suite takes about \d+( to \d+)? minutes", readme)
    assert "pip install -e '.[lsp]'" in readme


def test_supported_pythons_are_declared_and_the_tomllib_fallback_is_a_dependency():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10,<3.14"
    assert [c.rsplit(" ", 1)[-1] for c in project["classifiers"] if c.startswith("Programming Language :: Python :: 3.")] == [
        "3.10", "3.11", "3.12", "3.13"]
    assert "libcst>=1.1,<1.10" in project["dependencies"]  # the floor .ci/oldest-python installs, and a cap
    assert "tomli>=1.1; python_version < '3.11'" in project["dependencies"]


def test_readme_pre_commit_revision_is_this_version():
    import accumlint

    root = Path(__file__).resolve().parent.parent
    project = (root / "pyproject.toml").read_text()
    assert f'version = "{accumlint.__version__}"' in project
    assert f"rev: v{accumlint.__version__} " in (root / "README.md").read_text()


def test_pre_commit_hooks():
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml").read_text())
    by_id = {hook["id"]: hook for hook in hooks}
    assert by_id["accumlint"]["entry"] == "accumlint check"
    assert by_id["accumlint-fix"]["entry"] == "accumlint check --fix"
    for hook in hooks:
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"]


# ---------------------------------------------------------------- the process's own exit


def _command_process(project: Path, before: str, *args: str) -> subprocess.CompletedProcess:
    """`run()` (the console script) in a fresh process, after `before` ran in it."""
    write(project, "train.py", REAL_BUGGY)
    code = f"{before}\nimport sys\nsys.argv = {['accumlint', *args]!r}\nfrom accumlint.cli import run\nrun()\n"
    environment = {key: value for key, value in os.environ.items() if key != "ACCUMLINT_NO_SPEEDUPS"}  # (the fast exit's)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project, timeout=120,
                          env=environment)


def test_the_command_ends_at_once_with_its_status_output_and_exit_handlers(project):
    before = textwrap.dedent("""\
        import atexit, sys
        class Tail:
            def __del__(self):
                print("teardown ran")
        kept = Tail()
        atexit.register(lambda: sys.stderr.write("exit handler ran\\n"))
        """)
    done = _command_process(project, before, "check", "--no-cache", "--output-format", "json", "train.py")
    assert done.returncode == 1
    assert [d["code"] for d in json.loads(done.stdout)] == ["GA201"]  # all of it, flushed
    assert "exit handler ran" in done.stderr
    assert "teardown ran" not in done.stdout  # no interpreter teardown


def test_the_command_takes_the_normal_exit_while_another_thread_runs(project):
    before = textwrap.dedent("""\
        import threading, time
        import accumlint.cli
        checked = threading.Event()
        plain_main = accumlint.cli.main
        def main():
            try:
                plain_main()
            finally:
                checked.set()
        accumlint.cli.main = main
        def late():  # still running when the check is done, whatever its speed
            checked.wait()
            time.sleep(0.2)
            print("thread finished", flush=True)
        threading.Thread(target=late).start()
        """)
    done = _command_process(project, before, "check", "--no-cache", "train.py")
    assert done.returncode == 1
    assert "GA201" in done.stdout and done.stdout.rstrip().endswith("thread finished")


# ---------------------------------------------------------------- --watch


def test_watch_without_watchfiles_says_how_to_install_it(tmp_path):
    write(tmp_path, "train.py", REAL_BUGGY)
    done = subprocess.run([sys.executable, "-m", "accumlint", "check", "--watch", "."], capture_output=True,
                          text=True, cwd=tmp_path, env=_environment_without("watchfiles", tmp_path), timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "--watch needs watchfiles: from a checkout of accumlint, pip install -e '.[watch]'" in done.stderr


def test_watch_cannot_read_stdin():
    result = run("check", "--watch", "-")
    assert result.exit_code == 2 and "--watch cannot be combined with stdin" in result.stderr


def test_watch_checks_again_when_a_file_changes(tmp_path):
    pytest.importorskip("watchfiles")
    import queue
    import signal
    import threading
    import time

    path = write(tmp_path, "pkg/train.py", REAL_BUGGY)
    process = subprocess.Popen(
        [sys.executable, "-m", "accumlint", "check", "--no-cache", "--watch", "."],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()

    def wait_for(text: str, poke=None) -> None:
        deadline = time.monotonic() + 60  # a bound on a stuck watcher, not a speed requirement
        while time.monotonic() < deadline:
            try:
                if lines.get(timeout=0.5) == text:
                    return
            except queue.Empty:
                if poke:
                    poke()  # a change saved before the watcher started is not seen: save it again
        raise AssertionError(f"never printed {text!r}")

    try:
        wait_for("Found 1 error.\n")
        fixed = REAL_BUGGY.replace("loss.backward()", "(loss / 4).backward()")
        wait_for("All checks passed!\n", poke=lambda: path.write_text(fixed))
        path.write_text(REAL_BUGGY)
        wait_for("Found 1 error.\n")
    finally:
        process.send_signal(signal.SIGINT)
        status = process.wait(timeout=60)
    assert status == 130
    assert "Watching for file changes" in process.stderr.read()
