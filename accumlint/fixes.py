"""Applying fixes: non-overlapping edits per round, re-checking until stable.

Each round parses the current text, asks the rules for findings, applies the
fixes of the enabled ones whose edits do not touch the same subtree, and starts
again on the new text: one fix can reveal or remove another finding (a gate
fixed for GA106 may then need GA107's last-batch clause). A fix whose result
would not parse is dropped, never written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from accumlint.analysis import AnalysisOptions, Located, ParseFailure, find, parse
from accumlint.diagnostics import Diagnostic

MAX_ROUNDS = 10

Keep = Callable[[str, Diagnostic], bool]


@dataclass(frozen=True)
class FixOutcome:
    """The fixed text, the findings whose fix was applied, and those that remain."""

    text: str
    fixed: list[Diagnostic] = field(default_factory=list)
    remaining: list[Diagnostic] = field(default_factory=list)
    converged: bool = True


def _always(text: str, diagnostic: Diagnostic) -> bool:
    return True


def fix_text(
    text: str,
    path: str,
    options: AnalysisOptions,
    *,
    unsafe: bool,
    keep: Keep = _always,
) -> FixOutcome:
    """Apply every enabled fix (`keep(current_text, diagnostic)`), re-checking
    after each round until nothing changes or MAX_ROUNDS pass."""
    fixed: list[Diagnostic] = []
    refused: set[tuple[str, str]] = set()
    for _ in range(MAX_ROUNDS):
        module = parse(text)
        enabled = [item for item in find(module, text, path, options) if keep(text, item.diagnostic)]
        candidates = [
            item for item in enabled
            if _applies(item.diagnostic, unsafe) and (item.diagnostic.code, item.diagnostic.message) not in refused
        ]
        if not candidates:
            return FixOutcome(text, fixed, [item.diagnostic for item in enabled], True)
        chosen = _non_overlapping(candidates)
        new_text = _apply(module, chosen)
        if new_text is None and len(chosen) > 1:
            chosen = chosen[:1]
            new_text = _apply(module, chosen)
        if new_text is None or new_text == text:
            refused.update((item.diagnostic.code, item.diagnostic.message) for item in chosen)
            continue
        fixed.extend(item.diagnostic for item in chosen)
        text = new_text
    remaining = [d for d in find(parse(text), text, path, options) if keep(text, d.diagnostic)]
    return FixOutcome(text, fixed, [item.diagnostic for item in remaining], False)


def _applies(diagnostic: Diagnostic, unsafe: bool) -> bool:
    return diagnostic.fix is not None and (diagnostic.fix.applicability == "safe" or unsafe)


def _non_overlapping(candidates: list[Located]) -> list[Located]:
    """Greedy in source order: a fix is taken if no earlier taken fix edits its subtree."""
    from accumlint.model.tree import walk_all

    taken: list[Located] = []
    claimed: set[int] = set()
    for item in candidates:
        span = {id(node) for edit in item.finding.edits for node in walk_all(edit.target)}
        if span & claimed:
            continue
        claimed |= span
        taken.append(item)
    return taken


def _apply(module, chosen: list[Located]):
    from accumlint.edits import apply_edits

    edits = [edit for item in chosen for edit in item.finding.edits]
    try:
        text = apply_edits(module, edits).code
        parse(text)
    except (ParseFailure, Exception):  # a fix that breaks the file is never written
        return None
    return text
