"""A fix never breaks the program (issue 12, item 1).

Every fix output — of every fixture, safe fixes alone and with unsafe ones, and
of every rule document's example — is checked with pyflakes against its
original: no new undefined or unbound name. The cases that used to break (a
zeroing inserted into a Lightning module's class body, or before the loop that
creates the optimizer) and the other guards (moved bindings, duplicated
zeroing, unrelated lines, files LibCST cannot reproduce) have their own tests.
"""

from __future__ import annotations

from pathlib import Path

import libcst
import pytest

from accumlint import docs
from accumlint.analysis import AnalysisOptions, analyze
from accumlint.edits import insert_before, replace
from accumlint.fixes import fix_text
from accumlint.fixguard import FixGuard, touches_only_edited_lines
from accumlint.rules.catalog import RULES

from namecheck import new_undefined_names

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (REPO / "fixtures").rglob("*.py") if not p.name.endswith(".fixed.py"))
OPTIONS = AnalysisOptions()


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _fix(text: str, *, unsafe: bool = True, path: str = "train.py") -> str:
    return fix_text(text, path, OPTIONS, unsafe=unsafe).text


@pytest.mark.parametrize("fixture", FIXTURES, ids=_rel)
def test_fixture_fixes_add_no_undefined_name_and_leave_nothing_to_fix(fixture: Path) -> None:
    original = fixture.read_text(encoding="utf-8")
    before = analyze(original, _rel(fixture), OPTIONS)
    kinds = {d.fix.applicability for d in before if d.fix is not None}
    # with only safe fixes on offer, --fix and --fix --unsafe-fixes write the same text
    for unsafe in sorted({"unsafe" not in kinds, True} if kinds else set()):
        # the fixture's own path: a project fixture's findings depend on its neighbours (SPEC section 2)
        fixed = _fix(original, unsafe=unsafe, path=_rel(fixture))
        added = new_undefined_names(original, fixed)
        assert not added, f"unsafe={unsafe}: the fix made {dict(added)} undefined:\n{fixed}"
    if kinds:  # a fresh check of the --fix --unsafe-fixes result: nothing fixable, nothing new
        unfixable = {d.code for d in before if d.fix is None}
        left = [d for d in analyze(fixed, _rel(fixture), OPTIONS) if d.fix is not None or d.code not in unfixable]
        assert not left, [(d.line, d.code) for d in left]


@pytest.mark.parametrize("code", [rule.code for rule in RULES if rule.fix != "none"])
def test_rule_example_fix_adds_no_undefined_name(code: str) -> None:
    example = docs.rule_examples(code).invalid
    fixed = _fix(example)
    assert fixed != example
    assert not new_undefined_names(example, fixed)


LIGHTNING_MANUAL = '''\
import lightning as L
import torch
import torch.nn.functional as F


class Classifier(L.LightningModule):
    def __init__(self, accumulate=4):
        super().__init__()
        self.automatic_optimization = False
        self.accumulate = accumulate
        self.net = torch.nn.Linear(32, 10)

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.manual_backward(loss / self.accumulate)
        if (batch_idx + 1) % self.accumulate == 0 or self.trainer.is_last_batch:
            opt.step()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)
'''


def test_lightning_manual_zeroing_is_moved_not_put_into_the_class_body() -> None:
    assert [d.code for d in analyze(LIGHTNING_MANUAL, "model.py")] == ["GA101"]
    fixed = _fix(LIGHTNING_MANUAL, unsafe=False)
    owner = next(s for s in libcst.parse_module(fixed).body if isinstance(s, libcst.ClassDef))
    assert all(isinstance(s, libcst.FunctionDef) for s in owner.body.body)
    assert "            opt.step()\n            opt.zero_grad()\n" in fixed
    assert fixed.count("zero_grad()") == 1
    assert not new_undefined_names(LIGHTNING_MANUAL, fixed)
    assert analyze(fixed, "model.py") == []


OPTIMIZER_IN_LOOP = '''\
import torch
import torch.nn.functional as F


def train(model, loader, accum_steps, lr_for):
    for i, (x, y) in enumerate(loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=lr_for(i))
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
'''


