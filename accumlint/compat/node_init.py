"""Constructors for LibCST's nodes that store their fields through the slots.

LibCST's nodes are frozen dataclasses with slots. The `__init__` that
`dataclasses` writes for them stores each field with
`object.__setattr__(self, "name", value)`, which looks the name up on the
type for every field of every node, and a parse builds every node of a file
that way. The constructor made here for a node type does exactly what that
one does (the same parameters, defaults and default factories, then
`__post_init__`), but stores each field through its slot's descriptor,
fetched once.
While the only thread there is parses, the parser also has them skip the call
of `__post_init__` (`validating(False)`), whose hook it has made a no-op for
the parse anyway (`accumlint.source.parsing`): one Python call per node fewer.

Making them costs a few milliseconds (one small code object per shape of
fields, one function per node type), more than a one-file check can win
back, so the parser installs them once a process has parsed enough text
(`accumlint.source.parsing`, in accumlint's own command only). A node type
whose fields are not all plain slots (a LibCST release that changes how nodes
are declared), or that has a default factory where `dataclasses` has no
`_HAS_DEFAULT_FACTORY`, keeps its own constructor; tests/test_node_init.py
checks that both build the same nodes.
"""

from __future__ import annotations

import builtins
import dataclasses
from types import CellType, CodeType, FunctionType
from typing import Optional

from libcst import CSTNode

# The default of a field with a default factory, which makes the constructor run the
# factory: dataclasses' own marker, since callers that read a signature before the
# constructors were installed (hypothesis's `builds`) pass it explicitly.
_FACTORY = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", None)
_MEMBER = type(type("_Slotted", (), {"__slots__": ("value",)}).value)  # the descriptor type of a slot
# One code object per shape: which fields have a default factory.
_templates: dict[tuple[bool, ...], CodeType] = {}
# Whether the constructors call `__post_init__`: one cell, in every constructor's closure.
_CALL_POST_INIT = CellType(True)


def validating(on: bool) -> None:
    """Whether the installed constructors call `__post_init__` (LibCST's validating hook)."""
    _CALL_POST_INIT.cell_contents = on


def install() -> None:
    """Give every LibCST node type that allows it the slot-storing constructor."""
    for kind in _node_types():
        constructor = _constructor(kind)
        if constructor is not None:
            kind.__init__ = constructor


def _node_types() -> list[type]:
    """The node types LibCST builds: the dataclasses below CSTNode with an `__init__` of their own
    (the classes LibCST's `add_slots` replaced are still subclasses; they have no slots)."""
    found, stack = [], [CSTNode]
    while stack:
        for kind in stack.pop().__subclasses__():
            stack.append(kind)
            if "__init__" in kind.__dict__ and "__slots__" in kind.__dict__ and dataclasses.is_dataclass(kind):
                found.append(kind)
    return found


def _constructor(kind: type) -> Optional[FunctionType]:
    """The slot-storing `__init__` of a node type, or None when a field is not a plain slot."""
    if any("__post_init__" in owner.__dict__ for owner in kind.__mro__ if owner is not CSTNode):
        return None  # a hook of its own, which `validating(False)` must not skip
    fields = dataclasses.fields(kind)
    setters = []
    for field in fields:
        if not field.init or getattr(field, "kw_only", False):
            return None
        slot = next((owner.__dict__[field.name] for owner in kind.__mro__ if field.name in owner.__dict__), None)
        if type(slot) is not _MEMBER:
            return None
        setters.append(slot.__set__)
    shape = tuple(field.default_factory is not dataclasses.MISSING for field in fields)
    if _FACTORY is None and any(shape):
        return None
    namespace: dict[str, object] = {"__builtins__": builtins.__dict__, "FACTORY": _FACTORY}
    defaults = []
    for index, (field, setter) in enumerate(zip(fields, setters)):
        namespace[f"set{index}"] = setter
        if shape[index]:
            namespace[f"make{index}"] = field.default_factory
            defaults.append(_FACTORY)
        elif field.default is not dataclasses.MISSING:
            defaults.append(field.default)
    code = _template(shape).replace(co_varnames=("self", *(field.name for field in fields)))
    constructor = FunctionType(code, namespace, "__init__", tuple(defaults) or None, (_CALL_POST_INIT,))
    constructor.__qualname__ = f"{kind.__qualname__}.__init__"
    return constructor


def _template(shape: tuple[bool, ...]) -> CodeType:
    code = _templates.get(shape)
    if code is None:
        parameters = "".join(f", p{index}" for index in range(len(shape)))
        body = "".join(
            f"        set{index}(self, make{index}() if p{index} is FACTORY else p{index})\n"
            if factory
            else f"        set{index}(self, p{index})\n"
            for index, factory in enumerate(shape)
        )
        source = (
            "def closure():\n    call_post_init = True\n"  # the free variable the cell fills
            f"    def __init__(self{parameters}):\n{body}        if call_post_init:\n            self.__post_init__()\n"
            "    return __init__\n"
        )
        namespace: dict[str, object] = {}
        exec(compile(source, __name__, "exec"), namespace)
        code = _templates[shape] = namespace["closure"]().__code__
    return code
