"""Notebooks: code cells only, IPython syntax masked, cell locations, fixes written back in place."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fake_analysis import fake_analysis  # noqa: F401 - fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from accumlint.cli import cli
from accumlint.diagnostics import Diagnostic
from accumlint.source.notebooks import NotebookDocument
from accumlint.source.files import SourceError


def code(source, outputs=None) -> dict:
    return {"cell_type": "code", "execution_count": 1, "metadata": {"tags": ["x"]},
            "outputs": outputs or [], "source": source}


def notebook(*cells: dict, language: str = "python") -> bytes:
    data = {
        "cells": list(cells),
        "metadata": {"kernelspec": {"language": language, "name": "k"}, "custom": {"é": 1}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    # nbformat's own layout: indent 1, sorted keys, UTF-8, final newline.
    return (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


OUTPUT = {"name": "stdout", "output_type": "stream", "text": ["epoch 1\n"]}
CELLS = (
    {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
    code(["!pip install torch\n", "%matplotlib inline\n", "import torch"]),
    code(["%%bash\n", "loss.backward()\n"]),
    code(["for x in loader:\n", "    files = !ls\n", "    loss.backward()\n", "    optimizer.step()"], [OUTPUT]),
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_virtual_module_masks_ipython_and_skips_other_cells():
    document = NotebookDocument.from_bytes("nb.ipynb", notebook(*CELLS))
    assert "!pip" not in document.text and "%matplotlib" not in document.text and "%%bash" not in document.text
    assert "files = !ls" not in document.text
    compile(document.text, "nb", "exec")
    assert [cell.number for cell in document.cells] == [2, 4]


def test_a_line_that_continues_open_python_is_no_magic():
    """`%(...)` on the line after an open bracket, after a backslash, or inside a triple-quoted
    string is Python (the `%` operator, text): kept; a magic after the statement closes is masked."""
    cell = code([
        "for i, (x, y) in enumerate(loader):\n",
        "    print('epoch %d loss %.4f'\n",
        "          %(i, loss))\n",
        "    total = i \\\n",
        "        %2\n",
        '    note = """\n',
        "%not a magic\n",
        '"""  # closes the string; the ( in this comment opens nothing\n',
        "%timeit total\n",
        "!nvidia-smi\n",
    ])
    document = NotebookDocument.from_bytes("nb.ipynb", notebook(cell))
    assert "          %(i, loss))" in document.text and "        %2" in document.text
    assert "%not a magic" in document.text
    assert "%timeit" not in document.text and "!nvidia-smi" not in document.text
    compile(document.text, "nb", "exec")


def test_locations_name_the_cell(project, fake_analysis):
    (project / "nb.ipynb").write_bytes(notebook(*CELLS))
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == "nb.ipynb:cell 4:3:5: GA201 missing-loss-scaling: fake finding GA201 [*]"
    data = json.loads(CliRunner().invoke(cli, ["check", "--output-format", "json"]).stdout)
    assert [(d["cell"], d["line"], d["code"]) for d in data] == [(4, 3, "GA201"), (4, 4, "GA102")]


def test_fix_writes_back_only_the_fixed_cell(project, fake_analysis):
    original = notebook(*CELLS)
    (project / "nb.ipynb").write_bytes(original)
    result = CliRunner().invoke(cli, ["check", "--fix", "--unsafe-fixes"])
    assert result.exit_code == 0, result.output
    fixed = (project / "nb.ipynb").read_bytes()
    expected = json.loads(original)
    expected["cells"][3]["source"] = [
        "for x in loader:\n", "    files = !ls\n", "    (loss / 4).backward()\n", "    step_when_due(optimizer)"
    ]
    assert json.loads(fixed) == expected  # outputs, metadata, magics and other cells untouched
    assert fixed == notebook(*expected["cells"])  # and laid out byte for byte as before


def test_diff_shows_cells_and_writes_nothing(project, fake_analysis):
    original = notebook(*CELLS)
    (project / "nb.ipynb").write_bytes(original)
    result = CliRunner().invoke(cli, ["check", "--diff"])
    assert result.stdout.startswith("--- nb.ipynb:cell 4\n+++ nb.ipynb:cell 4\n")
    assert "+    (loss / 4).backward()\n" in result.stdout
    assert (project / "nb.ipynb").read_bytes() == original


def test_noqa_in_a_cell(project, fake_analysis):
    (project / "nb.ipynb").write_bytes(notebook(code("for x in y:\n    loss.backward()  # noqa: GA201\n")))
    assert CliRunner().invoke(cli, ["check"]).exit_code == 0


def test_syntax_error_in_a_cell(project, fake_analysis):
    (project / "nb.ipynb").write_bytes(notebook(code("x = 1"), code("loss.backward()\ndef f(:\n    pass")))
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stdout.startswith("nb.ipynb:cell 2:2:")


