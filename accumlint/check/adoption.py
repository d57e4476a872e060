"""Adopting accumlint on code that already has findings: `--add-noqa`, `--show-settings`, `--show-files`.

`--add-noqa` writes `# noqa: CODE` on the line of every current finding (in
notebooks, in the cell's line), so that a check passes from now on and only
new mistakes are reported; the suppressions say where to look later. A line
that cannot take a comment (it ends inside a multi-line string, or in a
backslash) is never broken: its comment goes on the last line of its
statement, which silences the whole statement (`accumlint.check.noqa`).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

from accumlint.check.engine import RunResult, is_error
from accumlint.check.noqa import NAMES, add_noqa
from accumlint.source.files import SourceError, write_atomic


@dataclasses.dataclass
class NoqaOutcome:
    """What `--add-noqa` did: codes added, files written, and findings left without a comment."""

    added: int = 0
    files: int = 0
    skipped: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)


def add_noqa_to_run(run: RunResult) -> NoqaOutcome:
    """Add `# noqa` comments for every finding of a (check-only) run, writing files atomically."""
    outcome = NoqaOutcome()
    for result in run.files:
        document = result.document
        findings = [d for d in result.diagnostics if not is_error(d) and d.code not in NAMES]
        if document is None or not findings:
            continue
        wanted: dict[int, set[str]] = {}
        for d in findings:
            wanted.setdefault(document.text_line(d), set()).add(d.code)
        text, added, skipped = add_noqa(document.text, wanted)
        by_line = {document.text_line(d): d for d in findings}
        outcome.skipped += [f"{result.path}:{_where(by_line[line])}" for line in skipped]
        if not added:
            continue
        try:
            write_atomic(result.path, document.replaced(text).encoded())
        except (OSError, UnicodeEncodeError, SourceError) as error:
            outcome.errors.append(f"{result.path}: cannot write the file: {error}")
            continue
        outcome.added += added
        outcome.files += 1
    return outcome


def _where(d) -> str:
    return f"cell {d.cell}:{d.line}" if d.cell is not None else str(d.line)


def settings_lines(path: str, settings, cache_dir) -> Iterator[str]:
    """The resolved settings for one file, one `key = value` line each (`--show-settings`)."""
    config = settings.config
    yield f"Resolved settings for: {path}"
    yield f"Settings path: {config.path if config.path else 'none (defaults)'}"
    yield ""
    yield f"enabled = [{', '.join(sorted(settings.enabled_for(path)))}]"
    yield f"fixable = [{', '.join(sorted(settings.enabled_for(path) & settings.fixable))}]"
    yield f"unsafe-fixes = {str(settings.unsafe_fixes).lower()}"
    for name in config._fields:
        if name in ("path", "selection", "fix_selection", "unsafe_fixes", "verify"):
            continue
        yield f"{name.replace('_', '-')} = {_value(getattr(config, name))}"
    for name in config.verify._fields:
        yield f"verify.{name.replace('_', '-')} = {_value(getattr(config.verify, name))}"
    yield f"cache-dir = {cache_dir}"


def _value(value) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, tuple):
        return "[" + ", ".join(_value(item) if isinstance(item, tuple) else repr(item) for item in value) + "]"
    return repr(value)
