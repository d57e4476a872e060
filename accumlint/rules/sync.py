"""GA403: a DDP sync control that comes too late or has the wrong condition."""

from __future__ import annotations

from typing import Iterable, Optional, cast

import libcst as cst

from accumlint.fix.edits import Edit, insert_before, remove, replace
from accumlint.model.forwards import forwards_of, may_hide_forward
from accumlint.model.frameworks import SyncControl
from accumlint.model.gates import parse_gate
from accumlint.model.loop import Statement
from accumlint.model.names import code, dotted, int_value, normalized
from accumlint.model import scopes
from accumlint.model.scopes import chains_bound, chains_in_targets, free_names
from accumlint.model.tree import walk
from accumlint.model.window import Window
from accumlint.rules.base import Finding, contains, movable
from accumlint.rules.catalog import Rule

_LATE = ("DDP decides at the forward whether the next backward all-reduces, so a control set after the "
         "forward has no effect on this micro-batch (or applies to the next one); ")


_DDP_KINDS = ("ddp", "accelerate", "fabric")


def sync_control_misplaced(window: Window) -> Iterable[Finding]:
    """DDP only: FSDP's `no_sync()` is read in its post-backward hooks, so there a block
    around the backward alone is correct; DeepSpeed has no such control."""
    if window.deepspeed:
        return
    statements = window.loop.statements
    for control in window.sync_controls:
        kind = window.objects.frameworks.parallel_kind(dotted(control.model)) or _implied_kind(control)
        if kind not in _DDP_KINDS:
            if kind in (None, "sharded") and control.kind == "context":
                # a sharded wrap, or one made where this module cannot see (a trainer's
                # `_wrap_model`): whatever holds `no_sync()`, the window's boundaries must sync
                yield from _wrong_condition(window, control)
                yield from _never_syncs(window, control)
            continue
        if control.kind == "context":
            yield from _late_context(window, control, statements)
        elif control.kind == "flag":
            yield from _late_flag(window, control, statements)
        yield from _wrong_condition(window, control)
        yield from _never_syncs(window, control)


def _never_syncs(window: Window, control: SyncControl) -> Iterable[Finding]:
    """An unconditional sync context that holds every backward of an accumulating window
    (`with accelerator.no_sync(model):` inside `accumulate()`): no micro-batch all-reduces,
    the boundary's included, so each process steps with its own gradients. Silent where
    the module all-reduces gradients by hand, and under DeepSpeed (where it does nothing)."""
    if control.kind != "context" or _sync_condition(control)[0] is not None or window.deepspeed_accelerator:
        return
    if not window.accumulates or not window.loop.steps:
        return
    backwards = window.loop.backwards
    held = {id(statement) for statement in control.statements}
    if not backwards or any(id(b.statement) not in held for b in backwards):
        return
    if window.objects.frameworks.reduces_gradients_by_hand():
        return
    yield Finding(
        control.site,
        f"`{code(control.site)}` holds every backward of the window: no micro-batch all-reduces its gradients",
        (),
        "Sync on the micro-batch that closes the window",
        help="the closing micro-batch runs under no-sync too, so each process steps with its own gradients; "
        "enter the no-sync context only off the window's boundary",
    )


def _implied_kind(control: SyncControl) -> Optional[str]:
    """`fabric.no_backward_sync(model, ...)` accepts only a model Fabric set up (it raises on
    any other): the control itself says the model is Fabric's, wherever it was set up."""
    item = control.node.item if type(control.node) is cst.WithItem else None
    if type(item) is cst.Call and (dotted(item.func) or "").rpartition(".")[2] == "no_backward_sync":
        return "fabric"
    return None


