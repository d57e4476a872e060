"""Applying fixes: non-overlapping edits per round, re-checking until stable.

Each round parses the current text, asks the rules for findings, applies the
fixes of the enabled ones that do not touch the same nodes, and starts again
on the new text, as ruff does, until no fix is left to apply (at most
MAX_ROUNDS rounds, ruff's bound): one fix can reveal or remove another
finding (a gate fixed for GA106 may then need GA107's last-batch clause).
Fixes compose: a fix whose new code holds a node that another fix of the
round changes (GA401's `require_backward_grad_sync = (<gate>)` and GA106's
correction of that gate) waits for the next round, which re-analyses the
corrected text.

Nothing is written that would break the file: a round whose result does not
parse, reads a name where it is not bound, or changes lines outside the
statements its edits name is dropped; a file LibCST cannot reproduce exactly
is not fixed at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from accumlint.check.analysis import AnalysisOptions, Located, ParseFailure, find, lost_by_libcst, parse
from accumlint.diagnostics import Diagnostic

# Rounds of fixes on one text before it is declared unsettled (ruff's bound).
MAX_ROUNDS = 100

Keep = Callable[[str, Diagnostic], bool]


@dataclass(frozen=True)
class FixOutcome:
    """The fixed text, the findings whose fix was applied, those that remain, and how many rounds applied fixes."""

    text: str
    fixed: list[Diagnostic] = field(default_factory=list)
    remaining: list[Diagnostic] = field(default_factory=list)
    converged: bool = True
    rounds: int = 0


def _always(text: str, diagnostic: Diagnostic) -> bool:
    return True


def fix_text(
    text: str,
    path: str,
    options: AnalysisOptions,
    *,
    unsafe: bool,
    keep: Keep = _always,
    fixable: Optional[frozenset[str]] = None,
) -> FixOutcome:
    """Apply every enabled fix (`keep(current_text, diagnostic)`) of a `fixable` code
    (None: any), re-checking after each round until nothing changes or MAX_ROUNDS pass."""
    fixed: list[Diagnostic] = []
    refused: set[tuple[str, str]] = set()
    rounds = 0
    for _ in range(MAX_ROUNDS):
        module = parse(text)
        enabled = [item for item in find(module, text, path, options) if keep(text, item.diagnostic)]
        # (without findings nothing is written: skip the codegen)
        lost = lost_by_libcst(module, text) if enabled else ""
        if lost is None:
            # LibCST would not write this text back as it is: refuse rather than change other lines
            return FixOutcome(text, fixed, [item.diagnostic._replace(fix=None) for item in enabled], True, rounds)
        candidates = [
            item for item in enabled
            if _applies(item.diagnostic, unsafe)
            and (fixable is None or item.diagnostic.code in fixable)
            and (item.diagnostic.code, item.diagnostic.message) not in refused
        ]
        if not candidates:
            return FixOutcome(text, fixed, [item.diagnostic for item in enabled], True, rounds)
        chosen = _non_overlapping(candidates)
        written = text[: len(text) - len(lost)]  # what LibCST writes back, which the fixes change
        new_text = _apply(module, written, chosen)
        if new_text is None and len(chosen) > 1:
            chosen = chosen[:1]
            new_text = _apply(module, written, chosen)
        if new_text is None or new_text == written:
            refused.update((item.diagnostic.code, item.diagnostic.message) for item in chosen)
            continue
        fixed.extend(item.diagnostic for item in chosen)
        text = new_text + lost
        rounds += 1
    remaining = [d for d in find(parse(text), text, path, options) if keep(text, d.diagnostic)]
    return FixOutcome(text, fixed, [item.diagnostic for item in remaining], False, rounds)


def _applies(diagnostic: Diagnostic, unsafe: bool) -> bool:
    return diagnostic.fix is not None and (diagnostic.fix.applicability == "safe" or unsafe)


def _non_overlapping(candidates: list[Located]) -> list[Located]:
    """The fixes of one round. A fix whose new code holds a node that another candidate
    changes waits (the next round re-analyses the changed text); of the others, greedy in
    source order, a fix is taken if it changes no node a taken fix changes or holds."""
    changes = [_changed_nodes(item.finding.edits) for item in candidates]
    holds = [_held_nodes(item.finding.edits) for item in candidates]
    everything_changed: dict[int, int] = {}
    for index, changed in enumerate(changes):
        for node in changed:
            everything_changed.setdefault(node, index)
    ready = [
        index for index in range(len(candidates))
        if not any(everything_changed.get(node, index) != index for node in holds[index])
    ] or [0]
    taken: list[Located] = []
    changed_so_far: set[int] = set()
    held_so_far: set[int] = set()
    for index in ready:
        if changes[index] & (changed_so_far | held_so_far) or holds[index] & changed_so_far:
            continue
        changed_so_far |= changes[index]
        held_so_far |= holds[index]
        taken.append(candidates[index])
    return taken


def _changed_nodes(edits) -> set[int]:
    """Nodes an edit replaces or removes (with all below them), or inserts beside."""
    from accumlint.fix.edits import AFTER, BEFORE
    from accumlint.model.tree import walk_all as walk

    found: set[int] = set()
    for edit in edits:
        if edit.action in (BEFORE, AFTER):
            found.add(id(edit.target))
        else:
            found.update(id(node) for node in walk(edit.target))
    return found


def _held_nodes(edits) -> set[int]:
    """Nodes of the file that an edit's new code holds (moved statements, repeated gates)."""
    from accumlint.model.tree import walk_all as walk

    import libcst as cst

    found: set[int] = set()
    for edit in edits:
        for new in edit.nodes:
            placed = new.nodes if isinstance(new, cst.FlattenSentinel) else (new,)
            found.update(id(node) for root in placed for node in walk(root))
    return found


def _apply(module, text: str, chosen: list[Located]) -> Optional[str]:
    """The text with the chosen fixes applied, or None when the result would break the
    file (no parse, a name read where it is not bound, unrelated lines changed)."""
    from accumlint.fix.edits import apply_edits
    from accumlint.fix.guard import guard_for, touches_only_edited_lines

    edits = [edit for item in chosen for edit in item.finding.edits]
    guard = guard_for(module)
    if len(chosen) > 1 and not guard.allows(edits):
        return None
    try:
        fixed = apply_edits(module, edits, guard.parents).code
        parse(fixed)
    except (ParseFailure, Exception):  # a fix that breaks the file is never written
        return None
    if not touches_only_edited_lines(text, module, edits, fixed):
        return None
    return fixed
