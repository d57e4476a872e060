"""The fix guard's shortcuts decide exactly what the plain computation decides.

The guard judges every fix a finding offers, even on a plain `check`, so it
applies edits by rebuilding only the edited nodes' ancestors. Each edit set the
guard is asked about — by every fixture's and every rule document's analysis
and fix — must give the same module as LibCST's full pass over every node.
"""

from __future__ import annotations

from pathlib import Path

import libcst
import pytest

from accumlint import docs
from accumlint.analysis import AnalysisOptions, analyze
from accumlint.edits import Edit, apply_edits, insert_after, insert_before, remove, replace
from accumlint.fixes import fix_text
from accumlint.fixguard import FixGuard
from accumlint.rules.catalog import RULES

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "fixtures").rglob("*.py"))
FIXABLE = [rule.code for rule in RULES if rule.fix != "none"]


def _asked(monkeypatch, text: str) -> list[tuple[libcst.Module, tuple[Edit, ...]]]:
    """Every (module, edits) the guard is asked about while `text` is checked and fixed."""
    asked: list[tuple[libcst.Module, tuple[Edit, ...]]] = []
    judge = FixGuard.refusal

    def recording(guard: FixGuard, edits):
        asked.append((guard.module, tuple(edits)))
        return judge(guard, edits)

    monkeypatch.setattr(FixGuard, "refusal", recording)
    analyze(text, "train.py", AnalysisOptions())
    fix_text(text, "train.py", AnalysisOptions(), unsafe=True)
    monkeypatch.undo()
    return asked


def _assert_same_as_a_full_pass(module: libcst.Module, edits) -> None:
    copied = apply_edits(module, edits, FixGuard(module).parents)
    full = apply_edits(module, edits)
    assert copied.code == full.code
    assert copied.deep_equals(full)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_fixture_edits_rebuilt_along_their_paths_give_the_full_pass_module(fixture: Path, monkeypatch) -> None:
    for module, edits in _asked(monkeypatch, fixture.read_text(encoding="utf-8")):
        _assert_same_as_a_full_pass(module, edits)


@pytest.mark.parametrize("code", FIXABLE)
def test_rule_example_edits_rebuilt_along_their_paths_give_the_full_pass_module(code: str, monkeypatch) -> None:
    asked = _asked(monkeypatch, docs.rule_examples(code).invalid)
    assert asked  # every fixable rule's example offers a fix
    for module, edits in asked:
        _assert_same_as_a_full_pass(module, edits)


SCRIPT = """\
import torch  # the imports


def helper(x):
    return x


class Net:
    def forward(self, x):
        return x


for batch in loader:
    loss = model(batch)
    loss.backward()
    if ready:
        step()
        log(loss)
"""


def _script():
    module = libcst.parse_module(SCRIPT)
    loop = module.body[3]
    gate = loop.body.body[2]
    return module, loop, gate


def test_untouched_statements_are_kept_as_the_same_objects() -> None:
    module, loop, gate = _script()
    fixed = apply_edits(module, [remove(gate.body.body[1])], FixGuard(module).parents)
    assert fixed.body[:3] == module.body[:3] and all(a is b for a, b in zip(fixed.body[:3], module.body))
    assert fixed.body[3] is not loop and fixed.body[3].body.body[0] is loop.body.body[0]


def test_hand_made_edits_rebuilt_along_their_paths_give_the_full_pass_module() -> None:
    module, loop, gate = _script()
    zero = libcst.parse_statement("opt.zero_grad()\n")
    backward = loop.body.body[1]
    call = backward.body[0].value
    cases = [
        [remove(s) for s in gate.body.body],  # an emptied block prints `pass`
        [remove(loop)],
        [insert_before(module.body[0], zero), insert_after(module.body[-1], zero)],
        [replace(backward, libcst.FlattenSentinel([zero, backward]))],
        [replace(call, libcst.parse_expression("(loss / 4).backward()"))],
        # an edit inside a statement that is replaced: the replacement wins
        [replace(call.func, libcst.Name("f")), replace(backward, zero)],
        # an edit inside a statement that gets a neighbour: both apply
        [replace(call.func, libcst.Name("f")), insert_after(backward, zero), insert_before(backward, zero)],
        [remove(gate), insert_after(loop.body.body[0], gate)],  # a move
        [remove(module.body[1].body.body[0])],  # a function emptied
        [replace(module, libcst.parse_module("x = 1\n"))],  # the module itself: a full pass
        [replace(call.func.dot, libcst.Dot(whitespace_before=libcst.SimpleWhitespace(" ")))],  # a token: a full pass
        [remove(libcst.parse_statement("x = 1\n"))],  # a node of another tree: nothing happens
    ]
    for edits in cases:
        _assert_same_as_a_full_pass(module, edits)
