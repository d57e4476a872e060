"""What every fix must keep: names bound where they are read, class bodies as they
are, and every line it does not name.

Rules build fixes from the loop model; this module judges the result, whatever
the rule. A finding whose fix fails a check is still reported, without the fix
(or a rule falls back to the part of its fix that passes, as GA101 does when
it cannot zero once before the loop).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Optional, Sequence

import libcst as cst

from accumlint.fix.edits import AFTER, BEFORE, REPLACE, Edit, apply_edits
from accumlint.model.facts import ancestors
from accumlint.model.scopes import FunctionReads, ModuleReads
from accumlint.model.tree import record_parents
from accumlint.source.files import python_lines

if TYPE_CHECKING:
    from accumlint.rules.base import Finding


class FixGuard:
    """Checks edits against one parsed module (its facts are computed once)."""

    def __init__(self, module: cst.Module, parents: Optional[dict[int, cst.CSTNode]] = None) -> None:
        self.module = module
        self._reads: Optional[ModuleReads] = None
        self._by_function: dict[tuple[int, Optional[int]], FunctionReads] = {}
        self._parents = parents

    def refusal(self, edits: Sequence[Edit]) -> Optional[str]:
        """Why these edits must not be applied, or None when they may."""
        if not edits:
            return None
        if any(self._into_class_body(edit) for edit in edits):
            return "it would insert a statement into a class body"
        try:
            fixed = apply_edits(self.module, edits, self.parents)
            added = self._added_reads(edits, fixed)
        except RecursionError:
            return "the fixed code is too deeply nested to check"
        if added:
            names = ", ".join(sorted(f"`{name}`" for _, name in added))
            return f"{names} would be read where it is not bound"
        return None

    def allows(self, edits: Sequence[Edit]) -> bool:
        return self.refusal(edits) is None

    def _added_reads(self, edits: Sequence[Edit], fixed: cst.Module) -> Counter:
        """The reads that may run unbound in the fixed module and not in the original. Edits
        inside one function's body are judged by that body alone (`FunctionReads`)."""
        place = self._function_holding(edits)
        edited = _function_at(fixed, *place) if place is not None and len(fixed.body) == len(self.module.body) else None
        if edited is not None:
            reads = self._function_reads(*place)
            if not reads.stars:
                return reads.of(edited) - reads.unbound
        return self.reads.of(fixed) - self.reads.unbound

    def _function_holding(self, edits: Sequence[Edit]) -> Optional[tuple[int, Optional[int]]]:
        """(index of a module-level statement, index of a method in it or None) of the one
        function whose body holds every edit's target, or None."""
        found = None
        for edit in edits:
            path = (*ancestors(self.parents, edit.target), edit.target)
            if path[0] is not self.module:
                return None
            place = _place(self.module, path)
            if place is None or (found is not None and place != found):
                return None
            found = place
        return found

    def _function_reads(self, index: int, method: Optional[int]) -> FunctionReads:
        key = (index, method)
        reads = self._by_function.get(key)
        if reads is None:
            top = self.module.body[index]
            owner = top if method is not None else None
            reads = self._by_function[key] = FunctionReads(self.module, owner, _function_at(self.module, index, method))
        return reads

    @property
    def reads(self) -> ModuleReads:
        """The original's unbound reads, and what its walk lets an edited version reuse."""
        if self._reads is None:
            self._reads = ModuleReads(self.module)
        return self._reads

    def _into_class_body(self, edit: Edit) -> bool:
        """New statements beside a class-level statement: `opt.zero_grad()` put before a
        Lightning `training_step` lands in the class body, where nothing it names exists.
        New methods are the exception: they are what a class body holds."""
        inserts = edit.action in (BEFORE, AFTER) or (
            edit.action == REPLACE and isinstance(edit.nodes[0], cst.FlattenSentinel)
        )
        if not inserts or all(type(node) is cst.FunctionDef for node in edit.nodes):
            return False  # a new method (GA207's `__init__`) belongs in the class body
        block = self.parents.get(id(edit.target))
        owner = self.parents.get(id(block)) if block is not None else None
        return type(owner) is cst.ClassDef

    @property
    def parents(self) -> dict[int, cst.CSTNode]:
        """id(node) -> parent for every content node: the module facts' map when the
        guard was given it, else one walk of its own."""
        if self._parents is None:
            self._parents = {}
            record_parents(self._parents, self.module)
        return self._parents


