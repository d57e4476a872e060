"""Questions about a function's own subtree, asked once per function through
`ModuleFacts.once` instead of walking the function for every call of it: the `return`
statements `ModuleFacts.returned` reads (`facts._valued_returns`), and the methods a
function calls and the names it reads (`facts._called_and_named`, which helpers are own
updates or backward methods). On every fixture module, once the model has filled the
memos, each answer is what a walk of the function finds."""

from __future__ import annotations

from pathlib import Path

import libcst

from accumlint.check.analysis import AnalysisOptions
from accumlint.model.build import model_of
from accumlint.model.facts import _called_and_named, _valued_returns
from accumlint.model.tree import walk

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "fixtures" / "check").rglob("*.py"))


def test_returned_reads_the_returns_a_walk_finds():
    functions = with_returns = calls = 0
    for path in FIXTURES:
        text = path.read_text(encoding="utf-8")
        try:
            module = libcst.parse_module(text)
        except libcst.ParserSyntaxError:
            continue
        model = model_of(module, text, AnalysisOptions())
        try:
            facts = model.facts
            for node in walk(module):
                if type(node) is not libcst.FunctionDef:
                    continue
                walked = [n for n in walk(node.body) if type(n) is libcst.Return and n.value is not None]
                assert facts.once(_valued_returns, node) == walked
                assert _valued_returns(node) == walked
                called = {n.func.attr.value for n in walk(node.body) if type(n) is libcst.Call and type(n.func) is libcst.Attribute}
                named = {n.value for n in walk(node.body) if type(n) is libcst.Name}
                assert facts.once(_called_and_named, node) == (called, named)
                functions += 1
                with_returns += bool(walked)
            for call in facts.calls:
                for index in (None, 0, 1):
                    first = facts.returned(call, index)
                    assert [id(v) for v in facts.returned(call, index)] == [id(v) for v in first]
                    calls += bool(first)
        finally:
            model.release()
    assert functions > 300 and with_returns > 50
    assert calls > 20
