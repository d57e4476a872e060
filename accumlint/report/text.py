"""`--output-format text` (the default): one line per finding and a summary, like ruff.

    train.py:12:9: GA201 missing-loss-scaling: <message> [*]
    nb.ipynb:cell 3:line 4:col 9: GA101 zero-grad-every-micro-batch: <message>
    train.py:1:1: syntax error: <message>

`[*]` marks a finding that `--fix` fixes with the current flags; fixes
that need `--unsafe-fixes` are counted in the summary instead.
"""

from __future__ import annotations

from accumlint.engine import is_error
from accumlint.report import ReportOptions, fix_applies, statistics


def _plural(count: int, word: str, plural: str = "") -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def location(d) -> str:
    if d.cell is not None:
        return f"{d.path}:cell {d.cell}:line {d.line}:col {d.column}"
    return f"{d.path}:{d.line}:{d.column}"


def line(d, unsafe_fixes: bool) -> str:
    """The one-line form of a diagnostic."""
    if is_error(d):
        return f"{location(d)}: {d.name.replace('-', ' ')}: {d.message}"
    marker = " [*]" if fix_applies(d, unsafe_fixes) else ""
    return f"{location(d)}: {d.code} {d.name}: {d.message}{marker}"


def _snippet(d, document) -> str:
    source = document.line(d) if document is not None else None
    if source is None:
        return ""
    number = str(d.line)
    pad = " " * len(number)
    width = d.end_column - d.column if d.end_line == d.line else len(source) - d.column + 1
    carets = " " * (d.column - 1) + "^" * max(width, 1)
    return f"{pad} |\n{number} | {source}\n{pad} | {carets}\n"


def _summary(run, options: ReportOptions) -> list[str]:
    results = run.files
    remaining = sum(len(f.diagnostics) for f in results)
    fixed = sum(len(f.fixed) for f in results)
    applicable = sum(fix_applies(d, f.unsafe_fixes) for f in results for d in f.diagnostics)
    hidden = sum(
        d.fix is not None and not fix_applies(d, f.unsafe_fixes) for f in results for d in f.diagnostics
    )
    if remaining == 0:
        lines = [f"Fixed {_plural(fixed, 'error')}." if fixed else "All checks passed!"]
    elif fixed:
        lines = [f"Found {_plural(fixed + remaining, 'error')} ({fixed} fixed, {remaining} remaining)."]
    else:
        lines = [f"Found {_plural(remaining, 'error')}."]
    hint = f"{_plural(hidden, 'hidden fix', 'hidden fixes')} can be enabled with the `--unsafe-fixes` option"
    if applicable and not options.fix:
        lines.append(f"[*] {applicable} fixable with the `--fix` option" + (f" ({hint})." if hidden else "."))
    elif hidden:
        lines.append(f"No fixes available ({hint}).")
    return lines


def _statistics(run) -> str:
    rows = statistics(run)
    if not rows:
        return ""
    width = max(len(str(row["count"])) for row in rows)
    code_width = max(len(row["code"]) for row in rows)
    return "".join(
        f"{row['count']:>{width}}\t{row['code']:<{code_width}}\t{'[*] ' if row['fixable'] else ''}{row['name']}\n"
        for row in rows
    )


def render(run, options: ReportOptions) -> str:
    if options.statistics:
        return _statistics(run)
    documents = {f.path: (f.document, f.unsafe_fixes) for f in run.files}
    out = []
    for d in run.diagnostics:
        document, unsafe = documents.get(d.path, (None, False))
        out.append(line(d, unsafe) + "\n")
        if options.show_source:
            out.append(_snippet(d, document))
    if not options.quiet:
        out.extend(summary + "\n" for summary in _summary(run, options))
    return "".join(out)