def _late_context(window: Window, control: SyncControl, statements: list[Statement]) -> Iterable[Finding]:
    governed = list(control.statements)
    if not governed or not any(e.kind == "backward" for s in governed for e in s.events):
        return
    if forwards_of(governed, control.model) or any(may_hide_forward(s, control.model, window.objects) for s in governed):
        return
    first = min(s.order for s in governed)
    earlier = [s for s in forwards_of(statements, control.model) if s.order < first and s.loops == governed[0].loops]
    if not earlier:
        return
    forward = earlier[-1]
    if window.forward_in_own_sync_context(forward, control):
        return  # `with model.no_sync(): outputs = model(...)` earlier, in its own block
    entered = code(cast(cst.WithItem, control.node).item)
    written = code(control.site) if control.site is not control.node else entered
    yield Finding(
        control.site,
        f"`{written}`{'' if written == entered else f' (entered as `{entered}`)'} holds the backward "
        f"but not the forward of `{code(control.model)}` "
        "({related}), so it does not skip the all-reduce",
        _wrap_forward(window, control, forward),
        "Move the forward inside the no-sync block",
        related=forward.node,
        help=_LATE + "run the forward and the backward inside the block",
    )


def _wrap_forward(window: Window, control: SyncControl, forward: Statement) -> tuple[Edit, ...]:
    """Move the statements from the forward up to the `with` into the `with`'s body."""
    with_node = _with_of(control)
    if with_node is None or type(with_node.body) is not cst.IndentedBlock or not movable(forward):
        return ()
    block = forward.block[-1]
    body = list(block.body) if type(block) is cst.IndentedBlock else []
    positions = [i for i, s in enumerate(body) if s is forward.node or s is with_node]
    if len(positions) != 2 or body[positions[0]] is not forward.node:
        return ()
    moved = body[positions[0]:positions[1]]
    if not all(type(s) is cst.SimpleStatementLine for s in moved):
        return ()
    inner = [moved[0].with_changes(leading_lines=()), *moved[1:], *with_node.body.body]
    new_with = with_node.with_changes(body=with_node.body.with_changes(body=inner),
                                      leading_lines=cast(cst.SimpleStatementLine, moved[0]).leading_lines)
    return (*(remove(s) for s in moved), replace(with_node, new_with))


def _with_of(control: SyncControl) -> Optional[cst.With]:
    for statement in control.statements:
        for node in statement.block:
            if type(node) is cst.With and any(item is control.node for item in node.items):
                return node
    return None


def _late_flag(window: Window, control: SyncControl, statements: list[Statement]) -> Iterable[Finding]:
    (flag,) = control.statements
    backward = next((s for s in statements if s.order > flag.order and any(e.kind == "backward" for e in s.events)), None)
    if backward is None:
        return
    forwards = [s for s in forwards_of(statements, control.model) if s.order < backward.order]
    if not forwards or forwards[-1].order > flag.order or forwards[-1].loops != flag.loops:
        return
    forward = forwards[-1]
    anchor = _enclosing_in_block(flag, forward)
    edits: tuple[Edit, ...] = ()
    if anchor is not None and movable(flag) and not _assigned_between(flag, anchor):
        edits = (remove(flag.node), insert_before(anchor, flag.node.with_changes(leading_lines=())))
    yield Finding(
        flag.node,
        f"`{code(control.model)}.require_backward_grad_sync` is set after the forward ({{related}})",
        edits,
        "Set `require_backward_grad_sync` before the forward",
        related=forward.node,
        help=_LATE + "set it before the forward",
    )


def _enclosing_in_block(flag: Statement, forward: Statement) -> Optional[cst.CSTNode]:
    """The statement of the flag's own block that holds the forward (the forward itself,
    or the `with torch.autocast(...):` around it)."""
    block = flag.block[-1]
    if type(block) is not cst.IndentedBlock:
        return None
    for statement in block.body:
        if contains(statement, forward.node):
            return statement
    return None


def _assigned_between(flag: Statement, anchor: cst.CSTNode) -> bool:
    """The flag's value reads a name bound between the anchor and the flag (moving it would
    read the old value)."""
    block = cast("cst.IndentedBlock | cst.Module", flag.block[-1])
    body: list[cst.CSTNode] = list(block.body)
    start, end = body.index(anchor), body.index(flag.node)
    read = free_names(cast(cst.Assign, flag.small).value)
    return any(chains_in_targets(statement) & read for statement in body[start:end])


