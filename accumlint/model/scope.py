"""Scope: whether an expression written at one place of a module can be evaluated at another.

Fixes that copy K from the loop into other code (a scheduler's length, an
`Accelerator(...)` constructor) may only do so when K's first name is bound
there: a parameter or local of the enclosing function, a module-level name or
an import, or `self` in a method of the same class.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from accumlint.model.facts import Function, ModuleFacts
from accumlint.model.tree import walk
from accumlint.model.names import dotted, int_value


def enclosing_function(facts: ModuleFacts, node: cst.CSTNode) -> Optional[Function]:
    """The innermost module-level function or method whose body holds `node`."""
    found: Optional[Function] = None
    size = None
    for function in [*facts.functions.values(), *facts.class_of]:
        if any(inner is node for inner in walk(function.body)):
            length = len(list(walk(function.body)))
            if size is None or length < size:
                found, size = function, length
    return found


def in_scope(facts: ModuleFacts, expr: cst.BaseExpression, at: cst.CSTNode, origin: Optional[Function]) -> bool:
    """Whether `expr` (as written in `origin`) means the same thing at node `at`."""
    if int_value(expr) is not None:
        return True
    name = dotted(expr)
    if name is None or name.endswith("()") or "[]" in name:
        return False
    base = name.split(".")[0]
    function = enclosing_function(facts, at)
    if base == "self":
        return function is not None and origin is not None and facts.class_of.get(function) is facts.class_of.get(origin) \
            and function in facts.class_of
    if function is not None:
        params = function.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        if any(param.name.value == base for param in every):
            return True
        if any(any(node is binding.statement for node in walk(function.body)) for binding in facts.bindings.get(base, ())):
            return True
    if base in facts.imports:
        return True
    return any(
        isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Assign) and any(dotted(t.target) == base for t in small.targets)
            for small in statement.body
        )
        for statement in facts.module.body
    )
