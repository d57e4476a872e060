"""GA4xx: distributed data parallel and frameworks that accumulate by themselves."""

from __future__ import annotations

from typing import Iterable, Optional, Sequence, cast

import libcst as cst

from accumlint.fix.edits import Edit, filled_expression, insert_after, insert_before, parenthesized, remove, replace
from accumlint.model.gates import Gate
from accumlint.model.loop import Event
from accumlint.model.names import code, dotted
from accumlint.model.scopes import chains_in_targets
from accumlint.model.window import Window
from accumlint.model.tree import walk
from accumlint.rules.base import Finding, contains
from accumlint.rules.catalog import Rule

_REPORTED_WRAPS = ("ddp", "apex", "accelerate", "fabric")


def sync_every_micro_batch(window: Window) -> Iterable[Finding]:
    if not (window.gated_step or window.has_micro_loop or window.steps_after_loop) or window.uses_accumulate_context \
            or window.deepspeed:
        return
    model = window.wrapped_model
    kind = window.objects.frameworks.parallel_kind(model)
    if model is None or kind not in _REPORTED_WRAPS or window.controls_sync or not window.mentions(model):
        return
    if not window.wraps_here(model) or window.bypasses_wrap(model) or not window.loop.backwards:
        return
    backward = window.backward_of(model)
    if backward is None or not backward.role.backpropagates_here:
        return
    # each backward in an exclusive arm (`try:` / `except:`, `if amp:` / `else:`) is its own
    # micro-batch's all-reduce (not the boundary's backward, which must sync); the edit wraps the
    # first, and the later backwards of the same iteration that forward the model again (a second
    # objective's), which the one finding stands for
    later = [other for other in window.loop.backwards[1:]
             if other.role.backpropagates_here and other.statement.gate is None and backward.statement.gate is None
             and other.statement.loops == backward.statement.loops]  # not the boundary's own, nor another micro-step loop's
    arms = [other for other in later if other.statement.exclusive_with(backward.statement)]
    sequential = [other for other in later if other not in arms and window.forwards_before(other, model)]
    # a model kept in a dict or list (`models[]`) is named by its container; no edit can name it
    edits = _sync_edits(window, model, kind, (sequential or [backward])[-1], backward is not window.loop.backwards[0]) \
        if not model.endswith("[]") else ()
    shown = model.replace("[]", "[...]")
    advice = _advice(window, shown, kind)
    others = [*arms, *window.further_micro_loops(backward, model)]
    for event, event_edits in ((backward, edits), *((other, ()) for other in others)):
        yield Finding(
            event.role.call,
            f"`{shown}` all-reduces gradients on every micro-batch",
            event_edits,
            "Run non-boundary micro-batches under the framework's no-sync context",
            help=f"`{shown}` is wrapped in DistributedDataParallel; only the window's last micro-batch needs the sync: {advice}",
        )


def _advice(window: Window, model: str, kind: str) -> str:
    """What to do, in the framework's own form."""
    owner = window.objects.frameworks.wrapper(model)
    if kind == "apex":
        return f"call `{model}.disable_allreduce()` before the other micro-batches and `enable_allreduce()` before the last"
    if kind == "accelerate" and owner is not None:
        return f"run the others under `with {code(owner)}.no_sync({model}):`"
    if kind == "fabric" and owner is not None:
        return f"run them under `with {code(owner)}.no_backward_sync({model}, enabled=<not at the boundary>):`"
    return f"run the others under `with {model}.no_sync():`"


def _sync_edits(window: Window, model: str, kind: str, through: Event, from_forward: bool = False) -> tuple[Edit, ...]:
    """Wrap the micro-step's forwards and backwards, up to the statement of `through`, in the
    framework's no-sync context, active off the boundary (DDP decides at the forward whether
    the backward syncs); with `from_forward`, from the statement that runs the model's forward."""
    boundary = _boundary(window)
    body = cast("cst.For | cst.While", window.loop.micro_loop).body if window.has_micro_loop else window.loop.node.body
    owner = window.objects.frameworks.wrapper(model)
    if boundary is None or type(body) is not cst.IndentedBlock or kind == "apex":
        return ()
    if kind in ("accelerate", "fabric") and owner is None:
        return ()
    statements = list(body.body)
    backward = through.role.call
    last = next((i for i, statement in enumerate(statements) if contains(statement, backward)), None)
    if last is None or _rebinds(statements, boundary):
        return ()
    edits: list[Edit] = []
    # the new code holds the boundary test's nodes: a fix of the gate in the same round makes it wait
    if kind == "fabric":
        item = filled_expression(f"{code(owner)}.no_backward_sync({model}, enabled=__off__)", __off__=_negated(boundary))
    else:
        context = _nullcontext(window, edits)
        if context is None:
            return ()
        if kind == "accelerate":
            off = f"{code(owner)}.no_sync({model})"
        elif window.objects.frameworks.always_wrapped(model, window.loop.function):
            off = f"{model}.no_sync()"
        else:  # a plain module on a run that does not wrap it has no `no_sync()`
            off = f'getattr({model}, "no_sync", {context})()'
        item = filled_expression(f"{context}() if __boundary__ else {off}", __boundary__=boundary)
    first_wrapped = 0
    if from_forward:
        # another model's backward runs first (a teacher's own update): the wrap starts at the
        # statement that runs this model's forward, where DDP decides whether it syncs
        first_wrapped = next((i for i, statement in enumerate(statements[: last + 1])
                              if any(dotted(call.func) == model for call in window.facts.calls_in(statement))), 0)
    wrapped = statements[first_wrapped: last + 1]
    first = wrapped[0]
    block = cst.IndentedBlock(body=[first.with_changes(leading_lines=()), *wrapped[1:]])
    first_lines = cast("cst.SimpleStatementLine | cst.BaseCompoundStatement", first).leading_lines
    with_node = cst.With(items=[cst.WithItem(item)], body=block, leading_lines=first_lines)
    edits.append(replace(first, with_node))
    edits.extend(remove(statement) for statement in wrapped[1:])
    return tuple(edits)


