"""Output formats: one module per format, each a function from a run to text.

Formatters only read diagnostics and the run's totals; they know nothing of
rules' internals. `render` picks the module by name and imports only it;
`concise` and `full` (and `text`, another name of `concise`) are the
terminal format, with or without source snippets, and `grouped` is
the same lines under each file's name.

Stage 7: imports `accumlint.check` and the stages below it; never `verify`,
`server` or the command line.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple, Optional

FORMATS = ("concise", "full", "text", "grouped", "json", "sarif", "github", "gitlab", "pylint", "junit")
_MODULES = {"concise": "text", "full": "text", "grouped": "text"}


class ReportOptions(NamedTuple):
    """How the user asked to see the results."""

    full: bool = False  # source lines, carets, help and fix under each finding
    grouped: bool = False  # findings under their file's name
    statistics: bool = False
    quiet: bool = False
    fix: bool = False
    color: bool = False


def render(output_format: str, run, options: ReportOptions = ReportOptions()) -> str:
    """The whole report of a run (`run` is an `accumlint.check.engine.RunResult`)."""
    if output_format not in FORMATS:
        raise ValueError(f"unknown output format {output_format!r}")
    if output_format in ("full", "grouped"):
        options = options._replace(**{output_format: True})
    module = importlib.import_module(f"accumlint.report.{_MODULES.get(output_format, output_format)}")
    return module.render(run, options)


def fix_applies(diagnostic, unsafe_fixes: bool) -> bool:
    """Whether `--fix` (with the file's unsafe-fixes setting) would apply this finding's fix."""
    fix = diagnostic.fix
    return fix is not None and (fix.applicability == "safe" or unsafe_fixes)


def statistics(run) -> list[dict]:
    """Counts per code, most frequent first, with whether `--fix` applies to each."""
    rows: dict[str, dict] = {}
    for result in run.files:
        for d in result.diagnostics:
            row = rows.setdefault(d.code, {"code": d.code, "name": d.name, "count": 0, "fixable": False})
            row["count"] += 1
            row["fixable"] = row["fixable"] or fix_applies(d, result.unsafe_fixes)
    return sorted(rows.values(), key=lambda row: (-row["count"], row["code"]))


def notebook_file_line(d, document) -> Optional[int]:
    """For a notebook finding, the line of the `.ipynb` file (its JSON, which CI viewers show)
    that holds its source line, when that can be told; None otherwise."""
    if d.cell is None or not hasattr(document, "file_line"):
        return None
    return document.file_line(d)
