"""Scopes: which names code binds and reads, and where a name means what it means.

The one model of Python's scopes that the loop model, the rules and the fix
guard ask (LibCST's `ScopeProvider` would answer too, at several times the
cost of the parse the checker is measured against):

- what code binds and reads: `target_names`, `target_chains`, `free_names`, `all_parameters`,
  `module_names`, `local_names`;
- whether code of the loop, as the loop spells it, can be written at another
  place of the module (`in_scope`: K copied out of the loop), or run once
  before the loop (`same_before_loop`: GA101's zeroing);
- which calls may run a same-module helper and what they pass it
  (`call_sites`, `parameter_receiving`, `passes`): a fix written inside a
  helper may only name what is in scope there, and the loop's K reaches it
  only through the parameter a call passes it to;
- which reads of a module may run unbound (`unbound_reads`, `ModuleReads`,
  `FunctionReads`): what the fix guard (`accumlint.fix.guard`) judges every
  fix by.
"""

from __future__ import annotations

import builtins
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Optional, Sequence, Union, cast

import libcst as cst

from accumlint.model.facts import Function, ModuleFacts, import_bindings
from accumlint.model.names import argument_for, dotted, normalized, parameters
from accumlint.model.tree import children, walk


# -- which names a piece of code binds or reads --------------------------------------


_ALWAYS_BOUND = frozenset(dir(builtins)) | {
    "__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__",
    "__path__", "__annotations__", "__dict__", "__module__", "__qualname__", "__class__",
}
_COMPREHENSIONS = frozenset({cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp})
_LITERALS = frozenset({cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary})
_NOTHING: frozenset[str] = frozenset()


def target_names(target: cst.CSTNode) -> set[str]:
    """Names an assignment target binds (`a, (b, *c) = ...` -> a, b, c; `x.y = ...` -> none)."""
    kind = type(target)
    if kind is cst.Name:
        return {cast(cst.Name, target).value}
    if kind is cst.Tuple or kind is cst.List:
        elements = cast("cst.Tuple | cst.List", target).elements
        return {name for element in elements for name in target_names(element.value)}
    if kind is cst.StarredElement:
        return target_names(cast(cst.StarredElement, target).value)
    return set()


def free_names(expr: cst.BaseExpression) -> set[str]:
    """Every name an expression mentions but attribute labels (`args.steps // world` ->
    {"args", "world"}), keyword labels and comprehension variables included: a superset
    of what it reads (`_reads`), which errs toward "depends on it" and "not in scope"."""
    attributes = {id(node.attr) for node in walk(expr) if type(node) is cst.Attribute}
    return {node.value for node in walk(expr) if type(node) is cst.Name and id(node) not in attributes}


def chains_bound(node: cst.CSTNode) -> set[str]:
    """The names and attribute chains code binds or unbinds anywhere under `node`
    (assignment, loop, `with` and `except` targets, walruses, `del`, imports), each as
    written (`a, self.b = ...` -> a, self.b)."""
    return set(_chains_bound(walk(node)))


def chains_in_targets(node: cst.CSTNode) -> set[str]:
    """Every name and attribute chain that a binding target under `node` writes
    (assignment and loop targets, `as` names, walruses): the target itself, and the
    container whose item a subscript target writes (`x.y[i] = ...` -> x.y). What the code
    may rebind, for questions where "may vary" is the safe answer (is a test the same for
    the whole run?): `self.global_step += 1` writes `self.global_step`, not `self` nor
    `self.args`."""
    found: set[str] = set()
    for child in walk(node):
        kind = type(child)
        targets: list[cst.CSTNode] = []
        if kind is cst.AssignTarget or kind is cst.AugAssign or kind is cst.AnnAssign or kind is cst.For:
            targets.append(cast("cst.AssignTarget | cst.AugAssign | cst.AnnAssign | cst.For", child).target)
        elif kind is cst.AsName or kind is cst.NamedExpr:
            targets.append(cast(cst.AsName, child).name if kind is cst.AsName else cast(cst.NamedExpr, child).target)
        while targets:
            target = targets.pop()
            if type(target) in (cst.Tuple, cst.List):
                targets.extend(element.value for element in cast("cst.Tuple | cst.List", target).elements)
                continue
            while type(target) is cst.Subscript:
                target = target.value
            name = dotted(target) if type(target) in (cst.Name, cst.Attribute) else None
            if name is not None:
                found.add(name)
            else:  # a target whose chain cannot be read (`f().x = ...`): every name in it
                found.update(n for part in walk(target) if type(part) in (cst.Name, cst.Attribute)
                             and (n := dotted(part)) is not None)
    return found


