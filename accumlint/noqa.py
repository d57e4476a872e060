"""Suppression comments: `# noqa`, `# noqa: GA201, GA101` and `# accumlint: noqa`.

Comments are found with `tokenize`, so `"# noqa"` inside a string silences
nothing. Only files with findings are tokenized.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Optional

from accumlint.diagnostics import Diagnostic

_CODES = r"[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*"
_LINE = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
_FILE = re.compile(rf"#\s*accumlint\s*:\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)

_MENTION = re.compile("noqa", re.IGNORECASE)

ALL = None  # a suppression that covers every code


def _codes(match: re.Match) -> Optional[frozenset[str]]:
    codes = match.group("codes")
    return ALL if codes is None else frozenset(code.upper() for code in re.split(r"[\s,]+", codes) if code)


def _comments(text: str) -> list[tuple[int, str]]:
    """(line, comment) pairs; a file tokenize rejects is scanned line by line instead."""
    try:
        return [
            (token.start[0], token.string)
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        return [
            (number, line[line.index("#"):])
            for number, line in enumerate(text.splitlines(), 1)
            if "#" in line
        ]


def _merge(current: Optional[frozenset[str]], new: Optional[frozenset[str]], present: bool):
    if not present:
        return new
    if current is ALL or new is ALL:
        return ALL
    return current | new


@dataclass(frozen=True)
class Suppressions:
    """The suppression comments of one text."""

    lines: dict[int, Optional[frozenset[str]]]
    file: Optional[frozenset[str]]
    file_wide: bool

    @classmethod
    def parse(cls, text: str) -> "Suppressions":
        lines: dict[int, Optional[frozenset[str]]] = {}
        file_codes: Optional[frozenset[str]] = frozenset()
        file_wide = False
        if _MENTION.search(text) is None:  # no suppression anywhere: skip tokenizing
            return cls(lines, file_codes, file_wide)
        for number, comment in _comments(text):
            whole_file = _FILE.search(comment)
            if whole_file:
                file_codes = _merge(file_codes, _codes(whole_file), file_wide)
                file_wide = True
                continue
            match = _LINE.search(comment)
            if match:
                lines[number] = _merge(lines.get(number), _codes(match), number in lines)
        return cls(lines, file_codes, file_wide)

    def suppresses(self, diagnostic: Diagnostic) -> bool:
        """Whether a comment silences this finding (syntax errors are never silenced)."""
        if diagnostic.is_syntax_error:
            return False
        if self.file_wide and (self.file is ALL or diagnostic.code in self.file):
            return True
        if diagnostic.line not in self.lines:
            return False
        codes = self.lines[diagnostic.line]
        return codes is ALL or diagnostic.code in codes


@functools.lru_cache(maxsize=8)
def suppressions(text: str) -> Suppressions:
    """Suppressions of a text, parsed once per distinct text (fix rounds ask often)."""
    return Suppressions.parse(text)
