"""Applying fixes: STUB (being written)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from accumlint.analysis import AnalysisOptions, analyze
from accumlint.diagnostics import Diagnostic

MAX_ROUNDS = 10


@dataclass(frozen=True)
class FixOutcome:
    """The fixed text, the findings whose fix was applied, and those that remain."""

    text: str
    fixed: list[Diagnostic] = field(default_factory=list)
    remaining: list[Diagnostic] = field(default_factory=list)
    converged: bool = True


def fix_text(
    text: str,
    path: str,
    options: AnalysisOptions,
    *,
    unsafe: bool,
    keep: Callable[[str, Diagnostic], bool] = lambda text, diagnostic: True,
) -> FixOutcome:
    """Apply every enabled fix (`keep(current_text, diagnostic)`), re-checking
    after each round until nothing changes or MAX_ROUNDS pass."""
    remaining = [d for d in analyze(text, path, options) if keep(text, d)]
    return FixOutcome(text=text, fixed=[], remaining=remaining, converged=True)
