"""A fixture's expected findings: the `X.expect` sidecar beside `fixtures/**/X.py`.

One finding a line, `LINE:COLUMN CODE MESSAGE` (`42:9 GA201 the loss reaches
backward undivided ...`), sorted by line, column and code; an empty file means
the fixture must stay silent. Like ruff's snapshots, the sidecar shows where
each finding points and what it says, so a finding that moves to another
column or changes its words fails the test beside the one that changes its
line. `python -m pytest tests/test_fixtures.py --update-expect` rewrites the
sidecars from the current output (see fixtures/README.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, NamedTuple

from accumlint.diagnostics import Diagnostic, one_line
from accumlint.rules.catalog import RULES_BY_CODE

_ENTRY = re.compile(r"^(\d+):(\d+) (GA\d{3}) (\S.*)$")


class Expected(NamedTuple):
    """One finding a fixture must produce (1-based line and column)."""

    line: int
    column: int
    code: str
    message: str

    def format(self) -> str:
        return f"{self.line}:{self.column} {self.code} {self.message}"


class MalformedExpect(ValueError):
    """A sidecar line that is not `LINE:COLUMN CODE MESSAGE`, or entries out of order."""


def expect_path(fixture: Path) -> Path:
    return fixture.with_suffix(".expect")


def parse_expect(text: str, name: str) -> list[Expected]:
    """The entries of a sidecar's `text`; `name` is the sidecar, for the error."""
    entries: list[Expected] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        match = _ENTRY.match(raw.rstrip())
        if match is None:
            raise MalformedExpect(
                f"{name}:{number}: expected `LINE:COLUMN CODE MESSAGE` "
                f"(e.g. `42:9 GA201 the loss reaches backward undivided ...`), got {raw!r}; "
                "`python -m pytest tests/test_fixtures.py --update-expect` writes it from the current findings"
            )
        line, column, code, message = match.groups()
        if code not in RULES_BY_CODE:
            raise MalformedExpect(f"{name}:{number}: unknown rule code {code}")
        entries.append(Expected(int(line), int(column), code, message))
    if entries != sorted(entries, key=_order):
        raise MalformedExpect(f"{name}: entries are not sorted by line, column, then code")
    if len(set(entries)) != len(entries):
        raise MalformedExpect(f"{name}: duplicate entries")
    return entries


def read_expect(fixture: Path) -> list[Expected]:
    """The entries of `fixture`'s sidecar (FileNotFoundError when it has none)."""
    path = expect_path(fixture)
    return parse_expect(path.read_text(encoding="utf-8"), path.as_posix())


def expected_of(diagnostics: Iterable[Diagnostic]) -> list[Expected]:
    """The sidecar entries that `diagnostics` would match, in sidecar order."""
    entries = {Expected(d.line, d.column, d.code, one_line(d.message)) for d in diagnostics}
    return sorted(entries, key=_order)


def format_expect(entries: Iterable[Expected]) -> str:
    """The sidecar text for `entries` (empty for a silent fixture)."""
    return "".join(entry.format() + "\n" for entry in sorted(entries, key=_order))


def _order(entry: Expected) -> tuple:
    return (entry.line, entry.column, entry.code, entry.message)
