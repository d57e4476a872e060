"""The reaches into LibCST's and CPython's private parts (accumlint.compat): each one is
guarded, falls back to a public path that gives the same results, and the process-wide
ones run only in accumlint's own command."""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import libcst as cst
import pytest

import accumlint.compat
from accumlint.compat import codegen, compile_budget, generated_code, quick_exit, validation
from accumlint.model import names, positions
from accumlint.model.tree import walk
from accumlint.source import gate

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "fixtures" / "check").rglob("*.py"))


def _python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != accumlint.compat.KILL_SWITCH}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, env={**environment, **env}
    )


_UNTOUCHED = """
import dataclasses, gc, importlib, json, pkgutil, sys
import libcst

def state():
    kinds, stack = [], [libcst.CSTNode]
    while stack:
        for kind in stack.pop().__subclasses__():
            stack.append(kind)
            kinds.append(kind)
    return {
        "inits": sorted(f"{kind.__qualname__}:{id(kind.__dict__.get('__init__'))}" for kind in kinds),
        "post_init": id(libcst.CSTNode.__dict__.get("__post_init__")),
        "dataclasses_exec": "exec" in vars(dataclasses),
        "gc": [gc.isenabled(), gc.get_freeze_count()],
        "recursion_limit": sys.getrecursionlimit(),
    }

before = state()
import accumlint
imported = []
for module in pkgutil.walk_packages(accumlint.__path__, "accumlint."):
    if module.name.startswith(("accumlint.verify", "accumlint.server")) and "torch" not in sys.modules:
        try:
            importlib.import_module(module.name)
        except ImportError:
            continue  # an extra that is not installed (torch, pygls)
    else:
        importlib.import_module(module.name)
    imported.append(module.name)
from accumlint.check.analysis import analyze
text = open(sys.argv[1]).read() * 20  # enough text that the command would install the constructors
analyze(text, sys.argv[1])
after = state()
print(json.dumps({"same": before == after, "before": before["gc"], "after": after["gc"], "imported": len(imported),
                  "post_init": before["post_init"] == after["post_init"], "exec": after["dataclasses_exec"]}))
"""


def test_importing_and_using_accumlint_as_a_library_patches_nothing_and_freezes_nothing() -> None:
    """Every module imported, a file analysed: LibCST's classes, `dataclasses` and the
    collector are as they were (a fresh interpreter: this one has run commands)."""
    fixture = REPO / "fixtures" / "check" / "basic" / "bug_step_every_batch.py"
    if not fixture.exists():
        fixture = FIXTURES[0]
    run = _python(_UNTOUCHED, str(fixture))
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found["imported"] > 50
    assert found["same"], found


def test_the_check_command_turns_them_on() -> None:
    """The premise of the test above: the command turns them on, unless the kill switch is set."""
    code = (
        "import sys, accumlint.cli, accumlint.compat\n"
        "sys.argv = ['accumlint', 'check', '--no-cache', sys.argv[1]]\n"
        "try:\n    accumlint.cli.main()\nexcept SystemExit:\n    pass\n"
        "print(accumlint.compat.process_wide())\n"
    )
    fixture = str(REPO / "fixtures" / "check" / "plain")
    assert _python(code, fixture).stdout.splitlines()[-1] == "True"
    assert _python(code, fixture, ACCUMLINT_NO_SPEEDUPS="1").stdout.splitlines()[-1] == "False"


def test_the_collector_is_frozen_and_paused_only_in_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from accumlint.compat import collector

    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    monkeypatch.setattr(accumlint.compat, "_process_wide", False)
    collector.freeze()
    with collector.collector_paused():
        assert gc.isenabled()
    assert frozen == []
    monkeypatch.setattr(accumlint.compat, "_process_wide", True)
    collector.freeze()
    with collector.collector_paused():
        assert not gc.isenabled()
    assert frozen == [True] and gc.isenabled()


def test_the_kill_switch_turns_every_reach_off() -> None:
    code = (
        "import accumlint.compat as c\n"
        "from accumlint.compat import codegen, compile_budget, generated_code, quick_exit, validation\n"
        "c.enable()\n"
        "print(c.process_wide(), codegen.CodegenState is None, validation.SKIPS_VALIDATION,\n"
        "      compile_budget.budget_bounds_compile(), quick_exit.may_exit_now(print))\n"
    )
    assert _python(code, ACCUMLINT_NO_SPEEDUPS="1").stdout.split() == ["False", "True", "False", "False", "False"]
    assert _python(code).stdout.split()[:3] == ["True", "False", "True"]


# --- each reach's public fallback -------------------------------------------------


def test_codegen_state_is_detected_and_refused_when_it_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    import libcst._nodes.internal as internal

    assert codegen._private_state() is internal.CodegenState
    monkeypatch.delattr(internal.CodegenState, "record_syntactic_position")
    assert codegen._private_state() is None
    monkeypatch.undo()
    monkeypatch.delattr(internal, "CodegenState")
    assert codegen._private_state() is None


def _modules() -> list[tuple[str, cst.Module]]:
    return [(path.read_text(), cst.parse_module(path.read_text())) for path in FIXTURES]


def test_without_the_codegen_state_texts_and_positions_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    modules = _modules()
    wanted = [[node for node in walk(module) if type(node) in (cst.Call, cst.For, cst.Name)] for _, module in modules]
    texts = [[names.code.__wrapped__(node) for node in nodes] for nodes in wanted]
    found = [
        (positions.positions_of(module, nodes, text, [n for n in nodes if type(n) is cst.Call]),
         positions.positions_of(module, nodes, whitespace=True))
        for (text, module), nodes in zip(modules, wanted)
    ]
    monkeypatch.setattr(names, "CodegenState", None)
    monkeypatch.setattr(positions, "CodegenState", None)
    assert [[names.code.__wrapped__(node) for node in nodes] for nodes in wanted] == texts
    assert [
        (positions.positions_of(module, nodes, text, [n for n in nodes if type(n) is cst.Call]),
         positions.positions_of(module, nodes, whitespace=True))
        for (text, module), nodes in zip(modules, wanted)
    ] == found


