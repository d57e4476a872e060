"""The fix guard's shortcuts decide exactly what the plain computation decides.

The guard judges every fix a finding offers, even on a plain `check`, so it
applies edits by rebuilding only the edited nodes' ancestors, and walks of the
edited module take over what the original's walk found for every statement
they share. Each edit set the guard is asked about — by every fixture's and
every rule document's analysis and fix — must give the same module as LibCST's
full pass over every node, the same unbound reads as a fresh walk, and the same
verdict; so must every edit of small modules made to bind and unbind names.
"""

from __future__ import annotations

from pathlib import Path

import libcst
import pytest

from accumlint.rules import docs
from accumlint.fix import guard as fixguard
from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.model.scopes import ModuleReads, unbound_reads
from accumlint.fix.edits import Edit, apply_edits, insert_after, insert_before, remove, replace
from accumlint.check.fixes import fix_text
from accumlint.fix.guard import FixGuard
from accumlint.model.tree import walk
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


class _FreshReads:
    """`ModuleReads` without taking anything over: every module walked from scratch."""

    def __init__(self, module: libcst.Module) -> None:
        self.unbound = unbound_reads(module)

    def of(self, edited: libcst.Module):
        return unbound_reads(edited)


def _fresh_refusal(module: libcst.Module, edits, monkeypatch) -> "str | None":
    """The verdict from fresh walks of both whole modules (no function-scoped walk either)."""
    with monkeypatch.context() as patched:
        patched.setattr(fixguard, "ModuleReads", _FreshReads)
        patched.setattr(FixGuard, "_function_holding", lambda guard, edits: None)
        return FixGuard(module).refusal(edits)


def _assert_judged_as_a_fresh_walk_judges(module: libcst.Module, edits, monkeypatch) -> "str | None":
    reads = ModuleReads(module)
    assert reads.unbound == unbound_reads(module)
    edited = apply_edits(module, edits, FixGuard(module).parents)
    assert reads.of(edited) == unbound_reads(edited)
    # edits inside one function are judged by its body alone: the same reads added
    assert FixGuard(module)._added_reads(edits, edited) == unbound_reads(edited) - unbound_reads(module)
    verdict = FixGuard(module).refusal(edits)
    assert verdict == _fresh_refusal(module, edits, monkeypatch)
    return verdict


def _assert_guard_shortcuts(asked, monkeypatch) -> None:
    for module, edits in asked:
        _assert_same_as_a_full_pass(module, edits)
        _assert_judged_as_a_fresh_walk_judges(module, edits, monkeypatch)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_fixture_edits_judged_by_the_shortcuts_as_by_the_plain_computation(fixture: Path, monkeypatch) -> None:
    _assert_guard_shortcuts(_asked(monkeypatch, fixture.read_text(encoding="utf-8")), monkeypatch)


@pytest.mark.parametrize("code", FIXABLE)
def test_rule_example_edits_judged_by_the_shortcuts_as_by_the_plain_computation(code: str, monkeypatch) -> None:
    asked = _asked(monkeypatch, docs.rule_examples(code).invalid)
    assert asked  # every fixable rule's example offers a fix
    _assert_guard_shortcuts(asked, monkeypatch)


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


# Small modules where edits bind and unbind names at module level, in class bodies,
# under `if __name__ == "__main__":`, beside star imports and walruses.
MODULES = [
    """\
import torch
LIMIT = 4


def train(loader, model):
    opt = make(model)
    for step, batch in enumerate(loader):
        loss = model(batch) / LIMIT
        loss.backward()
        if (ready := step % LIMIT == 0):
            opt.step()
    return total


class Trainer:
    scale = LIMIT
    other = scale * 2

    def run(self):
        global total
        total = self.scale + helper()
        return [x for x in range(total) if x]


def helper():
    return LIMIT


if __name__ == "__main__":
    model = build()
    train(loader, model)
    with open(path) as handle:
        data = handle.read()
    while (chunk := data[:4]):
        data = data[4:]
    print(chunk, data)
""",
    """\
from helpers import *

value = compute()
try:
    other = value + 1
except ValueError as error:
    other = error
finally:
    done = True
print(other, done)


def use():
    return value, missing
""",
    """\
def outer():
    count = 0

    def inner():
        nonlocal count
        count += 1
        return count, later

    later = 1
    del count
    return inner


match command:
    case [name, *rest] if rest:
        print(name, rest)
    case {"key": found, **others}:
        print(found, others)
""",
]
SNIPPETS = [
    "LIMIT = 8\n", "print(LIMIT)\n", "del LIMIT\n", "total = 0\n", "global total\n", "missing = 1\n",
    "from os import *\n", "if (ready := check()):\n    pass\n", "print(ready, chunk)\n",
    "def helper():\n    return data\n", "class Trainer:\n    pass\n", "for name in names:\n    print(name)\n",
    "count = later\n", "opt.zero_grad()\n",
]


def _edit_sets(module: libcst.Module):
    statements = [n for n in walk(module) if isinstance(n, libcst.BaseStatement)]
    small = [n for n in walk(module) if isinstance(n, libcst.BaseSmallStatement)]
    for index, statement in enumerate(statements):
        yield [remove(statement)]
        for snippet in SNIPPETS:
            new = libcst.parse_statement(snippet)
            yield [insert_before(statement, new)] if index % 2 else [insert_after(statement, new)]
        later = statements[(index * 7 + 3) % len(statements)]
        yield [remove(statement), insert_after(later, statement)]  # a move
    for statement in small:
        yield [replace(statement, libcst.parse_statement("pass\n").body[0])]


@pytest.mark.parametrize("index", range(len(MODULES)))
def test_binding_and_unbinding_edits_judged_by_the_shortcuts_as_by_the_plain_computation(index, monkeypatch) -> None:
    module = libcst.parse_module(MODULES[index])
    verdicts = set()
    for edits in _edit_sets(module):
        try:
            apply_edits(module, edits)
        except Exception:  # LibCST refuses the tree (a required node removed): not a fix
            continue
        verdicts.add(_assert_judged_as_a_fresh_walk_judges(module, edits, monkeypatch) is None)
    assert verdicts == {True, False} or "import *" in MODULES[index]  # both verdicts were compared


def test_edits_inside_one_function_are_judged_by_its_body_alone() -> None:
    """Where the guard's function-scoped walk applies (the tests above check that it
    adds the reads a walk of both whole modules adds): a module-level def, a method of a
    module-level class; not the def itself, two functions, or module-level code."""
    module = libcst.parse_module(MODULES[0])
    train, trainer, helper, main = module.body[2], module.body[3], module.body[4], module.body[5]
    run = trainer.body.body[2]
    loop = train.body.body[1]
    guard = FixGuard(module)
    zero = libcst.parse_statement("opt.zero_grad()\n")
    assert guard._function_holding([insert_before(loop, zero), remove(loop.body.body[1])]) == (2, None)
    assert guard._function_holding([insert_after(run.body.body[1], zero)]) == (3, 2)
    assert guard._function_holding([insert_before(train, zero)]) is None  # beside the def: module level
    assert guard._function_holding([replace(train, zero)]) is None  # the def itself
    assert guard._function_holding([remove(loop), remove(helper.body.body[0])]) is None  # two functions
    assert guard._function_holding([remove(main.body.body[0])]) is None  # module-level code
    assert guard._function_holding([insert_before(trainer.body.body[0], zero)]) is None  # a class body
