"""Binding a training function's parameters to roles, read from its source.

The verifier calls the user's function with objects it builds itself (a model
copy, a fresh optimizer, micro-batches, K), so it must know which parameter
receives which. The role is inferred from how the parameter is *used* in the
function body (LibCST, no import of the user's code and no torch), and the
parameter's name is only a fallback: `train(net, opt, it, n, crit)` binds as
well as the canonical `train(model, optimizer, loader, accum_steps, loss_fn)`.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Collection, Optional

import libcst as cst

MODEL = "model"
OPTIMIZER = "optimizer"
LOADER = "loader"
ACCUM_STEPS = "accum_steps"
LOSS_FN = "loss_fn"
ROLES = (MODEL, OPTIMIZER, LOADER, ACCUM_STEPS, LOSS_FN)

# What a user may write after `--bind NAME=`; each maps to a role.
ROLE_ALIASES = {
    MODEL: MODEL,
    "net": MODEL,
    OPTIMIZER: OPTIMIZER,
    "opt": OPTIMIZER,
    "optim": OPTIMIZER,
    LOADER: LOADER,
    "data": LOADER,
    "batches": LOADER,
    ACCUM_STEPS: ACCUM_STEPS,
    "accum": ACCUM_STEPS,
    "accumulation_steps": ACCUM_STEPS,
    "k": ACCUM_STEPS,
    LOSS_FN: LOSS_FN,
    "loss": LOSS_FN,
    "criterion": LOSS_FN,
}

# Name patterns used when the body says nothing about a parameter.
_NAME_PATTERNS = {
    MODEL: ("model", "net", "network", "module"),
    OPTIMIZER: ("optimizer", "opt", "optim"),
    LOADER: ("loader", "dataloader", "data_loader", "*_loader", "*_dataloader", "batches", "data", "*_data"),
    ACCUM_STEPS: (
        "accum*",
        "*accumulation_steps",
        "grad_accum*",
        "gradient_accumulation*",
        "update_freq",
        "micro_steps",
    ),
    LOSS_FN: ("loss_fn", "criterion", "loss_func", "loss_function", "loss"),
}

_OPTIMIZER_METHODS = {"step", "zero_grad", "add_param_group"}
_MODEL_METHODS = {"parameters", "named_parameters", "train", "eval", "no_sync", "modules", "buffers"}
_ITERATING_CALLS = {"enumerate", "iter", "zip", "next"}


class BindingError(Exception):
    """A parameter could not be given a role; the message says how to bind it."""


@dataclass(frozen=True)
class Parameter:
    """One parameter of the function, as declared."""

    name: str
    has_default: bool
    positional_only: bool = False


NAMESPACE = "namespace"

# The role of a parameter that receives an object the setup returns by name:
# "setup.scaler" for the setup's "scaler".
NAMED_PREFIX = "setup."


def named_object(role: str) -> str | None:
    """The setup object's name for a `setup.NAME` role, else None."""
    return role[len(NAMED_PREFIX):] if role.startswith(NAMED_PREFIX) else None


@dataclass(frozen=True)
class Binding:
    """Which role each parameter receives; optional parameters may stay unbound.

    A parameter bound by attribute (`--bind args.gradient_accumulation_steps=
    accum_steps`) has the role NAMESPACE and receives a namespace whose
    attributes are given in `attributes` (a role) and `fixed` (a value, from
    `--arg args.lr=0.1`); other `fixed` names are keyword arguments.
    """

    function: str
    parameters: tuple[Parameter, ...]
    roles: dict[str, str]
    evidence: dict[str, tuple[str, ...]] = field(default_factory=dict)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    fixed: dict[str, object] = field(default_factory=dict)
    # For `Class.method`: builds the instance from the run's objects.
    construct: Optional[Callable[[dict[str, object]], object]] = None
    constructed_roles: frozenset = frozenset()

    def parameter_for(self, role: str) -> str | None:
        """The first parameter (or `parameter.attribute`) bound to `role`, if any."""
        for name, bound in self.roles.items():
            if bound == role:
                return name
            for attribute, attribute_role in self.attributes.get(name, {}).items():
                if attribute_role == role:
                    return f"{name}.{attribute}"
        return None

    def bound_roles(self) -> list[tuple[str, str]]:
        """(parameter or `parameter.attribute`, role) of every binding."""
        pairs = [(name, role) for name, role in self.roles.items() if role != NAMESPACE]
        pairs += [(f"{name}.{attribute}", role) for name, attrs in self.attributes.items()
                  for attribute, role in attrs.items()]
        return pairs

    def arguments(self, objects: dict[str, object]) -> tuple[list[object], dict[str, object]]:
        """Positional and keyword arguments for a call, given an object per role."""
        args: list[object] = [self.construct(objects)] if self.construct is not None else []
        kwargs: dict[str, object] = {}
        for parameter in self.parameters:
            role = self.roles.get(parameter.name)
            if role == NAMESPACE:
                value: object = self._namespace(parameter.name, objects)
            elif role is not None:
                value = objects[role]
            elif parameter.name in self.fixed:
                value = self.fixed[parameter.name]
            else:
                continue
            if parameter.positional_only:
                args.append(value)
            else:
                kwargs[parameter.name] = value
        return args, kwargs

    def _namespace(self, name: str, objects: dict[str, object]) -> SimpleNamespace:
        values = {
            attribute.partition(".")[2]: value
            for attribute, value in self.fixed.items()
            if attribute.partition(".")[0] == name and "." in attribute
        }
        values.update((attribute, objects[role]) for attribute, role in self.attributes.get(name, {}).items())
        return SimpleNamespace(**values)