def _wrong_condition(window: Window, control: SyncControl) -> Iterable[Finding]:
    """The micro-batches that sync must be the window's boundaries, no more, no fewer."""
    condition, syncs_when_true, target = _sync_condition(control)
    if condition is None or target is None:
        return
    step_gate = window.step_gate
    wrong = False
    fix: Optional[cst.BaseExpression] = None
    if window.has_micro_loop:
        wrong = _never_last_micro_step(window, condition, syncs_when_true) or _same_on_every_micro_step(window, condition)
    elif step_gate is not None and step_gate.kind == "modulo" and step_gate.whole_test is not None:
        gate = parse_gate(condition, lambda name: _bound_once(window, name))
        if gate is None or gate.kind != "modulo" or gate.counter != step_gate.counter:
            return
        if gate.k is None or step_gate.k is None or normalized(gate.k) != normalized(step_gate.k):
            return
        syncs_on_boundary = gate.positive == syncs_when_true
        wrong = gate.form != step_gate.form or not syncs_on_boundary
        # the step gate's last-batch clause (`or (steps_in_epoch <= K and step + 1 == steps_in_epoch)`)
        # adds a boundary; a sync condition without one runs that boundary's backward unsynced
        wrong = wrong or (_clause_reads_loop(window, step_gate.whole_test)
                          and not _clause_reads_loop(window, condition))
        if type(step_gate.whole_test) is not cst.Name:
            fix = _gate_text(step_gate.whole_test, positive=syncs_when_true)
            own, step_own = parse_gate(gate.test, lambda name: None), parse_gate(step_gate.test, lambda name: None)
            if window.world_condition(gate) and own is not None and step_own is not None \
                    and not _clause_reads_loop(window, step_gate.whole_test):
                # `is_distributed and i % K != 0`: the guard stays, only the count's test becomes the gate's
                target, fix = gate.test, _gate_text(step_gate.test, positive=own.positive == step_own.positive)
    if not wrong:
        return
    edits = (replace(target, fix),) if fix is not None else ()
    yield Finding(
        control.site,
        f"the sync condition `{code(condition)}` is not the complement of the step gate",
        edits,
        "Sync exactly on the micro-batch that closes the window",
        help="the boundary micro-batch runs without all-reduce (so the step applies unsynced gradients), "
        "or a micro-batch inside the window syncs; derive the condition from the step gate",
    )


def _clause_reads_loop(window: Window, test: cst.BaseExpression) -> bool:
    """A part of a boundary test beside its modulo test (`A % K == 0 or <clause>`) that reads
    a name the loop changes (its index, a step count): a clause that adds boundaries, not a
    setting fixed for the run (`and args.local_rank != -1`)."""
    changing = {name.split(".")[0] for name in chains_bound(window.loop.node)}

    def reads(part: cst.BaseExpression) -> bool:
        if type(part) is cst.UnaryOperation and type(part.operator) is cst.Not:
            return reads(part.expression)  # `not (A % K == 0 or <clause>)`
        if type(part) is not cst.BooleanOperation:
            return False
        for side in (part.left, part.right):
            if parse_gate(side, lambda name: None) is None \
                    and {name.split(".")[0] for name in free_names(side)} & changing:
                return True
        return reads(part.left) or reads(part.right)

    return reads(test)


def _gate_text(test: cst.BaseExpression, *, positive: bool) -> cst.BaseExpression:
    """The step gate's test, or its complement (`== 0` becomes `!= 0`, else `not (...)`)."""
    if positive:
        return test
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        flipped = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}.get(type(target.operator))
        if flipped is not None:
            known = cast("cst.Equal | cst.NotEqual", target.operator)
            operator = flipped(whitespace_before=known.whitespace_before,
                               whitespace_after=known.whitespace_after)
            return test.with_changes(comparisons=[target.with_changes(operator=operator)])
    return cst.parse_expression(f"not ({code(test)})")


