"""CPython's `compile` under a small recursion budget: a bound on a text's nesting, for free.

CPython's compiler (3.10 and 3.11) counts its symbol table's recursion against
the interpreter's recursion limit, COMPILER_STACK_FRAME_SCALE (three) levels
for each frame of budget, and refuses deeper code with RecursionError. So a
`compile` run with the limit set a few frames above the current depth passes
only for texts that nest shallowly (`accumlint.source.gate` turns that into a
bound). Both the scale and the stack depth (`sys._getframe`) are CPython's
private details: `budget_bounds_compile()` is False, and the gate takes its
full public path, where `sys._getframe` is missing, where a probe deeper than
the budget compiles anyway (3.12 gave the compiler a C-stack limit of its own),
and when the kill switch is set.
"""

from __future__ import annotations

import sys
from typing import Optional

from accumlint.compat import speedups_allowed

# Levels of the symbol table's recursion that one frame of budget allows (CPython's
# COMPILER_STACK_FRAME_SCALE); the probe checks that no more are allowed.
LEVELS_PER_FRAME = 3
_PROBE_FRAMES = 16
_obeys_budget: Optional[bool] = None


def budget_bounds_compile() -> bool:
    """Whether `compiles_within(text, path, frames)` bounds the text's nesting by about
    LEVELS_PER_FRAME * frames here: a probe one more level per frame than that deep
    (plus a margin) must be refused. Probed once."""
    global _obeys_budget
    if _obeys_budget is None:
        if not speedups_allowed() or getattr(sys, "_getframe", None) is None:
            _obeys_budget = False
        else:
            probe = "x = " + "-" * (LEVELS_PER_FRAME * (_PROBE_FRAMES + 4)) + "a\n"
            _obeys_budget = not compiles_within(probe, "<probe>", _PROBE_FRAMES)
    return _obeys_budget


def compiles_within(text: str, path: str, frames: int) -> bool:
    """Whether CPython compiles the text with `frames` frames of recursion budget above the
    caller's. Lowers the interpreter's recursion limit meanwhile: only for a caller that
    knows no other thread runs."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_frame_depth() + frames)
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    finally:
        sys.setrecursionlimit(limit)
    return True


def _frame_depth() -> int:
    """How many Python frames are running (the recursion depth counts at least these)."""
    depth = 0
    frame = sys._getframe(1)
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth
