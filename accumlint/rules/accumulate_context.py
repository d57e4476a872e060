"""`accelerator.accumulate()` used wrongly: without K (GA108), or entered twice per iteration (GA404)."""

from __future__ import annotations

from typing import Iterable, Optional, cast

import libcst as cst

from accumlint.fix.edits import Edit, replace
from accumlint.model.build import ModuleModel
from accumlint.model.frameworks import carries_k
from accumlint.model.loop import Statement
from accumlint.model.names import call_name, code, dotted, last_part
from accumlint.model.scopes import in_scope
from accumlint.model.window import Window
from accumlint.rules.base import Finding
from accumlint.rules.catalog import Rule


def repeated_accumulate_context(window: Window) -> Iterable[Finding]:
    """Two `accumulate(...)` entries on one Accelerator in one iteration (two items of one
    `with`, nested, or one after the other, never in exclusive arms)."""
    if window.accumulate_k is None:
        return
    entries = _accumulate_entries(window)
    for index, (call, statement) in enumerate(entries):
        owner = dotted(cast(cst.Attribute, call.func).value)
        earlier = next((
            first for first, first_statement in entries[:index]
            if dotted(cast(cst.Attribute, first.func).value) == owner and not first_statement.exclusive_with(statement)
        ), None)
        if earlier is None:
            continue
        yield Finding(
            call,
            f"`{owner}.accumulate(...)` is entered a second time in this iteration ({{related}})",
            related=earlier,
            help="each entry advances accelerate's micro-batch counter, so windows close after K/2 "
            f"micro-batches while the loss is still divided by K; pass every model to one "
            f"`{owner}.accumulate({', '.join(_models(entries, owner))})`",
        )


def _accumulate_entries(window: Window) -> list[tuple[cst.Call, Statement]]:
    """Each `accelerator.accumulate(...)` item of the iteration once, with the first
    statement it holds (a `with` around several statements is one entry)."""
    entries: list[tuple[cst.Call, Statement]] = []
    seen: set[int] = set()
    for statement in window.loop.statements:
        for item in statement.withs:
            call = window.objects.frameworks.accumulate_of(item)
            if id(item) not in seen and call is not None and window.objects.frameworks.is_written_accumulate(call):
                seen.add(id(item))
                entries.append((call, statement))
    return entries


def _models(entries: list[tuple[cst.Call, Statement]], owner: Optional[str]) -> list[str]:
    models: list[str] = []
    for call, _ in entries:
        if dotted(cast(cst.Attribute, call.func).value) == owner:
            models.extend(code(arg.value) for arg in call.args if code(arg.value) not in models)
    return models


def framework_scales_without_windows(window: Window) -> Iterable[Finding]:
    """GA111: `accelerator.backward` on an Accelerator with K > 1, with no `accumulate()`
    and no gate around the step: every loss is divided by K, every micro-batch steps."""
    backward = window.unwindowed_framework_backward
    if backward is None:
        return
    owner = cast(cst.Attribute, cast(cst.Call, backward.role.call).func).value
    info = window.objects.accelerator(owner)
    assert info is not None and info.steps is not None
    yield Finding(
        backward.role.call,
        f"`{code(owner)}` divides every loss by `{code(info.steps)}`, but no `accumulate()` or gate "
        "holds the optimizer step back",
        _wrap_in_accumulate(window, owner),
        f"Wrap the loop body in `with {code(owner)}.accumulate(model):`",
        help=f"the optimizer steps on every micro-batch with 1/{code(info.steps)} of its gradient: nothing "
        f"accumulates; `with {code(owner)}.accumulate(model):` makes the prepared optimizer step once per window",
    )


def _wrap_in_accumulate(window: Window, owner: cst.BaseExpression) -> tuple[Edit, ...]:
    """The loop's whole body under `with accelerator.accumulate(<model>):`, when the body
    is an indented block and the prepared model is known."""
    if type(window.loop.node) not in (cst.For, cst.While):
        return ()
    body = window.loop.node.body
    model = window.objects.wrapped_model
    if type(body) is not cst.IndentedBlock or model is None or not body.body:
        return ()
    if window.objects.frameworks.wrapper(model) is None:
        return ()
    first, rest = body.body[0], body.body[1:]
    block = cst.IndentedBlock(body=[first.with_changes(leading_lines=()), *rest])
    item = cst.WithItem(cst.parse_expression(f"{code(owner)}.accumulate({model})"))
    first_lines = cast("cst.SimpleStatementLine | cst.BaseCompoundStatement", first).leading_lines
    with_node = cst.With(items=[item], body=block, leading_lines=first_lines)
    return (replace(body, body.with_changes(body=[with_node])),)


