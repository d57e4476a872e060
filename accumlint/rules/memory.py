"""GA5xx: memory that grows with every micro-batch."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from accumlint.fix.edits import filled_expression, parenthesized, replace
from accumlint.model.accumulators import accumulations, backpropagated_later, copies_of, kept_tensor
from accumlint.model.loss import operand_in, split_scaling
from accumlint.model.names import code, dotted, keyword
from accumlint.model.window import Window
from accumlint.rules.base import Finding
from accumlint.rules.catalog import Rule

def graph_kept_alive(window: Window) -> Iterable[Finding]:
    names = {flow.name for flow in window.flows if flow.name is not None and flow.reduction != "unknown" or
             flow.name is not None and "loss" in flow.name}
    terms = {term for flow in window.flows for term in flow.loss_terms} - names
    names |= terms
    # the terms of losses combined in a helper (`loss = torch.mean(loss_list)` in `loss_func`), each with
    # that helper: in the loop, the same name unpacked from the helper's tuple is one of its results
    helper_terms = {(term, flow.origin_statement.helper) for flow in window.flows
                    if flow.origin_statement is not None and flow.origin_statement.helper is not None
                    for term in flow.loss_terms}
    aliases = {(scope, alias) for flow in window.flows for scope, alias in flow.aliases if "loss" in alias.lower()}
    # copies of the backward's loss (`loss_train = l1`) under a loss's name count too
    read = {alias for flow in window.flows for _, alias in flow.aliases}
    names |= copies_of(window, names | read) if names else {c for c in copies_of(window, read) if "loss" in c.lower()}
    if not names and not aliases:
        return
    for accumulation in accumulations(window):
        statement, holder, added = accumulation.statement, accumulation.holder, accumulation.added
        if window.builds_no_graph(statement):
            continue  # `with torch.no_grad(): metrics += loss` keeps no graph
        # the backward's loss under the other names it had in this statement's scope
        known = names | {alias for scope, alias in aliases if scope is statement.helper}
        name = dotted(split_scaling(kept_tensor(added), None)[0])  # `loss * n_tokens` keeps `loss`'s graph
        if name not in known:
            name = operand_in(added, known, holder)  # a running mean: `avg += (loss - avg) / n`
        if name not in known or not window.may_hold_graph(statement, name) or backpropagated_later(window, holder):
            continue
        if name in terms and any(term == name and scope is not statement.helper for term, scope in helper_terms) \
                and window.unpacked_from_call(statement, name):
            continue  # another element of the tuple a loss function returns (`loss, per_sample, acc = f(...)`)
        yield Finding(
            statement.node,
            f"`{name}` is kept in `{holder}` with its autograd graph",
            (replace(added, filled_expression("__added__.detach()", __added__=parenthesized(added))),),
            f"Keep `{name}.detach()`",
            help=f"every micro-batch's graph stays alive; keep `{name}.detach()` (or `{name}.item()`)",
        )


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
