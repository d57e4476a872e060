"""How often a statement runs in an accumulating loop: on every micro-batch, or once per window.

`Window.runs_every_micro_batch` treats any condition as "not every micro-batch".
Work such as an EMA update or a step counter is usually wrapped in a
configuration test (`if args.use_ema:`, `if model_ema is not None:`) that is
true for the whole run; those tests do not change how often it runs. Nor does
a test that picks a stretch of the loop's micro-batches: the loop's own counter
ordered against a value (`if step < resume_step:`, the micro-batches a resumed
run skips) or an enclosing loop's counter compared with one (`epoch ==
starting_epoch`); inside the stretch the statement runs on each micro-batch.
Any other condition (an `else` arm, an `except` handler, a `%` test) leaves
the cadence unknown, and unknown is silent.
"""

from __future__ import annotations

from typing import Callable, Optional, cast

import libcst as cst

from accumlint.model.loop import Statement
from accumlint.model.names import call_name, dotted, string_value
from accumlint.model.window import Window


def every_micro_batch(window: Window, statement: Statement, stretches: bool = True) -> bool:
    """The statement runs on each micro-batch (configuration flags aside; with `stretches`,
    on each micro-batch of the stretch of them that its tests pick)."""
    if statement.gate is not None:
        return False
    stretch = _stretch_tests(window) if stretches else None
    if window.loop.micro_loop is not None and not _entry_counted(window, statement):
        return window.loop.in_micro_loop(statement) and _only_flags(statement, after=window.loop.micro_loop)
    return not statement.conditional or _only_flags(statement, stretch=stretch)


def _entry_counted(window: Window, statement: Statement) -> bool:
    """A statement after an inner loop (over datasets, pieces) but inside the same
    `accelerator.accumulate(...)` of an Accelerator with K: accelerate counts micro-batches by
    entries into `accumulate()`, so the statement runs once per micro-batch, whatever the
    inner loop does."""
    return (window.accumulate_k is not None and window.accumulate_context(statement)
            and not window.loop.in_micro_loop(statement))


def accumulate_accelerator(window: Window) -> Optional[cst.BaseExpression]:
    """The Accelerator whose `accumulate(...)` the loop enters (its receiver expression)."""
    for statement in window.loop.statements:
        call = window.accumulate_call(statement)
        if call is not None and type(call.func) is cst.Attribute:
            return call.func.value
    return None


def _stretch_tests(window: Window) -> Callable[[cst.BaseExpression], bool]:
    """Whether a test picks a stretch of the window's micro-batches (see the module's docstring)."""
    counter = window.loop.counter
    outer = _outer_counters(window.loop.site.ancestors)

    def picks(test: cst.BaseExpression) -> bool:
        if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
            return all(is_flag(side) or picks(side) for side in (test.left, test.right))
        if type(test) is not cst.Comparison or len(test.comparisons) != 1:
            return False
        operator = type(test.comparisons[0].operator)
        sides = (dotted(test.left), dotted(test.comparisons[0].comparator))
        if operator in _ORDERINGS:
            return counter is not None and counter in sides
        return operator in (cst.Equal, cst.NotEqual) and any(side in outer for side in sides if side is not None)

    return picks


_ORDERINGS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def _outer_counters(ancestors: tuple[cst.CSTNode, ...]) -> frozenset[str]:
    """The names that the `for` loops enclosing the window's loop bind (`for epoch in ...`)."""
    found: set[str] = set()
    for node in ancestors:
        if type(node) is cst.For:
            target = node.target
            parts = [e.value for e in cast("cst.Tuple | cst.List", target).elements] \
                if type(target) in (cst.Tuple, cst.List) else [target]
            found.update(name for part in parts if (name := dotted(part)) is not None)
    return frozenset(found)


def _only_flags(statement: Statement, after: Optional[cst.CSTNode] = None,
                stretch: Optional[Callable[[cst.BaseExpression], bool]] = None) -> bool:
    path = list(statement.block)
    if after is not None:
        if after not in path:
            return False
        path = path[path.index(after) + 1:]
    for index, node in enumerate(path):
        following = path[index + 1] if index + 1 < len(path) else None
        if type(node) is cst.If:
            if following is not node.body or not (is_flag(node.test) or (stretch is not None and stretch(node.test))):
                return False
        elif type(node) is cst.Try or type(node) is cst.TryStar:
            if following is not node.body:
                return False
    return True


def is_flag(test: cst.BaseExpression) -> bool:
    """`args.use_ema`, `model_ema is not None`, `not args.no_ema`, `hasattr(self, "ema_unet")`
    (whether the run built an object, fixed for the whole run), and `and` of those."""
    if type(test) is cst.Call and call_name(test) == "hasattr" and len(test.args) == 2 \
            and dotted(test.args[0].value) is not None and string_value(test.args[1].value) is not None:
        return True
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return is_flag(test.expression)
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return is_flag(test.left) and is_flag(test.right)
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        return (
            type(target.operator) in (cst.IsNot, cst.Is)
            and type(target.comparator) is cst.Name and target.comparator.value == "None"
            and dotted(test.left) is not None
        )
    name = dotted(test)
    return name is not None and not name.endswith("()") and not name.endswith("sync_gradients")
