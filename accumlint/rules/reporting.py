"""GA6xx: what the run reports. GA601: the logged loss is the loss already divided by K."""

from __future__ import annotations

from typing import Iterable, Iterator, Optional, Sequence

import libcst as cst

from accumlint.fix.edits import Edit, parenthesized, replace
from accumlint.model import scopes
from accumlint.model.facts import DETACHING_METHODS
from accumlint.model.loop import Event, Statement
from accumlint.model.loss import LossFlow, Scaling
from accumlint.model.names import code, dotted
from accumlint.model.tree import children, walk
from accumlint.model.window import Window
from accumlint.rules.base import Finding
from accumlint.rules.catalog import Rule



def logged_loss_scaled(window: Window) -> Iterable[Finding]:
    if not window.accumulates:
        return
    for flow in window.flows:
        scaling = _rebinding_division(window, flow)
        if scaling is None or scaling.statement is None:
            continue
        name = _assigned_name(scaling.statement)
        if name is None:
            continue
        for log, scaled, names in _scaled_logs(window, scaling.statement, name):
            call = log.role.call
            logged = dotted(scaled[0]) if dotted(scaled[0]) in names else \
                code(scaled[0]) if type(scaled[0]) is cst.BinaryOperation else name  # a running mean: `total / steps`
            yield Finding(
                call,
                f"the logged `{logged}` was already divided by `{code(scaling.factor)}` ({{related}})",
                () if any(_in_bound_sequence(window, e, call) for e in scaled) else _restore(window, scaled, scaling.factor),
                f"Log the loss multiplied back by `{code(scaling.factor)}`",
                help=f"the reported training loss is K times too small and not comparable with a run without "
                f"accumulation; log `{name}.item() * {code(scaling.factor)}`",
                related=scaling.node,
            )


def _scaled_logs(window: Window, scaled_at: Statement, name: str
                 ) -> Iterator[tuple[Event, list[cst.BaseExpression], set[str]]]:
    """The logging calls that show `name`'s scaled value (a copy of it, its running mean)
    after `scaled_at`, each with what it reads of it and the names that hold it there; in
    a helper that returns the value, those of its caller after the call, under the name
    the call's result is bound to (`loss = self._training_step(batch, k)`), up to the loop."""
    while True:
        copies, sums = window.value_reads(scaled_at, name)  # `train_loss = loss.item()`, `total += loss.item()`
        names = {name} | copies
        for log in _logs_after(window, scaled_at, name):
            call = log.role.call
            if type(call) is not cst.Call:
                continue
            # a running mean over the loop is reported where it is logged on every micro-batch, under no
            # gate (at the window's boundary or every N micro-batches, its scale is left unread)
            means = sums if log.statement.gate is None else set()
            scaled = _unrestored(window, call, names, means, _containers_logged(window, scaled_at, log, call))
            if scaled:
                yield log, scaled, names
        landing = window.returned_to(scaled_at, names)
        if landing is None:
            return
        scaled_at, name = landing


def _rebinding_division(window: Window, flow: LossFlow) -> Optional[Scaling]:
    """`loss = loss / K` (or `loss = criterion(...) / K`, `loss /= K`): the loss's own name now
    holds the scaled value. Silent when the division is extra (GA204) or the framework scales."""
    if flow.name is None or window.framework_scales(flow) is not False:
        return None
    divisions = [s for s in flow.scalings if s.op == "div" and window.is_k(s.factor)]
    if len(divisions) != 1:
        return None
    scaling = divisions[0]
    statement = scaling.statement
    if statement is None or statement is flow.backward.statement or _assigned_name(statement) is None:
        return None
    return scaling


def _assigned_names(statement: Statement) -> set[str]:
    """The dotted names the statement's assignments bind (`x = ...`, `x /= K`)."""
    names: set[Optional[str]] = set()
    for small in statement.node.body:
        if type(small) is cst.Assign:
            names |= {dotted(t.target) for t in small.targets}
        elif type(small) is cst.AugAssign:
            names.add(dotted(small.target))
    return {name for name in names if name is not None}


def _assigned_name(statement: Statement) -> Optional[str]:
    """The one name the division's statement binds: the loss's own (`loss = loss / K`), or the
    one a scaler context reads later (`loss = out[0] / K`, then `with amp.scale_loss(loss,
    opt) as scaled_loss:`): either way that name now holds the scaled value."""
    names = _assigned_names(statement)
    return names.pop() if len(names) == 1 else None