def _boundary(window: Window) -> Optional[cst.BaseExpression]:
    """The test that is true on the micro-batch that closes a window."""
    if window.has_micro_loop:
        micro, k = window.loop.micro_loop, window.micro_k
        if type(micro) is not cst.For or k is None or dotted(micro.target) is None:
            return None
        return filled_expression(f"{dotted(micro.target)} == __k__ - 1", __k__=parenthesized(k))
    gate = window.step_gate
    if gate is None or not gate.positive or gate.whole_test is None or not _inline(gate):
        return None
    return gate.whole_test if type(window.loop.node) is cst.For else None


def _rebinds(statements: Sequence[cst.CSTNode], boundary: cst.BaseExpression) -> bool:
    """A name the boundary test reads is (re)bound inside the loop body: the copied test
    would read it at the wrong time."""
    names = {node.value for node in walk(boundary) if type(node) is cst.Name}
    return any(names & chains_in_targets(statement) for statement in statements)


def _negated(test: cst.BaseExpression) -> cst.BaseExpression:
    """`a != b` for `a == b`, else `not (test)`; holding the test's own nodes."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1 and not test.lpar:
        if type(test.comparisons[0].operator) is cst.Equal:
            return filled_expression("__left__ != __right__", __left__=test.left, __right__=test.comparisons[0].comparator)
    return filled_expression("not (__test__)", __test__=test.with_changes(lpar=[], rpar=[]))


def _nullcontext(window: Window, edits: list[Edit]) -> Optional[str]:
    """How the module spells `contextlib.nullcontext`, adding the import if it has none."""
    imports = window.facts.imports
    for local, full in imports.items():
        if full == "contextlib.nullcontext":
            return local
    for local, full in imports.items():
        if full == "contextlib":
            return f"{local}.nullcontext"
    anchor = _first_import(window.facts.module)
    if anchor is None:
        return None
    statement = cst.parse_statement("from contextlib import nullcontext\n")
    future = type(anchor.body[0]) is cst.ImportFrom and dotted(anchor.body[0].module) == "__future__"
    edits.append(insert_after(anchor, statement) if future else insert_before(anchor, statement))
    return "nullcontext"


def _first_import(module: cst.Module) -> Optional[cst.SimpleStatementLine]:
    """The module's first import line, or its last `from __future__` import."""
    lines = [s for s in module.body if type(s) is cst.SimpleStatementLine
             and type(s.body[0]) in (cst.Import, cst.ImportFrom)]
    futures = [s for s in lines if type(s.body[0]) is cst.ImportFrom and dotted(s.body[0].module) == "__future__"]
    if futures:
        return futures[-1]
    return lines[0] if lines else None


def _inline(gate: Gate) -> bool:
    return gate.kind == "modulo" and type(gate.whole_test) is not cst.Name


def manual_gate_in_framework_accumulate(window: Window) -> Iterable[Finding]:
    seen = set()
    for step in window.loop.steps:
        gate, gate_if = step.gate, step.statement.gate_if
        if gate is None or gate.kind not in ("modulo", "count") or id(gate_if) in seen:
            continue
        if not window.framework_managed(step):
            continue
        if step.role.flavor != "engine" and not window.accumulate_context(step.statement):
            continue  # a prepared optimizer under a DeepSpeed plugin: its `step()` does nothing, gated or not
        seen.add(id(gate_if))
        framework = "DeepSpeed's engine" if step.role.flavor == "engine" else "`accelerator.accumulate()`"
        edits: tuple[Edit, ...] = ()
        accelerator = _accelerator_of(window, step)
        if accelerator is not None and type(gate_if) is cst.If and gate_if.test is gate.whole_test:
            # keep the block (it may count updates) but let accelerate say when a window closes
            edits = (replace(gate_if.test, cst.parse_expression(f"{accelerator}.sync_gradients")),)
        elif type(gate_if) is cst.If and gate_if.orelse is None and type(gate_if.body) is cst.IndentedBlock:
            body = list(gate_if.body.body)
            first_lines = cast("cst.SimpleStatementLine | cst.BaseCompoundStatement", body[0]).leading_lines
            body[0] = body[0].with_changes(leading_lines=[*gate_if.leading_lines, *first_lines])
            edits = (replace(gate_if, cst.FlattenSentinel(body)),)
        yield Finding(
            gate.test,
            f"manual gate `{code(gate.test)}` inside {framework}, which already steps once per window",
            edits,
            "Let the framework decide when the window closes",
            help="the extra gate skips or delays optimizer steps; drop it (or test `accelerator.sync_gradients`)",
        )


def _accelerator_of(window: Window, step: Event) -> Optional[str]:
    call = window.accumulate_call(step.statement)
    return dotted(call.func.value) if call is not None and type(call.func) is cst.Attribute else None


SYNC_EVERY_MICRO_BATCH = Rule(
    code="GA401",
    name="sync-every-micro-batch",
    fix="unsafe",
    summary="A DDP/FSDP model all-reduces gradients on every micro-batch.",
    check=sync_every_micro_batch,
)

MANUAL_GATE_IN_FRAMEWORK_ACCUMULATE = Rule(
    code="GA402",
    name="manual-gate-in-framework-accumulate",
    fix="unsafe",
    summary="A manual `% K` gate inside a framework that already accumulates.",
    check=manual_gate_in_framework_accumulate,
)
