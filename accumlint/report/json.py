"""`--output-format json`: one JSON array, one object per diagnostic (README, "Output formats")."""

from __future__ import annotations

import json

from accumlint.report import ReportOptions, statistics


def diagnostic_object(d) -> dict:
    """The JSON object of one diagnostic; `cell` only for notebooks."""
    data = {
        "path": d.path,
        "line": d.line,
        "column": d.column,
        "end_line": d.end_line,
        "end_column": d.end_column,
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "help": d.help or None,
        "fix": None if d.fix is None else {"applicability": d.fix.applicability, "message": d.fix.description},
    }
    if d.cell is not None:
        data["cell"] = d.cell
    return data


def render(run, options: ReportOptions) -> str:
    if options.statistics:
        return json.dumps(statistics(run), indent=2) + "\n"
    return json.dumps([diagnostic_object(d) for d in run.diagnostics], indent=2) + "\n"
