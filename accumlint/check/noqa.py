"""Suppression comments: `# noqa`, `# noqa: GA201, GA101` and `# accumlint: noqa`.

Comments are found with `tokenize`, so `"# noqa"` inside a string silences
nothing; a text without the word `noqa` is not tokenized at all.

A line comment silences the findings of its own line and, as ruff's do, of
every line of the statement (logical line) it ends: a statement continued
with a backslash, by brackets, or past a multi-line string's closing quotes
can always be silenced from its last line, where `--add-noqa` writes it when
the finding's own line cannot take a comment.

The comments are checked too, under codes of their own (ruff's PGH004 and
RUF100), kept apart from the GA rules of the loop model. They judge only the
comments that concern accumlint: those that name a code of its own (`GA...`,
`AL...`), or that name no code at all on a statement with a finding.
Comments written for other tools (`# noqa: E501`, flake8's `# noqa F811`)
are never reported.

- AL001 `malformed-noqa`: `# noqa GA106` (no colon) or `# noqa:` naming no
  code. A list without its colon silences only the codes it names (what was
  meant), never every code as a bare `# noqa` would; `noqa:` with nothing
  after it silences nothing, as ruff reads it. The colon's fix is safe; the
  fix that names the reported codes after `noqa:` silences findings, so it
  is unsafe.
- AL002 `unused-noqa`: a code of accumlint's named in a comment that silences
  nothing, because no enabled finding with that code is reported on its
  statement. Bare `# noqa` is never reported: other linters may need it.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from typing import Iterable, Iterator, NamedTuple, Optional

from accumlint.diagnostics import Diagnostic, FixInfo
from accumlint.rules.suppression import MALFORMED_NOQA, UNUSED_NOQA
from accumlint.source.files import python_lines

MALFORMED, UNUSED = MALFORMED_NOQA.code, UNUSED_NOQA.code
NAMES = {MALFORMED: MALFORMED_NOQA.info.name, UNUSED: UNUSED_NOQA.info.name}

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
NONE: frozenset[str] = frozenset()  # `noqa:` naming no code: it covers none


class Directive(NamedTuple):
    """One suppression comment, where it is and what it silences."""

    line: int
    column: int  # 1-based, the `#` of the directive
    end_column: int
    codes: Optional[frozenset[str]]  # ALL (None) for a bare `# noqa`, NONE for `# noqa:`
    file_wide: bool
    problem: str = ""  # why it is malformed (AL001), or empty

    def covers(self, code: str) -> bool:
        return self.codes is ALL or code in self.codes

    @property
    def names_own_code(self) -> bool:
        return any(_OWN_CODE.match(code) for code in self.codes or ())

    @property
    def prefix(self) -> str:
        return "# accumlint: noqa" if self.file_wide else "# noqa"


class _Layout(NamedTuple):
    """What one pass of `tokenize` tells about a text's lines."""

    comments: list[tuple[int, int, str]]  # (line, 0-based column, comment)
    ends: dict[int, int]  # a line of a statement spanning several -> the statement's last line
    open_lines: frozenset[int]  # lines a string or a backslash carries past their end: no comment fits


def _layout(text: str) -> Optional[_Layout]:
    """The comments and statements of a text; None if tokenize rejects it."""
    comments: list[tuple[int, int, str]] = []
    ends: dict[int, int] = {}
    open_lines: set[int] = set()
    first: Optional[int] = None  # the first line of the statement being read
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, (start, column), end = token.type, token.start, token.end[0]
            if kind == tokenize.COMMENT:
                comments.append((start, column, token.string))
            elif kind == tokenize.NEWLINE:
                ends.update((line, start) for line in range(first or start, start))
                first = None
            elif kind not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER) and first is None:
                first = start
            if start < end and kind not in (tokenize.NEWLINE, tokenize.NL):
                open_lines.update(range(start, end))
    except (tokenize.TokenError, SyntaxError):
        return None
    commented = {line for line, _, _ in comments}
    continued = (
        number for number, line in enumerate(python_lines(text, keepends=True), 1)
        if line.rstrip("\r\n").endswith("\\") and number not in commented  # (a comment's `\\` continues nothing)
    )
    open_lines.update(continued)
    return _Layout(comments, ends, frozenset(open_lines))


