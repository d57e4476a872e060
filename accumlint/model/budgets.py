"""Step counters and the budgets they are compared with.

A counter of optimizer steps (`completed_steps`, `global_step`, `num_updates`)
is only meaningful against a budget in the same unit. The module says a
budget is in optimizer steps when the value (or a binding it reads) is divided
by K, `max_train_steps = epochs * ceil(len(loader) / K)`, or when it is the
length of a scheduler that is not itself sized in micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import libcst as cst

from accumlint.model.facts import Function, ModuleFacts
from accumlint.model.loop import Statement
from accumlint.model.names import adds_one, dotted, int_value, looks_like_accumulation
from accumlint.model.schedules import (
    IsK,
    length_arguments,
    micro_batch_length,
    optimizer_step_value,
    referenced_names,
    scheduler_constructors,
)
from accumlint.model.tree import walk
from accumlint.model.window import Window
from accumlint.source.patterns import LazyPattern

_STEP_COUNTER = LazyPattern(r"(?i)(^|_)(step|update)s?(_(count|num|idx))?$|^n?_?updates$")
_ORDERING = (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal, cst.LessThan, cst.LessThanEqual)


@dataclass(frozen=True, eq=False)
class Increment:
    """`counter += 1` in an iteration."""

    counter: str
    statement: Statement


def step_counter_increments(window: Window) -> list[Increment]:
    """`+= 1` (`names.adds_one`) on names that mean optimizer steps (not micro-steps, not
    accumulation counts)."""
    found = []
    for statement in window.loop.statements:
        for small in statement.node.body:
            name = adds_one(small)
            if name is None:
                continue
            tail = name.rsplit(".", 1)[-1]
            if _STEP_COUNTER.search(tail) and "micro" not in tail.lower() and not looks_like_accumulation(tail):
                found.append(Increment(name, statement))
    return found


def step_budget(window: Window, counter: str, is_k: IsK) -> Optional[cst.Comparison]:
    """A comparison of `counter` with a value in optimizer steps, anywhere in the module (for a
    plain name, in the loop's own function: another function's `step` is another variable)."""
    local = "." not in counter
    for node, side, other in _orderings(window.facts.module):
        if local and window.facts.enclosing_function(node) is not window.loop.function:
            continue
        if dotted(side) == counter and _in_optimizer_steps(window, other, is_k, node):
            return node
    return None


def _orderings(root: cst.CSTNode) -> Iterator[tuple[cst.Comparison, cst.BaseExpression, cst.BaseExpression]]:
    """Each one-operator ordering or equality under `root` (`step >= max_steps`), once for
    each side: (the comparison, that side, the other side)."""
    for node in walk(root):
        if type(node) is not cst.Comparison or len(node.comparisons) != 1:
            continue
        target = node.comparisons[0]
        if not isinstance(target.operator, _ORDERING):
            continue
        yield node, node.left, target.comparator
        yield node, target.comparator, node.left


def _in_optimizer_steps(window: Window, value: cst.BaseExpression, is_k: IsK, where: cst.CSTNode) -> bool:
    if int_value(value) is not None:
        return False
    if type(value) is cst.BinaryOperation and type(value.operator) is cst.Multiply and (is_k(value.left) or is_k(value.right)):
        return False  # `max_steps * gradient_accumulation_steps`: the budget converted to micro-batches
    if optimizer_step_value(window.facts, value, is_k):
        return True
    facts = window.facts
    # each name with the function it is read in: a plain name is the same variable only in the
    # same function (`num_training_steps`, a parameter of both the training method and the
    # method that builds the schedule, is two variables)
    # (not a loader a `len(...)` is taken of: its length counts micro-batches, whatever else reads it)
    read = {(name, facts.enclosing_function(where)) for name in referenced_names(value, keyed=True, lengths=False)}
    for name, _ in list(read):  # `self.total_updates = total_updates`: either spelling
        for binding in facts.bindings.get(name, ()):
            scope = facts.enclosing_function(binding.statement)
            read |= {(other, scope) for other in referenced_names(binding.value, keyed=True, lengths=False)}
    if not read:
        return False
    if _divided_by_k(facts, read, is_k):
        return False  # `max_steps // K` elsewhere: the module counts the budget in micro-batches
    if any(micro_batch_length(facts, window.objects, binding.value, is_k) is not None
           for name, _ in read for binding in facts.bindings.get(name, ()) if binding.value is not None):
        return False  # `max_steps = epochs * len(loader)` in one arm: the budget counts micro-batches there
    for call in facts.calls:
        if window.objects.built_kind(call, None) != "scheduler" or _stepped_per_micro_batch(window, call):
            continue  # a schedule the loop steps on every micro-batch is sized in micro-batches
        here = facts.enclosing_function(call)
        shared_here = {name for name, scope in read if "." in name or scope is here}
        for argument in length_arguments(call):
            if shared_here & _length_names(facts, argument, here):
                return micro_batch_length(window.facts, window.objects, argument, is_k) is None
    return False


def _divided_by_k(facts: ModuleFacts, read: "set[tuple[str, Optional[Function]]]", is_k: IsK) -> bool:
    """A name of `read` ((name, the function it is read in) pairs) divided by K somewhere in the
    module (`self.max_steps // self.gradient_accumulation_steps`): converted to optimizer steps
    there, so it counts micro-batches itself (a plain name, in its own function)."""
    for name, node in facts.once(_named_divisions, facts.module):
        if is_k(node.right) and any(name == wanted and ("." in wanted or facts.enclosing_function(node) is scope)
                                    for wanted, scope in read):
            return True
    return False


def _named_divisions(module: cst.CSTNode) -> list[tuple[str, cst.BinaryOperation]]:
    """Each division of a name (`max_steps // K`, `self.max_steps / K`) in the tree, with the name."""
    return [(name, node) for node in walk(module)
            if type(node) is cst.BinaryOperation and type(node.operator) in (cst.Divide, cst.FloorDivide)
            and (name := dotted(node.left)) is not None]


def _length_names(facts: ModuleFacts, argument: cst.BaseExpression, scope: Optional[Function]) -> set[str]:
    """The names a schedule's length argument reads, and those its plain names are bound to in
    the function that builds the schedule (`t_total = args.max_steps`, then
    `num_training_steps=t_total`: the length is `args.max_steps` too)."""
    names = set(referenced_names(argument, keyed=True))
    for name in list(names):
        if "." in name:
            continue
        for binding in facts.bindings.get(name, ()):
            if binding.index is None and facts.enclosing_function(binding.statement) is scope:
                names |= set(referenced_names(binding.value, keyed=True))
    return names


def _stepped_per_micro_batch(window: Window, constructor: cst.Call) -> bool:
    """The loop steps the scheduler `constructor` builds on every micro-batch (ungated,
    unconditional): its length counts micro-batches, whatever it is named."""
    for event in window.loop.of_kind("sched"):
        if not window.event_once_per_window(event) and window.runs_every_micro_batch(event.statement) and any(
                built is constructor
                for built in scheduler_constructors(window.facts, window.objects, event.role.receiver)):
            return True
    return False


def micro_batch_budgets(window: Window) -> set[str]:
    """The names a comparison in the loop's function reads against a counter the loop
    increments by one on every micro-batch (`n_step += 1` ungated, then `if n_step >=
    config.n_training_steps: break`): budgets counted in micro-batches. A schedule whose
    length is one of them keeps the run's pace when it steps on every micro-batch."""
    counters: set[str] = set()
    for statement in window.loop.statements:
        if statement.gate is not None or statement.conditional:
            continue
        counters.update(name for small in statement.node.body if (name := adds_one(small)) is not None)
    if not counters or window.loop.function is None:
        return set()
    found: set[str] = set()
    for _, side, other in _orderings(window.loop.function.body):
        if dotted(side) in counters:
            found.update(referenced_names(other, keyed=True))
    return found