REPEATED_ACCUMULATE_CONTEXT = Rule(
    code="GA404",
    name="repeated-accumulate-context",
    fix="none",
    summary="One iteration enters `accelerator.accumulate()` twice, so windows close after K/2 micro-batches.",
    check=repeated_accumulate_context,
)

FRAMEWORK_SCALES_WITHOUT_WINDOWS = Rule(
    code="GA111",
    name="framework-scales-without-windows",
    fix="unsafe",
    summary="accelerate divides every loss by K, but no `accumulate()` or gate holds the step back.",
    any_loop=True,
    check=framework_scales_without_windows,
)


def accumulate_without_steps(model: ModuleModel) -> Iterable[Finding]:
    """GA108: `accumulate()` on an Accelerator built in the module without K, in a module
    that divides the loss by an accumulation count or gates on one."""
    k = _module_k(model)
    if k is None:
        return
    facts = model.facts
    for window in model.windows:
        for call, _ in _accumulate_entries(window):
            owner = dotted(cast(cst.Attribute, call.func).value)
            constructors = _constructors(model, owner)
            if not constructors or any(carries_k(facts, c) for c in constructors):
                continue
            if facts.bindings.get(f"{owner}.gradient_accumulation_steps"):
                continue
            info = window.objects.accelerator(cast(cst.Attribute, call.func).value)
            if info is not None and info.steps is not None:
                continue  # K from a DeepSpeed configuration the module names (its launcher's)
            edits: tuple[Edit, ...] = ()
            if len(constructors) == 1 and in_scope(facts, k, constructors[0]):
                edits = (replace(constructors[0], _with_steps(constructors[0], k)),)
            yield Finding(
                call,
                f"`{owner}` was built without `gradient_accumulation_steps` ({{related}}), so "
                "`accumulate()` syncs and steps on every micro-batch",
                edits,
                f"Pass `gradient_accumulation_steps={code(k)}` to the Accelerator",
                related=constructors[0],
                help=f"the loss is divided by (or gated on) `{code(k)}`, but accelerate only accumulates "
                f"when it knows K; build it with `Accelerator(gradient_accumulation_steps={code(k)})`",
            )


def _module_k(model: ModuleModel) -> Optional[cst.BaseExpression]:
    """The accumulation count the module divides the loss by or gates on."""
    for window in model.windows:
        for gate in window.loop.gates:
            if gate.k is not None and window.is_accumulation_name(gate.k):
                return gate.k
        for flow in window.flows:
            for scaling in flow.scalings:
                if scaling.op == "div" and window.is_accumulation_name(scaling.factor):
                    return scaling.factor
    return None


def _constructors(model: ModuleModel, owner: Optional[str]) -> list[cst.Call]:
    return [
        binding.value for binding in model.facts.values_of(owner)
        if type(binding.value) is cst.Call and last_part(call_name(binding.value) or "") == "Accelerator"
    ]


def _with_steps(call: cst.Call, k: cst.BaseExpression) -> cst.Call:
    """`Accelerator(...)` with `gradient_accumulation_steps=K` appended in the call's own layout."""
    new = cst.Arg(
        keyword=cst.Name("gradient_accumulation_steps"),
        value=k.with_changes(lpar=[], rpar=[]) if type(k) in (cst.Name, cst.Attribute) else k,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if type(last.comma) is cst.Comma:  # a trailing comma: one argument per line
        new = new.with_changes(comma=last.comma)
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=call.whitespace_before_args))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, new])


ACCUMULATE_WITHOUT_STEPS = Rule(
    code="GA108",
    name="accumulate-without-steps",
    fix="unsafe",
    summary="`accelerator.accumulate()` on an Accelerator built without `gradient_accumulation_steps`.",
    module_check=accumulate_without_steps,
)
