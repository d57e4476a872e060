"""No input ends the run: hostile files each get one line, and every other file is still checked.

The inputs are generated here (deep nesting, long chains, parser crashes,
broken notebooks, unreadable folders); none is committed.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from fake_analysis import patch_in_workers
from samples import UNSCALED_LOOP as TRAIN
from samples import UNSCALED_LOOP_AT_MODULE_LEVEL
from sampling import in_sample
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
    patch_in_workers(monkeypatch, "accumlint.source.gate.MAX_NESTING", 10**6)
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


# An indentation of seven spaces and a tab is eight columns to CPython; LibCST's tokenizer
# rejects it beside blocks indented by spaces.
TAB_INDENTED_LOOP = (
    "import torch\n\n\n"
    "def train(model, loader, optimizer, accum_steps):\n"
    "    optimizer.zero_grad()\n"
    "    for i, (x, y) in enumerate(loader):\n"
    "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
    "       \tif x is not None:\n"
    "\t        loss.backward()\n"
    "       \tif (i + 1) % accum_steps == 0:\n"
    "\t        optimizer.step()\n"
    "\t        optimizer.zero_grad()\n"
)


def test_tab_indentation_libcst_rejects_is_checked_as_cpython_reads_it(tmp_path, monkeypatch):
    import libcst

    compile(TAB_INDENTED_LOOP, "tabs.py", "exec")
    with pytest.raises(libcst.ParserSyntaxError):
        libcst.parse_module(TAB_INDENTED_LOOP)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tabs.py").write_text(TAB_INDENTED_LOOP)
    code, found = check_json("tabs.py")
    assert code == 1
    # column 10 of `\t        loss.backward()` as written (17 once the tab is expanded)
    assert [(d["code"], d["line"], d["column"], d["fix"]) for d in found] == [("GA201", 9, 10, None)]


def test_fix_leaves_tab_indentation_libcst_rejects_as_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tabs.py").write_text(TAB_INDENTED_LOOP)
    code, found = check_json("--fix", "--unsafe-fixes", "tabs.py")
    assert (tmp_path / "tabs.py").read_text() == TAB_INDENTED_LOOP
    assert [d["code"] for d in found] == ["GA201"]


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


# ---------------------------------------------------------------- the cache folder is accumlint's alone


def _run(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


def _tree(folder) -> dict[str, bytes]:
    """Every file below a folder (`.git` included) and its bytes, by relative path."""
    found = {}
    for directory, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, folder)] = handle.read()
    return found


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """A project with a git folder, its own .gitignore and a training script; no cache set."""
    monkeypatch.delenv("ACCUMLINT_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_cache_dir_dot_never_touches_the_projects_files(repository):
    before = _tree(repository)
    assert _run("check", "--cache-dir", ".", "train.py").exit_code == 1
    after = _tree(repository)
    assert {path: data for path, data in after.items() if path in before} == before  # .gitignore kept
    assert all(path.startswith(".accumlint_cache" + os.sep) for path in after.keys() - before.keys())
    assert (repository / ".accumlint_cache" / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55"
    )
    assert _run("check", "--cache-dir", ".", "train.py").exit_code == 1  # served from that cache
    cleaned = _run("clean", "--cache-dir", ".")
    assert cleaned.exit_code == 0 and cleaned.output == "Removed .accumlint_cache\n"
    assert _tree(repository) == before and sorted(os.listdir(repository)) == [".git", ".gitignore", "train.py"]


def test_clean_with_the_environments_shared_cache_folder_removes_only_accumlints(repository, monkeypatch):
    shared = repository / "home" / ".cache"
    (shared / "pip").mkdir(parents=True)
    (shared / "pip" / "selfcheck.json").write_text("{}")
    monkeypatch.setenv("ACCUMLINT_CACHE_DIR", str(shared))
    assert _run("check", "train.py").exit_code == 1
    assert sorted(os.listdir(shared)) == [".accumlint_cache", "pip"]
    assert not (shared / ".gitignore").exists() and not (shared / "CACHEDIR.TAG").exists()
    assert _run("clean").exit_code == 0
    assert sorted(os.listdir(shared)) == ["pip"] and (shared / "pip" / "selfcheck.json").read_text() == "{}"


def test_an_empty_folder_is_adopted_marked_and_left_in_place(repository):
    (repository / "cache").mkdir()
    assert _run("check", "--cache-dir", "cache", "train.py").exit_code == 1
    assert (repository / "cache" / "CACHEDIR.TAG").is_file()
    assert not (repository / "cache" / ".gitignore").exists()  # a folder accumlint did not create
    assert _run("clean", "--cache-dir", "cache").exit_code == 0
    assert os.listdir(repository / "cache") == []


def test_clean_keeps_what_accumlint_did_not_write_in_its_own_folder(repository):
    assert _run("check", "--cache-dir", "cache", "train.py").exit_code == 1
    version = "v" + __import__("accumlint").__version__
    assert sorted(os.listdir(repository / "cache")) == [".gitignore", "CACHEDIR.TAG", "accumlint-cache.marker", version]
    (repository / "cache" / "notes.txt").write_text("mine")
    cleaned = _run("clean", "--cache-dir", "cache")
    assert cleaned.exit_code == 0 and "kept what accumlint did not write: notes.txt" in cleaned.output
    assert sorted(os.listdir(repository / "cache")) == ["accumlint-cache.marker", "notes.txt"]  # still its cache


def test_a_folder_of_json_files_in_v_folders_is_not_taken_for_an_old_cache(repository):
    (repository / "data" / "v1").mkdir(parents=True)
    (repository / "data" / "v1" / "weights.json").write_text("[1]")
    (repository / "data" / "v2").mkdir()
    (repository / "data" / "v2" / ("0" * 64 + ".json")).write_text("[]")
    before = _tree(repository)
    assert _run("check", "--cache-dir", "data", "train.py").exit_code == 1
    assert _run("clean", "--cache-dir", "data").exit_code == 0
    assert _tree(repository) == before  # the cache went to data/.accumlint_cache, and is gone


def test_a_lookalike_tag_does_not_make_a_folder_accumlints(repository):
    (repository / "data").mkdir()
    (repository / "data" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (repository / "data" / "v1").mkdir()
    (repository / "data" / "v1" / "weights.json").write_text("[1]")
    before = _tree(repository)
    assert _run("clean", "--cache-dir", "data").output.startswith("No accumlint cache at")
    assert _tree(repository) == before


def test_no_cache_where_neither_the_folder_nor_its_accumlint_cache_folder_is_accumlints(repository):
    (repository / "data" / ".accumlint_cache").mkdir(parents=True)
    (repository / "data" / ".accumlint_cache" / "x.txt").write_text("mine")
    (repository / "data" / "y.txt").write_text("mine")
    before = _tree(repository)
    result = CliRunner().invoke(cli, ["check", "--cache-dir", "data", "train.py"], catch_exceptions=False)
    assert result.exit_code == 1 and "GA201" in result.stdout
    assert "results are not cached" in result.stderr
    assert _tree(repository) == before


def test_an_older_accumlints_cache_is_taken_over_and_cleaned(repository):
    old = repository / ".accumlint_cache"
    (old / "v0.0.1").mkdir(parents=True)
    (old / "v0.0.1" / ("0" * 64 + ".json")).write_text("[]")
    (old / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# accumlint's cache of results.\n")
    (old / ".gitignore").write_text("# Created by accumlint.\n*\n")
    assert _run("check", "train.py").exit_code == 1
    assert not (old / "v0.0.1").exists()  # another version's entries are pruned
    assert _run("clean").output == f"Removed {old}\n"
    assert os.listdir(old) == []  # adopted, not created: the folder stays


# ---------------------------------------------------------------- only regular files are read


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "accumlint.cli", "check", "--no-cache", "--output-format", "json", *args]


def _lines_of(tmp_path, *args: str) -> tuple[int, dict]:
    """Run a check in a process of its own (a FIFO must not hang the test run)."""
    import subprocess

    done = subprocess.run(_command(*args), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return done.returncode, by_path(json.loads(done.stdout))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifos_devices_and_sockets_get_one_line_each_and_the_rest_is_checked(tmp_path):
    import socket

    os.mkfifo(tmp_path / "p.py")
    os.mkfifo(tmp_path / "p.ipynb")
    os.symlink("/dev/zero", tmp_path / "z.py")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "s.py"))
    (tmp_path / "train.py").write_text(TRAIN)
    try:
        for args in ((".",), ("p.py", "p.ipynb", "z.py", "s.py", "train.py")):
            code, paths = _lines_of(tmp_path, *args)
            assert code == 2
            assert paths == {
                "p.py": [("io-error", "not a regular file (a FIFO); not read")],
                "p.ipynb": [("io-error", "not a regular file (a FIFO); not read")],
                "z.py": [("io-error", "not a regular file (a character device); not read")],
                "s.py": [("io-error", "not a regular file (a socket); not read")],
                "train.py": paths["train.py"],
            }
            assert [c for c, _ in paths["train.py"]] == ["GA201"]
    finally:
        server.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_swapped_in_after_the_check_of_the_path_is_refused_without_waiting(tmp_path, monkeypatch):
    import signal

    from accumlint.source import files as sources

    regular = tmp_path / "regular.py"
    regular.write_text("x = 1\n")
    os.mkfifo(tmp_path / "p.py")
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda path, *a, **k: real_stat(regular) if str(path).endswith("p.py") else real_stat(path, *a, **k))
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("opening the FIFO waited for a writer"))
    signal.alarm(10)
    try:
        with pytest.raises(sources.ReadError, match=r"not a regular file \(a FIFO\)"):
            sources.read_bytes(str(tmp_path / "p.py"))
    finally:
        signal.alarm(0)


def test_a_file_over_max_file_size_gets_a_line_and_the_rest_is_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.accumlint]\nmax-file-size = 1000\n")
    (tmp_path / "big.py").write_text(TRAIN + "#" * 1000 + "\n")
    (tmp_path / "train.py").write_text(TRAIN)
    code, found = check_json(".")
    assert code == 2
    size = (tmp_path / "big.py").stat().st_size
    assert by_path(found)["big.py"] == [
        ("io-error", f"file too large to read ({size:,} bytes; the limit, `max-file-size`, is 1,000 bytes)")
    ]
    assert [c for c, _ in by_path(found)["train.py"]] == ["GA201"]


@pytest.mark.parametrize("value", ["0", "-1", "'big'", "true"])
def test_max_file_size_must_be_a_positive_integer(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f"[tool.accumlint]\nmax-file-size = {value}\n")
    (tmp_path / "train.py").write_text(TRAIN)
    result = CliRunner().invoke(cli, ["check", "--no-cache", "train.py"])
    assert result.exit_code == 2 and "`max-file-size` must be a positive integer" in result.stderr


def test_a_named_path_that_cannot_be_read_is_a_line_and_the_rest_is_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ACCUMLINT_CACHE_DIR", raising=False)  # the default cache looks up from the first path
    (tmp_path / "train.py").write_text(TRAIN)
    too_long = "a" * 300 + "/x.py"
    result = CliRunner().invoke(cli, ["check", "--output-format", "json", too_long, "train.py"], catch_exceptions=False)
    assert result.exit_code == 2
    paths = by_path(json.loads(result.stdout))
    assert paths[too_long] == [("io-error", "cannot read file: File name too long")]
    assert [c for c, _ in paths["train.py"]] == ["GA201"]


# ---------------------------------------------------------------- caches that lie


def _entry(cache_dir) -> "os.PathLike":
    (entry,) = [p for p in cache_dir.rglob("*.json")]
    return entry


@pytest.mark.parametrize("content", ["[1]", '{"a": 1}', "{}", "[]", '[{"line": 1}]', "", "\0" * 10])
def test_a_result_cache_entry_of_the_wrong_shape_is_a_miss_and_rewritten(tmp_path, monkeypatch, content):
    monkeypatch.chdir(tmp_path)
    cache_dir = tmp_path / "cache"
    (tmp_path / "train.py").write_text(TRAIN)
    args = ["check", "--cache-dir", str(cache_dir), "--output-format", "json", "train.py"]
    first = CliRunner().invoke(cli, args, catch_exceptions=False)
    entry = _entry(cache_dir)
    good = entry.read_bytes()
    entry.write_text(content)
    again = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert again.exit_code == first.exit_code == 1
    assert again.stdout == first.stdout
    assert entry.read_bytes() == good  # rewritten by the analysis that followed the miss


def test_every_single_byte_flip_of_a_result_cache_entry_is_a_miss(tmp_path):
    from accumlint.check.cache import Cache
    from accumlint.diagnostics import Diagnostic, FixInfo

    cache = Cache(tmp_path / "cache")
    found = [Diagnostic("t.py", 7, 9, 7, 24, "GA201", "missing-loss-scaling", "m", FixInfo("safe", "d"), None, "h", 3)]
    cache.put("k", found)
    entry = cache.directory / "k.json"
    good = entry.read_bytes()
    for position in range(len(good)):
        for flip in (0x01, 0x20, 0x80):
            damaged = bytearray(good)
            damaged[position] ^= flip
            entry.write_bytes(bytes(damaged))
            assert cache.get("k", "t.py") is None, (position, flip)
    entry.write_bytes(good)
    assert cache.get("k", "t.py") == found


def test_every_single_byte_flip_of_the_kept_compiled_code_is_ignored(tmp_path, monkeypatch, speedups_on):
    import dataclasses

    from accumlint.compat import generated_code

    path = tmp_path / "pycache" / "dataclasses-code.marshal"
    monkeypatch.setattr(generated_code, "cache_file", lambda: path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)

    def define():
        with generated_code.cached():
            return dataclasses.make_dataclass("P", [("x", int)], frozen=True)

    define()
    good = path.read_bytes()
    assert generated_code._read(path)
    for position in range(len(good)):
        damaged = bytearray(good)
        damaged[position] ^= 0x01 << (position % 8)
        path.write_bytes(bytes(damaged))
        assert generated_code._read(path) == {}, position
    path.write_bytes(good[: len(good) // 2])  # a damaged file is rewritten by the next import
    assert define()(1).x == 1
    assert generated_code._read(path)


# ---------------------------------------------------------------- smaller ones


def _crlf_mixes():
    lines = TRAIN.split("\n")
    return {
        "cr.py": "\r".join(lines),
        "cr_mixed.py": "".join(line + ("\r" if index % 2 else "\n") for index, line in enumerate(lines)),
        "all_three.py": "".join(line + ("\r", "\n", "\r\n")[index % 3] for index, line in enumerate(lines)),
    }


@pytest.mark.parametrize("name", sorted(_crlf_mixes()))
def test_carriage_return_line_endings_get_findings_and_fixes_keep_them(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    text = _crlf_mixes()[name]
    (tmp_path / name).write_bytes(text.encode())
    import ast

    backward = next(node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Attribute) and node.attr == "backward")
    code, found = check_json(name)
    assert code == 1 and [(d["code"], d["line"], d["column"]) for d in found] == [("GA201", backward.lineno, 9)]
    assert found[0]["fix"] is not None
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--fix", name], catch_exceptions=False)
    assert result.exit_code == 0
    fixed = (tmp_path / name).read_bytes().decode()
    assert fixed == text.replace("loss.backward()", "(loss / accum_steps).backward()")


@pytest.mark.parametrize(
    "text, offered",
    [
        (TRAIN.replace("        loss.backward()", "\f        loss.backward()"), False),  # LibCST drops it
        (TRAIN.replace("import torch\n", "import torch\n\f\n"), True),
        (TRAIN.replace("import torch\n", "import torch  # page\fbreak\n"), True),
        (TRAIN.replace("        loss.backward()", "        \\\n        loss.backward()"), False),  # LibCST drops it
        (TRAIN + "\n  # the end\n", False),  # LibCST drops the empty line before it
        (TRAIN + "\n# the end\n", True),
    ],
    ids=["in-an-indentation", "own-line", "in-a-comment", "backslash-in-an-indentation", "indented-last-comment",
         "last-comment"],
)
def test_a_fix_is_offered_exactly_where_fix_applies_it_with_a_form_feed(tmp_path, monkeypatch, text, offered):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ff.py").write_bytes(text.encode())
    code, found = check_json("ff.py")
    assert [d["code"] for d in found] == ["GA201"] and (found[0]["fix"] is not None) == offered
    CliRunner().invoke(cli, ["check", "--no-cache", "--fix", "ff.py"], catch_exceptions=False)
    after = (tmp_path / "ff.py").read_bytes().decode()
    assert (after != text) == offered
    if offered:
        assert after == text.replace("loss.backward()", "(loss / accum_steps).backward()")


def test_a_check_writes_the_module_back_only_for_a_text_that_may_not_round_trip(monkeypatch):
    """Writing the module back costs almost half a parse: a check does it to decide whether
    a fix is offered only for a text where LibCST may lose something (`may_not_round_trip`)."""
    import random

    import libcst

    from accumlint.check import analysis

    written = []
    real = analysis.lost_by_libcst
    monkeypatch.setattr(analysis, "lost_by_libcst", lambda module, text: written.append(text) or real(module, text))
    found = analysis.analyze(TRAIN, "train.py")
    assert [d.code for d in found] == ["GA201"] and found[0].fix is not None and written == []
    odd = TRAIN.replace("import torch\n", "import torch\n\f\n")
    assert analysis.analyze(odd, "train.py")[0].fix is not None and written == [odd]

    # what the screen passes, LibCST writes back exactly: about one fixture in fifteen (each in
    # or out by its own path, tests/sampling.py), each changed at random 80 times by a random
    # generator of its own, so that a new fixture changes no other fixture's draws
    repo = Path(__file__).resolve().parent.parent
    paths = [p for p in sorted((repo / "fixtures" / "check").rglob("*.py")) if in_sample(p.relative_to(repo).as_posix(), 15)]
    pieces = ["\f", "\r", "\r\n", "\\\n", " \\\n", "\n  \n", "\n\n  # c\n", "\t", " ", "\n", "# c\n", "\x00"]
    assert len(paths) >= 30
    passed = 0
    for path in paths:
        original = path.read_text(encoding="utf-8")
        rng = random.Random(path.relative_to(repo).as_posix())
        for _ in range(80):
            text = original
            for _ in range(2):
                at = rng.randrange(len(text) + 1)
                text = text[:at] + rng.choice(pieces) + text[at:]
            if rng.random() < 0.3:
                text = text.rstrip("\n") + rng.choice(["", "  ", "\n  ", "\n\n  # c", "\n\n\t\n", "\n# c\n"])
            try:
                compile(text, "t.py", "exec")
                module = libcst.parse_module(text)
            except (SyntaxError, ValueError, libcst.ParserSyntaxError):
                continue
            if not analysis.may_not_round_trip(text):
                passed += 1
                assert module.code == text, repr(text)
    assert passed >= 40


def test_add_noqa_counts_lines_as_python_does_after_a_form_feed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = TRAIN.replace("import torch\n", "import torch  # page\fbreak\n")
    (tmp_path / "ff.py").write_bytes(text.encode())
    assert CliRunner().invoke(cli, ["check", "--no-cache", "--add-noqa", "ff.py"]).exit_code == 0
    assert (tmp_path / "ff.py").read_text() == text.replace("loss.backward()", "loss.backward()  # noqa: GA201")


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="no extended attributes on this platform")
def test_fix_keeps_extended_attributes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    try:
        os.setxattr(tmp_path / "train.py", "user.origin", b"kept")
    except OSError:
        pytest.skip("this file system keeps no user extended attributes")
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--fix", "train.py"], catch_exceptions=False)
    assert result.exit_code == 0 and "(loss / accum_steps)" in (tmp_path / "train.py").read_text()
    assert os.getxattr(tmp_path / "train.py", "user.origin") == b"kept"


def test_a_lone_surrogate_in_a_notebook_is_the_real_problem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = 'x = "\\ud800"\nfor b in loader:\n    model(b).backward()\n'
    (tmp_path / "nb.ipynb").write_text('{"cells": [{"cell_type": "code", "source": "' + source.replace('"', '\\"').replace("\n", "\\n") + '"}]}')
    (tmp_path / "train.py").write_text(TRAIN)
    code, found = check_json(".")
    assert code == 2
    assert by_path(found)["nb.ipynb"] == [
        ("syntax-error", "not a valid notebook: cell 1 holds half of a UTF-16 surrogate pair alone (\\ud800), which is not text")
    ]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"[tool.accumlint]\nselect = [\"\xff\"]\n", "invalid TOML: not UTF-8 (byte 0xff on line 2)"),
        (b"[tool.accumlint]\nx = " + b"[" * 100000 + b"]" * 100000 + b"\n", "invalid TOML: nested too deeply to read"),
    ],
    ids=["not-utf-8", "deeply-nested"],
)
def test_a_broken_pyproject_is_a_configuration_error_not_an_internal_one(tmp_path, monkeypatch, content, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_bytes(content)
    (tmp_path / "train.py").write_text(TRAIN)
    result = CliRunner().invoke(cli, ["check", "--no-cache", "train.py"])
    assert result.exit_code == 2
    assert result.stderr == f"accumlint: error: {tmp_path / 'pyproject.toml'}: {message}\n"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_a_file_timeout_that_is_not_a_finite_positive_number_is_a_usage_error(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--file-timeout", value, "train.py"])
    assert result.exit_code == 2
    assert "Invalid value for '--file-timeout'" in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize(
    "args, status", [(["--output-format", "full", "."], 2), (["--show-files", "."], 0)], ids=["findings", "show-files"]
)
def test_a_reader_that_stops_early_ends_the_run_quietly_with_its_own_status(tmp_path, args, status):
    import subprocess

    for index in range(200):  # more output than a pipe holds
        (tmp_path / f"train{index:03d}.py").write_text(TRAIN)
    (tmp_path / "zz_broken.py").write_text(LOOP + "x = (\n")  # a file that cannot be parsed: status 2
    command = [sys.executable, "-m", "accumlint.cli", "check", "--no-cache", *args]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == status
    assert stderr == b""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_what_the_native_parser_prints_as_it_dies_never_reaches_the_terminal(capfd, monkeypatch, method):
    from accumlint.check.workers import Failure, WorkerPool

    monkeypatch.setenv("ACCUMLINT_START_METHOD", method)
    with WorkerPool(1, _parse_dying_as_rust_does, 10.0) as pool:
        ((_, outcome),) = list(pool.map(["x = 1\n"]))
    assert isinstance(outcome, Failure) and "SIGABRT" in outcome.message
    assert "memory allocation" not in capfd.readouterr().err


def _parse(text):
    from accumlint.source.parsing import parse_module

    return parse_module(text)


def _parse_dying_as_rust_does(text):
    """In the worker: LibCST's parser made to die as its Rust code does, then a parse."""
    import libcst

    def die(text):
        os.write(2, b"memory allocation of 1099511627776 bytes failed\n")
        os.abort()

    libcst.parse_module = die
    return _parse(text)


def test_the_cache_key_changes_with_the_python_and_the_libcst_it_runs_under(tmp_path, monkeypatch):
    # a file read as a syntax error under one Python may parse under another
    from accumlint.check import cache as cache_module

    def key() -> str:
        return cache_module.Cache(tmp_path / "cache").key("x = 1\n", ("options",))

    first = key()
    assert key() == first
    monkeypatch.setattr(cache_module.sys, "version", cache_module.sys.version + " (another build)")
    assert key() != first
    monkeypatch.undo()
    assert key() == first
    real = cache_module._environment()
    monkeypatch.setattr(cache_module, "_environment", lambda: real.replace("libcst", "libcst-other"))
    assert key() != first
