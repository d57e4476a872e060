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

A finding that a loop of another module makes on one of this module's helpers
(`analysis.findings_from_importers`) is fixed here too, after the module's own
fixes, one per round: its edits change that helper's definition alone, so every
fix lands in the one file that holds the wrong statement and goes through the
same guard and the same atomic write as any other. A fix that would change two
files is not offered at all (there is no all-or-nothing write across files to
fall back on), and an unsafe one only when the helper has a single caller.

Nothing is written that would break the file: a round whose result does not
parse, reads a name where it is not bound, or changes lines outside the
statements its edits name is dropped; a file LibCST cannot reproduce exactly
is not fixed at all.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from accumlint.check.analysis import (
    AnalysisOptions,
    ForeignFix,
    Located,
    ParseFailure,
    ProjectAnalysis,
    analyze,
    find,
    findings_from_importers,
    lost_by_libcst,
    parse,
    tabs_expanded,
)
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


_ENDING = re.compile(r"\r\n|\r|\n")


def _with_endings_of(original: str, fixed: str) -> str:
    """`fixed` (line feeds only, made from `original` read with line feeds) with each line
    that it kept or changed from `original` ending as it did there; a new line ends as
    the file's first line does. A lone carriage return that would come to stand before a line feed
    (the line between them removed) becomes a line feed, so that no two line breaks read
    as one."""
    lines = re.findall(r"([^\r\n]*)(\r\n|\r|\n)", original)
    first = lines[0][1] if lines else "\n"
    contents = fixed.split("\n")
    ends = [first] * (len(contents) - 1) + [""]
    matcher = difflib.SequenceMatcher(None, [content for content, _ in lines], contents[:-1], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):  # a changed line keeps the ending of the line it replaces
            for offset in range(min(i2 - i1, j2 - j1)):
                ends[j1 + offset] = lines[i1 + offset][1]
    for index in range(len(ends) - 1):
        if ends[index] == "\r" and not contents[index + 1] and ends[index + 1].startswith("\n"):
            ends[index] = "\n"  # a lone CR before an empty line ending in LF would read as one CR LF
    return "".join(content + end for content, end in zip(contents, ends))


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
    (None: any), re-checking after each round until nothing changes or MAX_ROUNDS pass.

    A text whose line endings are mixed is fixed as its line-feed twin (Python reads both
    alike; LibCST writes a lone carriage return followed by a line that begins with a line
    feed as one CR LF), then each line the fix kept gets its own ending back."""
    kinds = set(_ENDING.findall(text))
    if len(kinds) > 1:
        outcome = fix_text(_ENDING.sub("\n", text), path, options, unsafe=unsafe, keep=keep, fixable=fixable)
        return dataclasses.replace(outcome, text=_with_endings_of(text, outcome.text))
    fixed: list[Diagnostic] = []
    refused: set[tuple[str, str]] = set()
    rounds = 0
    for _ in range(MAX_ROUNDS):
        try:
            module = parse(text)
        except ParseFailure:
            if rounds or tabs_expanded(text) is None:
                raise
            # indentation LibCST cannot read: the findings of its tab-expanded twin, without fixes
            return FixOutcome(text, fixed, [d for d in analyze(text, path, options) if keep(text, d)], True, rounds)
        enabled = [item for item in find(module, text, path, options) if keep(text, item.diagnostic)]
        # (without findings nothing is written: skip the codegen)
        lost = lost_by_libcst(module, text) if enabled else ""
        if lost is None:
            # LibCST would not write this text back as it is: refuse rather than change other lines
            mine = [item.diagnostic._replace(fix=None) for item in enabled]
            theirs = [d._replace(fix=None) for d in _from_importers(text, path, options, keep, mine).diagnostics]
            return FixOutcome(text, fixed, mine + theirs, True, rounds)
        candidates = [
            item for item in enabled
            if _applies(item.diagnostic, unsafe)
            and (fixable is None or item.diagnostic.code in fixable)
            and (item.diagnostic.code, item.diagnostic.message) not in refused
        ]
        if not candidates:
            # this module's own fixes are done: those that other modules' loops find on its helpers
            elsewhere = _from_importers(text, path, options, keep, [item.diagnostic for item in enabled])
            waiting = [
                item for item in elsewhere.fixes
                if _applies(item.diagnostic, unsafe)
                and (fixable is None or item.diagnostic.code in fixable)
                and (item.diagnostic.code, item.diagnostic.message) not in refused
            ]
            new_text = _apply_in_helper(text, waiting[0]) if waiting else None
            if new_text is None:
                if waiting:
                    refused.add((waiting[0].diagnostic.code, waiting[0].diagnostic.message))
                    continue
                remaining = [item.diagnostic for item in enabled] + elsewhere.diagnostics
                return FixOutcome(text, fixed, remaining, True, rounds)
            fixed.append(waiting[0].diagnostic)
            text = new_text
            rounds += 1
            continue
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
    left = [item.diagnostic for item in find(parse(text), text, path, options) if keep(text, item.diagnostic)]
    return FixOutcome(text, fixed, left + _from_importers(text, path, options, keep, left).diagnostics, False, rounds)


def _from_importers(text: str, path: str, options: AnalysisOptions, keep: Keep, mine: list[Diagnostic]) -> ProjectAnalysis:
    """What other modules' loops find on this module's helpers, read against `text` (the
    fixed text, not yet written), without what `mine` already reports and what `keep` drops."""
    try:
        found = findings_from_importers(text, path, options)
    except Exception:  # noqa: BLE001 - precision first: what cannot be read says nothing
        return ProjectAnalysis([], {})
    own = {(d.code, d.line, d.column) for d in mine}
    kept = [d for d in found.diagnostics if (d.code, d.line, d.column) not in own and keep(text, d)]
    return ProjectAnalysis(kept, found.reads, tuple(f for f in found.fixes if f.diagnostic in kept))


def _apply_in_helper(text: str, fix: ForeignFix) -> Optional[str]:
    """The module's text with a fix found by another module's loop applied to one of its
    helpers: the edits change the helper's definition parsed alone, which replaces its
    lines; None when the fix would break the module (see `_apply`) or the definition no
    longer stands where the fix was found."""
    from accumlint.source.files import python_lines

    lines = python_lines(text, keepends=True)
    if not 0 < fix.first <= fix.last <= len(lines):
        return None
    region = "".join(lines[fix.first - 1:fix.last])
    added = "" if region.endswith(("\n", "\r")) else "\n"  # the definition was parsed with a final newline
    if region + added != fix.snippet.code:
        return None
    new = _applied(fix.snippet, fix.snippet.code, fix.edits, combined=False)
    if new is None or not new.endswith("\n"):
        return None
    fixed = "".join(lines[:fix.first - 1]) + (new[:-1] if added else new) + "".join(lines[fix.last:])
    try:
        parse(fixed)
        _python_reads(fixed, text)
    except (ParseFailure, Exception):  # noqa: BLE001 - a fix that breaks the module is never written
        return None
    return fixed


def _python_reads(fixed: str, original: str) -> None:
    """Raise unless the running Python's own parser reads the fixed text too, when it read
    the original. LibCST reads newer syntax than some interpreters do: an expression with
    double quotes put inside a double-quoted f-string parses there, and is a syntax error
    before Python 3.12. A file already written for a newer Python (`newer_python_reads`)
    was never this interpreter's to read."""
    from accumlint.source.gate import parse_python

    try:
        parse_python(fixed, "<fixed>")
    except ParseFailure:
        try:
            parse_python(original, "<original>")
        except ParseFailure:
            return
        raise


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
    file (see `_applied`)."""
    return _applied(module, text, [edit for item in chosen for edit in item.finding.edits], combined=len(chosen) > 1)


def _applied(module, text: str, edits: Sequence, *, combined: bool) -> Optional[str]:
    """The text with the edits applied, or None when the result would break the file (no
    parse, a name read where it is not bound, unrelated lines changed). The edits of one
    finding passed the guard already; `combined` ones (several findings') are checked here."""
    from accumlint.fix.edits import apply_edits
    from accumlint.fix.guard import guard_for, touches_only_edited_lines

    guard = guard_for(module)
    if combined and not guard.allows(edits):
        return None
    try:
        fixed = apply_edits(module, edits, guard.parents).code
        parse(fixed)
        _python_reads(fixed, text)
    except (ParseFailure, Exception):  # a fix that breaks the file is never written
        return None
    if not touches_only_edited_lines(text, module, edits, fixed):
        return None
    return fixed
