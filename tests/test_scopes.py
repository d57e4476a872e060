"""One definition of a backward call, one model of scopes, one reading of imports.

The text gate (stage 1, raw text and Python's `ast`) and the loop model (stage 2,
LibCST) read the same table of backward forms (`accumlint.source.backward`): a
form added there is seen by both. The scope questions of the model, the rules and
the fix guard are answered by `accumlint.model.scopes`, and a module's import
bindings are read by `accumlint.model.facts.import_bindings` for the module facts
and for the project's summary of the analysed module alike.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Optional

import libcst as cst
import pytest

from accumlint.model import scopes
from accumlint.model.facts import collect_facts, import_bindings
from accumlint.model.roles import Objects, Role
from accumlint.project.summary import imports_and_configs, summarize
from accumlint.source import backward, gate


def _role_of_last_call(text: str) -> Optional[Role]:
    """What the model reads the text's last call statement (`x.backward()` alone on its line) as."""
    module = cst.parse_module(text)
    facts = collect_facts(module, text)
    statements = [call for call in facts.calls if type(facts.parents[id(call)]) is cst.Expr]
    return Objects(facts).role(statements[-1])


def _gate_keeps(text: str) -> tuple[bool, bool, bool]:
    """(the text stage, the text shortcut, the tree stage) of the gate."""
    return gate.might_hold_training_code(text), gate.plainly_holds_training_code(text), gate.screen(text, "x.py", plain=False)


def _with_forms(monkeypatch: pytest.MonkeyPatch, **changes) -> None:
    monkeypatch.setattr(backward, "BACKWARD", dataclasses.replace(backward.BACKWARD, **changes))


LOOP_CALL = "for b in loader:\n    model(b).backprop()\n"
COMPREHENSION_CALL = "[model(b).backprop() for b in loader]\n"  # not plain: stage two's tree decides


def test_a_method_added_to_the_table_is_a_backward_for_the_gate_and_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _gate_keeps(LOOP_CALL) == (False, False, False)
    assert _role_of_last_call(LOOP_CALL) is None
    _with_forms(monkeypatch, methods=backward.BACKWARD.methods | {"backprop"})
    assert _gate_keeps(LOOP_CALL) == (True, True, True)
    assert _gate_keeps(COMPREHENSION_CALL) == (True, False, True)
    role = _role_of_last_call(LOOP_CALL)
    assert role is not None and (role.kind, role.flavor) == ("backward", "tensor")


