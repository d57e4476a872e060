"""What an iteration accumulates: running sums and lists that outlive it.

`total += loss`, `total = total + loss` and `losses.append(loss)` add a value
to a holder on every iteration. The holder outlives the iteration unless the
iteration rebinds it by plain assignment on every run, at the same level: a
sum made inside the micro-step loop and rebound only outside it keeps every
micro-batch of the window. A reset under a gate or another condition
(`running_loss = 0` at the window boundary) does not end the holder either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from accumlint.model.facts import Function
from accumlint.model.loop import Statement, lightning_returned_loss
from accumlint.model.loss import VALUE_KEEPING_METHODS
from accumlint.model.names import code, dotted
from accumlint.model.scopes import target_chains
from accumlint.model.tree import walk
from accumlint.model.window import Window

# (the scope the statement runs in, inside the micro-step loop) -> names rebound there
_Rebound = dict[tuple[Optional[Function], bool], set[str]]


@dataclass(frozen=True, eq=False)
class Accumulation:
    """`holder += added` (or `holder = holder + added`, `holder.append(added)`) in one
    statement of the iteration."""

    statement: Statement
    holder: str
    added: cst.BaseExpression


def accumulations(window: Window) -> list[Accumulation]:
    """The statements of the window's iteration that add a value to a holder that outlives
    the iteration (see the module's docstring), in iteration order. An `append` counts on a
    list, or on a name that no binding says is something else: `run_loss.append(loss)` on
    a metric object (MONAI's `CumulativeAverage`) keeps a number, not the tensor. The backward's own
    loss, summed term by term (`gen_loss += duration_loss`), is no holder: the backward consumes it."""
    rebound = _rebound_each_iteration(window)
    building = {flow.name for flow in window.flows if flow.name is not None}
    found: list[Accumulation] = []
    for statement in window.loop.statements:
        read = _added(statement.small)
        if read is None:
            continue
        holder, added, appended = read
        if appended and not _may_be_list(window, holder):
            continue
        if holder in building or holder in rebound.get((statement.helper, window.loop.in_micro_loop(statement)), set()):
            continue
        found.append(Accumulation(statement, holder, added))
    return found


def copies_of(window: Window, names: set[str]) -> set[str]:
    """The names the iteration binds by plain assignment to one of `names`, or to such a
    copy (`loss_train = l1`, then `total += loss_train`): each is the same tensor."""
    copies: set[str] = set()
    grew = True
    while grew:
        grew = False
        for statement in window.loop.statements:
            for small in statement.node.body:
                if type(small) is not cst.Assign or len(small.targets) != 1:
                    continue
                if type(small.value) not in (cst.Name, cst.Attribute):
                    continue  # `logs = output["log"]` beside `loss = output["loss"]` is another value
                target, value = dotted(small.targets[0].target), dotted(small.value)
                if target is not None and value is not None and target not in names | copies \
                        and value in names | copies:
                    copies.add(target)
                    grew = True
    return copies


def kept_tensor(added: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor whose graph a value added to a holder keeps: `loss` in `loss.sum()`,
    `loss.mean()`, `loss.float()` (a reduction or a cast keeps the graph; `.item()` and
    `.detach()` do not, and are left as they are)."""
    while (type(added) is cst.Call and type(added.func) is cst.Attribute
           and added.func.attr.value in _GRAPH_KEEPING_METHODS and all(arg.keyword is not None for arg in added.args)):
        added = added.func.value
    return added


# Methods whose result is on the same autograd graph as their receiver: those that keep its
# value's scale, and reductions and copies that change it.
_GRAPH_KEEPING_METHODS = VALUE_KEEPING_METHODS | {"sum", "nansum", "clone"}


def backpropagated_later(window: Window, holder: str) -> bool:
    """The holder is a queue of graphs that a backward after the loop consumes
    (`losses.append(loss)` in the loop, `sum(losses).backward()` after it): keeping the
    graphs is its purpose."""
    pattern = re.compile(rf"\b{re.escape(holder)}\b")
    later = [code(s) for s in window.loop.site.siblings(before=False)]
    return any(pattern.search(text) and "backward" in text for text in later) or _returned_to_lightning(window, holder)


def _returned_to_lightning(window: Window, holder: str) -> bool:
    """The holder is what a `training_step` returns for Lightning to backpropagate (`loss +=
    chunk_loss` over the chunks, then `return {"loss": loss}`)."""
    function = window.loop.function
    if function is None or function.name.value != "training_step":
        return False
    return any(type(node) is cst.Return and node.value is not None and dotted(lightning_returned_loss(node.value)) == holder
               for node in walk(function.body))


def _added(small: cst.BaseSmallStatement) -> Optional[tuple[str, cst.BaseExpression, bool]]:
    """(holder, the value added, whether by `append`) when the statement adds to a holder."""
    if type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign:
        holder = dotted(small.target)
        return None if holder is None else (holder, small.value, False)
    summed = _self_sum(small)
    if summed is not None:
        return summed[0], summed[1], False
    if type(small) is cst.Expr and type(small.value) is cst.Call:
        call = small.value
        if type(call.func) is cst.Attribute and call.func.attr.value == "append" and len(call.args) == 1:
            holder = dotted(call.func.value)
            return None if holder is None else (holder, call.args[0].value, True)
    return None


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


def _may_be_list(window: Window, holder: str) -> bool:
    """The holder is a list, or nothing says otherwise: no binding of it calls anything
    but `list(...)`."""
    for binding in window.facts.bindings.get(holder, ()):
        value = binding.value
        if type(value) is cst.Call and dotted(value.func) != "list":
            return False
    return True


def _rebound_each_iteration(window: Window) -> _Rebound:
    """Names rebound by plain assignment on every iteration, per scope and per level (the
    iteration, or the micro-step loop's iteration): they do not outlive it. A rebinding
    under a gate or another condition does not count, nor does a self-sum
    (`total = total + loss`); a rebinding outside the micro-step loop does not end a sum
    made inside it."""
    found: _Rebound = {}
    for statement in window.loop.statements:
        if statement.gate is not None or statement.conditional:
            continue
        in_micro = window.loop.in_micro_loop(statement)
        for small in statement.node.body:
            if type(small) is cst.Assign and _self_sum(small) is None:
                for target in small.targets:
                    for name in target_chains(target.target):
                        found.setdefault((statement.helper, False), set()).add(name)
                        if in_micro:
                            found.setdefault((statement.helper, True), set()).add(name)
    return found

