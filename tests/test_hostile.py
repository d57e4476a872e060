"""No input ends the run: hostile files each get one line, and every other file is still checked.

The inputs are generated here (deep nesting, long chains, parser crashes,
broken notebooks, unreadable folders); none is committed.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from samples import UNSCALED_LOOP as TRAIN
from samples import UNSCALED_LOOP_AT_MODULE_LEVEL
from click.testing import CliRunner

from accumlint.cli import cli

LOOP = "for batch in loader:\n    model(batch).backward()\n"


def check_json(*args: str) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", "json", *args], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def by_path(found: list[dict]) -> dict[str, list[tuple[str, str]]]:
    paths: dict[str, list[tuple[str, str]]] = {}
    for d in found:
        paths.setdefault(d["path"], []).append((d["code"], d["message"]))
    return paths


HOSTILE = {
    # valid Python whose LibCST parse segfaults (48 KB), or takes minutes (+ and attribute chains)
    "and_chain.py": LOOP + "x = " + " and ".join(["a"] * 8000) + "\n",
    "plus_chain.py": LOOP + "x = " + " + ".join(["a"] * 12500) + "\n",
    "attribute_chain.py": LOOP + "x = a" + ".b" * 50000 + "\n",
    # invalid deep nesting: CPython refuses it, at its own position
    "parentheses.py": LOOP + "x = " + "(" * 5000 + "a" + ")" * 5000 + "\n",
    "nested_calls.py": LOOP + "x = " + "f(" * 2000 + "a" + ")" * 2000 + "\n",
}


@pytest.fixture
def hostile_tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, text in HOSTILE.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_each_hostile_file_gets_one_line_and_the_rest_is_checked(hostile_tree, jobs):
    code, found = check_json("--jobs", jobs, ".")
    assert code == 2
    paths = by_path(found)
    assert set(paths) == {*HOSTILE, "train.py"}
    assert all(len(lines) == 1 for name, lines in paths.items() if name in HOSTILE)
    assert [c for c, _ in paths["train.py"]] == ["GA201"]
    assert paths["and_chain.py"] == [("internal-error", "cannot be analysed: nested too deeply (depth 8003; the limit is 400)")]
    for name in ("plus_chain.py", "attribute_chain.py"):
        (line,) = paths[name]
        # Python 3.11+ refuses these chains itself; 3.10 parses them and the nesting bound refuses them.
        assert line == ("internal-error", "cannot be analysed: too deeply nested for Python's own parser") or (
            sys.version_info < (3, 11) and line[0] == "internal-error" and "nested too deeply (depth" in line[1]
        )
    for name in ("parentheses.py", "nested_calls.py"):
        assert paths[name] == [("syntax-error", "too many nested parentheses")]
    lines = {d["path"]: (d["line"], d["column"]) for d in found}
    assert lines["parentheses.py"] == (3, 205) and lines["nested_calls.py"] == (3, 406)  # CPython's


def test_a_parser_crash_costs_only_its_file(tmp_path, monkeypatch):
    # Lift the nesting bound so that LibCST really gets the 12,000-operand chain it segfaults on.
    monkeypatch.setattr("accumlint.gate.MAX_NESTING", 10**6)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "crash.py").write_text(LOOP + "x = " + " and ".join(["a"] * 12000) + "\n")
    for index in range(3):
        (tmp_path / f"train{index}.py").write_text(TRAIN)
    code, found = check_json("--jobs", "2", ".")
    paths = by_path(found)
    assert code == 2
    assert [c for c, _ in paths["crash.py"]] == ["internal-error"]
    assert "segmentation fault" in paths["crash.py"][0][1]
    assert all([c for c, _ in paths[f"train{index}.py"]] == ["GA201"] for index in range(3))


def test_a_file_past_its_time_budget_is_reported_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "big.py").write_text(TRAIN * 400)  # about a second of LibCST
    (tmp_path / "train.py").write_text(TRAIN)
    code, found = check_json("--file-timeout", "0.05", "--jobs", "1", "big.py")
    assert code == 2
    assert found == [{**found[0], "code": "internal-error",
                      "message": "analysis took longer than the per-file budget of 0.05 s; file not checked"}]
    code, found = check_json("train.py")
    assert code == 1 and [d["code"] for d in found] == ["GA201"]


def test_swapped_prepare_outputs_end_in_one_line_at_most(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "swapped.py").write_text(textwrap.dedent(
        """\
        accelerator = Accelerator(gradient_accumulation_steps=4)
        opt, model = accelerator.prepare(model, opt)
        for batch in loader:
            with accelerator.accumulate(model):
                accelerator.backward(model(batch))
                opt.step()
                opt.zero_grad()
        """
    ))
    (tmp_path / "train.py").write_text(TRAIN)
    code, found = check_json(".")
    paths = by_path(found)
    assert len(paths.get("swapped.py", [])) <= 1
    assert [c for c, _ in paths["train.py"]] == ["GA201"]


@pytest.mark.parametrize(
    "notebook, message",
    [
        ({"metadata": {"language_info": "python"}, "cells": [{"cell_type": "code", "source": LOOP}]}, None),
        ({"cells": [{"cell_type": "code", "source": [1, 2]}]}, "a cell's source is list data, not text"),
        ({"cells": [{"cell_type": "code", "source": 7}]}, "a cell's source is int data, not text"),
        ({"cells": "none"}, "no list of cells"),
    ],
)
def test_broken_notebooks_get_one_line(tmp_path, monkeypatch, notebook, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "train.py").write_text(TRAIN)
    code, found = check_json(".")
    paths = by_path(found)
    assert [c for c, _ in paths["train.py"]] == ["GA201"]
    if message is None:
        assert "nb.ipynb" not in paths
    else:
        assert paths["nb.ipynb"] == [("syntax-error", f"not a valid notebook: {message}")]


def test_deeply_nested_notebook_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deep.ipynb").write_text('{"cells": [], "metadata": ' + "[" * 100000 + "]" * 100000 + "}")
    code, found = check_json("deep.ipynb")
    assert code == 2
    assert [(d["code"], d["message"]) for d in found] == [
        ("syntax-error", "not a valid notebook: its JSON is nested too deeply to read")
    ]


def test_a_magic_inside_a_block_is_not_a_syntax_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cells = [
        {"cell_type": "code", "source": ["if IN_COLAB:\n", "    !pip install accelerate\n"]},
        {"cell_type": "code", "source": ["try:\n", "    %load_ext autoreload\n", "except ImportError:\n", "    pass\n"]},
        {"cell_type": "code", "source": TRAIN},
    ]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells}))
    code, found = check_json("nb.ipynb")
    assert [(d["code"], d["cell"]) for d in found] == [("GA201", 3)]


def _unlistable(tmp_path, monkeypatch):
    """A tree with a folder that cannot be listed, by permission or (as root) by a refusing scandir."""
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "inner.py").write_text(TRAIN)
    (tmp_path / "train.py").write_text(TRAIN)
    real_scandir = os.scandir

    def scandir(path="."):
        if os.path.basename(os.fspath(path)) == "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_a_folder_that_cannot_be_listed_is_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _unlistable(tmp_path, monkeypatch)
    code, found = check_json(".")
    assert code == 2
    assert by_path(found) == {
        "locked": [("io-error", "cannot read folder: Permission denied")],
        "train.py": [("GA201", found[-1]["message"])],
    }


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders whatever their mode")
@pytest.mark.parametrize("mode", [0o000, 0o311])
def test_folders_without_read_permission(tmp_path, monkeypatch, mode):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "inner.py").write_text(TRAIN)
    (tmp_path / "train.py").write_text(TRAIN)
    os.chmod(tmp_path / "locked", mode)
    try:
        code, found = check_json(".")
    finally:
        os.chmod(tmp_path / "locked", 0o755)
    assert code == 2
    assert [(d["path"], d["code"]) for d in found] == [("locked", "io-error"), ("train.py", "GA201")]


# ---------------------------------------------------------------- syntax errors told the truth


@pytest.mark.parametrize(
    "tail",
    [
        "x = 'never closed\n",  # tokenizer errors too
        "x = 1\n  y = 1\n",
        "    y = 1\n  z = 2\n",
        "return 3\n",  # a compiler error
        "def f(a, a):\n    pass\n",
        "x = (1,\ny = [\n",
        "print(f'{a b}')\n",
        "x = 0777\n",
        "café = ü + (\n",
    ],
)
def test_syntax_errors_are_reported_at_cpythons_position(tmp_path, monkeypatch, tail):
    monkeypatch.chdir(tmp_path)
    text = LOOP + tail
    (tmp_path / "bad.py").write_text(text)
    with pytest.raises(SyntaxError) as cpython:
        compile(text, "bad.py", "exec")
    code, found = check_json("bad.py")
    assert code == 2
    assert [(d["code"], d["line"], d["column"], d["message"]) for d in found] == [
        ("syntax-error", cpython.value.lineno, cpython.value.offset, cpython.value.msg)
    ]


def test_a_null_byte_is_located(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(LOOP + "x = 1\0\n")
    code, found = check_json("bad.py")
    assert [(d["line"], d["column"], d["message"]) for d in found] == [
        (3, 6, "source code string cannot contain null bytes")
    ]


@pytest.mark.parametrize(
    "tail",
    ["(x): int = 1\n", "x = " + " ".join(['"s"'] * 5000) + "\n"],
    ids=["parenthesized-annotated-target", "5000-adjacent-strings"],
)
def test_valid_python_libcst_cannot_parse_is_not_a_syntax_error(tmp_path, monkeypatch, tail):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "valid.py").write_text(LOOP + tail)
    code, found = check_json("valid.py")
    assert code == 2
    assert [d["code"] for d in found] == ["internal-error"]
    assert found[0]["message"].startswith("cannot be analysed: ")


def test_odd_file_names_do_not_break_any_output(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    with open(os.fsencode(tmp_path) + b"/caf\xe9_train.py", "w") as handle:  # latin-1 bytes: not UTF-8
        handle.write(TRAIN)
    for output in ("sarif", "json"):
        result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", output, "."], catch_exceptions=False)
        assert result.exit_code == 1, (output, result.output)
    sarif = json.loads(result.stdout if output == "sarif" else CliRunner().invoke(
        cli, ["check", "--no-cache", "--output-format", "sarif", "."]).stdout)
    uri = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "caf%E9_train.py"
    for output in ("concise", "github"):  # printed as the name's own bytes, as `ls` does
        command = [sys.executable, "-m", "accumlint.cli", "check", "--no-cache", "--output-format", output, "."]
        result = subprocess.run(command, capture_output=True)
        assert result.returncode == 1, result.stderr
        assert b"caf\xe9_train.py" in result.stdout


def _limit_address_space(limit: int):
    """A `preexec_fn` that caps the child's address space at `limit` bytes."""

    def limited() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return limited


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="an address-space limit as Linux enforces it")
@pytest.mark.parametrize("flags", [(), ("--fix", "--unsafe-fixes")])
def test_ten_thousand_module_level_statements_check_within_three_gigabytes(tmp_path, flags):
    # Memory must grow with the file, not with the square of its top-level statements:
    # each one after the loop is one more the fix guard's walk goes through at module level.
    import subprocess

    statements = "".join(f"v{k} = {k}\n" for k in range(10_000))
    (tmp_path / "train.py").write_text(UNSCALED_LOOP_AT_MODULE_LEVEL + statements)
    command = [sys.executable, "-m", "accumlint.cli", "check", "--no-cache", "--output-format", "json", *flags, "train.py"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, preexec_fn=_limit_address_space(3 * 1024**3))
    found = json.loads(result.stdout)
    assert [d["code"] for d in found] == ([] if flags else ["GA201"]), result.stderr
    assert result.returncode == (0 if flags else 1), result.stderr
    if flags:
        assert "(loss / accum_steps).backward()" in (tmp_path / "train.py").read_text()
