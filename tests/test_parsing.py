"""The parse without LibCST's node validation (accumlint.source.parsing).

The hook it switches off is LibCST's private `CSTNode.__post_init__`: these
tests fail when a LibCST release renames or changes it, when the trees stop
being the same as LibCST's plain parse, or when validation stays off for
anything but the parser's own nodes.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import libcst as cst
import pytest
from libcst import CSTNode
from threads import beside_another_thread

from accumlint.compat import validation
from accumlint.source import parsing

# What is tested here is the parse of accumlint's own command (accumlint.compat.enable).
pytestmark = pytest.mark.usefixtures("speedups_on")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "fixtures").rglob("*.py"))


def test_the_validating_hook_is_the_one_parsing_knows() -> None:
    """False when LibCST renames `__post_init__` or makes it do more than `_validate()`."""
    assert validation.SKIPS_VALIDATION


def test_the_parse_skips_validation_and_only_the_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    original = cst.Name._validate
    monkeypatch.setattr(cst.Name, "_validate", lambda node: checked.append(node.value) or original(node))
    parsing.parse_module("total = step + 1\n")
    assert checked == []
    cst.parse_module("total = step + 1\n")
    assert checked == ["total", "step"]
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")  # built after the parse: validated again


def test_other_threads_still_validate_during_a_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread that exists when the parse starts builds a node while it runs."""
    outcome: list[str] = []
    parsing_started, built = threading.Event(), threading.Event()

    def build_elsewhere() -> None:
        parsing_started.wait()
        try:
            cst.Name("")
            outcome.append("accepted")
        except cst.CSTValidationError:
            outcome.append("refused")
        built.set()

    plain_parse = cst.parse_module

    def parse_while_another_thread_builds(text: str) -> cst.Module:
        parsing_started.set()
        built.wait()
        return plain_parse(text)

    other = threading.Thread(target=build_elsewhere)
    other.start()
    monkeypatch.setattr(cst, "parse_module", parse_while_another_thread_builds)
    parsing.parse_module("x = 1\n")
    other.join()
    assert outcome == ["refused"]


def test_a_parse_alone_runs_with_the_no_op_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """The only thread needs no per-node question; with another one alive it is asked."""
    seen = []
    plain_parse = cst.parse_module

    def parse_and_look(text: str) -> cst.Module:
        seen.append(CSTNode.__post_init__)
        return plain_parse(text)

    monkeypatch.setattr(cst, "parse_module", parse_and_look)
    parsing.parse_module("x = 1\n")
    beside_another_thread(lambda: parsing.parse_module("x = 1\n"))
    assert seen == [validation._skip_validation, validation._validate_unless_parsing]
    assert CSTNode.__post_init__ is validation._VALIDATING_HOOK


def test_a_failed_parse_restores_validation_and_collection() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        parsing.parse_module("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
    assert gc.isenabled()


def test_collection_is_paused_during_the_parse_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    plain_parse = cst.parse_module

    def parse_and_look(text: str) -> cst.Module:
        seen.append(gc.isenabled())
        return plain_parse(text)

    monkeypatch.setattr(cst, "parse_module", parse_and_look)
    parsing.parse_module("x = 1\n")
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        parsing.parse_module("x = 1\n")  # a caller's own pause is left as it was
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: str(path.relative_to(REPO)))
def test_trees_are_libcsts_own(path: Path) -> None:
    text = path.read_text()
    try:
        expected = cst.parse_module(text)
    except cst.ParserSyntaxError:
        with pytest.raises(cst.ParserSyntaxError):
            parsing.parse_module(text)
        return
    found = parsing.parse_module(text)
    assert found.code == text
    assert found.deep_equals(expected)
