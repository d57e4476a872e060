"""Stage two of the gate (Python's `ast`, before LibCST): what it keeps, what it drops, what it tells.

The gate may only drop files no rule can report on: every fixture with an
expected finding and every rule document's example must pass both stages.
"""

from __future__ import annotations

import ast
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from accumlint.rules import docs
from accumlint.compat import speedups_allowed
from accumlint.compat.compile_budget import budget_bounds_compile
from accumlint.source import gate
from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.check.fixes import fix_text
from accumlint.source.gate import (
    MAX_NESTING,
    ParseFailure,
    Unanalysable,
    might_hold_training_code,
    nesting,
    plainly_holds_training_code,
    screen,
    text_stage,
)
from accumlint.rules.catalog import RULES

from fuzzing import mutated_fixtures

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _passes(text: str, path: str = "example.py") -> bool:
    """The engine's gate: the text's, or its project clauses: a loop whose backward runs
    in a helper of another project module (`accumlint.project.reach`), or a helper module
    whose findings the loops of its importers make (`findings_from_importers`)."""
    from accumlint.check.analysis import findings_from_importers
    from accumlint.project.reach import loop_reaches_project_backward

    if might_hold_training_code(text) and screen(text, path):
        return True
    if loop_reaches_project_backward(path, text):
        return screen(text, path, gate=False)
    return bool(findings_from_importers(text, path).diagnostics)


def _fixtures_with_findings() -> list[Path]:
    return sorted(
        path for path in FIXTURES.rglob("*.py")
        if not path.name.endswith(".fixed.py") and path.with_suffix(".expect").read_text().strip()
    )


def test_every_fixture_with_an_expected_finding_passes_the_gate():
    fixtures = _fixtures_with_findings()
    assert len(fixtures) > 50
    dropped = [str(path.relative_to(FIXTURES)) for path in fixtures if not _passes(path.read_text(), str(path))]
    assert dropped == []


