"""Regular expressions compiled when first used, not when their module is imported.

Compiling a pattern is not free (IGNORECASE ones cost the most), and a
module-level `re.compile` pays it on every run, even one that never reaches the
code using it: a one-file check leaves most of the model's name patterns
unused. A `LazyPattern` stands where the compiled pattern stood, with the same
methods, and compiles at the first call.
"""

from __future__ import annotations

import re
from typing import Any, Optional


class LazyPattern:
    """`re.compile(pattern, flags)`, done at the first use of any of its attributes."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)
        self._compiled: Optional[re.Pattern[str]] = None

    def __getattr__(self, name: str) -> Any:
        # Only reached while the instance lacks the attribute: the compiled
        # pattern's is then kept on it, so that later lookups are plain ones.
        if self._compiled is None:
            self._compiled = re.compile(*self._source)
        value = getattr(self._compiled, name)
        setattr(self, name, value)
        return value
