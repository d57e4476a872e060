"""Adopting accumlint on existing code: --add-noqa, --show-settings, --show-files, the cache's place and size.

These run the real analysis: `--add-noqa` must silence exactly what the
checker reports, in scripts and notebooks alike.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tokenize
from pathlib import Path
from typing import Optional

import pytest
from click.testing import CliRunner

from accumlint.check import cache as cache_module
from accumlint.cli import cli

BUGGY = """\
import torch


def train(model, loader, optimizer, accum_steps):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if i % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""

NOTEBOOK_CELLS = [
    "import torch\nmodel = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
    "accum_steps = 4\n",
    (
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "    loss.backward()\n"
        "    if (i + 1) % accum_steps == 0:\n"
        "        optimizer.step()\n"
        "        optimizer.zero_grad()\n"
    ),
]


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def notebook(cells: list[str]) -> str:
    data = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": text.splitlines(keepends=True)}
            for text in cells
        ],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=1) + "\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_add_noqa_then_check_passes_and_a_second_add_noqa_changes_nothing(project):
    (project / "train.py").write_text(BUGGY)
    (project / "nb.ipynb").write_text(notebook(NOTEBOOK_CELLS))
    before = run("check", "--no-cache", "--output-format", "json")
    assert before.exit_code == 1
    codes = sorted({d["code"] for d in json.loads(before.stdout)})
    assert codes == ["GA106", "GA201"]

    added = run("check", "--no-cache", "--add-noqa")
    assert added.exit_code == 0
    assert "Added 3 noqa directives in 2 files." in added.stderr
    text = (project / "train.py").read_text()
    assert "        loss.backward()  # noqa: GA201\n" in text
    assert "        if i % accum_steps == 0:  # noqa: GA106\n" in text
    cells = json.loads((project / "nb.ipynb").read_text())["cells"]
    assert "".join(cells[2]["source"]).splitlines()[2] == "    loss.backward()  # noqa: GA201"
    assert cells[0]["source"] == NOTEBOOK_CELLS[0].splitlines(keepends=True)

    assert run("check", "--no-cache").exit_code == 0
    snapshot = {path.name: path.read_bytes() for path in project.iterdir() if path.is_file()}
    again = run("check", "--no-cache", "--add-noqa")
    assert again.exit_code == 0 and "Added 0 noqa directives" in again.stderr
    assert {path.name: path.read_bytes() for path in project.iterdir() if path.is_file()} == snapshot


def test_add_noqa_joins_an_existing_directive_and_never_breaks_a_line(project):
    text = BUGGY.replace("        loss.backward()\n", "        loss.backward()  # noqa: GA502 - kept\n")
    text = text.replace("        if i % accum_steps == 0:\n", "        if i % accum_steps == 0:  # noqa GA999\n")
    (project / "train.py").write_text(text)
    assert run("check", "--no-cache", "--add-noqa").exit_code == 0
    fixed = (project / "train.py").read_text()
    assert "        loss.backward()  # noqa: GA201, GA502 - kept\n" in fixed
    assert "        if i % accum_steps == 0:  # noqa: GA106, GA999\n" in fixed
    compile(fixed, "train.py", "exec")


def test_add_noqa_silences_a_statement_from_its_last_line(project):
    """A finding on a line that a backslash or a multi-line string carries on gets its comment on the
    statement's last line (ruff's place), in scripts and notebook cells alike; the check then passes."""
    text = BUGGY.replace("        if i % accum_steps == 0:\n", "        if i % accum_steps \\\n                == 0:\n")
    text = text.replace("        loss.backward()\n", '        loss.backward(); note = """\n        text"""\n')
    (project / "train.py").write_text(text)
    cell = NOTEBOOK_CELLS[2].replace("    loss.backward()\n", "    loss \\\n        .backward()\n")
    (project / "nb.ipynb").write_text(notebook(NOTEBOOK_CELLS[:2] + [cell]))
    assert run("check", "--no-cache").exit_code == 1

    added = run("check", "--no-cache", "--add-noqa")
    assert added.exit_code == 0 and "warning" not in added.stderr
    assert "Added 3 noqa directives in 2 files." in added.stderr
    fixed = (project / "train.py").read_text()
    assert '        text"""  # noqa: GA201\n' in fixed
    assert "                == 0:  # noqa: GA106\n" in fixed
    source = "".join(json.loads((project / "nb.ipynb").read_text())["cells"][2]["source"])
    assert "        .backward()  # noqa: GA201\n" in source
    checked = run("check", "--no-cache")
    assert checked.exit_code == 0, checked.stdout


def _continued(text: str, line: int) -> Optional[str]:
    """`text` with a backslash continuation before the last token of `line` (the same code), if it has two."""
    tokens = [
        token for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.start[0] == line and token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE,
                                                          tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    ]
    if len(tokens) < 2:
        return None
    lines = text.splitlines(keepends=True)
    column = tokens[-1].start[1]
    body = lines[line - 1]
    lines[line - 1] = body[:column].rstrip() + " \\\n" + " " * (column + 4) + body[column:]
    return "".join(lines)


def _string_carried(text: str, line: int) -> Optional[str]:
    """`text` with a multi-line string statement after the code of `line` (`; _note = \"\"\"...`)."""
    lines = text.splitlines(keepends=True)
    body = lines[line - 1].rstrip("\n")
    if "#" in body or body.rstrip().endswith((":", ",", "(", "[", "{", "\\")):
        return None
    lines[line - 1] = body + '; _note = """\n    multi-line\n"""\n'
    return "".join(lines)


