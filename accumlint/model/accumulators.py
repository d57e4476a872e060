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
from typing import NamedTuple, Optional, cast

import libcst as cst

from accumlint.model.facts import Function
from accumlint.model.loop import Statement, lightning_returned_loss
from accumlint.model.loss import VALUE_KEEPING_METHODS, criterion_named, operand_in, split_scaling
from accumlint.model.names import code, dotted, last_part
from accumlint.model import scopes
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
        if _local_to_each_call(window, statement, holder):
            continue
        found.append(Accumulation(statement, holder, added))
    return found


def _local_to_each_call(window: Window, statement: Statement, holder: str) -> bool:
    """A holder of a helper the loop calls that the helper binds afresh at its own top level
    on every call (`total_loss = []` in `validation(...)`), added to outside any loop of the
    helper: each call's holder has one value and goes when the helper returns, whatever
    gate the call runs under."""
    helper = statement.helper
    if helper is None or "." in holder or holder not in scopes.local_names(helper):
        return False
    if any(window.facts.enclosing_function(loop) is helper for loop in statement.loops):
        return False  # summed over a loop of the helper's own: its graphs stay until it returns
    body = helper.body.body if type(helper.body) is cst.IndentedBlock else ()
    return any(type(line) is cst.SimpleStatementLine and any(
        type(small) is cst.Assign and _self_sum(small) is None and holder in {dotted(t.target) for t in small.targets}
        for small in line.body) for line in body)


def graphs_kept(window: Window) -> list[tuple[Accumulation, str]]:
    """The accumulations that keep the autograd graph of the loss the window's backward runs
    alive (`total_loss += loss`), each with the name it adds: the loss, a term of it, or
    another name it has in that statement's scope (an alias, a copy). Not kept: a value that
    is not the loss, or keeps no graph there (`.item()`, under `torch.no_grad()`, a loss that
    a branch of this scope detached); a holder that exists to keep graphs (a queue for a later
    backward, a `training_step`'s returned total); the other element of a loss function's
    returned tuple (`loss, per_sample, acc = f(...)`), and a term of the loss unpacked from the
    returned tuple of a call whose code the model does not read (`logits, ce_loss, kl_loss =
    model(x)`, SPEC: losses inside returned tuples)."""
    names = _graph_names(window)
    if not names.loop and not names.scoped:
        return []
    terms = {term for flow in window.flows for term in flow.loss_terms} - {flow.name for flow in window.flows}
    found = []
    for accumulation in accumulations(window):
        statement, holder, added = accumulation.statement, accumulation.holder, accumulation.added
        if window.builds_no_graph(statement):
            continue  # `with torch.no_grad(): metrics += loss` keeps no graph
        if _number_in_its_arm(statement, added):
            continue  # `if not isinstance(v, int): total += v.item() else: total += v`: a number there
        known = names.in_scope(statement.helper)
        name = dotted(split_scaling(kept_tensor(added), None)[0])  # `loss * n_tokens` keeps `loss`'s graph
        if name not in known:
            name = operand_in(added, known, holder)  # a running mean: `avg += (loss - avg) / n`
        if name is None or name not in known or not window.may_hold_graph(statement, name) \
                or backpropagated_later(window, holder, statement):
            continue
        if any(scope is not statement.helper for scope in names.helper_terms.get(name, ())) \
                and window.unpacked_from_call(statement, name):
            continue  # another element of the tuple a loss function returns
        if name in terms and window.unpacked_from_call(statement, name, unseen=True):
            continue  # a term of the loss a model returns beside others (`logits, ce, kl = model(x)`)
        if name in terms and _from_unknown_callable(window, statement, name):
            continue
        found.append((accumulation, name))
    return found


def _from_unknown_callable(window: Window, statement: Statement, name: str) -> bool:
    """A term of the loss (`loss_reg` in `loss = loss / gc + loss_reg`) that its scope binds
    only to numbers and to what a callable parameter returns (`loss_reg = reg_fn(model) *
    lambda_reg` when `reg_fn` is given, else `0`): whether it is a tensor at all is unknown."""
    function = window.facts.enclosing_function(statement.node)
    if function is None:
        return False
    parameters = scopes.all_parameters(function)
    bindings = [b for b in window.facts.bindings.get(name, ()) if window.facts.enclosing_function(b.statement) is function]
    if not bindings:
        return False
    called = False
    for binding in bindings:
        value = binding.value
        if binding.index is None and type(value) in (cst.Integer, cst.Float):
            continue
        while type(value) is cst.BinaryOperation and type(value.operator) in (cst.Multiply, cst.Divide):
            value = value.left if type(value.left) is cst.Call else value.right
        func = value.func if type(value) is cst.Call else None
        if binding.index is not None or type(func) is not cst.Name or func.value not in parameters \
                or criterion_named(func.value):
            return False
        called = True
    return called


