"""Suppression comments: `# noqa`, `# noqa: GA201, GA101` and `# accumlint: noqa`.

Comments are found with `tokenize`, so `"# noqa"` inside a string silences
nothing; a text without the word `noqa` is not tokenized at all.

The comments are checked too, under codes of their own (ruff's PGH004 and
RUF100), kept apart from the GA rules of the loop model:

- AL001 `malformed-noqa`: `# noqa GA106` (no colon) or `# noqa:` naming no
  code. A list without its colon silences only the codes it names (what was
  meant), never every code as a bare `# noqa` would.
- AL002 `unused-noqa`: a code of accumlint's (`GA...`, `AL...`) named in a
  comment that silences nothing, because no enabled finding with that code
  is reported there. Codes of other tools (`E501`, `F401`) and bare `# noqa`
  are never reported: other linters may need them.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from typing import Iterable, Iterator, NamedTuple, Optional

from accumlint.diagnostics import Diagnostic, FixInfo
from accumlint.sources import python_lines

MALFORMED, UNUSED = "AL001", "AL002"
NAMES = {MALFORMED: "malformed-noqa", UNUSED: "unused-noqa"}

_CODE = r"[A-Za-z]+[0-9]+"
_CODES = rf"{_CODE}(?:[\s,]+{_CODE})*"


@functools.lru_cache(maxsize=None)
def _directive_pattern() -> "re.Pattern[str]":
    """The directive, then what follows it: `: codes`, ` codes` (no colon: malformed), `:` alone (malformed),
    or `: word` that is no code at all (another tool's, e.g. torch's `# noqa: set_linter`: a blanket noqa, as
    flake8 reads it). Compiled on first use: a text that never mentions `noqa` does not pay for it."""
    return re.compile(
        rf"#\s*(?P<file>accumlint\s*:\s*)?noqa\b(?:(?P<colon>:)\s*(?:(?P<codes>{_CODES})|(?P<foreign>[^\s#,]+))?|\s+(?P<bare_codes>{_CODES})\b)?",
        re.IGNORECASE,
    )


_OWN_CODE = re.compile(r"^(GA|AL)\d{3}$")

_MENTION = re.compile("noqa", re.IGNORECASE)

ALL = None  # a suppression that covers every code


class Directive(NamedTuple):
    """One suppression comment, where it is and what it silences."""

    line: int
    column: int  # 1-based, the `#` of the directive
    end_column: int
    codes: Optional[frozenset[str]]  # ALL (None) for a bare `# noqa`
    file_wide: bool
    problem: str = ""  # why it is malformed (AL001), or empty

    def covers(self, code: str) -> bool:
        return self.codes is ALL or code in self.codes


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(line, 0-based column, comment) triples; a text tokenize rejects is scanned line by line instead."""
    try:
        return [
            (token.start[0], token.start[1], token.string)
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        return [
            (number, line.index("#"), line[line.index("#"):])
            for number, line in enumerate(python_lines(text), 1)
            if "#" in line
        ]


def _split(codes: str) -> frozenset[str]:
    return frozenset(code.upper() for code in re.split(r"[\s,]+", codes) if code)


def _directives(line: int, column: int, comment: str) -> Iterator[Directive]:
    """Every directive in one comment (`# why  # noqa: GA201` holds one; tokenize gives one comment)."""
    for match in _directive_pattern().finditer(comment):
        yield _directive(line, column, match)


def _directive(line: int, column: int, match: re.Match) -> Directive:
    start, end = column + match.start() + 1, column + match.end() + 1
    file_wide = match.group("file") is not None
    if match.group("bare_codes"):
        codes = _split(match.group("bare_codes"))
        return Directive(line, start, end, codes, file_wide, "the codes need a colon after `noqa`")
    if match.group("colon") and not match.group("codes") and not match.group("foreign"):
        return Directive(line, start, end, ALL, file_wide, "`noqa:` names no code")
    codes = _split(match.group("codes")) if match.group("codes") else ALL
    return Directive(line, start, end, codes, file_wide)


class Suppressions:
    """The suppression comments of one text."""

    def __init__(self, directives: tuple[Directive, ...]) -> None:
        self.directives = directives

    @classmethod
    def parse(cls, text: str) -> "Suppressions":
        if _MENTION.search(text) is None:  # no suppression anywhere: skip tokenizing
            return cls(())
        return cls(tuple(directive for comment in _comments(text) for directive in _directives(*comment)))

    @functools.cached_property
    def _by_line(self) -> dict[int, list[Directive]]:
        lines: dict[int, list[Directive]] = {}
        for directive in self.directives:
            if not directive.file_wide:
                lines.setdefault(directive.line, []).append(directive)
        return lines

    def _file_wide(self) -> Iterable[Directive]:
        return (directive for directive in self.directives if directive.file_wide)

    def suppresses(self, diagnostic: Diagnostic) -> bool:
        """Whether a comment silences this finding (syntax errors are never silenced)."""
        if diagnostic.is_syntax_error:
            return False
        if any(directive.covers(diagnostic.code) for directive in self._file_wide()):
            return True
        on_line = self._by_line.get(diagnostic.line, ())
        if diagnostic.code in NAMES:  # a comment's own finding: only a comment naming its code silences it
            return any(d.codes is not ALL and diagnostic.code in d.codes for d in on_line)
        return any(directive.covers(diagnostic.code) for directive in on_line)

    def _issues(self, path: str, raw: list[Diagnostic], enabled: frozenset[str]) -> Iterator[tuple[Diagnostic, Directive, str]]:
        """(AL finding, its directive, the directive's corrected text: empty to remove it)."""
        for directive in self.directives:
            prefix = "# accumlint: noqa" if directive.file_wide else "# noqa"
            if directive.problem:
                corrected = prefix if directive.codes is ALL else f"{prefix}: {', '.join(sorted(directive.codes))}"
                message = f"malformed `noqa`: {directive.problem}"
                yield _finding(path, directive, MALFORMED, message, _fix_help(directive), "Add the colon" if directive.codes is not ALL else "Write a bare `# noqa`"), directive, corrected
                continue
            unused = sorted(
                code for code in directive.codes or ()
                if _OWN_CODE.match(code) and (code in enabled or _unknown(code)) and not _used(directive, code, raw)
            )
            if not unused:
                continue
            names = ", ".join(f"`{code}`" for code in unused)
            kept = sorted(set(directive.codes or ()) - set(unused))
            if not kept:
                message, help_text = f"unused `noqa` directive ({names})", "nothing it names is reported here; remove it"
                yield _finding(path, directive, UNUSED, message, help_text, "Remove the unused `noqa` directive"), directive, ""
                continue
            plural = len(unused) > 1
            message = f"unused `noqa` code{'s' * plural}: {names}"
            help_text = f"nothing reports {names} here; remove {'them' if plural else 'it'} from the comment"
            description = f"Remove the unused code{'s' * plural}"
            yield _finding(path, directive, UNUSED, message, help_text, description), directive, f"{prefix}: {', '.join(kept)}"

    def check(self, path: str, raw: list[Diagnostic], enabled: frozenset[str]) -> list[Diagnostic]:
        """AL001/AL002 findings of these comments, given every raw finding of the text."""
        return [finding for finding, _, _ in self._issues(path, raw, enabled)]

    def corrected(self, text: str, raw: list[Diagnostic], enabled: frozenset[str]) -> str:
        """`text` with every enabled, unsuppressed AL001/AL002 fixed (`--fix`): colons added, unused codes gone.

        Only the directive's own span changes, so every line keeps its number;
        a directive removed from a line of code takes its leading spaces along,
        and one followed by a remark leaves the `#` so the remark stays a comment.
        """
        lines = python_lines(text, keepends=True)
        edits = [
            (directive, replacement)
            for finding, directive, replacement in self._issues("", raw, enabled)
            if finding.code in enabled and not self.suppresses(finding)
        ]
        for directive, replacement in sorted(edits, key=lambda edit: (edit[0].line, -edit[0].column)):
            line = lines[directive.line - 1]
            before, after = line[: directive.column - 1], line[directive.end_column - 1:]
            if not replacement:
                before = before.rstrip(" \t")
                replacement = "#" if after.strip() else ""
                if replacement:
                    before += "  "
            lines[directive.line - 1] = before + replacement + after
        return "".join(lines)


def _unknown(code: str) -> bool:
    """A code of accumlint's shape that no rule has is always unused (a typo, or a removed rule)."""
    from accumlint.rules.catalog import RULES_BY_CODE

    return code not in RULES_BY_CODE


def _used(directive: Directive, code: str, raw: list[Diagnostic]) -> bool:
    return any(d.code == code and (directive.file_wide or d.line == directive.line) for d in raw)


def _fix_help(directive: Directive) -> str:
    if directive.codes is ALL:
        return "name the codes it silences (`# noqa: GA201`), or write a bare `# noqa`"
    codes = ", ".join(sorted(directive.codes))
    return f"write `# noqa: {codes}`; without the colon other tools read it as a bare `# noqa`"


def _finding(path: str, directive: Directive, code: str, message: str, help_text: str, fix: str) -> Diagnostic:
    return Diagnostic(
        path=path,
        line=directive.line,
        column=directive.column,
        end_line=directive.line,
        end_column=directive.end_column,
        code=code,
        name=NAMES[code],
        message=message,
        help=help_text,
        fix=FixInfo("safe", fix),
    )


@functools.lru_cache(maxsize=8)
def suppressions(text: str) -> Suppressions:
    """The suppressions that can change what a check reports, parsed once per distinct
    text (fix rounds ask often).

    A directive that names only other tools' codes (`# noqa: F401`, torch's
    files hold thousands) silences no accumlint finding and is never AL001 or
    AL002: when every `noqa` of the text is one, the text is not tokenized.
    """
    if not any(_may_matter(line) for line in _lines_mentioning_noqa(text)):
        return Suppressions(())
    return Suppressions.parse(text)


def _lines_mentioning_noqa(text: str) -> Iterator[str]:
    end = 0
    for match in _MENTION.finditer(text):
        if match.start() < end:
            continue  # this line was given already
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        end = len(text) if end < 0 else end
        yield text[start:end]


def _may_matter(line: str) -> bool:
    """Whether a directive could start at any `#` of the line (in a comment or not) that
    silences every code, names one of accumlint's, or is malformed. Every directive a
    comment holds starts at one of these `#`, so a False is certain."""
    pattern = _directive_pattern()
    position = line.find("#")
    while position >= 0:
        match = pattern.match(line, position)
        if match is not None:
            directive = _directive(0, 0, match)
            if directive.codes is ALL or directive.problem or any(_OWN_CODE.match(code) for code in directive.codes):
                return True
        position = line.find("#", position + 1)
    return False


# ---------------------------------------------------------------- --add-noqa


def _closed_lines(text: str) -> Optional[set[int]]:
    """Lines that end outside any token (a comment can go at their end); None if tokenize fails.

    A line that a multi-line string, f-string part or backslash continuation
    carries on past its end cannot take a comment without changing the code.
    """
    lines = python_lines(text)
    open_lines: set[int] = {n for n, line in enumerate(lines, 1) if line.endswith("\\")}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.start[0] < token.end[0] and token.type not in (tokenize.NEWLINE, tokenize.NL):
                open_lines.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return None
    return set(range(1, len(lines) + 1)) - open_lines


def add_noqa(text: str, wanted: dict[int, set[str]]) -> tuple[str, int, list[int]]:
    """`text` with `# noqa: CODES` on each wanted line: (new text, codes added, lines left alone).

    An existing directive on the line is rewritten with the union of its codes
    (a malformed one is corrected on the way); otherwise the comment goes at
    the end of the line, after any other comment. Running it again on its own
    output adds nothing: the findings are suppressed by then.
    """
    closed = _closed_lines(text)
    if closed is None:
        return text, 0, sorted(wanted)
    directives: dict[int, Directive] = {}
    for directive in Suppressions.parse(text).directives:
        if not directive.file_wide:
            directives.setdefault(directive.line, directive)
    lines = python_lines(text, keepends=True)
    added, skipped = 0, []
    for number, codes in sorted(wanted.items()):
        if number not in closed or number > len(lines):
            skipped.append(number)
            continue
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        existing = directives.get(number)
        if existing is not None and existing.codes is ALL and not existing.problem:
            continue  # a bare `# noqa` already covers everything
        if existing is not None:
            merged = set(existing.codes or ()) | codes
            start, end = existing.column - 1, existing.end_column - 1
            body = f"{body[:start]}# noqa: {', '.join(sorted(merged))}{body[end:]}"
            added += len(merged - set(existing.codes or ()))
        else:
            body = body.rstrip(" \t") + f"  # noqa: {', '.join(sorted(codes))}"
            added += len(codes)
        lines[number - 1] = body + ending
    return "".join(lines), added, skipped
