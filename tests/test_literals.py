"""The scan of comments and string literals (accumlint.source.literals) against Python's tokenizer.

Every span the scan reports must be a COMMENT or a non-f STRING token exactly:
a span that is code would let the gate drop a file whose backward it hides.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

from accumlint.source.literals import literals_of

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

TRICKY = [
    "x = 'a # b'  # c 'd'\n",
    'x = "it\\"s"; y = \'\\\\\'  # z\n',
    'x = r"\\"" + rb"\\\\" + Rb\'q\'\n',
    'def f():\n    """doc with \'quotes\' and a # hash\n    and a \\""" inside"""\n    return 1\n',
    "x = '''a\n'' b'''  # after\n",
    "s = 'line \\\ncontinued'\n",
    "if'a' in x: y = u'b'\n",
    "v = f'{a!r} # {b}' + 'plain'\n",
    "v = f'''{a}\n''' + fr'x' + 'y'\n",
    "x = 1  # only a comment with ' and \"\n",
]


def _tokens(text: str) -> set[tuple[int, int]]:
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    spans = set()
    # From Python 3.12 an f-string is tokenized piece by piece, and the strings and comments
    # of its replacement fields are tokens of their own: they belong to the f-string.
    start, end = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    inside = 0
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == start:
            inside += 1
        elif token.type == end:
            inside -= 1
        elif inside:
            continue
        if token.type == tokenize.COMMENT or token.type == tokenize.STRING and not _is_f_string(token.string):
            spans.add((starts[token.start[0] - 1] + token.start[1], starts[token.end[0] - 1] + token.end[1]))
    return spans


def _is_f_string(token: str) -> bool:
    prefix = token[: min(i for i in (token.find("'"), token.find('"')) if i >= 0)]
    return "f" in prefix.lower()


@pytest.mark.parametrize("text", TRICKY + [p.read_text() for p in sorted(FIXTURES.rglob("*.py"))[::9]])
def test_every_span_is_a_comment_or_a_plain_string(text):
    literals = literals_of(text)
    assert literals is not None
    assert set(literals.spans) == _tokens(text)


@pytest.mark.parametrize("text", ["x = 'never closed\nloss.backward()\n", 'x = """never closed\n', "x = 'a\r\nb'\n"])
def test_a_scan_that_cannot_be_sure_gives_no_answer(text):
    assert literals_of(text) is None


def test_hold_tells_literals_from_code():
    text = "x = 'a'  # b\ny = 2\n"
    literals = literals_of(text)
    assert [literals.hold(i) for i in range(len(text))] == [
        text.index("'") <= i < text.index("'") + 3 or text.index("#") <= i < text.index("\n") for i in range(len(text))
    ]
