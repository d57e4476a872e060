"""What every input must survive, and the inputs the fuzzers make.

`problems(text)` runs the analysis and the fixer on one program and lists what
went wrong: an exception other than a parse failure, a fixed text that does not
parse or compile, a name the fix made undefined (pyflakes), a second `--fix`
that changes something, a change outside the top-level statements that hold
the fixed findings, a fixable finding left after `--fix --unsafe-fixes`.

Inputs come from hypothesmith (programs from Python's grammar and from
LibCST's node types) and from the fixtures, mutated: gradient-accumulation
mistakes spliced in (tests/mistakes.py), lines deleted, duplicated, swapped,
numbers changed, and lines spliced in from another fixture. tests/test_fuzz.py
runs a few examples in CI; benchmarks/fuzz.py runs many.
"""

from __future__ import annotations

import ast
import difflib
import re
import traceback
import warnings
from pathlib import Path

from hypothesis import strategies as st

from accumlint.check.analysis import AnalysisOptions, ParseFailure, analyze
from accumlint.check.fixes import fix_text

from mistakes import MISTAKES
from namecheck import new_undefined_names

REPO = Path(__file__).resolve().parent.parent
OPTIONS = AnalysisOptions()
FIXTURE_TEXTS = [
    p.read_text(encoding="utf-8")
    for p in sorted((REPO / "fixtures").rglob("*.py"))
    if not p.name.endswith(".fixed.py")
]


def problems(text: str) -> list[str]:
    """Everything that goes wrong when `text` is checked and fixed (empty: nothing)."""
    try:
        before = analyze(text, "fuzz.py", OPTIONS)
    except ParseFailure:
        return []
    except Exception:
        return [f"analysis raised:\n{traceback.format_exc()}"]
    if not any(d.fix is not None for d in before):
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<mutated>", "exec", dont_inherit=True)
    except SyntaxError:
        return []  # LibCST reads some texts CPython refuses (`return` at module level): no fix can compile them
    try:
        outcome = fix_text(text, "fuzz.py", OPTIONS, unsafe=True)
        fixed = outcome.text
        if fixed == text:
            return []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # generated code draws SyntaxWarnings; only errors count
                compile(fixed, "<fixed>", "exec", dont_inherit=True)
        except SyntaxError as error:
            return [f"the fixed text does not compile: {error}"]
        found = []
        added = new_undefined_names(text, fixed)
        if added:
            found.append(f"the fix made names undefined: {dict(added)}")
        if fix_text(fixed, "fuzz.py", OPTIONS, unsafe=True).text != fixed:
            found.append("a second fix changed the fixed text")
        outside = _changes_outside(text, fixed, [d.line for d in outcome.fixed] + _edited_lines(text))
        if outside:
            found.append(f"lines changed outside the fixed statements: {outside}")
        if outcome.converged:
            left = [f"{d.line} {d.code}" for d in analyze(fixed, "fuzz.py", OPTIONS) if d.fix is not None]
            if left:
                found.append(f"fixable findings left after the fix: {left}")
        return found
    except Exception:
        return [f"fixing raised:\n{traceback.format_exc()}"]


def _edited_lines(text: str) -> list[int]:
    """Lines of the nodes the first round's fixes edit: a fix may name another
    statement than its finding's (GA108 adds the keyword to the `Accelerator(...)` call)."""
    from accumlint.check.analysis import find, parse
    from accumlint.model.positions import positions_of

    module = parse(text)
    targets = [edit.target for located in find(module, text, "fuzz.py", OPTIONS) for edit in located.finding.edits]
    return [where.start.line for where in positions_of(module, targets).values()]


def _changes_outside(text: str, fixed: str, fixed_lines: list[int]) -> list[int]:
    """Lines of `text` changed by the fix outside the top-level statements holding a fixed
    finding (new import lines at the top of the file are allowed)."""
    spans = []
    for statement in ast.parse(text).body:
        end = getattr(statement, "end_lineno", statement.lineno)
        first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
        spans.append((first, end))
    allowed = [span for span in spans if any(span[0] <= line <= span[1] for line in fixed_lines)]
    old, new = text.splitlines(), fixed.splitlines()
    outside = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert" and all(re.match(r"\s*(from \S+ )?import ", line) for line in new[j1:j2]):
            continue
        if tag == "insert":  # new lines after line i1: at the edge of a statement is inside it
            if not any(_first_of(old, a) - 1 <= i1 <= b for a, b in allowed):
                outside.append(i1 + 1)
            continue
        outside.extend(line for line in range(i1 + 1, i2 + 1) if not any(a <= line <= b for a, b in allowed))
    return outside


def _first_of(lines: list[str], first: int) -> int:
    """A statement's first line, moved up over the blank lines before it."""
    while first > 1 and not lines[first - 2].strip():
        first -= 1
    return first


