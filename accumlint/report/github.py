"""`--output-format github`: GitHub Actions workflow commands, shown as annotations on the diff.

A notebook finding names its cell and line in the message, and is placed on
the line of the `.ipynb` file (its JSON, which is what the diff shows) that
holds the source line, when that can be told.
"""

from __future__ import annotations

from accumlint.check.engine import is_error
from accumlint.report import ReportOptions


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(d, document=None) -> str:
    """One `::error` command."""
    title = d.name.replace("-", " ") if is_error(d) else d.code
    properties = [f"file={_escape_property(d.path)}"]
    message = d.message + (f"\n{d.help}" if d.help else "")  # the annotation shows both lines
    if d.cell is None:
        properties += [f"line={d.line}", f"col={d.column}", f"endLine={d.end_line}", f"endColumn={d.end_column}"]
    else:
        message = f"cell {d.cell}, line {d.line}: {message}"
        file_line = document.file_line(d) if hasattr(document, "file_line") else None
        if file_line is not None:
            properties.append(f"line={file_line}")
    properties.append(f"title={_escape_property(title)}")
    return f"::error {','.join(properties)}::{_escape_data(f'{d.name}: {message}')}"


def render(run, options: ReportOptions) -> str:
    documents = {f.path: f.document for f in run.files}
    return "".join(annotation(d, documents.get(d.path)) + "\n" for d in run.diagnostics)
