"""GA5xx: memory that grows with every micro-batch."""

from __future__ import annotations

import re
from typing import Iterable, Optional

import libcst as cst

from accumlint.fix.edits import filled_expression, parenthesized, replace
from accumlint.model.loss import operand_in, split_scaling
from accumlint.model.names import code, dotted, keyword
from accumlint.model.window import Window
from accumlint.rules.base import Finding
from accumlint.rules.catalog import Rule

def graph_kept_alive(window: Window) -> Iterable[Finding]:
    names = {flow.name for flow in window.flows if flow.name is not None and flow.reduction != "unknown" or
             flow.name is not None and "loss" in flow.name}
    names |= {term for flow in window.flows for term in flow.loss_terms}
    if not names:
        return
    assigned_in_loop = _assigned_names(window)
    for statement in window.loop.statements:
        small = statement.small
        added: Optional[cst.BaseExpression] = None
        holder: Optional[str] = None
        if type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign:
            added, holder = small.value, dotted(small.target)
        elif (summed := _self_sum(small)) is not None:
            holder, added = summed
        elif type(small) is cst.Expr and type(small.value) is cst.Call:
            call = small.value
            if type(call.func) is cst.Attribute and call.func.attr.value == "append" and len(call.args) == 1:
                added, holder = call.args[0].value, dotted(call.func.value)
                if not _may_be_list(window, holder):
                    continue  # `run_loss.append(loss)` on a metric object (MONAI's CumulativeAverage...)
        if added is None or holder is None:
            continue
        if holder in assigned_in_loop.get((statement.helper, window.loop.in_micro_loop(statement)), set()):
            continue
        if window.builds_no_graph(statement):
            continue  # `with torch.no_grad(): metrics += loss` keeps no graph
        name = dotted(split_scaling(added, None)[0])  # `loss * n_tokens` keeps `loss`'s graph
        if name not in names:
            name = operand_in(added, names, holder)  # a running mean: `avg += (loss - avg) / n`
        if name not in names or not window.may_hold_graph(statement, name) or _backpropagated_later(window, holder):
            continue
        yield Finding(
            statement.node,
            f"`{name}` is kept in `{holder}` with its autograd graph",
            (replace(added, filled_expression("__added__.detach()", __added__=parenthesized(added))),),
            f"Keep `{name}.detach()`",
            help=f"every micro-batch's graph stays alive; keep `{name}.detach()` (or `{name}.item()`)",
        )


def _may_be_list(window: Window, holder: Optional[str]) -> bool:
    """The holder is a list, or nothing says otherwise: no binding of it calls anything
    but `list(...)`."""
    for binding in window.facts.bindings.get(holder or "", ()):
        value = binding.value
        if type(value) is cst.Call and dotted(value.func) != "list":
            return False
    return True


def _self_sum(small: cst.BaseSmallStatement) -> Optional[tuple[str, cst.BaseExpression]]:
    """`total = total + loss` -> ("total", loss)."""
    if type(small) is not cst.Assign or len(small.targets) != 1:
        return None
    value, holder = small.value, dotted(small.targets[0].target)
    if holder is None or type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Add:
        return None
    if dotted(value.left) == holder:
        return holder, value.right
    if dotted(value.right) == holder:
        return holder, value.left
    return None


def _backpropagated_later(window: Window, holder: str) -> bool:
    """The kept losses are a queue of graphs a later backward consumes (`sum(losses).backward()`)."""
    pattern = re.compile(rf"\b{re.escape(holder)}\b")
    later = [code(s) for s in window.loop.site.siblings(before=False)]
    return any(pattern.search(text) and "backward" in text for text in later)


def _assigned_names(window: Window) -> dict[tuple[Optional[cst.FunctionDef], bool], set[str]]:
    """Names rebound by plain assignment on every iteration, per scope and per level (the
    iteration, or the micro-step loop's iteration): they do not outlive it. A reset under
    a gate or another condition (`running_loss = 0` at the window boundary) does, and so
    does one outside the micro-step loop for a sum made inside it (`total = 0` before
    `for micro in range(K): total += loss`): the sum keeps every graph of the window."""
    found: dict[tuple[Optional[cst.FunctionDef], bool], set[str]] = {}
    for statement in window.loop.statements:
        if statement.gate is not None or statement.conditional:
            continue
        in_micro = window.loop.in_micro_loop(statement)
        for small in statement.node.body:
            if type(small) is cst.Assign and _self_sum(small) is None:
                for target in small.targets:
                    name = dotted(target.target)
                    if name is not None:
                        found.setdefault((statement.helper, False), set()).add(name)
                        if in_micro:
                            found.setdefault((statement.helper, True), set()).add(name)
    return found


def retain_graph_in_loop(window: Window) -> Iterable[Finding]:
    if not window.accumulates:
        return
    backwards = window.loop.backwards
    for backward in backwards:
        # another backward of the iteration may reuse the graph, unless it runs in another
        # arm (`if use_amp: scaler.scale(loss).backward(...)` / `else: loss.backward(...)`)
        if any(other is not backward and not other.statement.exclusive_with(backward.statement) for other in backwards):
            continue
        if backward.role.flavor == "lightning-auto" or window.builds_no_graph(backward.statement):
            continue
        call = backward.role.call
        retain = keyword(call, "retain_graph") if type(call) is cst.Call else None
        if retain is None or code(retain.value) != "True" or window.loop.backward_per_loss(backward):
            continue
        yield Finding(
            backward.role.call,
            "`retain_graph=True` with no second backward over the graph",
            help="every micro-batch's graph stays alive, so memory grows with each one; drop `retain_graph=True`",
        )


GRAPH_KEPT_ALIVE = Rule(
    code="GA501",
    name="graph-kept-alive",
    fix="safe",
    summary="A loss tensor is accumulated for logging without `.detach()`, keeping graphs alive.",
    any_loop=True,
    check=graph_kept_alive,
)

RETAIN_GRAPH_IN_LOOP = Rule(
    code="GA502",
    name="retain-graph-in-loop",
    fix="none",
    summary="`backward(retain_graph=True)` in a loop with no second backward over the graph.",
    check=retain_graph_in_loop,
)
