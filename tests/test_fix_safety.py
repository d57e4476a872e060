"""A fix never breaks the program.

Every fix output — of every fixture, safe fixes alone and with unsafe ones, and
of every rule document's example — is checked with pyflakes against its
original: no new undefined or unbound name. The cases that can break (a
zeroing inserted into a Lightning module's class body, or before the loop that
creates the optimizer) and the other guards (moved bindings, duplicated
zeroing, unrelated lines, files LibCST cannot reproduce) have their own tests.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import libcst
import pytest

from accumlint.rules import docs
from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.fix.edits import insert_before, replace
from accumlint.check.fixes import fix_text
from accumlint.fix.guard import FixGuard, touches_only_edited_lines
from accumlint.rules.catalog import RULES

from namecheck import new_undefined_names
from silence import assert_silent, window_ks

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
        # the fixture's own path: a project fixture's findings depend on its neighbours
        fixed = _fix(original, unsafe=unsafe, path=_rel(fixture))
        added = new_undefined_names(original, fixed)
        assert not added, f"unsafe={unsafe}: the fix made {dict(added)} undefined:\n{fixed}"
    if kinds:  # a fresh check of the --fix --unsafe-fixes result: nothing fixable, nothing new
        unfixable = {d.code for d in before if d.fix is None}
        left = [d for d in analyze(fixed, _rel(fixture), OPTIONS) if d.fix is not None or d.code not in unfixable]
        assert not left, [(d.line, d.code) for d in left]
        # (which counts only while the model still finds the loops the findings were on)
        loops_before, loops_after = window_ks(original, _rel(fixture)), window_ks(fixed, _rel(fixture))
        assert len(loops_after) == len(loops_before), f"training loops modelled: {loops_before} -> {loops_after}"


def test_an_off_by_one_fix_that_would_leave_the_epoch_tail_erased_is_not_offered() -> None:
    """`(ni + 1) % K` over a counter that runs across epochs still loses each epoch's tail to
    a zeroing when the next epoch starts: GA106 is reported there without a fix, and offered
    with one where the gradients are zeroed once before the epochs."""
    erased = "fixtures/check/counters/bug_global_iter_off_by_one_epoch_zeroing.py"
    kept = "fixtures/check/counters/bug_derived_counter_off_by_one.py"
    found = {path: [d for d in analyze((REPO / path).read_text(encoding="utf-8"), path, OPTIONS)
                    if d.code == "GA106"] for path in (erased, kept)}
    assert len(found[erased]) == 1 and found[erased][0].fix is None
    assert len(found[kept]) == 1 and found[kept][0].fix is not None
    text = (REPO / erased).read_text(encoding="utf-8")
    assert _fix(text, path=erased) == text


def test_missing_scaling_on_a_padded_token_mean_is_reported_without_the_plain_division() -> None:
    """Dividing a padded token-mean loss by K would trade GA201 for GA206: the finding stays,
    without a fix; the same loss over fixed-length blocks gets the division."""
    padded = "fixtures/check/token_loss/bug_padded_token_mean_undivided.py"
    packed = "fixtures/check/token_loss/bug_packed_token_mean_undivided.py"
    found = {path: [d for d in analyze((REPO / path).read_text(encoding="utf-8"), path, OPTIONS)
                    if d.code == "GA201"] for path in (padded, packed)}
    assert len(found[padded]) == 1 and found[padded][0].fix is None
    assert len(found[packed]) == 1 and found[packed][0].fix is not None
    text = (REPO / padded).read_text(encoding="utf-8")
    assert _fix(text, path=padded) == text


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
    assert_silent(fixed, path="model.py", k="self.accumulate")


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



# GA101 where the zeroing names something the loop binds (or a function it may call
# does): zeroing once before the loop would read it before it exists, or zero an
# object the loop replaces. Each runs as it is, and must still run once fixed.
_TORCH_SETUP = """\
import torch

model = torch.nn.Linear(4, 1)
loader = [torch.randn(2, 4) for _ in range(8)]
"""


def _zeroing_every_micro_batch(
    header: str, creation: str, zeroed: str, call: str, indent: str = "    ", stepped: str = "", after_step: str = ""
) -> str:
    """`_TORCH_SETUP`, then `header` (a function's or class's lines down to the loop's
    indentation), a loop that runs `creation` first, zeroes `zeroed` on every micro-batch
    and steps `stepped` (the same by default) then runs `after_step`, and `call` to run it."""
    body = f"""\