class _GraphNames(NamedTuple):
    """The names that hold the graph of the loss the window's backward runs."""

    loop: frozenset[str]  # the loss flows' names and terms, read in every scope
    scoped: frozenset[tuple[Optional[Function], str]]  # (scope, name): an alias or a copy of the loss there
    # a term of a loss that a helper combines (`loss = torch.mean(loss_list)` in `loss_func`) -> those
    # helpers: the same name unpacked from the helper's returned tuple elsewhere is another result of it
    helper_terms: dict[str, frozenset[Optional[Function]]]

    def in_scope(self, scope: Optional[Function]) -> set[str]:
        """The names that hold the loss's graph in a statement of `scope` (a helper, or the loop's function)."""
        return set(self.loop) | {name for where, name in self.scoped if where is scope}


def _graph_names(window: Window) -> _GraphNames:
    flows = window.flows
    # a flow's name counts when its reduction is read, or when it is named for a loss
    names = {flow.name for flow in flows if flow.name is not None and (flow.reduction != "unknown" or "loss" in flow.name)}
    # the container of a loss kept by key (`loss` of `loss["loss"]`) is a dict or list of losses: SPEC, silent
    containers = {name.removesuffix("[]") for name in names if name.endswith("[]")}
    terms = {term for flow in flows for term in flow.loss_terms} - names - containers
    helper_terms: dict[str, set[Optional[Function]]] = {}
    for flow in flows:
        if flow.origin_statement is not None and flow.origin_statement.helper is not None:
            for term in flow.loss_terms & terms:
                helper_terms.setdefault(term, set()).add(flow.origin_statement.helper)
    names |= terms
    aliases = {(scope, alias) for flow in flows for scope, alias in flow.aliases if "loss" in alias.lower()}
    # copies of the backward's loss (`loss_train = l1`) count too; with no named loss, those named for one
    read = {alias for flow in flows for _, alias in flow.aliases}
    copies = copies_of(window, names | read)
    if not names:
        copies = {(scope, copy) for scope, copy in copies if "loss" in copy.lower()}
    return _GraphNames(frozenset(names), frozenset(aliases | copies),
                       {term: frozenset(scopes) for term, scopes in helper_terms.items()})


def copies_of(window: Window, names: set[str]) -> set[tuple[Optional[Function], str]]:
    """(scope, name) for each name the iteration binds by plain assignment to one of `names`,
    or to such a copy made in the same scope (`loss_train = l1`, then `total += loss_train`):
    each is the same tensor there. A helper's `x = loss` is not the loop's `x`."""
    copies: set[tuple[Optional[Function], str]] = set()
    grew = True
    while grew:
        grew = False
        for statement in window.loop.statements:
            scope = statement.helper
            for small in statement.node.body:
                if type(small) is not cst.Assign or len(small.targets) != 1:
                    continue
                if type(small.value) not in (cst.Name, cst.Attribute):
                    continue  # `logs = output["log"]` beside `loss = output["loss"]` is another value
                target, value = dotted(small.targets[0].target), dotted(small.value)
                if target is None or value is None or target in names or (scope, target) in copies:
                    continue
                if value in names or (scope, value) in copies:
                    copies.add((scope, target))
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


def backpropagated_later(window: Window, holder: str, statement: Optional[Statement] = None) -> bool:
    """The holder is a queue of graphs that a backward after the loop consumes
    (`losses.append(loss)` in the loop, `sum(losses).backward()` after it), or that the helper
    adding to it sums into what it returns (`loss = sum(losses)`, then `return loss, stats`:
    the loss its caller backpropagates): keeping the graphs is its purpose."""
    pattern = re.compile(rf"\b{re.escape(holder)}\b")
    later = [code(s) for s in window.loop.site.siblings(before=False)]
    if any(pattern.search(text) and "backward" in text for text in later) or _returned_to_lightning(window, holder):
        return True
    if _gathered_into_backward(window, holder):
        return True
    helper = statement.helper if statement is not None else None
    return helper is not None and _summed_into_return(helper, holder)


_GATHERING = frozenset({"sum", "stack", "cat", "mean"})
# a list of losses may also feed the backward through the worst or best of them
_PICKING = frozenset({"max", "min"})


def _gathered_into_backward(window: Window, holder: str) -> bool:
    """The iteration binds the loss that a backward of the window runs to the holder's
    tensors gathered or picked (`loss = max(loss_list)`, then `scaler.scale(loss).backward()`):
    the holder collects graphs for that backward, not for a log."""
    backpropagated = {flow.name for flow in window.flows if flow.name is not None}
    for statement in window.loop.statements:
        for small in getattr(statement.node, "body", ()):
            if type(small) is cst.Assign and len(small.targets) == 1 \
                    and dotted(small.targets[0].target) in backpropagated \
                    and (_gathers(small.value, holder) or _picks(small.value, holder)):
                return True
    return False


