"""LibCST's parser, without LibCST re-validating every node its own parser builds.

Every LibCST node checks itself when it is constructed: the dataclass `__init__`
calls `CSTNode.__post_init__`, which runs the node's `_validate()` (balanced
parentheses, required whitespace, valid identifiers...). Those checks guard
trees that people build by hand; a tree the parser has just produced from a
text is valid by construction (the text round-trips, and accumlint only parses
texts CPython already compiled, `accumlint.source.gate`). On loop-dense code the
checks are a large share of the parse (README, "Speed").

So `unvalidated_parse` runs with that hook switched off, for the parsing thread
only, and only while `libcst.parse_module` runs: nodes the fixer builds later,
and nodes any other thread builds meanwhile, are still validated. When the
parsing thread is the only one (a check's worker always is), the hook is a
plain no-op for the parse, and the installed node constructors
(`accumlint.compat.node_init`) do not even call it: no other thread exists to
build a node, and the parse starts none (asking which thread builds each node
would cost a share of the parse of its own).

The hook is LibCST's private API, and swapping it changes a class for the whole
process: `SKIPS_VALIDATION` is False, and the parse is LibCST's plain one, when
`CSTNode.__post_init__` is not the one-line validating hook this module knows
or the kill switch is set (tests/test_parsing.py checks on every fixture that
the trees are the same either way). Only accumlint's own command calls it
(`accumlint.source.parsing`).
"""

from __future__ import annotations

import threading

import libcst
from libcst import CSTNode

from accumlint.compat import node_init, speedups_allowed



def is_known_hook(hook: object) -> bool:
    """Whether `hook` is the validating hook this module knows: a function that does nothing
    but run `_validate()`."""
    code = getattr(hook, "__code__", None)
    return code is not None and code.co_names == ("_validate",)


_VALIDATING_HOOK = CSTNode.__dict__.get("__post_init__")
SKIPS_VALIDATION: bool = speedups_allowed() and is_known_hook(_VALIDATING_HOOK)

_swap = threading.Lock()
_parsing: set[int] = set()  # threads parsing now; they skip validation


def _validate_unless_parsing(node: CSTNode) -> None:
    if threading.get_ident() not in _parsing:
        _VALIDATING_HOOK(node)


def _skip_validation(node: CSTNode) -> None:
    """The hook while the only thread there is parses."""


def unvalidated_parse(text: str) -> libcst.Module:
    """`libcst.parse_module(text)`, the nodes it builds left unvalidated where the hook is known."""
    if not SKIPS_VALIDATION:
        return libcst.parse_module(text)
    thread = threading.get_ident()
    with _swap:
        _parsing.add(thread)
        alone = threading.active_count() == 1
        CSTNode.__post_init__ = _skip_validation if alone else _validate_unless_parsing
        node_init.validating(not alone)
    try:
        return libcst.parse_module(text)
    finally:
        with _swap:
            _parsing.discard(thread)
            if not _parsing:
                CSTNode.__post_init__ = _VALIDATING_HOOK
                node_init.validating(True)