def _assigns(statement: Statement, name: str) -> bool:
    """The statement binds `name`, alone or among others (`loss, _, obs = model(dev_batch)`)."""
    return name in scopes.chains_bound(statement.node)


def _logs_after(window: Window, scaled_at: Statement, name: str) -> list[Event]:
    """Logging calls of the iteration after the scaling, while `name` still holds the scaled loss."""
    found: list[Event] = []
    for statement in window.loop.statements:
        if statement.order <= scaled_at.order or statement.helper is not scaled_at.helper:
            continue
        # `print(f"Loss is {loss}, stopping")` then `sys.exit(1)`; a report of a NaN loss
        if not statement.before_exit and not window.reports_non_finite(statement) \
                and not window.reports_out_of_range(statement, {name}):
            found.extend(event for event in statement.events if event.kind == "log")
        if _assigns(statement, name) and not _keeps_own_value(statement, name):
            break
    return found


def _keeps_own_value(statement: Statement, name: str) -> bool:
    """`loss = loss.detach().cpu().item()`: the name rebound to its own value off the graph
    (a copy, a number) still holds the scaled loss."""
    small = statement.small
    if type(small) is not cst.Assign or len(small.targets) != 1 or dotted(small.targets[0].target) != name:
        return False
    value: cst.BaseExpression = small.value
    while True:
        if type(value) is cst.Call and type(value.func) is cst.Attribute and not value.args \
                and value.func.attr.value in _VALUE_KEEPING_METHODS:
            value = value.func.value
        elif type(value) is cst.Call and dotted(value.func) == "float" and len(value.args) == 1:
            value = value.args[0].value
        else:
            return dotted(value) == name and value is not small.value


# Calls that read what kind of object a value is, not the value.
_TYPE_TESTS = frozenset({"isinstance", "type", "hasattr", "callable"})
# Methods that return the same number: off the graph, on another device, as a Python number, or a copy.
_VALUE_KEEPING_METHODS = DETACHING_METHODS | {"clone"}


def _containers_logged(window: Window, scaled_at: Statement, log: Event, call: cst.Call) -> list[cst.BaseExpression]:
    """The dict literals the logging call (`call`, of `log`) passes through a name (`logs = {"loss": ...}`
    then `progress_bar.set_postfix(**logs)`), bound in the iteration between the scaling and the call,
    the values stored under a key of such a name there (`self.metrics["loss"] = loss.item()`), and
    the list or tuple literals bound to a name that a comprehension of the call walks (`losses =
    [loss_g, loss_mel]`, then `logger.info([x.item() for x in losses])`)."""
    names = {dotted(arg.value) for arg in call.args if type(arg.value) in (cst.Name, cst.Attribute)}
    walked = _comprehended_names(call)
    found: dict[str, cst.BaseExpression] = {}
    sequences: dict[str, cst.BaseExpression] = {}
    stored: list[cst.BaseExpression] = []
    for statement in window.loop.statements:
        if not scaled_at.order < statement.order < log.order or statement.helper is not log.statement.helper:
            continue
        small = statement.small
        if type(small) is not cst.Assign or len(small.targets) != 1:
            continue
        target = small.targets[0].target
        if dotted(target) in walked:
            sequences[dotted(target) or ""] = small.value
        if dotted(target) in names:
            found[dotted(target) or ""] = small.value
        elif type(target) is cst.Subscript and dotted(target.value) in names:
            stored.append(small.value)  # `metrics["train/loss"] = loss.item()`, then `wandb.log(metrics)`
    return [value for value in found.values() if type(value) is cst.Dict] + stored + [
        value for value in sequences.values() if type(value) in (cst.List, cst.Tuple)]


def _in_bound_sequence(window: Window, expression: cst.BaseExpression, call: cst.CSTNode) -> bool:
    """The logged expression stands in a list or tuple bound to a name before the logging call
    (`losses = [loss_g, ...]`): multiplying it back there would change what every other reader of
    that name sees, so no edit is offered."""
    node: Optional[cst.CSTNode] = expression
    while node is not None and node is not call:
        parent = window.facts.parents.get(id(node))
        if type(node) in (cst.List, cst.Tuple) and type(parent) is cst.Assign:
            return True
        node = parent
    return False