def _comments(text: str) -> tuple[list[tuple[int, int, str]], dict[int, int]]:
    """(line, 0-based column, comment) triples and the statements' last lines; a text
    tokenize rejects is scanned line by line instead (each line its own statement)."""
    layout = _layout(text)
    if layout is not None:
        return layout.comments, layout.ends
    comments = [
        (number, line.index("#"), line[line.index("#"):].rstrip("\r\n"))
        for number, line in enumerate(python_lines(text, keepends=True), 1)
        if "#" in line
    ]
    return comments, {}


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
        return Directive(line, start, end, NONE, file_wide, "`noqa:` names no code, so it silences nothing")
    codes = _split(match.group("codes")) if match.group("codes") else ALL
    return Directive(line, start, end, codes, file_wide)


class Correction(NamedTuple):
    """The text with the comments' own findings fixed, and the findings whose fix was applied."""

    text: str
    fixed: list[Diagnostic]


class Suppressions:
    """The suppression comments of one text, and the statements they end."""

    def __init__(self, directives: tuple[Directive, ...], ends: Optional[dict[int, int]] = None) -> None:
        self.directives = directives
        self._ends = ends or {}

    @classmethod
    def parse(cls, text: str) -> "Suppressions":
        if _MENTION.search(text) is None:  # no suppression anywhere: skip tokenizing
            return cls(())
        comments, ends = _comments(text)
        return cls(tuple(directive for comment in comments for directive in _directives(*comment)), ends)

    @functools.cached_property
    def _by_line(self) -> dict[int, list[Directive]]:
        lines: dict[int, list[Directive]] = {}
        for directive in self.directives:
            if not directive.file_wide:
                lines.setdefault(directive.line, []).append(directive)
        return lines

    def _file_wide(self) -> Iterable[Directive]:
        return (directive for directive in self.directives if directive.file_wide)

    def _applies(self, directive: Directive, line: int) -> bool:
        """Whether the directive's place reaches a finding on `line`: the file, the line, or the end of its statement."""
        return directive.file_wide or directive.line == line or directive.line == self._ends.get(line)

    def _around(self, line: int) -> Iterator[Directive]:
        """The line directives that reach `line`."""
        yield from self._by_line.get(line, ())
        end = self._ends.get(line)
        if end is not None:
            yield from self._by_line.get(end, ())

    def suppresses(self, diagnostic: Diagnostic) -> bool:
        """Whether a comment silences this finding (syntax errors are never silenced)."""
        if diagnostic.is_syntax_error:
            return False
        if any(directive.covers(diagnostic.code) for directive in self._file_wide()):
            return True
        around = self._around(diagnostic.line)
        if diagnostic.code in NAMES:  # a comment's own finding: only a comment naming its code silences it
            return any(d.codes is not ALL and diagnostic.code in d.codes for d in around)
        return any(directive.covers(diagnostic.code) for directive in around)

    def _reached(self, directive: Directive, raw: list[Diagnostic], enabled: frozenset[str]) -> list[str]:
        """The codes of the enabled findings on the directive's statement (file-wide: in the file)."""
        return sorted({d.code for d in raw if d.code in enabled and d.code not in NAMES and self._applies(directive, d.line)})

    def _issues(self, path: str, raw: list[Diagnostic], enabled: frozenset[str]) -> Iterator[tuple[Diagnostic, Directive, str]]:
        """(AL finding, its directive, the directive's corrected text: empty to remove it)."""
        for directive in self.directives:
            if directive.problem:
                yield from self._malformed(path, directive, raw, enabled)
                continue
            unused = sorted(
                code for code in directive.codes or ()
                if _OWN_CODE.match(code) and (code in enabled or _unknown(code)) and not self._used(directive, code, raw)
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
            yield _finding(path, directive, UNUSED, message, help_text, description), directive, f"{directive.prefix}: {', '.join(kept)}"

    def _malformed(self, path: str, directive: Directive, raw: list[Diagnostic], enabled: frozenset[str]) -> Iterator[tuple[Diagnostic, Directive, str]]:
        """AL001 for a directive that concerns accumlint: `# noqa GA106`, or `# noqa:` on a statement with findings."""
        message = f"malformed `noqa`: {directive.problem}"
        if directive.codes:
            if not directive.names_own_code:
                return  # `# noqa F811`: another tool's
            codes = ", ".join(sorted(directive.codes))
            help_text = f"write `{directive.prefix}: {codes}`; without the colon other tools read it as a bare `# noqa`"
            yield _finding(path, directive, MALFORMED, message, help_text, "Add the colon"), directive, f"{directive.prefix}: {codes}"
            return
        reached = self._reached(directive, raw, enabled)
        if not reached:
            return  # nothing of accumlint's is reported there: not its comment to judge
        codes = ", ".join(reached)
        help_text = f"name the codes it is meant to silence (`{directive.prefix}: {codes}`); other tools read it as a bare `# noqa`"
        fix = FixInfo("unsafe", f"Name the codes reported here ({codes})")
        yield _finding(path, directive, MALFORMED, message, help_text, fix), directive, f"{directive.prefix}: {codes}"

    def _used(self, directive: Directive, code: str, raw: list[Diagnostic]) -> bool:
        return any(d.code == code and self._applies(directive, d.line) for d in raw)

    def check(self, path: str, raw: list[Diagnostic], enabled: frozenset[str]) -> list[Diagnostic]:
        """AL001/AL002 findings of these comments, given every raw finding of the text."""
        return [finding for finding, _, _ in self._issues(path, raw, enabled)]

    def corrected(self, text: str, path: str, raw: list[Diagnostic], enabled: frozenset[str], *, unsafe: bool) -> Correction:
        """`text` with every enabled, unsuppressed AL001/AL002 fixed (`--fix`; unsafe fixes only with
        `unsafe`): colons added, codes named, unused codes gone; and the findings so fixed.

        Only the directive's own span changes, so every line keeps its number;
        a directive removed from a line of code takes its leading spaces along,
        and one followed by a remark leaves the `#` so the remark stays a comment.
        """
        lines = python_lines(text, keepends=True)
        edits = [
            (finding, directive, replacement)
            for finding, directive, replacement in self._issues(path, raw, enabled)
            if finding.code in enabled and not self.suppresses(finding) and (unsafe or finding.fix.applicability == "safe")
        ]
        for _, directive, replacement in sorted(edits, key=lambda edit: (edit[1].line, -edit[1].column)):
            line = lines[directive.line - 1]
            before, after = line[: directive.column - 1], line[directive.end_column - 1:]
            if not replacement:
                before = before.rstrip(" \t")
                replacement = "#" if after.strip() else ""
                if replacement:
                    before += "  "
            lines[directive.line - 1] = before + replacement + after
        return Correction("".join(lines), [finding for finding, _, _ in edits])


def _unknown(code: str) -> bool:
    """A code of accumlint's shape that no rule has is always unused (a typo, or a removed rule)."""
    from accumlint.rules.catalog import RULES_BY_CODE

    return code not in RULES_BY_CODE


def _finding(path: str, directive: Directive, code: str, message: str, help_text: str, fix) -> Diagnostic:
    """An AL finding on the directive; `fix` is a FixInfo, or the description of a safe fix."""
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
        fix=fix if isinstance(fix, FixInfo) else FixInfo("safe", fix),
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
            if directive.codes is ALL or directive.problem or directive.names_own_code:
                return True
        position = line.find("#", position + 1)
    return False


# ---------------------------------------------------------------- --add-noqa


def add_noqa(text: str, wanted: dict[int, set[str]]) -> tuple[str, int, list[int]]:
    """`text` with `# noqa: CODES` for each wanted line: (new text, codes added, lines left alone).

    The comment goes on the wanted line when it can take one, else on the last
    line of its statement (after a backslash continuation, a multi-line string's
    closing quotes), which silences the whole statement. An existing directive
    there is rewritten with the union of its codes (a malformed one is corrected
    on the way); otherwise the comment goes at the end of the line, after any
    other comment. Only a text tokenize rejects is left alone. Running it again
    on its own output adds nothing: the findings are suppressed by then.
    """
    layout = _layout(text)
    lines = python_lines(text, keepends=True)
    if layout is None:
        return text, 0, sorted(wanted)
    targets: dict[int, set[str]] = {}
    skipped = []
    for number, codes in sorted(wanted.items()):
        target = number if number not in layout.open_lines else layout.ends.get(number, number)
        if target in layout.open_lines or not 1 <= target <= len(lines):
            skipped.append(number)
            continue
        targets.setdefault(target, set()).update(codes)
    directives: dict[int, Directive] = {}
    for comment in layout.comments:
        for directive in _directives(*comment):
            if not directive.file_wide:
                directives.setdefault(directive.line, directive)
    added = 0
    for number, codes in targets.items():
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        existing = directives.get(number)
        if existing is not None and existing.codes is ALL:
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