def test_no_zeroing_before_the_loop_that_creates_the_optimizer() -> None:
    (finding,) = analyze(OPTIMIZER_IN_LOOP, "train.py")
    assert finding.code == "GA101" and finding.fix is not None
    fixed = _fix(OPTIMIZER_IN_LOOP, unsafe=False)
    assert fixed.count("optimizer.zero_grad()") == 1
    assert "            optimizer.step()\n            optimizer.zero_grad()\n" in fixed
    assert not new_undefined_names(OPTIMIZER_IN_LOOP, fixed)


ZEROED_TWICE = '''\
import torch.nn.functional as F


def train(model, optimizer, loader, accum_steps):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
'''


def test_a_zeroing_already_after_the_step_is_not_duplicated() -> None:
    assert [d.code for d in analyze(ZEROED_TWICE, "train.py")] == ["GA101"]
    fixed = _fix(ZEROED_TWICE, unsafe=False)
    assert fixed == ZEROED_TWICE.replace(
        "enumerate(loader):\n        optimizer.zero_grad()\n", "enumerate(loader):\n"
    )


CLIP_NORM_LOGGED = '''\
import torch
import torch.nn.functional as F


def train(model, optimizer, loader, accum_steps, log):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / accum_steps
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
        log(grad_norm)
'''


def test_a_binding_read_outside_the_gate_is_not_moved_under_it() -> None:
    (finding,) = analyze(CLIP_NORM_LOGGED, "train.py")
    assert finding.code == "GA302"
    assert finding.fix is None  # `log(grad_norm)` would read an unbound name on most micro-batches
    assert _fix(CLIP_NORM_LOGGED) == CLIP_NORM_LOGGED
    read_inside = CLIP_NORM_LOGGED.replace("        log(grad_norm)\n", "            log(grad_norm)\n")
    (finding,) = analyze(read_inside, "train.py")
    assert finding.fix is not None
    fixed = _fix(read_inside)
    assert "grad_norm = " in fixed.split("optimizer.step()")[0].split("if (i + 1)")[1]
    assert not new_undefined_names(read_inside, fixed)


def test_guard_refuses_statements_in_a_class_body_and_unbound_reads() -> None:
    module = libcst.parse_module("class A:\n    def f(self):\n        return 1\n\n\ndef g():\n    y = 2\n")
    method = module.body[0].body.body[0]
    guard = FixGuard(module)
    refusal = guard.refusal([insert_before(method, libcst.parse_statement("z = 1\n"))])
    assert refusal is not None and "class body" in refusal
    body = module.body[1].body.body
    refusal = guard.refusal([insert_before(body[0], libcst.parse_statement("print(y)\n"))])
    assert refusal is not None and "`y`" in refusal
    assert guard.refusal([insert_before(body[0], libcst.parse_statement("print(A)\n"))]) is None


def test_unrelated_line_changes_are_detected() -> None:
    text = "def f(x):\n    a = x\n    \n    return a\n"
    module = libcst.parse_module(text)
    value = module.body[0].body.body[0].body[0].value
    edits = [replace(value, libcst.parse_expression("x + 1"))]
    good = "def f(x):\n    a = x + 1\n    \n    return a\n"
    assert touches_only_edited_lines(text, module, edits, good)
    assert not touches_only_edited_lines(text, module, edits, good.replace("    \n", "\n"))
    assert not touches_only_edited_lines(text, module, edits, good.replace("return a", "return  a"))


ODD_LAYOUT = '''\
import torch.nn.functional as F


def train(model, optimizer, loader, accum_steps):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
\x0c        if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
'''


def test_a_file_libcst_cannot_reproduce_is_not_fixed() -> None:
    assert libcst.parse_module(ODD_LAYOUT).code != ODD_LAYOUT  # the premise of this test
    outcome = fix_text(ODD_LAYOUT, "train.py", OPTIONS, unsafe=True)
    assert outcome.text == ODD_LAYOUT
    assert [d.code for d in outcome.remaining] == ["GA201"]
    assert outcome.remaining[0].fix is None