@settings(max_examples=80, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(mutated_fixtures())
def test_the_gate_keeps_every_mutated_fixture_that_has_findings(text):
    """The gate against the loop model itself: lines deleted, swapped, duplicated and
    spliced from other fixtures, mistakes spliced in; whatever LibCST's analysis reports
    on, both stages keep (or report as a syntax error)."""
    try:
        found = analyze(text, "mutated.py")
    except (ParseFailure, Unanalysable):
        return
    if not found:
        return
    assert might_hold_training_code(text)
    try:
        assert screen(text, "mutated.py")
    except (ParseFailure, Unanalysable):
        pass  # reported as a syntax (or internal) error: not silently dropped


@pytest.mark.parametrize("code", [rule.code for rule in RULES])
def test_every_rule_example_passes_the_gate(code):
    assert _passes(docs.rule_examples(code).invalid)


@pytest.mark.parametrize(
    "source",
    [
        # a turtle's backward: a function of the module, not a method of a tensor
        "from turtle import backward\nfor i in range(4):\n    backward(100)\n",
        "loss = compute_loss(batch)\n",
        # a backward in a docstring or a comment (a library's documentation)
        '"""Call loss.backward() to train."""\nfor x in range(3):\n    print(x)\n',
        "for x in range(3):\n    print(x)  # then loss.backward()\n",
        "def f(x):\n    r\'\'\'Example:\n\n    >>> y = f(x)\n    >>> y.sum().backward()\n    \'\'\'\n",
        "s = 'loss.backward()' + \"it's loss.backward()\"\n",
    ],
)
def test_the_text_stage_drops_files_without_a_backward_method_call(source):
    assert not might_hold_training_code(source)


@pytest.mark.parametrize(
    "source",
    [
        # a test method with a backward but no loop, helper chain or framework hook
        "class T:\n    def test_grad(self):\n        out = f(x)\n        out.backward()\n        assert x.grad is not None\n",
        # the class's own `backward` method (a turtle's, an autograd Function's), as the loop model reads it
        "class Turtle:\n    def square(self):\n        for _ in range(4):\n            self.backward(10)\n",
        "class Pen(Turtle):\n    def back(self, n):\n        for _ in range(n):\n            super().backward(1)\n",
        "for b in loader:\n    super(Wrapper, self).backward(b)\n",
        # a backward after a loop, in a function no loop calls: the loop model reads a window
        # only around a backward that runs in a loop (GA110's dedented backward sits in an outer loop)
        "def train_step(batches):\n    for b in batches:\n        loss = model(b)\n    loss.backward()\n",
        # a backward in a function whose name no loop mentions
        "def check(x):\n    x.sum().backward()\n\nfor case in cases:\n    print(case)\n",
    ],
)
def test_files_without_training_code_are_dropped(source):
    assert might_hold_training_code(source) and not screen(source, "x.py")


@pytest.mark.parametrize(
    "source",
    [
        "for batch in loader:\n    model(batch).backward()\n",
        # the backward in a helper that a loop calls (one level further too), or passes as a closure
        "def step(b):\n    loss(b).backward()\n\ndef train():\n    for b in loader:\n        step(b)\n",
        "def inner(b):\n    loss(b).backward()\n\ndef step(b):\n    inner(b)\n\nfor b in loader:\n    step(b)\n",
        "def closure():\n    loss().backward()\n\nfor b in loader:\n    opt.step(closure)\n",
        # framework hooks: the framework runs the loop
        "class M(LightningModule):\n    def training_step(self, batch, i):\n        return self(batch)\n",
        "class T(Trainer):\n    def compute_loss(self, model, inputs):\n        return model(**inputs).loss\n",
        "trainer = Trainer(accumulate_grad_batches=4)  # backward(\n",
        # shapes the text points at only loosely: a call split over lines, one-line
        # compound statements, comprehensions, decorators, handlers, a helper named `backward`
        "for b in loader:\n    loss = (\n        model(b)\n        .backward()\n    )\n",
        "for b in loader: model(b).backward()\n",
        "for b in loader:\n    if b: model(b).backward(); opt.step()\n",
        "[model(b).backward() for b in loader]\n",
        "def run(b):\n    return [l.backward() for l in model(b)]\n",
        "def backward(loss):\n    loss.backward()\n\nfor b in loader:\n    backward(model(b))\n",
        "class T:\n    def step(self, b):\n        model(b).backward()\n\n    def fit(self):\n        while True:\n            self.step(next(it))\n",
        "try:\n    pass\nexcept E:\n    for b in loader:\n        model(b).backward()\n",
        "match cmd:\n    case 'train':\n        for b in loader:\n            model(b).backward()\n",
        "def train(b):\n    model(b).backward()\n\nbatches = {b: train(b) for b in loader}\n",
        "for b in loader:\n    @hook(model(b).backward())\n    def f():\n        pass\n",
        "with accelerator.accumulate(model):\n    out = model(b)\n\ndef helper(l):\n    l.backward()\n",
        # a Lightning module's own forward, then the tensor's backward
        "class M(Module):\n    def fit(self, loader):\n        for b in loader:\n            self(b).backward()\n",
    ],
)
def test_training_shapes_are_kept(source):
    assert _passes(source)


@pytest.mark.parametrize(
    "source",
    [
        # code among literals: after a string holding a '#' or escaped quotes, inside f-string braces
        "x = '# not a comment'; loss.backward()\n",
        "x = 'it\\'s'; y = \"\\\"\"; loss.backward()\n",
        'x = """a \\""" still a string """\nloss.backward()\n',
        "print(f'{loss.backward()}')\n",
        "if'a' in x: loss.backward()\n",
        # a string the scan cannot close: it does not decide, the code counts
        "x = 'never closed\nloss2.backward()  # 'comment\n",
    ],
)
def test_the_text_stage_keeps_backward_calls_in_code(source):
    assert might_hold_training_code(source)




def test_syntax_errors_carry_cpythons_position():
    with pytest.raises(ParseFailure) as caught:
        screen("for b in loader:\n    b.backward()\nx = 'never closed\n", "x.py")
    assert (caught.value.line, caught.value.column) == (3, 5)
    assert "unterminated string literal" in caught.value.message
    with pytest.raises(ParseFailure) as caught:  # the compiler's errors, for files it keeps
        screen("for b in loader:\n    b.backward()\nreturn 3\n", "x.py")
    assert (caught.value.line, caught.value.message) == (3, "'return' outside function")


def _reference_depth(node: ast.AST) -> int:
    step = len(node.values) if isinstance(node, ast.BoolOp) else 1
    return max((step + _reference_depth(child) for child in ast.iter_child_nodes(node)), default=0)


def test_the_checked_files_warnings_are_not_printed():
    """CPython warns about `is not "0"` and invalid escapes while it compiles; a linter must not."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert screen('for b in loader:\n    b.backward()\n    if b is not "0":\n        p = "\\d"\n', "x.py")
    assert caught == []


def test_nesting_is_the_depth_of_pythons_tree():
    texts = [path.read_text() for path in sorted(FIXTURES.rglob("*.py"))[::7]]
    texts += ["x = a and b and c\n", "f(a)(b)[c].d.e = -(+(~g))\n", "del x, y[0]\n", "[*a] = b\n"]
    for text in texts:
        tree = ast.parse(text)
        assert nesting(tree) == _reference_depth(tree), text[:80]


def test_nesting_beyond_the_bound_is_refused_before_libcst():
    chain = " and ".join(["a"] * (MAX_NESTING + 10))
    with pytest.raises(Unanalysable, match="nested too deeply"):
        screen(f"for b in loader:\n    b.backward()\nx = {chain}\n", "x.py")
    # the same chain in a file without training code costs nothing: it is dropped
    assert screen(f"x = {chain}\n", "x.py") is False


# A loop written for Python 3.12: the f-string reuses its quote (PEP 701).
_PEP_701_LOOP = textwrap.dedent('''\
    import torch
    import torch.nn.functional as F

    ACCUM = 4


    def train(model, loader, cfg):
        opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if (step + 1) % ACCUM == 0:
                opt.step()
                opt.zero_grad()
                print(f"step {step} loss {cfg["name"]}")
''')


def test_a_file_for_a_newer_python_is_analysed_not_a_syntax_error():
    """On any interpreter, a file that only Python 3.12 and later read is checked as that
    Python reads it (LibCST reads it too); a broken f-string stays a syntax error."""
    assert screen(_PEP_701_LOOP, "x.py") is True
    assert {d.code for d in analyze(_PEP_701_LOOP, "train.py")} == {"GA201"}
    fixed = fix_text(_PEP_701_LOOP, "train.py", AnalysisOptions(), unsafe=True).text
    assert "(loss / ACCUM).backward()" in fixed and 'cfg["name"]' in fixed
    with pytest.raises(ParseFailure):
        screen(_PEP_701_LOOP.replace('cfg["name"]}', 'cfg["name"]'), "x.py")


# A loop whose module uses Python 3.12's type parameters (PEP 695).
_PEP_695_LOOP = textwrap.dedent('''\
    import torch
    import torch.nn.functional as F

    type Batch = tuple[torch.Tensor, torch.Tensor]


    def first[T](items: list[T]) -> T:
        return items[0]


    def train(model, loader, accum):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if (step + 1) % accum == 0:
                opt.step()
                opt.zero_grad()
''')


def test_a_file_with_type_parameters_is_analysed_not_a_syntax_error():
    """`type Alias = ...` and `def first[T](...)` are Python 3.12 (PEP 695): on an older
    interpreter the file is checked as LibCST reads it; a broken one stays a syntax error."""
    import libcst

    try:
        libcst.parse_module("type X = int\n")
    except libcst.ParserSyntaxError:
        pytest.skip("this LibCST does not read PEP 695")
    assert screen(_PEP_695_LOOP, "x.py") is True
    assert {d.code for d in analyze(_PEP_695_LOOP, "train.py")} == {"GA201"}
    with pytest.raises(ParseFailure):
        screen(_PEP_695_LOOP.replace("def first[T](items", "def first[T](items,,"), "x.py")


def test_no_prefilter_still_checks_syntax_but_keeps_every_file():
    assert screen("x = 1\n", "x.py", gate=False) is True
    with pytest.raises(ParseFailure):
        screen("x = (\n", "x.py", gate=False)


def test_the_gate_never_imports_libcst():
    import subprocess
    import sys

    code = textwrap.dedent(
        """
        import sys
        from accumlint.source.gate import screen
        screen("for b in c:\\n    b.backward()\\n", "x.py")
        print("libcst" in sys.modules)
        """
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


# -- the shortcut: texts that plainly hold a loop skip Python's tree ------------------


@pytest.mark.parametrize(
    "source",
    [
        "for batch in loader:\n    model(batch).backward()\n",
        "def train():\n    while True:  # until stopped\n\n        # one micro-batch\n        loss.backward()\n",
        "async def train():\n    async for b in stream:\n        if b:\n            model(b).backward()\n",
        "for b in loader:\n    self.manual_backward(loss)\n",  # Lightning's, whatever the receiver
        "class M(LightningModule):\n    def training_step(self, batch, i):\n        return self(batch)\n",
        "class T(Trainer):\n    async def compute_loss(self, model, inputs):\n        return 0\n",
        "with accelerator.accumulate(model):\n    out = model(b)\n",
        "trainer = Trainer(accumulate_grad_batches=4)\n",
    ],
)
def test_the_text_plainly_shows_a_loop(source):
    assert plainly_holds_training_code(source)
    assert screen(source, "x.py")


@pytest.mark.parametrize(
    "source",
    [
        "def check(x):\n    x.sum().backward()\n",  # no loop header above it
        "for b in loader:\n    pass\ny.backward()\n",  # after the loop, not in it
        "for b in loader:\n    self.backward(b)\n",  # the class's own method
        "for b in loader:\n    super(Wrapper, self).backward(b)\n",
        "for b in loader:\n    x = '''\n    loss.backward()'''\n",  # in a string
        "for b in range(\n        4):\n    loss.backward()\n",  # a header over two lines: not plain
        "def f():\n    # for b in loader:\n        loss.backward()\n",  # a header in a comment
        "[model(b).backward() for b in loader]\n",  # stage two reads comprehensions
        "x = training_step_count\n",
    ],
)
def test_the_text_does_not_plainly_show_a_loop(source):
    assert not plainly_holds_training_code(source)


def _verdict(text: str) -> object:
    try:
        return screen(text, "x.py")
    except (ParseFailure, Unanalysable) as error:
        return type(error).__name__, getattr(error, "line", None), getattr(error, "column", None), error.message


def _deep_texts() -> list[str]:
    """Valid and invalid texts around the shortcut's bound (chains, brackets, blocks,
    keyword calls, boolean chains), each inside a training loop."""
    head = "for b in loader:\n    b.backward()\n"
    shapes = [
        lambda n: "x = " + " + ".join(["a"] * n),
        lambda n: "x = a" + ".b" * n,
        lambda n: "x = " + "f(k=" * n + "1" + ")" * min(n, 150),
        lambda n: "x = " + "lambda: " * n + "0",
        lambda n: "x = " + "(a and " * n + "b" + ")" * n,
        lambda n: "x = " + " or ".join(["a"] * n),
        lambda n: "".join("    " * i + "if a:\n" for i in range(min(n, 99))) + "    " * min(n, 99) + "pass",
        lambda n: "def f():\n    return " + "-" * n + "a",
    ]
    return [head + shape(n) + "\n" for shape in shapes for n in (5, 40, 48, 120, 160, 300, 1000)]


_BOUND_PROBE = """
import ast, json, sys
sys.path.insert(0, sys.argv[1])
from test_gate import _deep_texts
from accumlint.source import gate
from accumlint.compat.compile_budget import budget_bounds_compile
assert budget_bounds_compile()
found = []
for text in _deep_texts():
    if gate._compiles_within_bound(text, "x.py"):
        found.append([gate.nesting(ast.parse(text)), len(gate._BOOLEAN_OPERATORS.findall(text))])
    else:
        found.append(None)
