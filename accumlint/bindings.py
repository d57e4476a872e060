"""Which name reads of a module are not certainly bound where they run.

A fix must never make a program raise `NameError` or `UnboundLocalError`: an
`opt.zero_grad()` inserted before the loop that creates `opt`, a clip whose
`grad_norm = ...` moves under a gate while a log line outside it still reads
`grad_norm`. `unbound_reads` walks a module in execution order, the way a
definite-assignment check does, and counts the reads (per scope and name) for
which no binding certainly ran before: a fix is safe for names when the fixed
module has no such read that the original did not have.

The walk is conservative where control flow is (a name bound in one arm of an
`if`, in a loop body or a `try` is not certain afterwards) and lenient where
Python's order is not the text's: a function body may read any name its
enclosing scopes bind anywhere, since it runs after they are set up. Both
texts are judged the same way, so only the difference matters.
"""

from __future__ import annotations

import builtins
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Sequence

import libcst as cst

from accumlint.model.tree import children, walk


_ALWAYS_BOUND = frozenset(dir(builtins)) | {
    "__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__",
    "__path__", "__annotations__", "__dict__", "__module__", "__qualname__", "__class__",
}
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda) + _COMPREHENSIONS


def unbound_reads(module: cst.Module) -> Counter:
    """(scope, name) -> how many reads of `name` in that scope may run unbound."""
    flow = _Flow()
    # a star import can bind anything: every read of such a module counts as bound
    top = _Scope("<module>", None, frozenset(assigned_anywhere(module.body)), star=_has_star_import(module))
    flow.block(module.body, frozenset(), top)
    return flow.unbound


# -- which names a piece of code binds or reads ------------------------------------


