"""Run every fixture under fixtures/ against the analysis and the fixer.

A fixture is any `fixtures/**/X.py` except `X.fixed.py`. Its sidecar `X.expect`
lists the findings SPEC requires, one `LINE CODE` per line (empty: silent).
When `X.fixed.py` exists, it is what `fix_text(..., unsafe=True)` must produce.
See fixtures/README.md.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from pathlib import Path

import libcst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.check.fixes import fix_text
from accumlint.rules.catalog import RULES, RULES_BY_CODE

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
MIN_FIXTURES = 50

_EXPECT_LINE = re.compile(r"^(\d+) (GA\d{3})$")
NO_FIX_CODES = frozenset(r.code for r in RULES if r.fix == "none")


def _all_fixtures() -> list[Path]:
    return sorted(
        p for p in FIXTURES.rglob("*.py") if not p.name.endswith(".fixed.py")
    )


def _fixed_fixtures() -> list[Path]:
    return [p for p in _all_fixtures() if _fixed_path(p).exists()]


def _fixed_path(fixture: Path) -> Path:
    return fixture.with_name(fixture.name[: -len(".py")] + ".fixed.py")


def _expect_path(fixture: Path) -> Path:
    return fixture.with_suffix(".expect")


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _read(path: Path) -> str:
    # newline="" keeps the file's own line endings: the analysis sees the bytes
    # a user's file would hold.
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def read_expect(fixture: Path) -> list[tuple[int, str]]:
    """The (line, code) pairs of a fixture's sidecar; a malformed sidecar fails."""
    expect = _expect_path(fixture)
    if not expect.exists():
        pytest.fail(f"{_rel(fixture)} has no sidecar {_rel(expect)} (an empty file means silent)")
    entries: list[tuple[int, str]] = []
    for number, raw in enumerate(_read(expect).splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        match = _EXPECT_LINE.match(line)
        if match is None:
            pytest.fail(f"{_rel(expect)}:{number}: expected `LINE CODE` (e.g. `42 GA201`), got {raw!r}")
        code = match.group(2)
        if code not in RULES_BY_CODE:
            pytest.fail(f"{_rel(expect)}:{number}: unknown rule code {code}")
        entries.append((int(match.group(1)), code))
    if entries != sorted(entries):
        pytest.fail(f"{_rel(expect)}: entries are not sorted by line, then code")
    if len(set(entries)) != len(entries):
        pytest.fail(f"{_rel(expect)}: duplicate entries")
    return entries


def _found(text: str, path: Path) -> set[tuple[int, str]]:
    return {(d.line, d.code) for d in analyze(text, _rel(path), AnalysisOptions())}


def _describe(pairs, lines: list[str]) -> list[str]:
    out = []
    for line, code in sorted(pairs):
        source = lines[line - 1].strip() if 0 < line <= len(lines) else "<no such line>"
        out.append(f"    {line:>4} {code}   | {source}")
    return out


def _diff_message(fixture: Path, expected: set, found: set, text: str) -> str:
    lines = text.splitlines()
    parts = [f"findings differ from {_rel(_expect_path(fixture))}"]
    missing = expected - found
    unexpected = found - expected
    if missing:
        parts.append("  expected but not reported:")
        parts.extend(_describe(missing, lines))
    if unexpected:
        parts.append("  reported but not expected:")
        parts.extend(_describe(unexpected, lines))
    if expected & found:
        parts.append("  reported as expected:")
        parts.extend(_describe(expected & found, lines))
    return "\n".join(parts)


@pytest.mark.parametrize("fixture", _all_fixtures(), ids=_rel)
def test_fixture_findings(fixture: Path) -> None:
    text = _read(fixture)
    expected = set(read_expect(fixture))
    found = _found(text, fixture)
    assert found == expected, _diff_message(fixture, expected, found, text)


def _comment_lines_outside_statements(text: str) -> Counter:
    """Stripped comment lines of `text` that are not inside a multi-line simple
    statement (those may legitimately change with the statement they sit in)."""
    module = libcst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    inside: set[int] = set()
    for node, where in positions.items():
        if isinstance(node, libcst.SimpleStatementLine) and where.end.line > where.start.line:
            inside.update(range(where.start.line + 1, where.end.line + 1))
    counter: Counter = Counter()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#") and number not in inside:
            counter[stripped] += 1
    return counter


def _all_comment_lines(text: str) -> Counter:
    return Counter(
        line.strip() for line in text.splitlines() if line.strip().startswith("#")
    )


@pytest.mark.parametrize("fixture", _fixed_fixtures(), ids=_rel)
def test_fixture_fix(fixture: Path) -> None:
    original = _read(fixture)
    wanted = _read(_fixed_path(fixture))
    options = AnalysisOptions()

    fixed = fix_text(original, _rel(fixture), options, unsafe=True).text
    assert fixed == wanted, (
        f"fix_text output differs from {_rel(_fixed_path(fixture))}\n"
        + "".join(
            difflib.unified_diff(
                wanted.splitlines(keepends=True),
                fixed.splitlines(keepends=True),
                "expected",
                "fix_text",
            )
        )
    )

    # The fixed text parses.
    libcst.parse_module(fixed)

    # Comments outside the changed statements survive.
    kept = _all_comment_lines(fixed)
    lost = _comment_lines_outside_statements(original) - kept
    assert not lost, "comment lines lost by the fix:\n" + "\n".join(
        f"    {line}" for line in sorted(lost.elements())
    )

    # Fixing is stable.
    again = fix_text(fixed, _rel(fixture), options, unsafe=True).text
    assert again == fixed, "a second fix_text on the fixed text changed it"

    # Only explain-only rules remain.
    remaining = _found(fixed, fixture)
    fixable = {(line, code) for line, code in remaining if code not in NO_FIX_CODES}
    assert not fixable, "fixable findings remain after the fix:\n" + "\n".join(
        _describe(fixable, fixed.splitlines())
    )


def test_fixture_corpus_size_and_balance() -> None:
    fixtures = _all_fixtures()
    silent = [
        f for f in fixtures if _expect_path(f).exists() and not _read(_expect_path(f)).strip()
    ]
    assert len(fixtures) >= MIN_FIXTURES, f"only {len(fixtures)} fixtures under fixtures/"
    assert 2 * len(silent) >= len(fixtures), (
        f"only {len(silent)} of {len(fixtures)} fixtures are silent; at least half must be"
    )


def test_every_fixture_has_a_sidecar() -> None:
    missing = [_rel(f) for f in _all_fixtures() if not _expect_path(f).exists()]
    assert not missing, "fixtures without a .expect sidecar:\n" + "\n".join(missing)


def test_every_fixed_sidecar_has_a_fixture() -> None:
    orphans = [
        _rel(p)
        for p in FIXTURES.rglob("*.fixed.py")
        if not p.with_name(p.name[: -len(".fixed.py")] + ".py").exists()
    ]
    assert not orphans, "fixed sidecars without a fixture:\n" + "\n".join(orphans)