def _picks(value: cst.BaseExpression, holder: str) -> bool:
    """`max(holder)`, `min(holder)`: one of the holder's tensors, graph and all."""
    return type(value) is cst.Call and dotted(value.func) in _PICKING and len(value.args) == 1 \
        and dotted(value.args[0].value) == holder.removesuffix("[]")


def _summed_into_return(function: Function, holder: str) -> bool:
    """`function` binds a name to the holder gathered (`sum(losses)`, `torch.stack(losses).mean()`)
    and returns that name (alone or in a tuple), or returns the gathering itself."""
    gathered: set[str] = set()
    for node in walk(function.body):
        if type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name \
                and _gathers(node.value, holder):
            gathered.add(node.targets[0].target.value)
    for node in walk(function.body):
        if type(node) is not cst.Return or node.value is None:
            continue
        values = [e.value for e in node.value.elements] if type(node.value) is cst.Tuple else [node.value]
        if any(dotted(value) in gathered or _gathers(value, holder) for value in values):
            return True
    return False


def _gathers(value: cst.BaseExpression, holder: str) -> bool:
    """`sum(holder)`, `torch.stack(holder)`, `torch.cat(holder).mean()`: the holder's tensors
    combined into one (of a holder written to by element, `losses[i] += loss`, the list)."""
    container = holder.removesuffix("[]")
    return any(type(node) is cst.Call and last_part(dotted(node.func) or "") in _GATHERING and node.args
               and dotted(node.args[0].value) == container for node in walk(value))


def _returned_to_lightning(window: Window, holder: str) -> bool:
    """The holder is what a `training_step` returns for Lightning to backpropagate (`loss +=
    chunk_loss` over the chunks, then `return {"loss": loss}`), itself or through a method of
    its class that returns the holder (`sampling_loss, training_loss = self.compute_loss(batch)`
    then `return training_loss`, where `compute_loss` sums the chunks' losses)."""
    function = window.loop.function
    if function is None:
        return False
    if function.name.value == "training_step":
        return any(type(node) is cst.Return and node.value is not None
                   and dotted(lightning_returned_loss(node.value, function)) == holder for node in walk(function.body))
    positions = _returned_positions(function, holder)
    step = window.facts.method(function, "training_step")
    if not positions or step is None or step is function:
        return False
    returned = {dotted(lightning_returned_loss(node.value, step)) for node in walk(step.body)
                if type(node) is cst.Return and node.value is not None}
    callee = f"self.{function.name.value}"
    for node in walk(step.body):
        if type(node) is cst.Return and type(node.value) is cst.Call and dotted(node.value.func) == callee:
            if None in positions:
                return True
        if type(node) is not cst.Assign or type(node.value) is not cst.Call or dotted(node.value.func) != callee:
            continue
        for target in node.targets:
            if type(target.target) is cst.Name and None in positions and target.target.value in returned:
                return True
            if type(target.target) in (cst.Tuple, cst.List):
                elements = cast("cst.Tuple | cst.List", target.target).elements
                if any(index in positions and dotted(element.value) in returned for index, element in enumerate(elements)):
                    return True
    return False


def _returned_positions(function: cst.FunctionDef, holder: str) -> set[Optional[int]]:
    """Where `function`'s returns give the holder: None for the whole value, an index for an
    element of a returned tuple."""
    found: set[Optional[int]] = set()
    for node in walk(function.body):
        if type(node) is not cst.Return or node.value is None:
            continue
        if dotted(node.value) == holder:
            found.add(None)
        elif type(node.value) is cst.Tuple:
            found.update(index for index, element in enumerate(node.value.elements) if dotted(element.value) == holder)
    return found


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
    but `list(...)`, before the loop ends (`total_loss = np.average([l.item() for l in
    total_loss])` after the loop makes a number of the list the loop filled)."""
    after = {id(node) for statement in window.loop.site.siblings(before=False) for node in walk(statement)}
    for binding in window.facts.bindings.get(holder, ()):
        if id(binding.statement) in after:
            continue
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


_NUMBER_TYPES = frozenset({"int", "float", "numbers.Number", "Number"})


def _number_in_its_arm(statement: Statement, added: cst.BaseExpression) -> bool:
    """The statement sits in the arm of a type test that says the added value is a plain number
    (`isinstance(v, (int, float))`, or the `else` of `not isinstance(v, int)`): it holds no graph."""
    name = dotted(added)
    if name is None:
        return False
    for index, node in enumerate(statement.block):
        if type(node) is not cst.If or index + 1 >= len(statement.block):
            continue
        arm = statement.block[index + 1]
        test, numeric_arm = node.test, arm is node.body
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, numeric_arm = test.expression, not numeric_arm
        if not numeric_arm or type(test) is not cst.Call or dotted(test.func) != "isinstance" or len(test.args) != 2:
            continue
        types = test.args[1].value
        named = [e.value for e in types.elements] if type(types) is cst.Tuple else [types]
        if dotted(test.args[0].value) == name and named and all(dotted(t) in _NUMBER_TYPES for t in named):
            return True
    return False
