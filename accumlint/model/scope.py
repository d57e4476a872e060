"""Whether code of the loop, as the loop spells it, can be written at another place of the module.

Fixes that copy K out of the loop (into a scheduler's length, an
`Accelerator(...)` constructor) may only do so when every name K reads is
bound where the copy goes: a parameter or local of the enclosing function, a
module-level name or an import, or `self` in a method of the same class.

A statement run once before the loop instead of inside it (GA101's zeroing)
must also act on the objects it acts on inside the loop: nothing may bind what
it reads between the loop's start and the statement, or the copy reads a name
or an attribute of `self` before the statement that first binds it (an
optimizer created in the loop, `self.opt = ...` there, a `global optimizer`
assigned there, `optimizer = None` before a lazy creation).
"""

from __future__ import annotations

from typing import Iterable, Optional

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


def same_before_loop(facts: ModuleFacts, statement: cst.CSTNode, loop: cst.CSTNode, function: Optional[Function]) -> bool:
    """Whether `statement`, a statement of `loop` (in `function`, None at module level),
    names the same objects just before the loop: nothing binds a name or attribute chain
    it reads (`optimizer`, `self.opt`, `self`) in the loop, in another function (a
    `global` or `nonlocal` declaration's assignments, which may run from the loop) or,
    for an attribute of `self`, in another method of the class than `__init__`."""
    read = _chains_read(statement)
    if any(chain in read for chain in _chains_bound(walk(loop))):
        return False
    owner = facts.class_of.get(function) if function is not None else None
    for other in [*facts.functions.values(), *facts.class_of]:
        if other is function:
            continue
        declared = {item.name.value for node in walk(other.body) if type(node) in (cst.Global, cst.Nonlocal)
                    for item in node.names}
        if declared & read:
            return False
        if owner is not None and facts.class_of.get(other) is owner and other.name.value != "__init__":
            if any(chain.startswith("self.") and chain in read for chain in _chains_bound(walk(other.body))):
                return False
    return True


def _chains_read(statement: cst.CSTNode) -> set[str]:
    """Every name and attribute chain the statement reads (`self.opt.zero_grad()` ->
    self, self.opt, self.opt.zero_grad)."""
    nodes = list(walk(statement))
    labels = {id(node.attr) for node in nodes if type(node) is cst.Attribute}
    labels |= {id(node.keyword) for node in nodes if type(node) is cst.Arg and node.keyword is not None}
    return {chain for node in nodes if type(node) in (cst.Name, cst.Attribute) and id(node) not in labels
            for chain in [dotted(node)] if chain is not None}


def _chains_bound(nodes: Iterable[cst.CSTNode]) -> Iterable[str]:
    """The names and attribute chains that assignments, loop and `with` targets, walruses,
    `del`, `except ... as` and imports among `nodes` bind (or unbind)."""
    for node in nodes:
        kind = type(node)
        if kind in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del):
            yield from _target_chains(node.target)
        elif kind is cst.AsName:  # `with ... as x`, `except E as x`, `import a as x`
            yield from _target_chains(node.name)
        elif kind is cst.Import:
            for alias in node.names:
                if alias.asname is None:
                    yield (dotted(alias.name) or "").split(".")[0]
        elif kind is cst.ImportFrom and type(node.names) is not cst.ImportStar:
            for alias in node.names:
                if alias.asname is None:
                    yield dotted(alias.name) or ""


def _target_chains(target: cst.CSTNode) -> Iterable[str]:
    kind = type(target)
    if kind is cst.Tuple or kind is cst.List:
        for element in target.elements:
            yield from _target_chains(element.value)
    elif kind is cst.StarredElement:
        yield from _target_chains(target.value)
    else:
        chain = dotted(target)
        if chain is not None:
            yield chain
