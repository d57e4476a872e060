"""Forwards: where an iteration calls the model that a sync control concerns.

DDP decides at the forward whether the next backward all-reduces, so a sync
control must come before the model's forward. A forward is a call of the model
itself (`model(x)`, `self.model(**batch)`, `model.module(x)` is not one: it
bypasses DDP). A statement that calls a function the module does not define
may hide a forward: such statements make the answer unknown.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from accumlint.model.loop import Statement
from accumlint.model.tree import calls_in
from accumlint.model.names import dotted
from accumlint.model.roles import Objects
from accumlint.source.patterns import LazyPattern

_HARMLESS = {"len", "float", "int", "range", "print", "sum", "min", "max", "isinstance"}
_LOSS_NAME = LazyPattern(r"loss|criterion|crit", re.IGNORECASE)


def forwards_of(statements: list[Statement], model: Optional[cst.BaseExpression]) -> list[Statement]:
    """The statements that call `model(...)` directly."""
    name = dotted(model) if model is not None else None
    if name is None:
        return []
    return [s for s in statements if any(dotted(call.func) == name for call in calls_in(s.node))]


def may_hide_forward(statement: Statement, model: Optional[cst.BaseExpression], objects: Objects) -> bool:
    """The statement calls a plain function (`_forward()`, `run_model(batch)`) that could run
    the model, or passes the model to a call. Loss functions and criteria do not."""
    name = dotted(model) if model is not None else None
    for call in calls_in(statement.node):
        func = call.func
        if type(func) is cst.Name and func.value not in _HARMLESS and not _LOSS_NAME.search(func.value):
            if objects.kind_of(func) != "loss":
                return True
        if name is not None and any(dotted(arg.value) == name for arg in call.args):
            return True
    return False
