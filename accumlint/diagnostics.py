"""The values that flow out of the analysis: diagnostics and the fixes they offer.

A `Diagnostic` is plain, picklable data (it crosses process boundaries with
`--jobs`) and knows nothing of the syntax tree; like the other immutable
records it is a NamedTuple, cheaper to create than a frozen dataclass (whose
generated methods are compiled at import, on every start-up). The tree edits behind a fix
live in `accumlint.check.fixes` and never leave the process that made them.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple, Optional

Applicability = Literal["safe", "unsafe"]

SYNTAX_ERROR = "syntax-error"

# Code quoted in a message: between backticks, on one line or several.
_QUOTED_CODE = re.compile(r"`[^`]*`")
_LINE_BREAK = re.compile(r"[ \t]*(?:\r\n|\r|\n)\s*")
ELLIPSIS = "\u2026"


def one_line(text: str) -> str:
    """`text` on one line, as every output format needs it (a terminal line, a JSON
    string read line by line, a GitHub annotation): code quoted between backticks
    that spans lines is quoted as its first line and an ellipsis (`step % k …`,
    a backslash continuation dropped), and any other line break becomes a space."""
    if "\n" not in text and "\r" not in text:
        return text
    text = _QUOTED_CODE.sub(_first_line, text)
    return _LINE_BREAK.sub(" ", text)


def _first_line(quoted: "re.Match[str]") -> str:
    code = quoted.group()[1:-1]
    first = re.split(r"\r\n|\r|\n", code, maxsplit=1)[0]
    if first == code:
        return quoted.group()
    first = first.rstrip().removesuffix("\\").rstrip()
    return f"`{first} {ELLIPSIS}`" if first else f"`{ELLIPSIS}`"


class FixInfo(NamedTuple):
    """What a user is told about a fix: whether `--fix` applies it, and what it does."""

    applicability: Applicability
    description: str


class Diagnostic(NamedTuple):
    """One finding (or one unparsable file) at a 1-based line and column."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    message: str
    fix: Optional[FixInfo] = None
    cell: Optional[int] = None
    help: str = ""  # why it matters and what to do; `message` stays one short line
    related_line: Optional[int] = None  # the line named as "line N" in the message or help

    @property
    def is_syntax_error(self) -> bool:
        return self.code == SYNTAX_ERROR

    def with_path(self, path: str) -> "Diagnostic":
        return self._replace(path=path)

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)


def syntax_error(path: str, line: int, column: int, message: str) -> Diagnostic:
    """The diagnostic for a file that could not be read or parsed (a parser's or an exception's
    text can span lines)."""
    return Diagnostic(
        path=path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        code=SYNTAX_ERROR,
        name=SYNTAX_ERROR,
        message=one_line(message),
    )