def target_chains(target: cst.CSTNode) -> set[str]:
    """The names and attribute chains one assignment target binds, as `dotted` writes
    them (`a, (self.b, *c) = ...` -> a, self.b, c; `x[i] = ...` -> x[])."""
    return set(_target_chains(target))


def all_parameters(function: Function) -> frozenset[str]:
    """The names of all a function's parameters, `*args` and `**kwargs` included."""
    return _param_names(function.params)


def module_names(module: cst.Module) -> set[str]:
    """Names bound at module level, in any top-level block (`if __name__ == ...:` too),
    never inside a function or class body: the module's globals."""
    return set(_Scans().block(module.body)[0])


def local_names(function: Function) -> set[str]:
    """Names Python makes local to the function (parameters included, names it declares
    `global` or `nonlocal` not): they hide module names."""
    assigned, declared = _Scans().block(getattr(function.body, "body", ()))
    return set((assigned | _param_names(function.params)) - declared)


def rebound_names(function: Function) -> set[str]:
    """Names the function's body assigns (a parameter among them no longer holds what the
    call passed)."""
    return set(_Scans().block(getattr(function.body, "body", ()))[0])


def _reads(node: cst.CSTNode) -> tuple[list[str], frozenset[str]]:
    """(names an expression reads, in no particular order, comprehension and lambda
    variables excluded; names its walruses bind), without recursion: expressions
    can be very deep. A walrus's own target counts as read too."""
    found: list[str] = []
    walruses: set[str] = set()
    stack: list[tuple[cst.CSTNode, frozenset[str]]] = [(node, _NOTHING)]
    while stack:
        current, local = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            name = cast(cst.Name, current).value
            if name not in local:
                found.append(name)
        elif kind is cst.Attribute or kind is cst.Arg:
            stack.append((cast("cst.Attribute | cst.Arg", current).value, local))
        elif kind in _LITERALS:
            continue
        elif kind is cst.Lambda:
            current = cast(cst.Lambda, current)
            params = _param_names(current.params)
            stack.extend((default, local) for default in _param_defaults(current.params))
            stack.append((current.body, local | params))
        elif kind in _COMPREHENSIONS:
            bound = {name for n in walk(current) if type(n) is cst.CompFor for name in target_names(n.target)}
            stack.extend((child, local | bound) for child in children(current))
        else:
            if kind is cst.NamedExpr:
                walruses |= target_names(cast(cst.NamedExpr, current).target)
            stack.extend((child, local) for child in children(current))
    return found, frozenset(walruses) if walruses else _NOTHING


def _param_names(params: cst.Parameters) -> frozenset[str]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    if type(params.star_arg) is cst.Param:
        every.append(params.star_arg)
    if params.star_kwarg is not None:
        every.append(params.star_kwarg)
    return frozenset(p.name.value for p in every)


def _param_defaults(params: cst.Parameters) -> list[cst.BaseExpression]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return [p.default for p in every if p.default is not None]


def _import_names(node: cst.CSTNode) -> set[str]:
    """`import a.b` binds `a`; `import a.b as c` and `from a import b as c` bind `c`."""
    return {binding.local for binding in import_bindings(cast("cst.Import | cst.ImportFrom", node))}


def _is_star_import(node: cst.CSTNode) -> bool:
    return type(node) is cst.ImportFrom and type(node.names) is cst.ImportStar


# -- whether code of the loop can be written at another place ------------------------
#
# Fixes that copy K out of the loop (into a scheduler's length, an `Accelerator(...)`
# constructor) may only do so when every name K reads is bound where the copy goes: a
# parameter or local of the enclosing function, a module-level name or an import, or
# `self` in a method of the same class.
#
# A statement run once before the loop instead of inside it (GA101's zeroing) must also
# act on the objects it acts on inside the loop: nothing may bind what it reads between
# the loop's start and the statement, or the copy reads a name or an attribute of `self`
# before the statement that first binds it (an optimizer created in the loop,
# `self.opt = ...` there, a `global optimizer` assigned there, `optimizer = None` before
# a lazy creation).