def test_add_noqa_then_check_passes_on_the_fixtures_and_their_multi_line_variants(tmp_path, monkeypatch):
    """The acceptance of `--add-noqa`: on every fixture, and on variants of each whose reported lines are
    continued by a backslash or carried on by a multi-line string (as scripts and as notebooks), a check
    after `--add-noqa` passes."""
    root = tmp_path / "fixtures"
    shutil.copytree(Path(__file__).resolve().parent.parent / "fixtures", root)
    monkeypatch.chdir(root)
    found = json.loads(run("check", "--no-cache", "--output-format", "json").stdout)
    lines: dict[str, set[int]] = {}
    for d in found:
        lines.setdefault(d["path"], set()).add(d["line"])
    variants = 0
    for path, numbers in lines.items():
        text = Path(path).read_text()
        for name, make in (("continued", _continued), ("string", _string_carried)):
            variant = text
            for number in sorted(numbers, reverse=True):  # bottom up: the lines above keep their numbers
                variant = make(variant, number) or variant
            try:
                compile(variant, path, "exec")
            except SyntaxError:
                continue
            if variant != text:
                stem = Path(path).with_suffix("")
                Path(f"{stem}_{name}.py").write_text(variant)
                Path(f"{stem}_{name}.ipynb").write_text(notebook([variant]))
                variants += 1
    assert variants > 100
    added = run("check", "--no-cache", "--add-noqa")
    assert added.exit_code == 0 and "warning" not in added.stderr, added.stderr
    assert int(re.search(r"Added (\d+) noqa", added.stderr).group(1)) > 2 * len(found)
    after = run("check", "--no-cache")
    assert after.exit_code == 0, after.stdout


def test_add_noqa_refuses_fix_and_stdin(project):
    assert run("check", "--add-noqa", "--fix").exit_code == 2


def test_show_files_lists_what_check_reads(project):
    (project / "a.py").write_text("x = 1\n")
    (project / "sub").mkdir()
    (project / "sub" / "nb.ipynb").write_text(notebook(["x = 1\n"]))
    (project / "skip").mkdir()
    (project / "skip" / "b.py").write_text("x = 1\n")
    (project / "pyproject.toml").write_text('[tool.accumlint]\nexclude = ["skip/"]\n')
    result = run("check", "--show-files")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["a.py", "sub/nb.ipynb"]


def test_show_settings_names_the_file_and_the_resolved_values(project):
    (project / "pyproject.toml").write_text('[tool.accumlint]\nignore = ["GA5"]\noptimizer-names = ["opt_g"]\n')
    (project / "train.py").write_text("x = 1\n")
    out = run("check", "--show-settings", "train.py", "--select", "GA2").stdout.splitlines()
    assert out[0] == "Resolved settings for: train.py"
    assert out[1] == f"Settings path: {project / 'pyproject.toml'}"
    enabled = next(line for line in out if line.startswith("enabled = "))
    assert "GA201" in enabled and "GA101" not in enabled and "GA501" not in enabled
    assert "optimizer-names = ['opt_g']" in out


# ---------------------------------------------------------------- the cache


def test_cache_lives_at_the_project_root(project, monkeypatch):
    monkeypatch.delenv(cache_module.ENVIRONMENT_VARIABLE, raising=False)
    (project / "pyproject.toml").write_text("[tool.accumlint]\n")
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "src" / "pkg" / "train.py").write_text(BUGGY)
    monkeypatch.chdir(project / "src")
    assert run("check", "pkg").exit_code == 1
    assert (project / ".accumlint_cache" / "CACHEDIR.TAG").is_file()
    assert not (project / "src" / ".accumlint_cache").exists()


def test_git_root_is_a_project_root(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert cache_module.project_root(tmp_path / "a" / "b") == tmp_path.resolve()


def test_cache_dir_option_and_clean(project, monkeypatch):
    monkeypatch.delenv(cache_module.ENVIRONMENT_VARIABLE, raising=False)
    (project / "train.py").write_text(BUGGY)
    assert run("check", "--cache-dir", "elsewhere").exit_code == 1
    assert (project / "elsewhere" / "CACHEDIR.TAG").is_file()
    assert run("clean", "--cache-dir", "elsewhere").stdout == "Removed elsewhere\n"
    assert not (project / "elsewhere").exists()
    assert run("clean", "--cache-dir", "elsewhere").stdout.startswith("No accumlint cache at")


def test_clean_never_removes_a_folder_accumlint_did_not_make(project):
    (project / "precious").mkdir()
    (project / "precious" / "data.json").write_text("{}")
    run("clean", "--cache-dir", "precious")
    assert (project / "precious" / "data.json").exists()


def test_cache_is_pruned_oldest_first_and_other_versions_go(tmp_path):
    cache = cache_module.Cache(tmp_path, max_bytes=500)  # entries of `[]`: 67 bytes each (with their checksum)
    (tmp_path / "v0.0.1").mkdir()
    keys = [f"{index:064x}" for index in range(30)]  # (keys are SHA-256 digests)
    for index, key in enumerate(keys):
        cache.put(key, [])
        os.utime(cache.directory / f"{key}.json", (index, index))
    cache.get(keys[0], "t.py")  # a hit makes the oldest entry the newest
    cache.prune()
    kept = sorted(path.name for path in cache.directory.iterdir())
    total = sum(path.stat().st_size for path in cache.directory.iterdir())
    assert total <= 500 * 0.8
    assert f"{keys[0]}.json" in kept and f"{keys[1]}.json" not in kept and f"{keys[29]}.json" in kept
    assert not (tmp_path / "v0.0.1").exists()


def test_explicit_cache_dir_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv(cache_module.ENVIRONMENT_VARIABLE, "/from/env")
    assert cache_module.cache_directory("given") == Path("given")
    assert cache_module.cache_directory(None) == Path("/from/env")