print(json.dumps(found))
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12's compiler has a C-stack limit of its own")
@pytest.mark.skipif(not speedups_allowed(), reason="ACCUMLINT_NO_SPEEDUPS is set: the shortcut is off")
def test_a_passing_compile_bounds_the_nesting():
    """What the shortcut relies on: when its compile passes, Python's tree nests no deeper
    than the bound it computes; each shape is both taken and refused at some depth. Run
    in a fresh interpreter, as shallow as the check's own (pytest's calls use up part of
    the recursion budget, which only makes the shortcut rarer)."""
    import json
    import subprocess

    run = subprocess.run(
        [sys.executable, "-c", _BOUND_PROBE, str(Path(__file__).parent)], capture_output=True, text=True, check=True
    )
    found = json.loads(run.stdout)
    taken = [depths for depths in found if depths is not None]
    for depth, booleans in taken:
        assert depth <= gate._NESTING_WITHIN_BUDGET + booleans <= MAX_NESTING
    assert len(taken) >= 12 and len(found) - len(taken) >= 12
    assert max(depth - booleans for depth, booleans in taken) > gate._NESTING_WITHIN_BUDGET // 2  # near the bound


def test_the_boolean_operators_are_counted_exactly_or_overcounted():
    """The shortcut's bound needs at least as many as the text holds; the letters' count
    over-counts (`torch`, `random`) and is replaced by the words' count past what is enough."""
    words = "torch.random(x) and y or z\n"
    assert gate._boolean_operators(words, 100) == 4 >= len(gate._BOOLEAN_OPERATORS.findall(words))
    assert gate._boolean_operators("torch " * 50 + "a and b\n", 10) == 1