for i, x in enumerate(loader):
{creation}    {zeroed}.zero_grad()
    loss = model(x).sum() / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        {stepped or zeroed}.step()
{after_step}"""
    return _TORCH_SETUP + "\n\n" + header + textwrap.indent(body, indent) + (f"\n\n{call}" if call else "")


def _moved_after_the_step(text: str) -> str:
    """`text` with its one zeroing line moved after its one step line, one level deeper."""
    lines = text.splitlines(keepends=True)
    zeroing = next(line for line in lines if ".zero_grad()" in line)
    lines.remove(zeroing)
    step = next(i for i, line in enumerate(lines) if ".step()" in line)
    indent = lines[step][: len(lines[step]) - len(lines[step].lstrip())]
    lines.insert(step + 1, indent + zeroing.lstrip())
    return "".join(lines)


CREATED_IN_THE_LOOP = {
    "global bound on the first batch": _zeroing_every_micro_batch(
        "def train(accum_steps=4):\n    global optimizer\n",
        "    if i == 0:\n        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "optimizer", "train()\n",
    ),
    "global bound on every batch": _zeroing_every_micro_batch(
        "def train(accum_steps=4):\n    global optimizer\n",
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "optimizer", "train()\n",
    ),
    "None before a lazy creation": _zeroing_every_micro_batch(
        "def train(accum_steps=4):\n    optimizer = None\n",
        "    if optimizer is None:\n        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "optimizer", "train()\n",
    ),
    "self attribute set in the loop": _zeroing_every_micro_batch(
        "class Trainer:\n    def train(self, accum_steps=4):\n",
        "    if i == 0:\n        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "self.opt", "Trainer().train()\n", indent="        ",
    ),
    "self attribute set by a method the loop calls": _zeroing_every_micro_batch(
        "class Trainer:\n    def __init__(self):\n        self.opt = None\n\n"
        "    def build(self):\n        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)\n\n"
        "    def train(self, accum_steps=4):\n",
        "    if self.opt is None:\n        self.build()\n",
        "self.opt", "Trainer().train()\n", indent="        ",
    ),
    "module-level loop": _zeroing_every_micro_batch(
        "accum_steps = 4\n",
        "    if i == 0:\n        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "optimizer", "", indent="",
    ),
}


def _run(text: str) -> None:
    exec(compile(text, "train.py", "exec"), {"__name__": "__main__"})


@pytest.mark.parametrize("name", CREATED_IN_THE_LOOP)
def test_no_zeroing_before_the_loop_reads_what_the_loop_binds(name: str) -> None:
    original = CREATED_IN_THE_LOOP[name]
    assert "GA101" in [d.code for d in analyze(original, "train.py")]
    fixed = _fix(original, unsafe=False)
    assert fixed == _moved_after_the_step(original)  # and nothing before the loop
    assert not new_undefined_names(original, fixed)
    pytest.importorskip("torch")
    _run(original)
    _run(fixed)


MODEL_ZEROED_BESIDE_THE_OPTIMIZER = _zeroing_every_micro_batch(
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n\n\ndef train(accum_steps=4):\n",
    "", "model", "train()\n", stepped="optimizer", after_step="        optimizer.zero_grad()\n",
)


def test_a_model_zeroing_is_not_added_beside_the_optimizers() -> None:
    original = MODEL_ZEROED_BESIDE_THE_OPTIMIZER
    safe = [d.code for d in analyze(original, "train.py") if d.fix is not None and d.fix.applicability == "safe"]
    assert safe == ["GA101"]
    in_loop = "enumerate(loader):\n        model.zero_grad()\n"
    # zeroed once before the loop, where nothing did; after the step by the optimizer's zeroing alone
    expected = original.replace(in_loop, "enumerate(loader):\n").replace(
        "    for i, x", "    model.zero_grad()\n    for i, x"
    )
    assert _fix(original, unsafe=False) == expected
    zeroed_before = original.replace("    for i, x", "    optimizer.zero_grad()\n    for i, x")
    assert _fix(zeroed_before, unsafe=False) == zeroed_before.replace(in_loop, "enumerate(loader):\n")
    pytest.importorskip("torch")
    _run(original)
    _run(expected)


def test_guard_judges_a_global_that_only_the_function_binds_by_its_flow() -> None:
    text = "def train(make):\n    global optimizer\n    for batch in make():\n        optimizer = make()\n"
    module = libcst.parse_module(text)
    loop = module.body[0].body.body[1]
    zero = libcst.parse_statement("optimizer.zero_grad()\n")
    refusal = FixGuard(module).refusal([insert_before(loop, zero)])
    assert refusal is not None and "`optimizer`" in refusal
    # bound at module level: looked up there, as any global
    bound = libcst.parse_module("optimizer = None\n\n\n" + text)
    assert FixGuard(bound).refusal([insert_before(bound.body[1].body.body[1], zero)]) is None


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


def test_a_lone_carriage_return_before_a_moved_line_keeps_both_line_breaks() -> None:
    """`zero_grad()\\r` then the backward (moved before the gate by GA103's fix) then an
    empty line: the fix must not leave `\\r\\n` (one line break as Python reads it) where
    there were two."""
    text = textwrap.dedent("""\
        import torch


        def train(model, loader, opt, K):
            opt.zero_grad()
            for i, (x, y) in enumerate(loader):
                loss = torch.nn.functional.mse_loss(model(x), y) / K
                if (i + 1) % K == 0:
                    opt.step()
                    opt.zero_grad()
                loss.backward()


        print("done")
    """)
    mixed = text.replace("opt.zero_grad()\n        loss", "opt.zero_grad()\r        loss")
    assert mixed.count("\r") == 1
    fixed = _fix(mixed)
    assert fixed != mixed
    assert fixed.replace("\r\n", "\n").replace("\r", "\n") == _fix(text)
    assert "\r\n" not in fixed


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 reads quotes nested in f-strings (PEP 701)")
def test_a_fix_that_only_libcst_can_read_is_never_written() -> None:
    """LibCST reads an f-string holding its own quote character; Python before 3.12 does not.
    The fixer checks the fixed text with the running Python's parser too, when that parser
    read the original."""
    from accumlint.check.fixes import _python_reads

    nested = 'print(f"loss {loss.item() * cfg["accum_steps"]}")\n'
    plain = 'print(f"loss {loss.item() * cfg[\'accum_steps\']}")\n'
    libcst.parse_module(nested)  # LibCST reads it
    with pytest.raises(Exception):
        _python_reads(nested, plain)
    _python_reads(plain, plain)
    # a file already written for Python 3.12 was never this interpreter's to read
    _python_reads(nested + plain, nested)
