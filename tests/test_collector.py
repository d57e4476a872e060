"""The cyclic collector pauses while trees are built and files are analysed, and
the analysis leaves no cycle that would keep a module's tree for the collector."""

from __future__ import annotations

import gc
from pathlib import Path

import libcst as cst
import pytest

from accumlint.analysis import AnalysisOptions, analyze
from accumlint.collector import collector_paused
from accumlint.engine import Task, run_task

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
    monkeypatch.setattr("accumlint.engine.screen", lambda *args, **kwargs: seen.append(gc.isenabled()))
    result = run_task(Task("t.py", "x = 1\n", AnalysisOptions()))
    assert seen == [False] and result.diagnostics == []
    assert gc.isenabled()


def _modules_left_for_the_collector(texts: list[tuple[str, str]]) -> list[str]:
    gc.collect()
    left = []
    with collector_paused():
        for path, text in texts:
            analyze(text, path)
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                gc.collect()
                if any(type(item) is cst.Module for item in gc.garbage):
                    left.append(path)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
    return left


def test_no_cycle_keeps_a_module_tree_after_the_analysis(collecting) -> None:
    """Every tenth fixture: reference counting alone frees each module's tree."""
    paths = sorted((REPO / "fixtures").rglob("*.py"))[::10]
    texts = [(str(path), path.read_text()) for path in paths]
    assert len(texts) > 20
    assert _modules_left_for_the_collector(texts) == []
