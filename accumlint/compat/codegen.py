"""LibCST's code-generation state, for passes that generate less than LibCST's own.

`CodegenState` (in `libcst._nodes.internal`) is what a node's `_codegen`
writes its tokens into and reports each node's start, end and syntactic
position to. Subclassing it lets accumlint generate a node's text without
recording positions (`accumlint.model.names.code`) and find the positions of
the few reported nodes in one pass that keeps no tokens
(`accumlint.model.positions`). Both are private to LibCST: `CodegenState` is
None, and the callers use `Module.code_for_node` and LibCST's position
providers, when either is missing, when the state does not have the fields and
hooks those passes override, or when the kill switch is set.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst

from accumlint.compat import speedups_allowed

# What the passes set or override: the state's fields and the hooks `_codegen` calls.
_FIELDS = ("default_indent", "default_newline", "indent_tokens", "tokens")
_HOOKS = ("add_indent_tokens", "add_token", "before_codegen", "after_codegen", "pop_trailing_newline",
          "record_syntactic_position")


def _private_state() -> Optional[type]:
    """LibCST's `CodegenState` where it is the one the passes know, else None."""
    try:
        from libcst._nodes.internal import CodegenState
    except ImportError:
        return None
    if not dataclasses.is_dataclass(CodegenState) or not callable(getattr(libcst.CSTNode, "_codegen", None)):
        return None
    fields = {field.name for field in dataclasses.fields(CodegenState)}
    if not fields.issuperset(_FIELDS) or not all(callable(getattr(CodegenState, hook, None)) for hook in _HOOKS):
        return None
    return CodegenState


CodegenState: Optional[type] = _private_state() if speedups_allowed() else None


def generate(node: libcst.CSTNode, state: object) -> None:
    """Run the node's code generation into `state` (an instance of a `CodegenState` subclass)."""
    node._codegen(state)