def _sync_condition(control: SyncControl) -> tuple[Optional[cst.BaseExpression], bool, Optional[cst.CSTNode]]:
    """The expression that decides syncing, whether syncing happens when it is true, and the
    node a fix replaces."""
    if control.kind == "flag":
        flag = cast(cst.Assign, control.node)
        return flag.value, True, flag.value
    if control.kind != "context" or type(control.node) is not cst.WithItem:
        return None, False, None
    item = control.choice or control.node.item
    if type(item) is cst.IfExp:
        body = item.body.func if type(item.body) is cst.Call else item.body
        in_body = "sync" in (dotted(body) or "")
        return item.test, not in_body, item.test
    if type(item) is cst.Call:
        enabled = next((arg for arg in item.args if arg.keyword is not None and arg.keyword.value == "enabled"), None)
        if enabled is not None:
            return enabled.value, False, enabled.value
    arm = _enclosing_arm(control)
    if arm is not None:
        test, in_body = arm
        return test, not in_body, test
    return None, False, None


def _enclosing_arm(control: SyncControl) -> Optional[tuple[cst.BaseExpression, bool]]:
    """`if cond: with model.no_sync(): ...` -> (cond, True); in the `else`: (cond, False)."""
    if not control.statements:
        return None
    path = control.statements[0].block
    with_node = _with_of(control)
    if with_node is None or with_node not in path:
        return None
    index = path.index(with_node)
    if index < 2 or type(path[index - 1]) is not cst.IndentedBlock:
        return None
    owner = path[index - 2]
    if type(owner) is not cst.If or not isinstance(owner.orelse, (cst.Else, type(None))):
        return None
    if path[index - 1] is owner.body:
        return owner.test, True
    if owner.orelse is not None and path[index - 1] is owner.orelse.body:
        return owner.test, False
    return None


def _never_last_micro_step(window: Window, condition: cst.BaseExpression, syncs_when_true: bool) -> bool:
    """In a `for t in range(K)` micro-step loop, syncing on `t == 0` (or `t == K`) misses the
    window's last micro-batch, the one whose backward the step uses."""
    micro = window.loop.micro_loop
    k = window.micro_k
    if not syncs_when_true or type(micro) is not cst.For or k is None:
        return False
    target = dotted(micro.target)
    if not (type(condition) is cst.Comparison and len(condition.comparisons) == 1):
        return False
    comparison = condition.comparisons[0]
    if type(comparison.operator) is not cst.Equal or dotted(condition.left) != target:
        return False
    other = comparison.comparator
    k_value = window.known_int(k)
    return (int_value(other) == 0 and k_value != 1) or normalized(other) == normalized(k)


def _same_on_every_micro_step(window: Window, condition: cst.BaseExpression) -> bool:
    """In a micro-step loop, a sync condition that reads nothing the loop changes and calls
    nothing (`enabled=micro_batch == 1`) is the same for every micro-step of the window: the
    boundary skips the all-reduce with the others, or every micro-step syncs."""
    micro = window.loop.micro_loop
    if micro is None or any(type(node) is cst.Call for node in walk(condition)):
        return False
    read = free_names(condition)
    function = window.facts.enclosing_function(condition)
    own = {name for name in read if "." not in name and name not in ("self", "cls")}
    if function is not None and function is not window.loop.function and own & scopes.local_names(function):
        return False  # a helper's own local (`last_batch = start + size >= n` from what each call passes)
    return bool(read) and not read & {name.split(".")[0] for name in chains_bound(micro)}


def _bound_once(window: Window, name: str) -> Optional[cst.BaseExpression]:
    bindings = window.facts.bindings.get(name, ())
    return bindings[0].value if len(bindings) == 1 else None


SYNC_CONTROL_MISPLACED = Rule(
    code="GA403",
    name="sync-control-misplaced",
    fix="unsafe",
    summary="A DDP sync control does not cover the forward, or its condition is not the step gate's complement.",
    check=sync_control_misplaced,
)