def test_an_own_receiver_added_to_the_table_is_no_backward_for_either(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "for b in loader:\n    cls.backward(b)\n"
    assert _gate_keeps(text) == (True, True, True)
    assert _role_of_last_call(text).kind == "backward"
    _with_forms(monkeypatch, own_method_receivers=backward.BACKWARD.own_method_receivers | {"cls"})
    assert _gate_keeps(text) == (True, False, False)
    assert _role_of_last_call(text) is None


def test_a_method_flavor_added_to_the_table_counts_on_any_receiver_for_both(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "for b in loader:\n    self.backprop(loss)\n"
    flavors = {**backward.BACKWARD.method_flavors, "backprop": "mine"}
    _with_forms(monkeypatch, methods=backward.BACKWARD.methods | {"backprop"})
    assert _gate_keeps(text) == (True, False, False)  # the class's own method
    assert _role_of_last_call(text) is None
    _with_forms(monkeypatch, methods=backward.BACKWARD.methods | {"backprop"}, method_flavors=flavors)
    assert _gate_keeps(text) == (True, True, True)
    role = _role_of_last_call(text)
    assert role is not None and (role.kind, role.flavor) == ("backward", "mine")


@pytest.mark.parametrize(
    ("text", "flavor"),
    [
        ("from accelerate import Accelerator\naccelerator = Accelerator()\nfor b in d:\n    accelerator.backward(loss)\n", "accelerate"),
        ("import deepspeed\nengine, *_ = deepspeed.initialize(model=m)\nfor b in d:\n    engine.backward(loss)\n", "deepspeed"),
        ("import torch\nfor b in d:\n    torch.autograd.backward(loss)\n", "autograd"),
        ("for b in d:\n    scaler.scale(loss).backward()\n", "tensor"),
        ("for b in d:\n    self.manual_backward(loss)\n", "lightning"),
    ],
)
def test_the_forms_of_the_table_are_kept_by_the_gate_and_flavored_by_the_model(text: str, flavor: str) -> None:
    assert _gate_keeps(text) == (True, True, True)
    role = _role_of_last_call(text)
    assert role is not None and (role.kind, role.flavor) == ("backward", flavor)


def test_the_project_summary_reads_backward_effects_from_the_table() -> None:
    text = "class T:\n    def back(self):\n        self.backward(1)\n\n    def fit(self):\n        loss.backward()\n"
    effects = {name: function.effects for name, function in summarize("t.py", text).functions.items()}
    assert effects == {"T.back": frozenset(), "T.fit": frozenset({"backward"})}


# -- one model of scopes -------------------------------------------------------------


def test_subscript_and_attribute_targets_bind_no_name_in_scope_questions() -> None:
    module = cst.parse_module(textwrap.dedent("""
        import a.b as c, d.e
        table[key] = 1
        obj.attr, plain = 1, 2
        def f(x):
            counts[step] += 1
            with open(p) as (h, self.g):
                pass
    """))
    assert scopes.module_names(module) == {"c", "d", "plain", "f"}
    assert scopes.local_names(module.body[-1]) == {"x", "h"}


def test_what_code_binds_as_chains_and_what_its_targets_may_rebind() -> None:
    """`chains_bound` gives each target as written (a counter moved by unpacking counts);
    `chains_in_targets` gives the chain each target writes (a subscript target writes its
    container), not the objects the chain starts from: `self.global_step += 1` leaves
    `self.args` as it was."""
    statement = cst.parse_module("step, self.seen[i] = step + 1, True\n").body[0]
    assert scopes.chains_bound(statement) == {"step", "self.seen[]"}
    assert scopes.chains_in_targets(statement) == {"step", "self.seen"}
    counter = cst.parse_module("self.global_step += 1\n").body[0]
    assert scopes.chains_in_targets(counter) == {"self.global_step"}
    item = cst.parse_module("self.layers[0].scale = 1\n").body[0]
    assert scopes.chains_in_targets(item) == {"self.layers[].scale"}
    plain = cst.parse_module("total = step * 2\n").body[0]
    assert scopes.chains_bound(plain) == scopes.chains_in_targets(plain) == {"total"}
    read_only = cst.parse_module("log(step, self.seen[i])\n").body[0]
    assert scopes.chains_bound(read_only) == scopes.chains_in_targets(read_only) == set()


def test_the_scope_questions_and_the_guard_read_locals_as_python_does() -> None:
    module = cst.parse_module(textwrap.dedent("""
        ks = [k for k in range(3)]
        def f(a, *rest, b=1, **options):
            global g
            g = [y for y in a]
            if (total := len(a)):
                pass
            def inner():
                hidden = 1
    """))
    assert scopes.module_names(module) == {"ks", "f"}
    assert scopes.local_names(module.body[-1]) == {"a", "rest", "b", "options", "total", "inner"}


@pytest.mark.parametrize(
    ("source", "unbound"),
    [
        # a comprehension's variable is its own: the function's later read is the module's `x`
        ("x = 1\ndef f(xs):\n    ys = [x for x in xs]\n    return x\n", {}),
        # and it binds nothing at module level: this read raises NameError
        ("ks = [k for k in range(3)]\ndef f():\n    return k\n", {("<module>.f", "k"): 1}),
    ],
)
def test_the_guard_reads_comprehension_variables_as_their_own(source: str, unbound: dict) -> None:
    assert dict(scopes.unbound_reads(cst.parse_module(source))) == unbound


def test_k_is_in_scope_in_a_nested_function_through_its_enclosing_method() -> None:
    text = textwrap.dedent("""
        class Loop:
            def fit(self, steps):
                self.k = steps
                def inner():
                    for b in loader:
                        pass
                inner()
    """)
    module = cst.parse_module(text)
    facts = collect_facts(module, text)
    loop = facts.loops[0].node
    assert scopes.in_scope(facts, cst.parse_expression("steps"), loop)
    assert scopes.in_scope(facts, cst.parse_expression("self.k"), loop)
    assert not scopes.in_scope(facts, cst.parse_expression("other"), loop)


# -- one reading of imports ----------------------------------------------------------


IMPORTS = "import a.b\nimport a.b as c\nimport torch\nfrom ..pkg.mod import x as y, z\nfrom . import w\nfrom m import *\n"


def test_import_bindings_read_each_form() -> None:
    module = cst.parse_module(IMPORTS)
    read = [(b.local, b.module, b.name, b.level, b.keeps_earlier, b.qualified)
            for statement in module.body for b in import_bindings(statement.body[0])]
    assert read == [
        ("a", "a", None, 0, True, "a"),
        ("c", "a.b", None, 0, False, "a.b"),
        ("torch", "torch", None, 0, True, "torch"),
        ("y", "pkg.mod", "x", 2, False, "pkg.mod.x"),
        ("z", "pkg.mod", "z", 2, False, "pkg.mod.z"),
        ("w", "", "w", 1, False, "w"),
    ]


def test_the_module_facts_and_the_analysed_modules_summary_read_imports_alike() -> None:
    module = cst.parse_module(IMPORTS)
    facts = collect_facts(module, IMPORTS)
    summary = imports_and_configs("t.py", IMPORTS, module)
    assert summary.imports == {name: imported for name, imported in summarize("t.py", IMPORTS).imports.items()}
    # the summary also records `from m import *` (under a key no name can take), so that a
    # change to `m` re-checks this module; the module facts bind no name for it
    assert {name for name in summary.imports if not name.startswith("*")} == set(facts.imports) == {
        "a", "c", "torch", "y", "z", "w"}
    assert summary.imports["*m"] == ("m", "*", 0)
    assert {"a": "a", "c": "a.b", "y": "pkg.mod.x", "w": "w"}.items() <= facts.imports.items()
    assert scopes.module_names(module) == set(facts.imports)


def test_a_function_that_binds_a_name_reads_its_own_bindings_of_it() -> None:
    text = textwrap.dedent("""\
        import torch.nn as nn
        from losses import WindowedCrossEntropy
        criterion = nn.L1Loss()

        def train_accumulated(k):
            criterion = WindowedCrossEntropy(k)
            return criterion

        def finetune_head():
            criterion = nn.CrossEntropyLoss()
            return criterion

        def evaluate():
            return criterion
        """)
    module = cst.parse_module(text)
    facts = collect_facts(module, text)
    functions = {f.name.value: f for f in module.body if type(f) is cst.FunctionDef}

    def values(function: Optional[str]) -> list[str]:
        within = functions[function] if function is not None else None
        return [module.code_for_node(b.value) for b in facts.values_in("criterion", within)]

    assert values("train_accumulated") == ["WindowedCrossEntropy(k)"]
    assert values("finetune_head") == ["nn.CrossEntropyLoss()"]
    # a function that does not bind the name reads every binding (the module's among them)
    assert len(values("evaluate")) == 3
    assert len(values(None)) == 3


def _target(statement: str) -> cst.BaseAssignTargetExpression:
    small = cst.parse_statement(statement)
    assert type(small) is cst.SimpleStatementLine and type(small.body[0]) is cst.Assign
    return small.body[0].targets[0].target


@pytest.mark.parametrize(
    "statement, bound",
    [
        ("a, (self.b, *c) = f()", {"a", "self.b", "c"}),
        ("[loss, aux] = model(x)", {"loss", "aux"}),
        ("self.loss = 0", {"self.loss"}),
        ("losses[i] = loss", {"losses[]"}),  # an item of the list, as `dotted` writes it
        ("x, (y + 1).z = g()", {"x"}),  # no chain names the second target
    ],
)
def test_target_chains_are_what_one_assignment_target_binds(statement: str, bound: set[str]) -> None:
    assert scopes.target_chains(_target(statement)) == bound
