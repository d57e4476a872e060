"""LibCST's parser, without LibCST re-validating every node its own parser builds.

Every LibCST node checks itself when it is constructed: the dataclass `__init__`
calls `CSTNode.__post_init__`, which runs the node's `_validate()` (balanced
parentheses, required whitespace, valid identifiers...). Those checks guard
trees that people build by hand; a tree the parser has just produced from a
text is valid by construction (the text round-trips, and accumlint only parses
texts CPython already compiled, `accumlint.source.gate`).

So the parse runs with that hook switched off, for the parsing thread only,
and only while `parse_module` runs: nodes the fixer builds later, and nodes any
other thread builds meanwhile, are still validated. When the parsing thread is
the only one (a check's worker always is), the hook is a plain no-op for the
parse, and the installed node constructors do not even call it: no other
thread exists to build a node, and the parse starts none (asking which thread
builds each node would cost more than it saves). The hook is
LibCST's private API: `SKIPS_VALIDATION` is False, and the parse is LibCST's plain one,
when `CSTNode.__post_init__` is not the one-line validating hook this module
knows (tests/test_parsing.py fails then, and checks on every fixture that the
trees are the same either way).

The parse also runs with Python's cyclic garbage collector paused
(`accumlint.compat.collector`), and, once the process has parsed
INSTALL_AFTER_CHARS of text, with node constructors that store fields through
the slots (`accumlint.compat.node_init`): installing them costs more than a
one-file check would win back.
"""

from __future__ import annotations

import threading

import libcst
from libcst._nodes.base import CSTNode

from accumlint.compat import node_init
from accumlint.compat.collector import collector_paused
from accumlint.source.native import native_errors_silenced

_VALIDATING_HOOK = CSTNode.__dict__.get("__post_init__")
# The hook is known when it does nothing but run `_validate()`.
SKIPS_VALIDATION: bool = (
    _VALIDATING_HOOK is not None
    and getattr(_VALIDATING_HOOK, "__code__", None) is not None
    and _VALIDATING_HOOK.__code__.co_names == ("_validate",)
)

# How much text a process parses before the faster node constructors pay for themselves.
INSTALL_AFTER_CHARS = 50_000
_parsed_chars = 0

_swap = threading.Lock()
_parsing: set[int] = set()  # threads parsing now; they skip validation


def _validate_unless_parsing(node: CSTNode) -> None:
    if threading.get_ident() not in _parsing:
        _VALIDATING_HOOK(node)


def _skip_validation(node: CSTNode) -> None:
    """The hook while the only thread there is parses."""


def parse_module(text: str) -> libcst.Module:
    """`libcst.parse_module(text)`, the nodes it builds left unvalidated."""
    global _parsed_chars
    if _parsed_chars < INSTALL_AFTER_CHARS:
        _parsed_chars += len(text)
        if _parsed_chars >= INSTALL_AFTER_CHARS:
            node_init.install()
    with collector_paused(), native_errors_silenced():
        if not SKIPS_VALIDATION:
            return libcst.parse_module(text)
        return _unvalidated_parse(text)


def _unvalidated_parse(text: str) -> libcst.Module:
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