def test_non_python_notebook_is_skipped(project, fake_analysis):
    (project / "nb.ipynb").write_bytes(notebook(code("loss.backward()"), language="R"))
    assert CliRunner().invoke(cli, ["check"]).exit_code == 0


def test_invalid_notebook_is_an_error(project, fake_analysis):
    (project / "nb.ipynb").write_text("{not json")
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 2 and "nb.ipynb:1:1: syntax error: not a valid notebook" in result.stdout


def test_cells_that_cannot_be_mapped_back_are_refused():
    document = NotebookDocument.from_bytes("nb.ipynb", notebook(code("a = 1"), code("b = 2")))
    with pytest.raises(SourceError):
        document.replaced(document.text.replace("'accumlint-cell 2'", ""))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["x = 1", "%time f()", "!ls", "  y = !cat", "obj?", "", "for a in b:", "    pass", "é = 2"]),
            max_size=5,
        ).map("\n".join),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
def test_unchanged_round_trip_is_byte_exact(sources, as_lists):
    cells = [code(s.splitlines(keepends=True) if as_lists else s) for s in sources]
    raw = notebook(*cells)
    document = NotebookDocument.from_bytes("nb.ipynb", raw)
    again = document.replaced(document.text)
    assert again.encoded() == raw
    assert [c.text for c in again.cells] == [c.text for c in document.cells]


# ---------------------------------------------------------------- cells in the real analysis

SETUP_CELL = (
    "import torch\nmodel = torch.nn.Linear(2, 1)\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\naccum_steps = 4\n"
)
LOOP_CELL = (
    "for i, (x, y) in enumerate(loader):\n"
    "    optimizer.zero_grad()\n"
    "    loss = torch.nn.functional.mse_loss(model(x), y) / accum_steps\n"
    "    loss.backward()\n"
    "    if (i + 1) % accum_steps == 0:\n"
    "        optimizer.step()\n"
)


def _training_notebook(project) -> bytes:
    data = notebook(
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
        code(SETUP_CELL.splitlines(keepends=True)),
        code(LOOP_CELL.splitlines(keepends=True)),
    )
    (project / "nb.ipynb").write_bytes(data)
    return data


def test_findings_and_the_lines_they_name_are_counted_in_their_cell(project):
    _training_notebook(project)
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", "full"])
    lines = result.stdout.splitlines()
    assert lines[0].startswith("nb.ipynb:cell 3:2:5: GA101 zero-grad-every-micro-batch: ")
    assert "  = help: zero once per window, after the optimizer step (line 6)" in lines
    assert "2 |     optimizer.zero_grad()" in lines


def test_a_line_in_another_cell_is_named_with_its_cell():
    document = NotebookDocument.from_bytes("nb.ipynb", notebook(code(["a = 1\n", "b = 2"]), code(["c = 3\n", "d = 4"])))
    first, second = document._starts  # virtual lines of each cell's first line
    raw = Diagnostic("nb.ipynb", second + 1, 1, second + 1, 2, "GA101", "n",
                     f"see (line {first + 1})", help=f"after line {first + 1}", related_line=first + 1)
    located = document.locate(raw)
    assert (located.cell, located.line) == (2, 2)
    assert located.message == "see (cell 1, line 2)" and located.help == "after cell 1, line 2"


def test_a_fix_before_a_cells_first_statement_lands_in_that_cell(project):
    _training_notebook(project)
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--fix"])
    assert result.exit_code == 0, result.stdout
    cells = json.loads((project / "nb.ipynb").read_text())["cells"]
    assert "".join(cells[1]["source"]) == SETUP_CELL  # the previous cell is untouched
    fixed = "".join(cells[2]["source"])
    assert fixed.startswith("optimizer.zero_grad()\nfor i, (x, y) in enumerate(loader):\n")
    assert fixed.endswith("        optimizer.step()\n        optimizer.zero_grad()\n")


@pytest.mark.parametrize("output_format", ["sarif", "github"])
def test_ci_formats_point_at_the_notebooks_json_line(project, output_format):
    raw = _training_notebook(project).decode().split("\n")
    out = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", output_format]).stdout
    if output_format == "sarif":
        (result,) = json.loads(out)["runs"][0]["results"]
        line = result["locations"][0]["physicalLocation"]["region"]["startLine"]
        assert result["properties"] == {"cell": 3, "cellLine": 2, "cellColumn": 5}
        assert result["message"]["text"].startswith("cell 3, line 2: ")
    else:
        line = int(out.split(",line=")[1].split(",")[0])
        assert "cell 3, line 2: " in out
    assert raw[line - 1].strip() == '"    optimizer.zero_grad()\\n",'
