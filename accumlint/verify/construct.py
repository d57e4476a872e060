"""`FILE::Class.method`: building the instance a trainer-class method runs on.

Most training code is a class whose `__init__` takes the model, optimizer,
loader and settings, and whose `train()` runs the loop. Each run needs its
own instance over its own model copy, optimizer and loader, so the instance
is built per run: by the setup's `construct` factory (called with the run's
objects under the role names it accepts: model, optimizer, loader,
accum_steps, loss_fn), or else by binding `Class.__init__` by role exactly
as a function is bound (`--bind`/`--arg` names that `__init__` takes go to it).
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import replace
from typing import Any, Callable, Optional

from accumlint.verify.binding import ROLES, Binding, BindingError, Parameter, bind_parameters


def split_options(
    options: Optional[dict[str, Any]], method_parameters: tuple[Parameter, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the method's, the constructor's) share of `--bind`/`--arg` options, by
    the name before any dot."""
    names = {p.name for p in method_parameters}
    method, init = {}, {}
    for key, value in (options or {}).items():
        (method if key.partition(".")[0] in names else init)[key] = value
    return method, init


def constructing(
    binding: Binding,
    owner: type,
    construct: Optional[Callable[..., Any]],
    overrides: Optional[dict[str, str]] = None,
    fixed: Optional[dict[str, Any]] = None,
    named: tuple[str, ...] = (),
) -> Binding:
    """`binding` (of the method) with the per-run construction of `owner`;
    `named` are the objects the setup returns by name (see bind_parameters)."""
    if construct is not None:
        return _from_factory(binding, construct)
    init = owner.__dict__.get("__init__")
    if init is None:
        if overrides or fixed:
            raise BindingError(f"{owner.__name__} has no __init__ of its own to take {', '.join({**(overrides or {}), **(fixed or {})})}")
        return replace(binding, construct=lambda objects: owner(), constructed_roles=frozenset())
    try:
        source = textwrap.dedent(inspect.getsource(owner))
    except (OSError, TypeError):
        source = None
    init_binding = bind_parameters(source, f"{owner.__name__}.__init__", overrides, fixed, _init_signature(init),
                                   named=named)

    def build(objects: dict[str, object]) -> object:
        args, kwargs = init_binding.arguments(objects)
        return owner(*args, **kwargs)

    roles = {role for _, role in init_binding.bound_roles()}
    return replace(_without(binding, roles), construct=build, constructed_roles=frozenset(roles))


def _without(binding: Binding, roles: set[str]) -> Binding:
    """The method's binding minus optional parameters that only guessed a role
    the constructor already receives (`def train(self, epochs=1)` bounding a
    range() is not K when `__init__` takes the accumulation steps)."""
    kept = {
        name: role for name, role in binding.roles.items()
        if role not in roles or binding.evidence.get(name) == ("--bind",)
        or not next((p.has_default for p in binding.parameters if p.name == name), False)
    }
    return replace(binding, roles=kept)


def _init_signature(init: Callable[..., Any]) -> tuple[Parameter, ...]:
    try:
        parameters = list(inspect.signature(init).parameters.values())[1:]
    except (TypeError, ValueError):
        return ()
    return tuple(
        Parameter(p.name, p.default is not inspect.Parameter.empty)
        for p in parameters
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    )


def _from_factory(binding: Binding, factory: Callable[..., Any]) -> Binding:
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        accepted = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    roles = frozenset(role for role in ROLES if takes_all or role in accepted)

    def build(objects: dict[str, object]) -> object:
        return factory(**{role: objects[role] for role in roles})

    return replace(_without(binding, set(roles)), construct=build, constructed_roles=roles)


def accepts_accum_steps(binding: Binding) -> bool:
    """Whether the construction of a method's instance receives K."""
    return "accum_steps" in binding.constructed_roles