def test_without_the_frame_stack_the_gate_takes_stage_two_with_the_same_verdicts(monkeypatch) -> None:
    texts = [path.read_text() for path in FIXTURES]
    texts += ["for b in loader:\n    b.backward()\nreturn 3\n", "for b in loader:\n    b.backward()\nx = (\n"]

    def verdict(text: str) -> object:
        try:
            return bool(gate.screen(text, "x.py"))
        except Exception as error:  # noqa: BLE001 - the verdict is the error itself
            return (type(error).__name__, str(error))

    expected = [verdict(text) for text in texts]
    monkeypatch.setattr(compile_budget, "sys", types.SimpleNamespace(getrecursionlimit=sys.getrecursionlimit))
    monkeypatch.setattr(compile_budget, "_obeys_budget", None)
    assert not compile_budget.budget_bounds_compile()
    assert not gate._compiles_within_bound(texts[0], "x.py")
    assert [verdict(text) for text in texts] == expected


def test_an_unknown_validating_hook_leaves_the_parse_validating(monkeypatch, speedups_on) -> None:
    assert validation.is_known_hook(cst.CSTNode.__dict__["__post_init__"])
    assert not validation.is_known_hook(lambda node: node._validate() or node.extra())
    assert not validation.is_known_hook(None)
    monkeypatch.setattr(validation, "SKIPS_VALIDATION", False)
    checked: list[str] = []
    original = cst.Name._validate
    monkeypatch.setattr(cst.Name, "_validate", lambda node: checked.append(node.value) or original(node))
    from accumlint.source import parsing

    assert parsing.parse_module("total = step\n").deep_equals(cst.parse_module("total = step\n"))
    assert checked == ["total", "step", "total", "step"]


def test_where_dataclasses_cannot_be_hooked_it_compiles_as_usual(monkeypatch, speedups_on, tmp_path) -> None:
    assert generated_code._dataclasses_call_exec()  # every supported Python's dataclasses can be
    path = tmp_path / "cache.marshal"
    monkeypatch.setattr(generated_code, "cache_file", lambda: path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(generated_code, "HOOKABLE", False)
    with generated_code.cached():
        assert "exec" not in vars(dataclasses)
        dataclasses.make_dataclass("Point", ["x", "y"])
    assert not path.exists()
    monkeypatch.setattr(generated_code, "HOOKABLE", True)
    with generated_code.cached():
        assert "exec" in vars(dataclasses)
        dataclasses.make_dataclass("Point", ["x", "y"])
    assert path.exists()


def test_the_hook_needs_the_command(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(accumlint.compat, "_process_wide", False)  # (an earlier test may have run `check`)
    monkeypatch.setattr(generated_code, "cache_file", lambda: tmp_path / "cache.marshal")
    with generated_code.cached():
        assert "exec" not in vars(dataclasses)


# --- the exit ------------------------------------------------------------------------


def _entry() -> None:
    """Stands for the console script's function."""


def test_the_process_ends_at_once_only_from_its_own_main_unwatched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(accumlint.compat.KILL_SWITCH, raising=False)
    main = types.ModuleType("__main__")
    main._entry = _entry
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "gettrace", lambda: None)  # pytest's own tracing (coverage) aside
    monkeypatch.setattr(sys, "getprofile", lambda: None)
    monkeypatch.setattr(quick_exit, "_monitored", lambda: False)
    assert quick_exit.may_exit_now(_entry)
    monkeypatch.setattr(sys, "gettrace", lambda: print)
    assert not quick_exit.may_exit_now(_entry)
    monkeypatch.setattr(sys, "gettrace", lambda: None)
    monkeypatch.setattr(sys, "getprofile", lambda: print)
    assert not quick_exit.may_exit_now(_entry)
    monkeypatch.setattr(sys, "getprofile", lambda: None)
    monkeypatch.setattr(quick_exit, "_monitored", lambda: True)
    assert not quick_exit.may_exit_now(_entry)
    monkeypatch.setattr(quick_exit, "_monitored", lambda: False)
    main._entry = print  # someone else's __main__
    assert not quick_exit.may_exit_now(_entry)
    main._entry = _entry
    monkeypatch.delattr(atexit, "_run_exitfuncs")
    assert not quick_exit.may_exit_now(_entry)


def test_a_profiled_check_writes_its_profile(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "accumlint.cli", "check", "--no-cache",
         str(REPO / "fixtures" / "check")],
        capture_output=True, text=True, cwd=REPO,
    )
    assert "GA" in run.stdout, run.stderr  # (cProfile's own exit status is 0)
    assert out.stat().st_size > 0


def test_the_command_still_runs_its_exit_handlers_and_keeps_its_status(tmp_path: Path) -> None:
    """`python -m accumlint.cli`: the fast exit, with what the interpreter's exit would do."""
    marker = tmp_path / "handled"
    code = (
        "import atexit, sys, runpy\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').close())\n"
        "sys.argv = ['accumlint', 'rules']\n"
        "runpy.run_module('accumlint.cli', run_name='__main__', alter_sys=True)\n"
    )
    run = _python(code)
    assert run.returncode == 0, run.stderr
    assert marker.exists() and "GA" in run.stdout
