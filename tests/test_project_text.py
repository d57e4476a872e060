"""The project layer's text shortcuts give what the full reading gives: import lines matched
only where a line holds `import`, the summaries' own tree walk, the walks a method's text
spares, the marker search remembered per folder, and the root joining's folder listings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accumlint.project import root as project_root
from accumlint.project.root import IMPORT_LINE, import_lines, joined_ancestor, root_under
from accumlint.project.summary import _walk, summarize

REPO = Path(__file__).resolve().parent.parent

TRICKY_IMPORTS = [
    "",
    "import",
    "import torch",
    "from .steps import backward_step, batch_objective as objective\n",
    "x = 1\n  from pkg.sub import (a,\n   b)\nimport os.path # a comment\n",
    "text = 'import nothing'\n    import json; import re\n",
    "# import x\nfrom\timport_helpers import go\n",
    "yield from values\nfrom . import steps\r\nimport a.b.c\r\n",
    "def f():\n    import inner\n    return inner\n" * 3,
    "important = 1\nreimported = important\n",
]


def _python_files() -> list[Path]:
    return sorted(p for folder in ("accumlint", "fixtures", "tests") for p in (REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("text", TRICKY_IMPORTS)
def test_import_lines_match_what_the_pattern_finds_everywhere(text: str) -> None:
    expected = [m.groups() for m in IMPORT_LINE.finditer("\n" + text)]
    assert [m.groups() for m in import_lines(text)] == expected


def test_import_lines_on_real_modules() -> None:
    found = 0
    for path in _python_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        expected = [m.groups() for m in IMPORT_LINE.finditer("\n" + text)]
        assert [m.groups() for m in import_lines(text)] == expected, path
        found += len(expected)
    assert found > 100  # the files hold import lines to compare


def test_summary_walk_is_ast_walk() -> None:
    for path in _python_files()[:60]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert list(_walk(tree)) == list(ast.walk(tree)), path


WRAPPING = '''import torch
from torch.nn.parallel import DistributedDataParallel


class Runner:
    def __init__(self, model, args):
        self.steps = args.steps
        self.model = model

    def wrap(self, model):
        self.model = DistributedDataParallel(model) if self.distributed else model

    def run(self):
        return self.model
'''


def test_method_walks_spared_by_text_find_the_same() -> None:
    summary = summarize("runner.py", WRAPPING)
    runner = summary.classes["Runner"]
    assert runner.wraps == {"model": ("wrap", "DistributedDataParallel(model) if self.distributed else model")}
    assert runner.attributes == {"steps": "args.steps", "model": "model"}


PARSER = '''import argparse


@register(argparse.ArgumentParser())
def options():
    return None


def build():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum-steps", default=4)
    return parser


def unrelated():
    return [step for step in range(3)]
'''


def test_parser_builders_seen_through_decorators() -> None:
    summary = summarize("options.py", PARSER)
    assert summary.argparse_builders == {"options", "build"}
    assert summary.argparse_defaults == {"accum_steps": "4"}


def test_marker_search_remembered_per_folder_until_forgotten(tmp_path: Path) -> None:
    deep = tmp_path / "repo" / "pkg" / "sub"
    deep.mkdir(parents=True)
    project_root.forget_joins()
    assert root_under(str(deep), None) != str(tmp_path / "repo")
    (tmp_path / "repo" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    project_root.forget_joins()
    assert root_under(str(deep), None) == str(tmp_path / "repo")
    assert root_under(str(tmp_path / "repo" / "pkg"), None) == str(tmp_path / "repo")
    project_root.forget_joins()


def test_joining_reads_listings_as_the_files_stand(tmp_path: Path) -> None:
    # segment/train.py imports `utils`, which stands beside segment/, not in it: the parent joins
    top = tmp_path / "checkout"
    (top / "segment").mkdir(parents=True)
    (top / "utils").mkdir()
    (top / "utils" / "dist.py").write_text("def wrap(model):\n    return model\n")
    (top / "segment" / "train.py").write_text("from utils.dist import wrap\nimport torch\n")
    project_root.forget_joins()
    assert joined_ancestor(str(top / "segment")) == str(top)
    # a `utils` of its own beside the script: the import is the folder's own, nothing joins
    (top / "segment" / "utils.py").write_text("")
    project_root.forget_joins()
    assert joined_ancestor(str(top / "segment")) == str(top / "segment")
    project_root.forget_joins()


def test_scripts_importing_an_ancestor_package_root_above_it(tmp_path: Path) -> None:
    # projects/depth/train.py imports `projects.depth.data`: it runs from the checkout's top
    # (`python -m projects.depth.train`), whether the file, its folder or both scripts are checked
    top = tmp_path / "checkout"
    for name in ("depth", "normals"):
        (top / "projects" / name).mkdir(parents=True)
        (top / "projects" / name / "train.py").write_text(f"from projects.{name}.data import TrainLoader\n")
    (top / "projects" / "__init__.py").write_text("")
    project_root.forget_joins()
    depth = top / "projects" / "depth"
    assert joined_ancestor(str(depth)) == str(top)
    assert root_under(str(depth / "train.py"), str(depth)) == str(top)
    assert root_under(str(depth / "train.py"), str(top / "projects")) == str(top)
    # a script that imports its package relatively names no ancestor: its folder stays the root
    (depth / "train.py").write_text("from .data import TrainLoader\n")
    (top / "projects" / "normals" / "train.py").write_text("import torch\n")
    project_root.forget_joins()
    assert root_under(str(depth / "train.py"), str(top / "projects")) == str(top / "projects")
    project_root.forget_joins()


# Definitions the gate's project clause asks about: each name with what `summarize` says of it.
DEFINITIONS = '''import torch


def backward_step(loss, k):
    (loss / k).backward()


def backward_step(loss, k):  # redefined: the last definition is the module's
    return loss


class Scaler:
    def __call__(self, loss, optimizer):
        loss.backward()
        optimizer.step()


class Scaler:  # a second class of the name: its methods join the first's
    def reset(self):
        pass


class Meter:
    def update(self, loss):
        loss.backward()


async def stream_backward(loss):
    loss.backward()


def \\
        continued(loss):
    torch.autograd.backward(loss)


if torch.cuda.is_available():
    def guarded(loss):
        loss.backward()
'''
NAMES = ("backward_step", "Scaler", "Meter", "stream_backward", "continued", "guarded", "absent", "torch")


def _summarized_effects(text: str, name: str):
    summary = summarize("m.py", text)
    if summary.error is not None:
        return None
    function = summary.functions.get(name) or summary.functions.get(f"{name}.__call__")
    return function.effects if function is not None else None


@pytest.mark.parametrize("text", [DEFINITIONS, DEFINITIONS.replace("__call__", "run"),
                                  DEFINITIONS + "def broken(:\n", "def \uff53tep(loss):\n    loss.backward()\n"])
def test_one_definition_has_the_effects_its_module_summary_gives(text: str) -> None:
    from accumlint.project.summary import definition_effects

    answers = {name: definition_effects(text, name) for name in NAMES + ("step",)}
    assert answers == {name: _summarized_effects(text, name) for name in NAMES + ("step",)}
    if "broken" not in text and "__call__" in text:
        assert answers["Scaler"] and answers["continued"] and answers["backward_step"] == frozenset()


def test_one_definition_on_real_modules() -> None:
    from accumlint.project.summary import definition_effects

    asked = 0
    for path in _python_files()[::7]:
        text = path.read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(text)
        names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
        for name in sorted(names)[:12] + ["absent_name"]:
            assert definition_effects(text, name) == _summarized_effects(text, name), (path, name)
            asked += 1
    assert asked > 200


@pytest.mark.parametrize("text", TRICKY_IMPORTS + [DEFINITIONS, "import a.b as c, d\nfrom .. import *\nfrom .x import (y as z,\n w)\n",
                                                   "def broken(:\n    import os\n"])
def test_imports_alone_are_the_summary_imports(text: str) -> None:
    from accumlint.project.summary import imports_only

    summary = summarize("m.py", text)
    assert imports_only(text) == (summary.imports if summary.error is None else None)


def test_imports_alone_on_real_modules() -> None:
    from accumlint.project.summary import imports_only

    for path in _python_files()[::5]:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert imports_only(text) == summarize(str(path), text).imports, path


def test_index_answers_from_a_summary_it_holds_and_sees_a_file_change(tmp_path: Path) -> None:
    """`ProjectIndex.effects` and `.imports` read the file when the index holds no summary
    of it, use the summary it holds, and read the file again once it changes."""
    import os

    from accumlint.project.modules import ProjectIndex

    module = tmp_path / "steps.py"
    module.write_text("import os\n\ndef step(loss):\n    loss.backward()\n")
    index = ProjectIndex()
    assert index.effects(str(module), "step", "backward(") == frozenset({"backward"})
    assert index.imports(str(module)) == {"os": ("os", None, 0)}
    assert index.effects(str(module), "step", "zero_grad(") is None  # the text lacks the word
    module.write_text("import json\n\ndef step(loss):\n    return loss\n# backward(\n")
    os.utime(module, ns=(1, 1))  # another stamp, whatever the clock's resolution
    assert index.effects(str(module), "step", "backward(") == frozenset()
    assert index.imports(str(module)) == {"json": ("json", None, 0)}
    entry = index.entry(str(module))
    assert entry is not None
    entry.summary.imports["held"] = ("held", None, 0)  # the summary held is what is answered
    assert "held" in (index.imports(str(module)) or {})
    assert index.imports(str(tmp_path / "absent.py")) is None