def _place(module: cst.Module, path: Sequence[cst.CSTNode]) -> Optional[tuple[int, Optional[int]]]:
    """Where the function whose body holds the last node of `path` (the module down to
    it) stands: a module-level def, or a def in a module-level class's body."""
    if len(path) < 4:  # module, def, its body, a statement in it at least
        return None
    index = _index(module.body, path[1])
    if type(path[1]) is cst.FunctionDef:
        return (index, None) if path[2] is path[1].body else None
    if type(path[1]) is cst.ClassDef and len(path) >= 6 and type(path[3]) is cst.FunctionDef and path[4] is path[3].body:
        return index, _index(path[2].body, path[3])
    return None


def _index(statements: Sequence[cst.CSTNode], statement: cst.CSTNode) -> int:
    return next(position for position, candidate in enumerate(statements) if candidate is statement)


def _function_at(module: cst.Module, index: int, method: Optional[int]) -> Optional[cst.FunctionDef]:
    """The def at a place `_place` gave, in the module or in an edited version of it."""
    node = module.body[index] if index < len(module.body) else None
    if method is not None:
        body = node.body if type(node) is cst.ClassDef else None
        node = body.body[method] if type(body) is cst.IndentedBlock and method < len(body.body) else None
    return node if type(node) is cst.FunctionDef else None


_recent: list[FixGuard] = []  # the guards of the last two modules asked about


def guard_for(module: cst.Module, parents: Optional[dict[int, cst.CSTNode]] = None) -> FixGuard:
    """The guard of a module (rules and the fixer ask about the same parse); `parents`,
    the module facts' map (`ModuleFacts.parents`), saves the guard a walk of its own."""
    for guard in _recent:
        if guard.module is module:
            if guard._parents is None:
                guard._parents = parents
            return guard
    guard = FixGuard(module, parents)
    _recent[:] = [guard, *_recent[:1]]
    return guard


def guarded(module: cst.Module, findings: list["Finding"], parents: Optional[dict[int, cst.CSTNode]] = None) -> list["Finding"]:
    """The findings, each without its fix when the fix fails a guard."""
    guard = guard_for(module, parents)
    kept = []
    for finding in findings:
        if finding.edits and not guard.allows(finding.edits):
            finding = dataclasses.replace(finding, edits=())
        kept.append(finding)
    return kept


def touches_only_edited_lines(text: str, module: cst.Module, edits: Sequence[Edit], fixed: str) -> bool:
    """Whether `fixed` keeps, verbatim and in order, every line of `text` outside the
    statements the edits name: the regenerated module must not change unrelated
    lines (whitespace-only lines, odd line breaks) anywhere else in the file."""
    from accumlint.model.positions import positions_of

    positions = positions_of(module, [edit.target for edit in edits], whitespace=True)
    lines = python_lines(text, keepends=True)
    edited = [False] * (len(lines) + 2)
    for edit in edits:
        where = positions.get(edit.target)
        if where is None:
            return False
        last = where.end.line if where.end.column > 0 else where.end.line - 1
        for number in range(where.start.line, max(last, where.start.line) + 1):
            if 0 < number <= len(lines):
                edited[number] = True
    segments: list[tuple[int, int, str]] = []  # (first, last line number, text) of each untouched run
    run: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not edited[number]:
            run.append(line)
        elif run:
            segments.append((number - len(run), number - 1, "".join(run)))
            run = []
    if run:
        segments.append((len(lines) - len(run) + 1, len(lines), "".join(run)))
    return _in_order(segments, fixed, len(lines))


def _in_order(segments: list[tuple[int, int, str]], fixed: str, line_count: int) -> bool:
    """Each untouched segment occurs in `fixed` after the previous one; the first and
    last segments of the file stay its first and last text."""
    position = 0
    for first, last, segment in segments:
        if first == 1:
            if not fixed.startswith(segment):
                return False
            position = len(segment)
        elif last == line_count:
            at = fixed.rfind(segment)
            return at >= position and at + len(segment) == len(fixed)
        else:
            at = fixed.find(segment, position)
            if at < 0:
                return False
            position = at + len(segment)
    return True
