"""The model's shortcuts answer as the questions they stand for, on every fixture.

The loop model asks some questions once per module (`Objects.role`,
`ModuleFacts.helper`, `ModuleFacts.once`) and asks whether a loop runs a backward
of a probe walk that reads no test (`_Walker.probe`). Each shortcut must give
what the question asked afresh gives: these tests ask both ways, after the
model's own walks have filled the memos, on every fixture module.
"""

from __future__ import annotations

from pathlib import Path

import libcst
import pytest

from accumlint.check.analysis import AnalysisOptions
from accumlint.model.build import model_of
from accumlint.model.loop import _plain_values, _Walker
from accumlint.model.roles import Objects
from accumlint.model.scopes import chains_in_targets
from accumlint.model.tree import walk

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "fixtures" / "check").rglob("*.py"))


def _model(path: Path):
    text = path.read_text(encoding="utf-8")
    try:
        module = libcst.parse_module(text)
    except libcst.ParserSyntaxError:
        return None
    return model_of(module, text, AnalysisOptions())


def _backwards(statements) -> list:
    return [e.role.call for s in statements if not s.loops for e in s.events if e.kind == "backward"]


def test_fixtures_are_found():
    assert len(FIXTURES) > 100


@pytest.mark.parametrize("path", FIXTURES[::3], ids=lambda p: str(p.relative_to(REPO)))
def test_probe_walk_finds_the_backwards_of_the_full_own_level_walk(path: Path):
    model = _model(path)
    if model is None:
        pytest.skip("not parsed by LibCST")
    try:
        facts, objects = model.facts, model.objects
        for site in facts.loops:
            def own_level(probe: bool) -> list:
                walker = _Walker(facts, objects, site.function, own_level=True, probe=probe)
                return _backwards(walker.walk(site.node.body, site.node))

            assert own_level(True) == own_level(False), f"line of loop: {site.node}"
    finally:
        model.release()


@pytest.mark.parametrize("path", FIXTURES[1::3], ids=lambda p: str(p.relative_to(REPO)))
def test_remembered_answers_are_those_asked_afresh(path: Path):
    model = _model(path)
    if model is None:
        pytest.skip("not parsed by LibCST")
    try:
        facts = model.facts
        fresh = Objects(facts)
        asked = 0
        for statement in model.statements:
            for call in facts.calls_in(statement.node):
                assert model.objects.role(call, statement.loops) == fresh._role(call, statement.loops)
                function = facts.enclosing_function(call)
                assert facts.helper(call, function) is facts._helper(call, function)
                asked += 1
        for site in facts.loops:
            assert facts.once(chains_in_targets, site.node) == chains_in_targets(site.node)
            assert facts.once(_plain_values, site.node) == _plain_values(site.node)
        # the calls the walks asked about are all of the module's calls in loops' statements
        assert asked == sum(len(facts.calls_in(s.node)) for s in model.statements)
    finally:
        model.release()


def test_role_is_remembered_per_call_and_loops():
    """`q.grad.zero_()` zeroes a parameter inside `for q in model.parameters():`; asked
    about the same call with no loop around it, `q` is no parameter by its name: the
    answer remembered for one must not be given for the other."""
    text = (
        "import torch\n"
        "for q in model.parameters():\n"
        "    q.grad.zero_()\n"
    )
    module = libcst.parse_module(text)
    model = model_of(module, text, AnalysisOptions())
    try:
        loop = next(node for node in walk(module) if type(node) is libcst.For)
        call = next(node for node in walk(module)
                    if type(node) is libcst.Call and type(node.func) is libcst.Attribute and node.func.attr.value == "zero_")
        within = model.objects.role(call, (loop,))
        assert within is not None and within.kind == "zero"
        alone = model.objects.role(call, ())
        assert alone is None or alone.kind != "zero"
        assert model.objects.role(call, (loop,)) is within
    finally:
        model.release()