def _comprehended_names(call: cst.Call) -> set[str]:
    """The names that a comprehension among the call's arguments walks (`for x in losses`)."""
    return {dotted(node.iter) or "" for arg in call.args for node in walk(arg.value) if type(node) is cst.CompFor} - {""}


def _unrestored(window: Window, call: cst.Call, names: set[str], sums: set[str],
                extra: Sequence[cst.BaseExpression] = ()) -> list[cst.BaseExpression]:
    """The expressions (`loss.item()`, `loss`) in the logging call (and the dicts it logs
    through a name) that read the scaled loss (under one of `names`), or its running mean
    over the loop (`total_loss / steps`, a total of `sums`), without multiplying it back
    by K; each is the whole `loss.x().y()` chain."""
    found: list[cst.BaseExpression] = []
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(arg.value, ()) for arg in call.args]
    stack += [(value, ()) for value in extra]
    while stack:
        node, parents = stack.pop()
        if ((type(node) is cst.Name or type(node) is cst.Attribute) and dotted(node) in names
                or type(node) is cst.BinaryOperation and window.running_mean(node, sums)):
            if not any(_multiplies_back(window, parent) or _mixed_with_other_terms(parent, node, parents)
                       for parent in parents):
                found.append(_chain(node, parents))
            continue
        if type(node) is cst.Lambda or type(node) is cst.Call and dotted(node.func) in _TYPE_TESTS:
            continue  # `isinstance(loss, float)` reads the loss's type, not its value
        # not `loss=` keywords, nor the attribute name of `outputs.loss` (another value than `loss`)
        inner = [node.value] if type(node) is cst.Arg or type(node) is cst.Attribute else children(node)
        stack.extend((child, parents + (node,)) for child in inner)
    return found


def _mixed_with_other_terms(parent: cst.CSTNode, node: cst.CSTNode, parents: tuple[cst.CSTNode, ...]) -> bool:
    """The scaled loss is added to or subtracted from another quantity that is not a number
    (`(loss.item() - reg_lambda * reg.item()) / alpha`): what is logged is another metric,
    whose scale the division by K leaves unknown, not the training loss."""
    if type(parent) is not cst.BinaryOperation or type(parent.operator) not in (cst.Add, cst.Subtract):
        return False
    path = parents[parents.index(parent) + 1:] + (node,)
    other = parent.right if path and path[0] is parent.left else parent.left
    return type(other) not in (cst.Integer, cst.Float)


def _multiplies_back(window: Window, node: cst.CSTNode) -> bool:
    return type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply and (
        window.is_k(node.left) or window.is_k(node.right)
    )


def _chain(node: cst.BaseExpression, parents: tuple[cst.CSTNode, ...]) -> cst.BaseExpression:
    """`loss` -> `loss.detach().item()`: climb through attribute access and calls on it."""
    top = node
    for parent in reversed(parents):
        if type(parent) is cst.Attribute and parent.value is top:
            top = parent
        elif type(parent) is cst.Call and parent.func is top:
            top = parent
        else:
            break
    return top


def _restore(window: Window, expressions: list[cst.BaseExpression], k: cst.BaseExpression) -> tuple[Edit, ...]:
    """Multiply each logged expression back by K; nothing when K's text holds the quote of an
    f-string the expression sits in (`f"{loss.item()}"` and `params["k"]`: before Python
    3.12 the quote would end the f-string)."""
    written = code(k)
    for expression in expressions:
        node: Optional[cst.CSTNode] = expression
        while node is not None:
            if type(node) is cst.FormattedString and node.start.lstrip("rRfFbB")[:1] in written:
                return ()
            node = window.facts.parents.get(id(node))
    edits = []
    for expression in expressions:
        product = cst.BinaryOperation(
            left=expression,
            operator=cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "),
                                  whitespace_after=cst.SimpleWhitespace(" ")),
            right=parenthesized(k),
        )
        edits.append(replace(expression, product))
    return tuple(edits)


LOGGED_LOSS_SCALED = Rule(
    code="GA601",
    name="logged-loss-scaled",
    fix="unsafe",
    summary="The logged training loss is the loss divided by K, so it reads K times too small.",
    check=logged_loss_scaled,
)