def parse_role(text: str) -> str:
    """The role named by `text` (as given to `--bind`: a role, or `setup.NAME`
    for an object the setup returns by that name), or BindingError."""
    stripped = text.strip()
    if stripped.startswith(NAMED_PREFIX) and stripped[len(NAMED_PREFIX):].isidentifier():
        return stripped
    role = ROLE_ALIASES.get(stripped.lower())
    if role is None:
        raise BindingError(f"unknown role {text!r}; use one of: {', '.join(ROLES)}, or setup.NAME")
    return role


def parse_bind_options(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`["net=model", "args.accum=k"]` -> `{"net": "model", "args.accum": "accum_steps"}`,
    checking every role name."""
    overrides: dict[str, str] = {}
    for item in items:
        name, sep, role = item.partition("=")
        if not sep or not name.strip():
            raise BindingError(f"--bind expects NAME=ROLE or NAME.ATTRIBUTE=ROLE, got {item!r}")
        overrides[name.strip()] = parse_role(role)
    return overrides


def parse_arg_options(items: tuple[str, ...] | list[str]) -> dict[str, object]:
    """`["epochs=1", "args.lr=0.1", "name=run"]` -> values: Python literals
    where they parse as one, strings otherwise."""
    fixed: dict[str, object] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise BindingError(f"--arg expects NAME=VALUE, got {item!r}")
        try:
            value: object = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()
        fixed[name.strip()] = value
    return fixed


def bind_parameters(
    source: str | None,
    function: str,
    overrides: dict[str, str] | None = None,
    fixed: dict[str, object] | None = None,
    signature: tuple[Parameter, ...] | None = None,
    named: Collection[str] = (),
) -> Binding:
    """Bind `function` (a def in `source`, methods included) by role.

    Explicit `overrides` win (`NAME=ROLE`, or `NAME.ATTR=ROLE` for a namespace
    argument); `fixed` values (`--arg`) come next; then a parameter named as
    an object the setup returns (`named`: it receives that object), or named
    exactly as a role (`optimizer`: that role, whatever the body does with
    it); then usage evidence; then the name's pattern. Each role goes to one
    parameter at most. A parameter without a
    default that gets no role is a BindingError naming it. Without `source`
    (a function whose source cannot be read) the parameters come from
    `signature` and every one of them must be bound by `overrides` or `fixed`.
    """
    fixed = dict(fixed or {})
    overrides = dict(overrides or {})
    definition = _find_function(_parsed(source), function) if source is not None else None
    if definition is None and source is not None:
        raise BindingError(f"no function named {function!r} in the source")
    parameters = _parameters(definition) if definition is not None else tuple(signature or ())
    parameters = tuple(p for p in parameters if p.name not in ("self", "cls")) if _is_method(function) else parameters
    names = {p.name for p in parameters}
    unknown = sorted({key.partition(".")[0] for key in (*overrides, *fixed)} - names)
    if unknown:
        raise BindingError(f"--bind/--arg name {', '.join(unknown)}, which {function}() does not take")
    attributes: dict[str, dict[str, str]] = {}
    for key in [key for key in overrides if "." in key]:
        owner, _, attribute = key.partition(".")
        attributes.setdefault(owner, {})[attribute] = overrides.pop(key)
    for key in fixed:
        if "." in key:
            attributes.setdefault(key.partition(".")[0], {})

    roles = {name: role for name, role in overrides.items()}
    roles.update((owner, NAMESPACE) for owner in attributes)
    evidence = {name: ("--bind",) for name in roles}
    for name in fixed:
        if "." not in name:
            roles.pop(name, None)
    if definition is None:
        unbound = [p.name for p in parameters if p.name not in roles and p.name not in fixed and not p.has_default]
        if unbound:
            raise BindingError(
                f"the source of {function}() cannot be read, so every parameter must be bound: "
                f"bind {', '.join(unbound)} with --bind NAME=ROLE or --arg NAME=VALUE"
            )
        in_order = {p.name: roles[p.name] for p in parameters if p.name in roles}
        return Binding(function, parameters, in_order, evidence, attributes, fixed)
    collector = _UsageCollector(names)
    definition.body.visit(collector)
    taken = set(roles.values()) | {role for attrs in attributes.values() for role in attrs.values()}
    roles_with_fixed = set(fixed)
    for parameter in parameters:
        name = parameter.name
        if name in roles or name in roles_with_fixed:
            continue
        if name in named:
            roles[name] = f"{NAMED_PREFIX}{name}"
            evidence[name] = (f"the setup returns {name!r}",)
        elif name in ROLES and name not in taken:
            roles[name] = name
            taken.add(name)
            evidence[name] = tuple(dict.fromkeys(collector.reasons[name][name])) or ("its name is the role",)
    # Usage first, strongest claim per role wins (so `range(epochs)` does not
    # take the accumulation steps from the divisor of the loss).
    claims = sorted(
        ((scores[role], -index, name, role)
         for index, parameter in enumerate(parameters)
         if (name := parameter.name) not in roles and name not in roles_with_fixed
         and (scores := collector.scores[name])
         for role in ROLES if scores[role]),
        reverse=True,
    )
    for _score, _index, name, role in claims:
        if name not in roles and role not in taken:
            roles[name] = role
            taken.add(role)
            evidence[name] = tuple(dict.fromkeys(collector.reasons[name][role]))
    for parameter in parameters:
        name = parameter.name
        if name in roles or name in roles_with_fixed:
            continue
        by_name = _role_by_name(name)
        if by_name is not None and by_name not in taken:
            roles[name] = by_name
            taken.add(by_name)
            evidence[name] = ("its name",)
        elif not parameter.has_default:
            raise BindingError(
                f"cannot tell what parameter {name!r} of {function}() receives; "
                f"bind it with --bind {name}=ROLE (ROLE: {', '.join(ROLES)}), "
                f"--bind {name}.ATTRIBUTE=ROLE or --arg {name}=VALUE"
            )
    in_order = {p.name: roles[p.name] for p in parameters if p.name in roles}
    return Binding(function, parameters, in_order, evidence, attributes, fixed)


@functools.lru_cache(maxsize=8)
def _parsed(source: str) -> cst.Module:
    """The source's tree, parsed once for the binding and the loop's shape (trees are immutable)."""
    return cst.parse_module(source)


def _is_method(function: str) -> bool:
    return "." in function


def _role_by_name(name: str) -> str | None:
    lowered = name.lower()
    for role, patterns in _NAME_PATTERNS.items():
        if any(fnmatch.fnmatchcase(lowered, pattern) for pattern in patterns):
            return role
    return None


def _find_function(module: cst.Module, name: str) -> cst.FunctionDef | None:
    """The def named `name`, or `Class.method` inside that class."""
    owner, _, method = name.rpartition(".")
    found: list[cst.FunctionDef] = []

    class _Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.classes: list[str] = []

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            self.classes.append(node.name.value)
            return not found

        def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
            self.classes.pop()

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            in_owner = not owner or (self.classes and self.classes[-1] == owner.rpartition(".")[2])
            if node.name.value == method and in_owner and not found:
                found.append(node)
            return not found

    module.visit(_Finder())
    return found[0] if found else None


def _parameters(definition: cst.FunctionDef) -> tuple[Parameter, ...]:
    params = definition.params
    result = [Parameter(p.name.value, p.default is not None, positional_only=True) for p in params.posonly_params]
    result += [Parameter(p.name.value, p.default is not None) for p in params.params]
    result += [Parameter(p.name.value, p.default is not None) for p in params.kwonly_params]
    return tuple(result)


def _name_of(node: cst.CSTNode) -> str | None:
    return node.value if isinstance(node, cst.Name) else None


class _UsageCollector(cst.CSTVisitor):
    """Scores each (parameter, role) pair from what the body does with the name."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.scores: dict[str, Counter] = defaultdict(Counter)
        self.reasons: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))

    def _note(self, node: cst.CSTNode | None, role: str, reason: str, weight: int = 2) -> None:
        name = _name_of(node) if node is not None else None
        if name in self.names:
            self.scores[name][role] += weight
            self.reasons[name][role].append(reason)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        positional = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _OPTIMIZER_METHODS:
                self._note(func.value, OPTIMIZER, f".{method}()")
            elif method in _MODEL_METHODS:
                self._note(func.value, MODEL, f".{method}()")
            if method == "step" and positional:
                self._note(positional[0], OPTIMIZER, "passed to .step()")
            if method in {"div", "div_", "__truediv__"} and positional:
                self._note(positional[0], ACCUM_STEPS, f"divides with .{method}()")
            return
        callee = _name_of(func)
        if callee in self.names:
            if len(positional) >= 2:
                self._note(func, LOSS_FN, "called with (output, target)")
            else:
                self._note(func, MODEL, "called with a batch")
        elif callee in _ITERATING_CALLS and positional:
            for value in positional:
                self._note(value, LOADER, f"passed to {callee}()")
        elif callee == "range" and positional:
            self._note(positional[-1] if len(positional) <= 2 else positional[1], ACCUM_STEPS, "bounds range()", 1)
        elif callee == "len" and positional:
            self._note(positional[0], LOADER, "passed to len()", 1)

    def visit_For(self, node: cst.For) -> None:
        self._note(node.iter, LOADER, "iterated by a for loop")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Modulo):
            self._note(node.right, ACCUM_STEPS, "divisor of %")
        elif isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            self._note(node.right, ACCUM_STEPS, "divisor of the loss")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.DivideAssign):
            self._note(node.value, ACCUM_STEPS, "divisor of the loss")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            if isinstance(target.operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan)):
                self._note(target.comparator, ACCUM_STEPS, "a counter is compared with it", 1)


