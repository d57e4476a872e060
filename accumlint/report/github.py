"""`--output-format github`: GitHub Actions workflow commands, shown as annotations on the diff."""

from __future__ import annotations

from accumlint.engine import is_error
from accumlint.report import ReportOptions


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(d) -> str:
    """One `::error` command; a notebook's cell is named in the message (lines are per cell)."""
    title = d.name.replace("-", " ") if is_error(d) else d.code
    properties = [f"file={_escape_property(d.path)}"]
    message = d.message
    if d.cell is None:
        properties += [f"line={d.line}", f"col={d.column}", f"endLine={d.end_line}", f"endColumn={d.end_column}"]
    else:
        message = f"cell {d.cell}, line {d.line}: {message}"
    properties.append(f"title={_escape_property(title)}")
    return f"::error {','.join(properties)}::{_escape_data(f'{d.name}: {message}')}"


def render(run, options: ReportOptions) -> str:
    return "".join(annotation(d) + "\n" for d in run.diagnostics)
