"""An independent name check for fix outputs: pyflakes, original against fixed.

accumlint's own guard (accumlint.model.scopes) decides which fixes to offer; the
tests judge its results with a different, well-kept tool, so a blind spot of
one is not the blind spot of both.
"""

from __future__ import annotations

import ast
from collections import Counter

from pyflakes import checker, messages

_NAME_ERRORS = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


def undefined_names(text: str) -> Counter:
    """(kind, name) -> how often pyflakes reports the name undefined or unbound."""
    tree = ast.parse(text)
    found: Counter = Counter()
    for message in checker.Checker(tree, filename="<fixed>").messages:
        if isinstance(message, _NAME_ERRORS):
            found[(type(message).__name__, message.message_args[0])] += 1
    return found


def new_undefined_names(original: str, fixed: str) -> Counter:
    """Names the fix made undefined or unbound (empty when it made none)."""
    return undefined_names(fixed) - undefined_names(original)