# -- inputs -------------------------------------------------------------------------


def _delete(lines: list[str], at: int, _: list[str]) -> list[str]:
    return lines[:at] + lines[at + 1:]


def _duplicate(lines: list[str], at: int, _: list[str]) -> list[str]:
    return lines[:at + 1] + lines[at:]


def _swap(lines: list[str], at: int, _: list[str]) -> list[str]:
    if at + 1 >= len(lines):
        return lines
    return lines[:at] + [lines[at + 1], lines[at]] + lines[at + 2:]


def _renumber(lines: list[str], at: int, _: list[str]) -> list[str]:
    return lines[:at] + [re.sub(r"\b\d+\b", "1", lines[at], count=1)] + lines[at + 1:]


def _splice(lines: list[str], at: int, donor: list[str]) -> list[str]:
    """A line of another fixture, at the indentation of the line it goes before."""
    if not donor or at >= len(lines):
        return lines
    line = donor[at % len(donor)].strip()
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    return lines[:at] + [indent + line] + lines[at:]


LINE_MUTATIONS = {"delete": _delete, "duplicate": _duplicate, "swap": _swap, "renumber": _renumber, "splice": _splice}


@st.composite
def mutated_fixtures(draw) -> str:
    """A fixture with a few mistakes made and a few lines mutated."""
    text = draw(st.sampled_from(FIXTURE_TEXTS))
    for name in draw(st.lists(st.sampled_from(sorted(MISTAKES)), max_size=3)):
        text = MISTAKES[name](text) or text
    for mutation in draw(st.lists(st.sampled_from(sorted(LINE_MUTATIONS)), max_size=3)):
        lines = text.split("\n")
        at = draw(st.integers(0, max(len(lines) - 1, 0)))
        donor = draw(st.sampled_from(FIXTURE_TEXTS)).split("\n")
        text = "\n".join(LINE_MUTATIONS[mutation](lines, at, donor))
    return text


def grammar_programs() -> st.SearchStrategy[str]:
    """Programs from Python's grammar and from LibCST's nodes (hypothesmith)."""
    import hypothesmith

    return st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node())


# -- line endings ---------------------------------------------------------------------

LINE_ENDINGS = ("\n", "\r\n", "\r")


def as_python_reads(text: str) -> str:
    """The text with every line ending Python accepts made a line feed (what it numbers lines by)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@st.composite
def mixed_line_endings(draw) -> str:
    """A fixture (mistakes made) whose lines end in line feeds, CRLFs or lone carriage
    returns, drawn line by line: old Mac files and files edited on several systems."""
    text = draw(st.sampled_from(FIXTURE_TEXTS))
    for name in draw(st.lists(st.sampled_from(sorted(MISTAKES)), max_size=2)):
        text = MISTAKES[name](text) or text
    lines = text.split("\n")
    endings = draw(st.lists(st.sampled_from(LINE_ENDINGS), min_size=len(lines), max_size=len(lines)))
    return "".join(line + ending for line, ending in zip(lines[:-1], endings)) + lines[-1]


def line_ending_problems(text: str) -> list[str]:
    """What goes wrong when a text whose line endings are mixed is checked and fixed: the
    gate's verdicts and the findings must be those of the same text with line feeds only,
    and so must its fixed text, with no line ending the file did not already use."""
    plain = as_python_reads(text)
    try:
        expected = analyze(plain, "fuzz.py", OPTIONS)
    except ParseFailure:
        return []
    try:
        found = analyze(text, "fuzz.py", OPTIONS)
        fixed = fix_text(text, "fuzz.py", OPTIONS, unsafe=True).text
    except Exception:
        return [f"checking or fixing raised:\n{traceback.format_exc()}"]
    problems = []
    from accumlint.source.gate import screen, text_stage

    # (`text_stage`'s second answer is a shortcut, which may differ: only its verdict counts)
    if (text_stage(text) is None, screen(text, "fuzz.py")) != (text_stage(plain) is None, screen(plain, "fuzz.py")):
        problems.append("the gate reads the text otherwise than its line-feed twin")
    where = [(d.code, d.line, d.column, d.fix is not None) for d in found]
    if where != [(d.code, d.line, d.column, d.fix is not None) for d in expected]:
        problems.append(f"findings differ from the line-feed text's: {where}")
    elif as_python_reads(fixed) != fix_text(plain, "fuzz.py", OPTIONS, unsafe=True).text:
        problems.append("the fixed text differs from the line-feed text's fixed text")
    added = _line_endings(fixed) - _line_endings(text)
    if added:
        problems.append(f"the fix added line endings the file did not use: {sorted(map(repr, added))}")
    return problems


def _line_endings(text: str) -> set[str]:
    return set(re.findall(r"\r\n|\r|\n", text))
