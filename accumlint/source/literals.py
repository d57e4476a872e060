"""Where a Python text's comments and plain string literals are, without tokenizing.

The gate's first stage looks for `.backward(` in the text; in a large library
most occurrences sit in docstrings and comments, and each such file would cost
a full `ast.parse`. `tokenize` would tell, but it is pure Python and slower
than the parse. This scanner jumps from one quote or `#` to the next with `str.find`
and a regular expression, and answers only when it is sure:

- an f-string is never counted as a literal (its braces hold code, and
  Python 3.12 lets them hold its own quotes), though it is skipped past;
- a string that does not close where Python would close it makes the whole
  answer None: the caller must then treat the text as code.
"""

from __future__ import annotations

import bisect
import re
from typing import Optional

_NEXT = re.compile(r"[#'\"]")
_PREFIXES = frozenset({"r", "u", "b", "br", "rb", "f", "fr", "rf"})


class Literals:
    """The comments and non-f string literals of a text, as sorted (start, end) offsets."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans = spans
        self._starts = [start for start, _ in spans]

    def hold(self, offset: int) -> bool:
        """Whether the character at `offset` is part of a comment or a plain string literal."""
        index = bisect.bisect_right(self._starts, offset) - 1
        return index >= 0 and offset < self.spans[index][1]


def literals_of(text: str) -> Optional[Literals]:
    """The comments and plain string literals of a Python text; None when the scan cannot
    be sure of them (a string that never closes, a line ending it cannot read)."""
    spans: list[tuple[int, int]] = []
    position = 0
    while True:
        match = _NEXT.search(text, position)
        if match is None:
            return Literals(spans)
        start = match.start()
        if match.group() == "#":
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            spans.append((start, end))
            position = end
            continue
        quote = text[start] * 3 if text.startswith(text[start] * 3, start) else text[start]
        end = _closing(text, start + len(quote), quote)
        if end is None:
            return None
        prefix = _prefix(text, start)
        if "f" not in prefix:
            spans.append((start - len(prefix), end))
        position = end


def _prefix(text: str, quote: int) -> str:
    """The string prefix before a quote, lower-cased: the run of letters and digits just
    before it, when that whole run is one (`rb"..."`; in `if"..."` the run is a keyword)."""
    start = quote
    while start > 0 and word_character(text[start - 1]):
        start -= 1
    run = text[start:quote].lower()
    return run if run in _PREFIXES else ""


def word_character(character: str) -> bool:
    """Whether a character can be part of an identifier (or a string prefix)."""
    return character.isalnum() or character == "_"


def _closing(text: str, start: int, quote: str) -> Optional[int]:
    """The offset just past the quote that closes a string whose body begins at `start`
    (a quote after an odd number of backslashes does not close it, raw or not)."""
    position = start
    while True:
        found = text.find(quote, position)
        if found < 0:
            return None
        if len(quote) == 1 and _line_ends(text, position, found):
            return None  # a one-quote string cannot run past its line
        if not _escaped(text, found):
            return found + len(quote)
        position = found + 1


def _line_ends(text: str, start: int, end: int) -> bool:
    """Whether a line ends (a newline not continued by a backslash) between two offsets."""
    if "\r" in text[start:end]:
        return True  # a carriage return: let Python's own reading decide
    newline = text.find("\n", start, end)
    while newline >= 0:
        if not _escaped(text, newline):
            return True
        newline = text.find("\n", newline + 1, end)
    return False


def _escaped(text: str, offset: int) -> bool:
    backslashes = 0
    while offset - backslashes - 1 >= 0 and text[offset - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1