def test_the_shortcut_and_stage_two_tell_every_file_the_same(monkeypatch):
    """A file's verdict (kept, dropped, its syntax error and position, its refusal) does
    not depend on the way it went: the fixtures, deep code, and broken code."""
    texts = [path.read_text() for path in sorted(FIXTURES.rglob("*.py"))]
    texts += _deep_texts()
    texts += [
        "for b in loader:\n    b.backward()\nreturn 3\n",
        "for b in loader:\n    b.backward()\nx = (\n",
        "for b in loader:\n    b.backward()\nx = " + "(" * 300 + ")" * 300 + "\n",
        "for b in loader:\n    b.backward()\n    nonlocal q\n",
        "for b in loader:\n    b.backward()\nx = 'a\0'\n",
    ]
    shortcut = [_verdict(text) for text in texts]
    monkeypatch.setattr(gate, "plainly_holds_training_code", lambda text: False)
    assert [_verdict(text) for text in texts] == shortcut


def test_the_shortcut_is_not_taken_beside_another_thread():
    """The recursion limit is the interpreter's: lowered, it would trip another thread."""
    text = "for b in loader:\n    b.backward()\n"
    assert gate._compiles_within_bound(text, "x.py") == budget_bounds_compile()
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not gate._compiles_within_bound(text, "x.py")
        assert screen(text, "x.py")
    finally:
        release.set()
        other.join()


def test_the_text_stage_is_stage_one_and_the_shortcut_in_one():
    texts = [path.read_text() for path in sorted(FIXTURES.rglob("*.py"))]
    texts += ["x = 1\n", "for b in c:\n    self.backward(b)\n", "trainer = Trainer(accumulate_grad_batches=2)\n"]
    verdicts = [text_stage(text) for text in texts]
    assert verdicts == [plainly_holds_training_code(t) if might_hold_training_code(t) else None for t in texts]
    assert {True, False, None} <= set(verdicts)
