"""Scopes: which names code in a same-module helper can read, and what they hold.

A fix written inside a helper may only name what is in scope there: a name the
module binds at top level (and the helper does not rebind), or one of the
helper's parameters. When the loop's K is a local of the caller, the helper
knows it only through the parameter the call passes it to.
"""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from accumlint.model.facts import Function, ModuleFacts
from accumlint.model.tree import children, walk
from accumlint.model.names import normalized


def free_names(expr: cst.BaseExpression) -> set[str]:
    """Names an expression reads (`args.steps // world` -> {"args", "world"})."""
    attributes = {id(node.attr) for node in walk(expr) if type(node) is cst.Attribute}
    return {node.value for node in walk(expr) if type(node) is cst.Name and id(node) not in attributes}


def module_names(module: cst.Module) -> set[str]:
    """Names bound at module level, in any top-level block (`if __name__ == ...:` too)."""
    found: set[str] = set()
    for statement in _top_level(module.body):
        if type(statement) in (cst.FunctionDef, cst.ClassDef):
            found.add(statement.name.value)
        elif type(statement) in (cst.For, cst.With):
            found |= _targets(statement)
        elif type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                found |= _targets(small)
    return found


def _top_level(body) -> Iterator[cst.CSTNode]:
    """Statements run at module level: the top-level ones and those in their blocks,
    never inside a function or class body."""
    stack = list(reversed(list(body)))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BaseStatement):
            yield node
        if type(node) in (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine):
            continue
        stack.extend(reversed([child for child in children(node) if not isinstance(child, cst.BaseExpression)]))


def _targets(node: cst.CSTNode) -> set[str]:
    """Names a statement binds (assignment and loop targets, imports, `with ... as`)."""
    targets: list[cst.CSTNode] = []
    if type(node) is cst.Assign:
        targets = [t.target for t in node.targets]
    elif type(node) in (cst.AnnAssign, cst.AugAssign, cst.For):
        targets = [node.target]
    elif type(node) is cst.With:
        targets = [item.asname.name for item in node.items if item.asname is not None]
    elif type(node) in (cst.Import, cst.ImportFrom) and type(node.names) is not cst.ImportStar:
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            while type(bound) is cst.Attribute:
                bound = bound.value
            targets.append(bound)
    return {n.value for t in targets for n in walk(t) if type(n) is cst.Name
            and type(t) is not cst.Attribute}


def parameters(function: Function) -> list[str]:
    params = function.params
    return [p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]]


def local_names(function: Function) -> set[str]:
    """Names the function binds itself (parameters included): they hide module names."""
    found = set(parameters(function))
    for node in walk(function.body):
        if type(node) in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.With, cst.Import, cst.ImportFrom):
            found |= _targets(node)
    return found


def call_sites(facts: ModuleFacts, helper: Function) -> list[cst.Call]:
    """Calls in the module that may run the helper (`name(...)`, `self.name(...)`)."""
    name = helper.name.value
    method = helper in facts.class_of
    found = []
    for call in facts.calls:
        func = call.func
        if type(func) is cst.Name and func.value == name and not method:
            found.append(call)
        elif type(func) is cst.Attribute and func.attr.value == name and method:
            found.append(call)
    return found


def parameter_receiving(helper: Function, call: cst.Call, value: cst.BaseExpression) -> Optional[str]:
    """The helper's parameter that `call` passes `value` to (by position or keyword)."""
    names = parameters(helper)
    if helper.params.params and names and names[0] == "self" and type(call.func) is cst.Attribute:
        names = names[1:]
    wanted = normalized(value)
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            if normalized(arg.value) == wanted and arg.keyword.value in names:
                return arg.keyword.value
            continue
        if normalized(arg.value) == wanted and position < len(names):
            return names[position]
        position += 1
    return None


def passes(helper: Function, call: cst.Call, parameter: str) -> bool:
    """Whether `call` passes an explicit argument for the helper's `parameter`."""
    names = parameters(helper)
    if names and names[0] == "self" and type(call.func) is cst.Attribute:
        names = names[1:]
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if parameter in names[: len(positional)]:
        return True
    return any(arg.keyword is not None and arg.keyword.value == parameter for arg in call.args)
