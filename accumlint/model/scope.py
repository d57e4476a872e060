"""Whether K, as the loop spells it, can be written at another place of the module.

Fixes that copy K out of the loop (into a scheduler's length, an
`Accelerator(...)` constructor) may only do so when every name K reads is
bound where the copy goes: a parameter or local of the enclosing function, a
module-level name or an import, or `self` in a method of the same class.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from accumlint.model import scopes
from accumlint.model.facts import Function, ModuleFacts
from accumlint.model.names import dotted
from accumlint.model.tree import walk


def enclosing_function(facts: ModuleFacts, node: cst.CSTNode) -> Optional[Function]:
    """The innermost module-level function or method whose body holds `node`."""
    found: Optional[Function] = None
    size = None
    for function in [*facts.functions.values(), *facts.class_of]:
        nodes = list(walk(function.body))
        if any(inner is node for inner in nodes) and (size is None or len(nodes) < size):
            found, size = function, len(nodes)
    return found


def in_scope(facts: ModuleFacts, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Whether `expr` means the same thing at node `at` (`self.k` only when it is set
    earlier in the same method)."""
    function = enclosing_function(facts, at)
    bound = scopes.module_names(facts.module) | set(facts.imports)
    if function is not None:
        bound |= set(scopes.parameters(function)) | scopes.local_names(function)
    for name in scopes.free_names(expr):
        if name == "self":
            if function is None or function not in facts.class_of or not _bound_before(facts, expr, function, at):
                return False
        elif name not in bound:
            return False
    return True


def _bound_before(facts: ModuleFacts, expr: cst.BaseExpression, function: Function, at: cst.CSTNode) -> bool:
    """`self.k` is assigned in `function` before `at` (so the copy reads a set attribute)."""
    statements = {id(binding.statement) for binding in facts.bindings.get(dotted(expr) or "", ())}
    for node in walk(function.body):
        if node is at:
            return False
        if id(node) in statements:
            return True
    return False
