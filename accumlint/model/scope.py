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


def in_scope(facts: ModuleFacts, expr: cst.BaseExpression, at: cst.CSTNode, origin: Optional[Function]) -> bool:
    """Whether `expr` (as written in function `origin`) means the same thing at node `at`."""
    function = enclosing_function(facts, at)
    bound = scopes.module_names(facts.module) | set(facts.imports)
    if function is not None:
        bound |= set(scopes.parameters(function)) | scopes.local_names(function)
    for name in scopes.free_names(expr):
        if name == "self":
            same_class = function is not None and facts.class_of.get(function) is facts.class_of.get(origin)
            if not same_class or function not in facts.class_of:
                return False
        elif name not in bound:
            return False
    return True
