"""Exclusive arms: two statements in different arms of one `if`/`elif`/`else`,
`match` or `try`/`except` never both run in the same iteration."""

from __future__ import annotations

import libcst as cst

from accumlint.model.loop import Statement

_BRANCHING = (cst.If, cst.Try, cst.TryStar, cst.Match)


def exclusive(first: Statement, second: Statement) -> bool:
    """Whether the two statements stand in different arms of one branching statement."""
    a, b = first.block, second.block
    for index, (left, right) in enumerate(zip(a, b)):
        if left is not right:
            return index > 0 and isinstance(a[index - 1], _BRANCHING)
    return False
