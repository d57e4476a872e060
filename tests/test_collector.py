"""The cyclic collector pauses while trees are built and files are analysed, and
the analysis leaves no cycle that would keep a module's tree for the collector."""

from __future__ import annotations

import gc
from pathlib import Path

import libcst as cst
import pytest

from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.compat.collector import collector_paused
from accumlint.check.engine import Task, run_task

# The collector is paused in accumlint's own command only (accumlint.compat.enable).
pytestmark = pytest.mark.usefixtures("speedups_on")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def collecting():
    """The collector on before the test, and as it was after it."""
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_resumes_as_it_was(collecting) -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_the_collector_resumes_when_the_block_raises(collecting) -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()


def test_a_task_runs_paused_and_resumes(collecting, monkeypatch) -> None:
    seen = []
    monkeypatch.setattr("accumlint.check.engine.screen", lambda *args, **kwargs: seen.append(gc.isenabled()))
    result = run_task(Task("t.py", "x = 1\n", AnalysisOptions()))
    assert seen == [False] and result.diagnostics == []
    assert gc.isenabled()


def _left_for_the_collector(texts: list[tuple[str, str]]) -> dict[str, set[str]]:
    """The types of the objects each analysis leaves for the cyclic collector (by path)."""
    gc.collect()
    left = {}
    with collector_paused():
        for path, text in texts:
            analyze(text, path)
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                gc.collect()
                left[path] = {f"{type(item).__module__}.{type(item).__qualname__}" for item in gc.garbage}
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
    return left


def _every_tenth_fixture() -> list[tuple[str, str]]:
    texts = [(str(path), path.read_text()) for path in sorted((REPO / "fixtures").rglob("*.py"))[::10]]
    assert len(texts) > 20
    return texts


def test_no_cycle_keeps_a_module_tree_after_the_analysis(collecting) -> None:
    """Reference counting alone frees each module's tree."""
    left = _left_for_the_collector(_every_tenth_fixture())
    assert [path for path, kinds in left.items() if "libcst._nodes.module.Module" in kinds] == []


def test_the_analysis_leaves_no_node_and_no_model_object_for_the_collector(collecting) -> None:
    """Not even the statements the loop walks made: the model releases them when it is done
    (`ModuleModel.release`). What may be left is `ast.literal_eval`'s own closures."""
    left = _left_for_the_collector(_every_tenth_fixture())
    ours = {path: {kind for kind in kinds if kind.startswith(("libcst.", "accumlint."))} for path, kinds in left.items()}
    assert {path: kinds for path, kinds in ours.items() if kinds} == {}
