"""GA4xx: distributed data parallel and frameworks that accumulate by themselves."""

from __future__ import annotations

import re
from typing import Iterable, Optional

import libcst as cst

from accumlint.edits import Edit, replace
from accumlint.model.gates import Gate
from accumlint.model.names import code, dotted
from accumlint.model.window import Window
from accumlint.rules.base import Finding

_SYNC_CONTROL = re.compile(
    r"no_sync|require_backward_grad_sync|set_requires_gradient_sync|no_backward_sync|skip_sync|sync_gradients"
)


def sync_every_micro_batch(window: Window) -> Iterable[Finding]:
    if not (window.gated_step or window.has_micro_loop) or window.uses_accumulate_context or window.deepspeed:
        return
    model = window.objects.wrapped_model
    if model is None:
        return
    texts = [code(window.loop.node)] + [code(s.helper) for s in window.loop.statements if s.helper is not None]
    if any(_SYNC_CONTROL.search(text) for text in texts):
        return
    backward = window.loop.backwards[0]
    if backward.role.flavor not in ("tensor", "accelerate", "fabric"):
        return
    yield Finding(
        "GA401",
        backward.role.call,
        f"`{model}` all-reduces gradients on every micro-batch",
        _sync_edits(window, model),
        "Synchronize gradients only on the window's last micro-batch",
        help=f"only the window's last micro-batch needs the sync: run the others under `{model}.no_sync()`",
    )


def _sync_edits(window: Window, model: str) -> tuple[Edit, ...]:
    """Set `require_backward_grad_sync` first thing in each micro-step (DDP reads it in forward)."""
    loop = window.loop
    if window.has_micro_loop:
        micro = loop.micro_loop
        k = window.micro_k
        if not isinstance(micro, cst.For) or k is None or dotted(micro.target) is None:
            return ()
        boundary = f"{dotted(micro.target)} == {code(k)} - 1"
        body = micro.body
    else:
        gate = window.step_gate
        if gate is None or gate.whole_test is None or not _inline(gate) or not isinstance(loop.node, cst.For):
            return ()
        boundary = code(gate.whole_test)
        body = loop.node.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return ()
    first = body.body[0]
    statement = cst.parse_statement(f"{model}.require_backward_grad_sync = ({boundary})\n")
    return (replace(first, cst.FlattenSentinel([statement, first])),)


def _inline(gate: Gate) -> bool:
    return gate.kind == "modulo" and not isinstance(gate.whole_test, cst.Name)


def manual_gate_in_framework_accumulate(window: Window) -> Iterable[Finding]:
    seen = set()
    for step in window.loop.steps:
        gate, gate_if = step.gate, step.statement.gate_if
        if gate is None or gate.kind not in ("modulo", "count") or id(gate_if) in seen:
            continue
        if not window.framework_managed(step):
            continue
        seen.add(id(gate_if))
        framework = "DeepSpeed's engine" if step.role.flavor == "engine" else "`accelerator.accumulate()`"
        edits: tuple[Edit, ...] = ()
        accelerator = _accelerator_of(step)
        if accelerator is not None and isinstance(gate_if, cst.If) and gate_if.test is gate.whole_test:
            # keep the block (it may count updates) but let accelerate say when a window closes
            edits = (replace(gate_if.test, cst.parse_expression(f"{accelerator}.sync_gradients")),)
        elif isinstance(gate_if, cst.If) and gate_if.orelse is None and isinstance(gate_if.body, cst.IndentedBlock):
            body = list(gate_if.body.body)
            body[0] = body[0].with_changes(leading_lines=[*gate_if.leading_lines, *body[0].leading_lines])
            edits = (replace(gate_if, cst.FlattenSentinel(body)),)
        yield Finding(
            "GA402",
            gate.test,
            f"manual gate `{code(gate.test)}` inside {framework}, which already steps once per window",
            edits,
            "Let the framework decide when the window closes",
            help="the extra gate skips or delays optimizer steps; drop it (or test `accelerator.sync_gradients`)",
        )


def _accelerator_of(step) -> Optional[str]:
    for item in step.statement.withs:
        value = item.item
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "accumulate":
            return dotted(value.func.value)
    return None


RULES = {
    "GA401": sync_every_micro_batch,
    "GA402": manual_gate_in_framework_accumulate,
}