def _outer_definition(facts: ModuleFacts, node: cst.CSTNode) -> Optional[Function]:
    """The innermost module-level function or method (`facts.functions`, `facts.class_of`)
    whose body holds `node`; a nested function's body counts as its enclosing one's."""
    child, parent = node, facts.parents.get(id(node))
    while parent is not None:
        if type(parent) is cst.FunctionDef and child is parent.body and (
            parent in facts.class_of or facts.functions.get(parent.name.value) is parent
        ):
            return parent
        child, parent = parent, facts.parents.get(id(parent))
    return None


def in_scope(facts: ModuleFacts, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Whether `expr` means the same thing at node `at` (`self.k` only when it is set
    earlier in the same method)."""
    function = _outer_definition(facts, at)
    bound = module_names(facts.module) | set(facts.imports)
    if function is not None:
        bound |= set(parameters(function)) | local_names(function)
    for name in free_names(expr):
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
    read = chains_read(statement)
    if any(chain in read for chain in _chains_bound(walk(loop))):
        return False
    owner = facts.class_of.get(function) if function is not None else None
    for other in [*facts.functions.values(), *facts.class_of]:
        if other is function:
            continue
        declared = {item.name.value for node in walk(other.body) if type(node) in (cst.Global, cst.Nonlocal)
                    for item in cast("cst.Global | cst.Nonlocal", node).names}
        if declared & read:
            return False
        if owner is not None and facts.class_of.get(other) is owner and other.name.value != "__init__":
            if any(chain.startswith("self.") and chain in read for chain in _chains_bound(walk(other.body))):
                return False
    return True


def chains_read(statement: cst.CSTNode) -> set[str]:
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
            yield from _target_chains(cast("_TargetHolder | cst.CompFor", node).target)
        elif kind is cst.AsName:  # `with ... as x`, `except E as x`, `import a as x`
            yield from _target_chains(cast(cst.AsName, node).name)
        elif kind is cst.Import or kind is cst.ImportFrom:
            yield from _import_names(node)


def _target_chains(target: cst.CSTNode) -> Iterable[str]:
    """The names and attribute chains a target binds (`a, self.b = ...` -> a, self.b)."""
    kind = type(target)
    if kind is cst.Tuple or kind is cst.List:
        for element in cast("cst.Tuple | cst.List", target).elements:
            yield from _target_chains(element.value)
    elif kind is cst.StarredElement:
        yield from _target_chains(cast(cst.StarredElement, target).value)
    else:
        chain = dotted(target)
        if chain is not None:
            yield chain


# -- the calls that run a same-module helper -------------------------------------------


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


def default_of(function: Function, name: str) -> Optional[cst.BaseExpression]:
    """The default value a function's parameter `name` declares, if any."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param.default
    return None


# -- which name reads may run unbound: what the fix guard judges ----------------------
#
# A fix must never make a program raise `NameError` or `UnboundLocalError`: an
# `opt.zero_grad()` inserted before the loop that creates `opt`, a clip whose
# `grad_norm = ...` moves under a gate while a log line outside it still reads
# `grad_norm`. `unbound_reads` walks a module in execution order, the way a
# definite-assignment check does, and counts the reads (per scope and name) for which
# no binding certainly ran before: a fix is safe for names when the fixed module has no
# such read that the original did not have.
#
# The walk is conservative where control flow is (a name bound in one arm of an `if`, in
# a loop body or a `try` is not certain afterwards) and lenient where Python's order is
# not the text's: a function body may read any name its enclosing scopes bind anywhere,
# since it runs after they are set up. Both texts are judged the same way, so only the
# difference matters.


def unbound_reads(module: cst.Module) -> Counter[tuple[str, str]]:
    """(scope, name) -> how many reads of `name` in that scope may run unbound."""
    return _Flow(_Scans()).module(module)


class ModuleReads:
    """`unbound_reads` of one module and of its edited versions.

    An edited module shares every untouched node with the original (edits are
    applied along the targets' paths), and what a statement contributes depends
    only on the statement, the names bound before it and its scope. So the
    original's walk records each statement's and each function's contribution,
    and the walk of an edited version takes it over wherever those are the same,
    walking only what the edits changed and what their new bindings reach.
    """

    def __init__(self, module: cst.Module) -> None:
        scans = _Scans(memo={})
        self._recorded = _Recording()
        self.unbound = _Flow(scans, self._recorded).module(module)
        self._scans = _Scans(scans.memo, remember=False)

    def of(self, edited: cst.Module) -> Counter[tuple[str, str]]:
        """`unbound_reads(edited)`, for a module made from this one by edits."""
        return _Flow(self._scans, replay=self._recorded).module(edited)


class FunctionReads:
    """`unbound_reads` of one function of a module (a module-level function, or a method of
    a module-level class) and of its edited versions, for edits inside its body.

    Such edits change nothing the rest of the module contributes: the function's
    body binds nothing outside it (the enclosing names are those the module's
    statements bind, the def's own name among them), and every other scope is
    walked the same way. So the module's unbound reads differ from the edited
    module's only by what the body contributes, and the walk can stay inside it
    (with the scope the module walk gives it), taking over what it can as
    `ModuleReads` does. A star import makes every read bound, as in `unbound_reads`:
    `stars` says whether the module holds one (then the module's walk decides), and
    an edited body that holds one has no unbound read."""

    def __init__(self, module: cst.Module, owner: Optional[cst.ClassDef], function: cst.FunctionDef) -> None:
        scans = _Scans(memo={})
        top = _Scope("<module>", None, scans.block(module.body)[0])
        self._outer = top if owner is None else _Scope(f"{top.key}.{owner.name.value}", None, top.enclosing)
        self.stars = _has_star_import(module)
        self._recorded = _Recording()
        walk = _Flow(scans, self._recorded)
        walk.function(function, self._outer)
        self.unbound = Counter(walk.found)
        self._scans = _Scans(scans.memo, remember=False)

    def of(self, edited: cst.FunctionDef) -> Counter[tuple[str, str]]:
        """The unbound reads of the function's edited version (the same def, another body)."""
        walk = _Flow(self._scans, replay=self._recorded)
        walk.function(edited, self._outer)
        return Counter() if walk.stars else Counter(walk.found)


# The nodes that hold statements (Python accepts a star import only at module level,
# but the walk counts one wherever it stands, and so does this search).
_STATEMENT_BLOCKS = frozenset({
    cst.If, cst.Else, cst.For, cst.While, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler,
    cst.Finally, cst.With, cst.Match, cst.MatchCase, cst.IndentedBlock, cst.FunctionDef, cst.ClassDef,
})


def _has_star_import(module: cst.Module) -> bool:
    """Whether a statement anywhere in the module is `from ... import *` (expressions hold none)."""
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            line = cast("cst.SimpleStatementLine | cst.SimpleStatementSuite", node)
            if any(_is_star_import(small) for small in line.body):
                return True
        elif kind in _STATEMENT_BLOCKS:
            stack.extend(child for child in children(node) if type(child) in _STATEMENT_BLOCKS
                         or type(child) is cst.SimpleStatementLine or type(child) is cst.SimpleStatementSuite)
    return False


# statements whose nested statements are scanned on their own (and remembered)
_BLOCK_STATEMENTS = frozenset({cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.With, cst.Match})
# (a comprehension's variables are its own; a walrus in it binds in the scope around it)
_TARGET_HOLDERS = frozenset({cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.Del})
# (the same node types, for the type check)
_TargetHolder = Union[cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.Del]
_MATCH_CAPTURES = frozenset({cst.MatchAs, cst.MatchStar})


@dataclass
class _Scans:
    """Every name a block binds anywhere in it (not inside nested functions or classes,
    whose own names it binds): what Python makes local to a function. With a memo, each
    statement's names are remembered by identity (they depend on nothing else)."""

    memo: Optional[dict[int, tuple[frozenset[str], frozenset[str], cst.CSTNode]]] = None
    remember: bool = True  # False: only read the memo (an edited module's new nodes are not kept)

    def block(self, body: Sequence[cst.CSTNode]) -> tuple[frozenset[str], frozenset[str]]:
        """(names bound anywhere in the block, names it declares `global` or `nonlocal`)."""
        names: set[str] = set()
        declared: set[str] = set()
        for node in body:
            found = self.statement(node)
            names |= found[0]
            declared |= found[1]
        return frozenset(names), frozenset(declared)

    def statement(self, root: cst.CSTNode) -> tuple[frozenset[str], frozenset[str], cst.CSTNode]:
        """(names, declared, root) of one statement (or a match pattern)."""
        memo = self.memo
        if memo is not None:
            known = memo.get(id(root))
            if known is not None and known[2] is root:
                return known
        names: set[str] = set()
        declared: set[str] = set()
        stack = [root]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is cst.Name or kind in _LITERALS:
                continue  # the commonest nodes; nothing in them binds
            if kind is cst.Attribute or kind is cst.Arg:
                # the attribute's or keyword's own name binds nothing
                stack.append(cast("cst.Attribute | cst.Arg", node).value)
                continue
            if kind is cst.FunctionDef or kind is cst.ClassDef:
                names.add(cast("cst.FunctionDef | cst.ClassDef", node).name.value)
                continue
            if kind is cst.Lambda:
                continue
            if kind in _BLOCK_STATEMENTS and node is not root:
                inner = self.statement(node)
                names |= inner[0]
                declared |= inner[1]
                continue
            if kind in _TARGET_HOLDERS:
                names |= target_names(cast(_TargetHolder, node).target)
            elif kind is cst.AsName:
                names |= target_names(cast(cst.AsName, node).name)
            elif kind is cst.Import or kind is cst.ImportFrom:
                names |= _import_names(node)
            elif kind in _MATCH_CAPTURES and (capture := cast("cst.MatchAs | cst.MatchStar", node).name) is not None:
                names.add(capture.value)
            elif kind is cst.MatchMapping and (rest := cast(cst.MatchMapping, node).rest) is not None:
                names.add(rest.value)
            elif kind is cst.Global or kind is cst.Nonlocal:
                declared |= {item.name.value for item in cast("cst.Global | cst.Nonlocal", node).names}
            stack.extend(children(node))
        found = (frozenset(names) if names else _NOTHING, frozenset(declared) if declared else _NOTHING, root)
        if memo is not None and self.remember:
            memo[id(root)] = found
        return found


# -- the walk in execution order -----------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Scope:
    """Where reads are judged: a function's locals need a binding that certainly ran;
    other names resolve in the enclosing scopes (anywhere in them) or builtins."""

    key: str
    locals: Optional[frozenset[str]]  # None: module or class body (judged by flow alone)
    enclosing: frozenset[str]


class _Span(NamedTuple):
    """What a statement's or a function's walk added to the recording, a tuple each
    (there is one per statement). Functions start from their parameters: they record
    no names."""

    node: cst.CSTNode
    scope: _Scope
    # the names whose being bound it asked or changed, each with whether it was bound before the statement
    depends: tuple[tuple[str, bool], ...]
    # the names it left bound or unbound otherwise than before, each with what it left
    effects: tuple[tuple[str, bool], ...]
    found: int  # start and end of its unbound reads in `found`
    found_end: int
    queries: int  # start and end of its lookups in `queries`
    queries_end: int
    stars: int  # how many star imports it holds


class _Recording:
    """What the original's walk found, and which part of it each statement and function made."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []
        self.queries: list[str] = []
        self.statements: dict[int, _Span] = {}
        self.functions: dict[int, _Span] = {}


class _Flow:
    """The definite-assignment walk. It counts (scope, name) for each read that may
    run unbound; a star import can bind anything, so a module holding one has none.

    The names certainly bound are one set, changed in place as the walk goes, with
    a log of each change so that a branch can be undone: an `if`'s arms each start
    from what was bound before it, and afterwards a name is bound where every arm
    left it bound. So each statement costs what it holds, not what came before it
    (a set per statement would make a module's walk quadratic in its length).

    Recording (the original module), it remembers what each statement and function
    added, which names' being bound it depended on, and what it left bound;
    replaying (an edited module), it takes that over for a node it meets again with
    those names bound as before and a scope that answers every enclosing-scope
    lookup it made the same way."""

    def __init__(self, scans: _Scans, recording: Optional[_Recording] = None, replay: Optional[_Recording] = None) -> None:
        self.scans = scans
        self.recording = recording
        self.replay = replay
        self.found: list[tuple[str, str]] = recording.found if recording is not None else []
        self.queries: list[str] = recording.queries if recording is not None else []
        self.stars = 0
        self.bound: set[str] = set()  # the names certainly bound here
        self._log: list[tuple[str, bool]] = []  # each change of `bound`: (name, whether it was bound before)
        self._asked: Optional[list[str]] = [] if recording is not None else None  # names whose binding mattered
        self._fits: dict[tuple[int, int], tuple[_Scope, _Scope, Optional[bool]]] = {}

    def module(self, module: cst.Module) -> Counter[tuple[str, str]]:
        top = _Scope("<module>", None, self.scans.block(module.body)[0])
        self.block(module.body, top)
        return Counter() if self.stars else Counter(self.found)

    # -- the set of names bound, and undoing a branch's changes to it

    def _set(self, name: str, bound: bool) -> None:
        """Makes `name` bound or not, logged."""
        if self._asked is not None:
            self._asked.append(name)
        names = self.bound
        if (name in names) != bound:
            self._log.append((name, not bound))
            if bound:
                names.add(name)
            else:
                names.discard(name)

    def _bind(self, names: Iterable[str]) -> None:
        for name in names:
            self._set(name, True)

    def _undo(self, mark: int) -> dict[str, bool]:
        """Undoes the changes logged since `mark`; returns whether each name they changed
        was bound before the undoing (what the branch left)."""
        log, names = self._log, self.bound
        left: dict[str, bool] = {}
        while len(log) > mark:
            name, was = log.pop()
            if name not in left:
                left[name] = name in names
            if was:
                names.add(name)
            else:
                names.discard(name)
        return left

    def _meet(self, branches: Sequence[dict[str, bool]]) -> None:
        """After branches that each started from the present names (undone since): a name is
        bound where every branch left it bound (one that did not change it left it as it is)."""
        for name in {name: None for branch in branches for name in branch}:
            now = name in self.bound
            self._set(name, all(branch.get(name, now) for branch in branches))

    # -- reads

    def reads(self, node: Optional[cst.CSTNode], scope: _Scope) -> frozenset[str]:
        """Counts the reads of an expression; returns the names its walruses bind."""
        if node is None:
            return _NOTHING
        names, walruses = _reads(node)
        local_names = scope.locals
        bound, asked = self.bound, self._asked
        for name in names:
            if name in _ALWAYS_BOUND:
                continue
            if asked is not None:
                asked.append(name)
            if name in bound:
                continue
            if local_names is None or name in local_names:
                self.found.append((scope.key, name))
                continue
            self.queries.append(name)
            if name not in scope.enclosing:
                self.found.append((scope.key, name))
        return walruses

    def reads_of_target(self, target: cst.CSTNode, scope: _Scope) -> None:
        """`x.y = ...` and `x[i] = ...` read `x` (and `i`); a plain name does not."""
        kind = type(target)
        if kind is cst.Tuple or kind is cst.List:
            for element in cast("cst.Tuple | cst.List", target).elements:
                self.reads_of_target(element.value, scope)
        elif kind is cst.StarredElement:
            self.reads_of_target(cast(cst.StarredElement, target).value, scope)
        elif kind is not cst.Name:
            self.reads(target, scope)

    # -- statements

    def block(self, statements: Sequence[cst.CSTNode], scope: _Scope) -> None:
        for statement in statements:
            self.statement(statement, scope)

    def suite(self, suite: Optional[cst.CSTNode], scope: _Scope) -> None:
        if suite is not None:
            self.block(getattr(suite, "body", ()), scope)

    def branch(self, suite: Optional[cst.CSTNode], scope: _Scope, names: Iterable[str] = _NOTHING) -> dict[str, bool]:
        """Walks a suite with `names` bound too, then undoes its changes; returns what it left."""
        mark = len(self._log)
        self._bind(names)
        self.suite(suite, scope)
        return self._undo(mark)

    def statement(self, node: cst.CSTNode, scope: _Scope) -> None:
        if self.replay is not None:
            span = self.replay.statements.get(id(node))
            if span is not None and span.node is node and self._bound_as_before(span) and self._same(span, scope):
                self._take(span)
                for name, bound in span.effects:
                    self._set(name, bound)
                return
        if self.recording is None:
            self._statement(node, scope)
            return
        found, queries, stars = len(self.found), len(self.queries), self.stars
        assert self._asked is not None  # kept while recording
        asked, mark = len(self._asked), len(self._log)
        self._statement(node, scope)
        before: dict[str, bool] = {}
        for name, was in self._log[mark:]:
            before.setdefault(name, was)
        names = self.bound
        depends = tuple((name, before.get(name, name in names)) for name in dict.fromkeys(self._asked[asked:]))
        effects = tuple((name, not was) for name, was in before.items() if (name in names) != was)
        self.recording.statements[id(node)] = _Span(
            node, scope, depends, effects, found, len(self.found), queries, len(self.queries), self.stars - stars
        )

    def _bound_as_before(self, span: _Span) -> bool:
        names = self.bound
        return all((name in names) == was for name, was in span.depends)

    def _take(self, span: _Span) -> None:
        assert self.replay is not None  # asked only while replaying
        self.found.extend(self.replay.found[span.found:span.found_end])
        self.stars += span.stars

    def _same(self, span: _Span, scope: _Scope) -> bool:
        """Whether the walk that made `span` would go the same way in `scope`."""
        old = span.scope
        pair = (id(old), id(scope))
        known = self._fits.get(pair)
        if known is None:
            if old.key != scope.key or old.locals != scope.locals:
                verdict: Optional[bool] = False
            else:
                verdict = True if old.enclosing == scope.enclosing else None
            known = self._fits[pair] = (old, scope, verdict)  # both kept alive: ids stay theirs
        if known[2] is not None:
            return known[2]
        # the same names, but other enclosing ones: same where every lookup answers the same
        before, now = old.enclosing, scope.enclosing
        assert self.replay is not None  # asked only while replaying
        lookups = self.replay.queries[span.queries:span.queries_end]
        return all((name in before) == (name in now) for name in lookups)

    def _statement(self, node: cst.CSTNode, scope: _Scope) -> None:
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for small in cast(cst.SimpleStatementLine, node).body:
                self.small(small, scope)
        elif kind is cst.If:
            node = cast(cst.If, node)
            then = self.branch(node.body, scope, self.reads(node.test, scope))
            if type(node.orelse) is cst.If:
                mark = len(self._log)
                self.statement(node.orelse, scope)
                other = self._undo(mark)
            else:
                other = self.branch(node.orelse.body, scope) if node.orelse is not None else {}
            self._meet((then, other))
        elif kind is cst.For:
            node = cast(cst.For, node)
            self.reads(node.iter, scope)
            self.reads_of_target(node.target, scope)
            self.branch(node.body, scope, target_names(node.target))
            if node.orelse is not None:
                self.branch(node.orelse.body, scope)
        elif kind is cst.FunctionDef:
            node = cast(cst.FunctionDef, node)
            for decorator in node.decorators:
                self.reads(decorator.decorator, scope)
            for default in _param_defaults(node.params):
                self.reads(default, scope)
            self.function(node, scope)
            self._set(node.name.value, True)
        elif kind is cst.While:
            node = cast(cst.While, node)
            self.branch(node.body, scope, self.reads(node.test, scope))
            if node.orelse is not None:
                self.branch(node.orelse.body, scope)
        elif kind is cst.Try or kind is cst.TryStar:
            node = cast("cst.Try | cst.TryStar", node)
            mark = len(self._log)
            self.suite(node.body, scope)
            if node.orelse is not None:
                self.suite(node.orelse.body, scope)
            outcomes = [self._undo(mark)]
            for handler in node.handlers:
                self.reads(handler.type, scope)
                name = target_names(handler.name.name) if handler.name is not None else set()
                outcomes.append(self.branch(handler.body, scope, name))
            self._meet(outcomes)
            if node.finalbody is not None:
                self.suite(node.finalbody.body, scope)
        elif kind is cst.With:
            node = cast(cst.With, node)
            for item in node.items:
                self.reads(item.item, scope)
                if item.asname is not None:
                    self.reads_of_target(item.asname.name, scope)
                    self._bind(target_names(item.asname.name))
            self.suite(node.body, scope)
        elif kind is cst.Match:
            node = cast(cst.Match, node)
            self.reads(node.subject, scope)
            for case in node.cases:
                mark = len(self._log)
                self._bind(self.scans.statement(case.pattern)[0])
                self.reads(case.guard, scope)
                self.suite(case.body, scope)
                self._undo(mark)
        elif kind is cst.ClassDef:
            node = cast(cst.ClassDef, node)
            for decorator in node.decorators:
                self.reads(decorator.decorator, scope)
            for arg in (*node.bases, *node.keywords):
                self.reads(arg.value, scope)
            # a class body sees what is bound around it; its methods see past it
            enclosing = scope.enclosing if scope.locals is None else scope.enclosing | scope.locals
            self.branch(node.body, _Scope(f"{scope.key}.{node.name.value}", None, enclosing))
            self._set(node.name.value, True)
        else:
            self.small(node, scope)

    def function(self, node: cst.FunctionDef, outer: _Scope) -> None:
        body = getattr(node.body, "body", ())
        params = _param_names(node.params)
        assigned, declared_global = self.scans.block(body)
        local_names = (assigned | params) - declared_global
        if outer.locals is None:
            enclosing = outer.enclosing
        else:
            enclosing = outer.enclosing | outer.locals
        # A name declared `global` that the module does not bind is bound only by the
        # assignments of such declarations, at times nothing says: the body's own flow
        # judges its reads, as a local's.
        flowed = local_names | (declared_global - enclosing)
        scope = _Scope(f"{outer.key}.{node.name.value}", frozenset(flowed), enclosing | declared_global)
        if self.replay is not None:
            span = self.replay.functions.get(id(node))
            if span is not None and span.node is node and self._same(span, scope):
                self._take(span)
                return
        found, queries, stars = len(self.found), len(self.queries), self.stars
        # the body starts from its parameters, whatever is bound around the def
        around = self.bound, self._log, self._asked
        self.bound, self._log = set(params), []
        if around[2] is not None:
            self._asked = []
        try:
            self.block(body, scope)
        finally:
            self.bound, self._log, self._asked = around
        if self.recording is not None:
            self.recording.functions[id(node)] = _Span(
                node, scope, (), (), found, len(self.found), queries, len(self.queries), self.stars - stars
            )

    def small(self, node: cst.CSTNode, scope: _Scope) -> None:
        kind = type(node)
        if kind is cst.Assign:
            node = cast(cst.Assign, node)
            walruses = self.reads(node.value, scope)
            names: set[str] = set()
            for target in node.targets:
                self.reads_of_target(target.target, scope)
                names |= target_names(target.target)
            self._bind(names)
            self._bind(walruses)
        elif kind is cst.Expr:
            self._bind(self.reads(node, scope))
        elif kind is cst.AugAssign:
            node = cast(cst.AugAssign, node)
            self.reads(node.target, scope)
            self.reads(node.value, scope)
            self._bind(target_names(node.target))
        elif kind is cst.AnnAssign:
            node = cast(cst.AnnAssign, node)
            self.reads(node.value, scope)
            self.reads_of_target(node.target, scope)
            if node.value is not None:
                self._bind(target_names(node.target))
        elif kind is cst.Import or kind is cst.ImportFrom:
            if _is_star_import(node):
                self.stars += 1
            self._bind(_import_names(node))
        elif kind is cst.Del:
            node = cast(cst.Del, node)
            self.reads_of_target(node.target, scope)
            for name in target_names(node.target):
                self._set(name, False)
        elif kind is cst.Global or kind is cst.Nonlocal or kind is cst.Pass or kind is cst.Break or kind is cst.Continue:
            pass
        else:  # Return, Raise, Assert and anything newer: reads only
            self._bind(self.reads(node, scope))