@dataclass(frozen=True)
class LoopShape:
    """How a training function takes its micro-batches, read from its source.

    `update_driven`: it pulls them with `next()` inside a loop bounded by the
    accumulation steps (`for _ in range(accum_steps): x, y = next(it)`), so
    it runs a fixed number of updates of K micro-batches and never consumes a
    partial window. `prefetches`: it also pulls one before its loops, and
    then one ahead inside them (nanoGPT's shape), so it asks for one
    micro-batch more than it trains on.
    """

    update_driven: bool = False
    prefetches: bool = False


def loop_shape(source: str | None, function: str, accum_steps: str | None) -> LoopShape:
    """The `LoopShape` of `function` in `source`, whose accumulation steps
    arrive as `accum_steps` (a parameter, or `parameter.attribute`)."""
    if source is None or accum_steps is None:
        return LoopShape()
    definition = _find_function(_parsed(source), function)
    if definition is None:
        return LoopShape()
    finder = _PullFinder(accum_steps)
    definition.body.visit(finder)
    update_driven = finder.pulls_per_micro_step > 0
    return LoopShape(update_driven, update_driven and finder.pulls_outside_loops > 0)


def _dotted(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        owner = _dotted(node.value)
        return f"{owner}.{node.attr.value}" if owner is not None else None
    return None


def _is_next_call(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and _name_of(node.func) == "next"


class _PullFinder(cst.CSTVisitor):
    """Counts `next()` calls inside loops bounded by K and outside every loop."""

    def __init__(self, accum_steps: str) -> None:
        self.accum_steps = accum_steps
        self.loops: list[bool] = []  # per enclosing loop: whether it is bounded by K
        self.pulls_per_micro_step = 0
        self.pulls_outside_loops = 0

    def _bounded_by_k(self, node: cst.For) -> bool:
        call = node.iter
        if not isinstance(call, cst.Call) or _name_of(call.func) != "range" or not call.args:
            return False
        bound = call.args[0].value if len(call.args) == 1 else call.args[1].value
        return _dotted(bound) == self.accum_steps

    def visit_For(self, node: cst.For) -> None:
        self.loops.append(self._bounded_by_k(node))

    def leave_For(self, original_node: cst.For) -> None:
        self.loops.pop()

    def visit_While(self, node: cst.While) -> None:
        self.loops.append(False)

    def leave_While(self, original_node: cst.While) -> None:
        self.loops.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function's pulls are not this loop's

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_next_call(node):
            return
        if not self.loops:
            self.pulls_outside_loops += 1
        elif self.loops[-1]:
            self.pulls_per_micro_step += 1