def target_names(target: cst.CSTNode) -> set[str]:
    """Names an assignment target binds (`a, (b, *c) = ...` -> a, b, c; `x.y = ...` -> none)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in target_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


def read_names(node: cst.CSTNode) -> list[str]:
    """Names an expression reads, in no particular order (comprehension and lambda
    variables excluded), without recursion: expressions can be very deep."""
    found: list[str] = []
    stack: list[tuple[cst.CSTNode, frozenset]] = [(node, frozenset())]
    while stack:
        current, local = stack.pop()
        if isinstance(current, cst.Name):
            if current.value not in local:
                found.append(current.value)
        elif isinstance(current, cst.Attribute):
            stack.append((current.value, local))
        elif isinstance(current, cst.Arg):
            stack.append((current.value, local))
        elif isinstance(current, cst.Lambda):
            params = _param_names(current.params)
            stack.extend((default, local) for default in _param_defaults(current.params))
            stack.append((current.body, local | params))
        elif isinstance(current, _COMPREHENSIONS):
            bound = {name for n in walk(current) if isinstance(n, cst.CompFor) for name in target_names(n.target)}
            stack.extend((child, local | bound) for child in children(current))
        elif isinstance(current, (cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary)):
            continue
        else:
            stack.extend((child, local) for child in children(current))
    return found


def _walrus_names(node: cst.CSTNode) -> set[str]:
    return {name for n in walk(node) if isinstance(n, cst.NamedExpr) for name in target_names(n.target)}


def _param_names(params: cst.Parameters) -> frozenset:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        every.append(params.star_arg)
    if params.star_kwarg is not None:
        every.append(params.star_kwarg)
    return frozenset(p.name.value for p in every)


def _param_defaults(params: cst.Parameters) -> list[cst.BaseExpression]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return [p.default for p in every if p.default is not None]


def _import_names(node: cst.CSTNode) -> set[str]:
    """`import a.b` binds `a`; `import a.b as c` and `from a import b as c` bind `c`."""
    if not isinstance(node, (cst.Import, cst.ImportFrom)) or isinstance(node.names, cst.ImportStar):
        return set()
    names: set[str] = set()
    for alias in node.names:
        name = alias.asname.name if alias.asname is not None else alias.name
        while isinstance(name, cst.Attribute):
            name = name.value
        names |= target_names(name)
    return names


def _has_star_import(module: cst.Module) -> bool:
    return any(isinstance(n, cst.ImportFrom) and isinstance(n.names, cst.ImportStar) for n in walk(module))


def assigned_anywhere(body: Sequence[cst.CSTNode]) -> set[str]:
    """Every name a block binds anywhere in it (not inside nested functions or classes,
    whose own names it binds): what Python makes local to a function."""
    return _scan(body)[0]


def _scan(body: Sequence[cst.CSTNode]) -> tuple[set[str], set[str]]:
    """(names bound anywhere in the block, names it declares `global` or `nonlocal`)."""
    names: set[str] = set()
    declared: set[str] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            names.add(node.name.value)
            continue
        if kind is cst.Lambda:
            continue
        if kind in _TARGET_HOLDERS:
            names |= target_names(node.target)
        elif kind is cst.AsName:
            names |= target_names(node.name)
        elif kind is cst.Import or kind is cst.ImportFrom:
            names |= _import_names(node)
        elif kind in _MATCH_CAPTURES and getattr(node, "name", None) is not None:
            names.add(node.name.value)
        elif kind is cst.MatchMapping and node.rest is not None:
            names.add(node.rest.value)
        elif kind is cst.Global or kind is cst.Nonlocal:
            declared |= {item.name.value for item in node.names}
        stack.extend(children(node))
    return names, declared


_TARGET_HOLDERS = frozenset({cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del})
_MATCH_CAPTURES = frozenset({cst.MatchAs, cst.MatchStar})


# -- the walk in execution order -----------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    """Where reads are judged: a function's locals need a binding that certainly ran;
    other names resolve in the enclosing scopes (anywhere in them) or builtins."""

    key: str
    locals: Optional[frozenset]  # None: module or class body (judged by flow alone)
    enclosing: frozenset
    star: bool = False

    def bound(self, name: str, flow_bound: frozenset) -> bool:
        if self.star or name in _ALWAYS_BOUND or name in flow_bound:
            return True
        if self.locals is None:
            return False
        return name not in self.locals and name in self.enclosing


@dataclass
class _Flow:
    unbound: Counter = field(default_factory=Counter)

    def reads(self, node: Optional[cst.CSTNode], bound: frozenset, scope: _Scope) -> None:
        if node is None:
            return
        for name in read_names(node):
            if not scope.bound(name, bound):
                self.unbound[(scope.key, name)] += 1

    def block(self, statements: Sequence[cst.CSTNode], bound: frozenset, scope: _Scope) -> frozenset:
        for statement in statements:
            bound = self.statement(statement, bound, scope)
        return bound

    def suite(self, suite: Optional[cst.CSTNode], bound: frozenset, scope: _Scope) -> frozenset:
        if suite is None:
            return bound
        return self.block(getattr(suite, "body", ()), bound, scope)

    def statement(self, node: cst.CSTNode, bound: frozenset, scope: _Scope) -> frozenset:
        if isinstance(node, cst.SimpleStatementLine):
            return self.block(node.body, bound, scope)
        if isinstance(node, cst.If):
            self.reads(node.test, bound, scope)
            then = self.suite(node.body, bound | _walrus_names(node.test), scope)
            if isinstance(node.orelse, cst.If):
                other = self.statement(node.orelse, bound, scope)
            elif node.orelse is not None:
                other = self.suite(node.orelse.body, bound, scope)
            else:
                other = bound
            return then & other
        if isinstance(node, cst.For):
            self.reads(node.iter, bound, scope)
            self.reads_of_target(node.target, bound, scope)
            self.suite(node.body, bound | target_names(node.target), scope)
            if node.orelse is not None:
                self.suite(node.orelse.body, bound, scope)
            return bound
        if isinstance(node, cst.While):
            self.reads(node.test, bound, scope)
            self.suite(node.body, bound | _walrus_names(node.test), scope)
            if node.orelse is not None:
                self.suite(node.orelse.body, bound, scope)
            return bound
        if isinstance(node, (cst.Try, cst.TryStar)):
            after = self.suite(node.body, bound, scope)
            if node.orelse is not None:
                after = self.suite(node.orelse.body, after, scope)
            for handler in node.handlers:
                self.reads(handler.type, bound, scope)
                name = target_names(handler.name.name) if handler.name is not None else set()
                after &= self.suite(handler.body, bound | name, scope)
            if node.finalbody is not None:
                after = self.suite(node.finalbody.body, after, scope)
            return after
        if isinstance(node, cst.With):
            for item in node.items:
                self.reads(item.item, bound, scope)
                if item.asname is not None:
                    self.reads_of_target(item.asname.name, bound, scope)
                    bound = bound | target_names(item.asname.name)
            return self.suite(node.body, bound, scope)
        if isinstance(node, cst.Match):
            self.reads(node.subject, bound, scope)
            for case in node.cases:
                captured = assigned_anywhere([case.pattern])
                self.reads(case.guard, bound | captured, scope)
                self.suite(case.body, bound | captured, scope)
            return bound
        if isinstance(node, cst.FunctionDef):
            for decorator in node.decorators:
                self.reads(decorator.decorator, bound, scope)
            for default in _param_defaults(node.params):
                self.reads(default, bound, scope)
            self.function(node, scope)
            return bound | {node.name.value}
        if isinstance(node, cst.ClassDef):
            for decorator in node.decorators:
                self.reads(decorator.decorator, bound, scope)
            for arg in (*node.bases, *node.keywords):
                self.reads(arg.value, bound, scope)
            # a class body sees what is bound around it; its methods see past it
            enclosing = scope.enclosing if scope.locals is None else scope.enclosing | scope.locals
            inner = _Scope(f"{scope.key}.{node.name.value}", None, enclosing, scope.star)
            self.suite(node.body, bound, inner)
            return bound | {node.name.value}
        return self.small(node, bound, scope)

    def function(self, node: cst.FunctionDef, outer: _Scope) -> None:
        body = getattr(node.body, "body", ())
        params = _param_names(node.params)
        assigned, declared_global = _scan(body)
        local_names = (assigned | params) - declared_global
        if outer.locals is None:
            enclosing = outer.enclosing
        else:
            enclosing = outer.enclosing | outer.locals
        enclosing = enclosing | declared_global
        scope = _Scope(f"{outer.key}.{node.name.value}", frozenset(local_names), frozenset(enclosing), outer.star)
        self.block(body, frozenset(params), scope)

    def reads_of_target(self, target: cst.CSTNode, bound: frozenset, scope: _Scope) -> None:
        """`x.y = ...` and `x[i] = ...` read `x` (and `i`); a plain name does not."""
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.reads_of_target(element.value, bound, scope)
        elif isinstance(target, cst.StarredElement):
            self.reads_of_target(target.value, bound, scope)
        elif not isinstance(target, cst.Name):
            self.reads(target, bound, scope)

    def small(self, node: cst.CSTNode, bound: frozenset, scope: _Scope) -> frozenset:
        if isinstance(node, cst.Assign):
            self.reads(node.value, bound, scope)
            names: set[str] = set()
            for target in node.targets:
                self.reads_of_target(target.target, bound, scope)
                names |= target_names(target.target)
            return bound | names | _walrus_names(node.value)
        if isinstance(node, cst.AugAssign):
            self.reads(node.target, bound, scope)
            self.reads(node.value, bound, scope)
            return bound | target_names(node.target)
        if isinstance(node, cst.AnnAssign):
            self.reads(node.value, bound, scope)
            self.reads_of_target(node.target, bound, scope)
            return bound | target_names(node.target) if node.value is not None else bound
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return bound | _import_names(node)
        if isinstance(node, cst.Del):
            self.reads_of_target(node.target, bound, scope)
            return bound - target_names(node.target)
        if isinstance(node, (cst.Global, cst.Nonlocal, cst.Pass, cst.Break, cst.Continue)):
            return bound
        # Expr, Return, Raise, Assert and anything newer: reads only
        self.reads(node, bound, scope)
        return bound | _walrus_names(node)
