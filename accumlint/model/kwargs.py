"""Keyword arguments, also those passed through a `**dict` the module builds.

Real scripts often collect a constructor's options first
(`accelerator_kwargs = {"gradient_accumulation_steps": args.steps}`, then
`accelerator_kwargs["log_with"] = ...`, then `Accelerator(**accelerator_kwargs)`).
When the dict is a literal or `dict(...)` bound once in the module, its string
keys count as the keywords they hold; anything else is unknown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from accumlint.model.names import dotted, string_value

if TYPE_CHECKING:
    from accumlint.model.facts import ModuleFacts


def keywords(facts: ModuleFacts, call: cst.Call) -> Optional[dict[str, cst.BaseExpression]]:
    """Every keyword argument of `call` by name, with those of its `**` dicts; None when
    a `**` argument is not a dict the module builds (its keys are unknown)."""
    found: dict[str, cst.BaseExpression] = {}
    for arg in call.args:
        if arg.star == "**":
            spread = _dict_items(facts, arg.value, depth=0)
            if spread is None:
                return None
            found.update(spread)
        elif arg.keyword is not None:
            found[arg.keyword.value] = arg.value
    return found


def _dict_items(facts: ModuleFacts, expr: cst.BaseExpression, depth: int) -> Optional[dict[str, cst.BaseExpression]]:
    if depth > 3:
        return None
    name = dotted(expr)
    value = expr
    extra: dict[str, cst.BaseExpression] = {}
    if type(expr) in (cst.Name, cst.Attribute) and name is not None:
        bindings = facts.bindings.get(name, [])
        if not bindings and facts.project is not None:  # a literal dict another project module holds
            bindings = facts.project.bindings(name, facts)
        if len(bindings) != 1 or bindings[0].index is not None or _updated(facts, name):
            return None
        value = bindings[0].value
        for item in facts.bindings.get(f"{name}[]", []):
            key = _subscript_key(item.statement, name)
            if key is None:
                return None
            extra[key] = item.value
    if type(value) is cst.Dict:
        items = _literal_items(facts, value, depth)
    elif type(value) is cst.Call and dotted(value.func) == "dict" and not any(
        arg.keyword is None and not arg.star for arg in value.args
    ):
        items = keywords(facts, value)
    else:
        return None
    return None if items is None else {**items, **extra}


def _updated(facts: ModuleFacts, name: str) -> bool:
    """`d.update(...)`, `d.setdefault(...)`, `d.pop(...)`: keys the module does not show."""
    mutators = {f"{name}.{method}" for method in ("update", "setdefault", "pop", "popitem", "clear")}
    return any(dotted(call.func) in mutators for call in facts.calls)


def _literal_items(facts: ModuleFacts, value: cst.Dict, depth: int) -> Optional[dict[str, cst.BaseExpression]]:
    items: dict[str, cst.BaseExpression] = {}
    for element in value.elements:
        if type(element) is cst.DictElement:
            key = string_value(element.key)
            if key is None:
                return None
            items[key] = element.value
            continue
        nested = _dict_items(facts, element.value, depth + 1)  # `**other`, a StarredDictElement
        if nested is None:
            return None
        items.update(nested)
    return items


def _subscript_key(statement: cst.CSTNode, name: str) -> Optional[str]:
    """The string key of `name["key"] = ...` in an assignment statement."""
    targets = [t.target for t in statement.targets] if type(statement) is cst.Assign else [
        getattr(statement, "target", None)]
    for target in targets:
        if type(target) is cst.Subscript and dotted(target.value) == name and len(target.slice) == 1:
            index = target.slice[0].slice
            if type(index) is cst.Index:
                return string_value(index.value)
    return None
