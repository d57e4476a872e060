"""`--output-format concise|full|grouped` (the default `text` is `concise`): findings and a summary, like ruff.

    train.py:12:9: GA201 missing-loss-scaling: <message> [*]
    nb.ipynb:cell 3:4:9: GA101 zero-grad-every-micro-batch: <message>
    train.py:1:1: syntax error: <message>

`[*]` marks a finding that `--fix` fixes with the current flags; fixes
that need `--unsafe-fixes` are counted in the summary instead. `full` adds,
under each finding, the source lines around it with carets under the
reported node, the `help:` (why it matters, what to do) and the fix.
`grouped` prints each file's name once, its findings indented under it:

    train.py:
      12:9 GA201 missing-loss-scaling: <message> [*]

Colour comes from `click.style` and only when the command line asked for it
(`ReportOptions.color`, decided from the terminal, NO_COLOR/FORCE_COLOR and
`--color`); the same text without colour is what pipes and files get.
"""

from __future__ import annotations

from typing import Optional

import click

from accumlint.check.engine import is_error
from accumlint.report import ReportOptions, fix_applies, statistics

CONTEXT_LINES = 2  # source lines shown before and after a finding (ruff shows 2)


class _Style:
    """Named styles (ruff's palette); a no-op when colour is off."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, **style) -> str:
        return click.style(text, **style) if self.color else text

    def path(self, text: str) -> str:
        return self(text, bold=True)

    def separator(self, text: str = ":") -> str:
        return self(text, fg="cyan")

    def code(self, text: str) -> str:
        return self(text, fg="red", bold=True)

    def marker(self, text: str) -> str:
        return self(text, fg="cyan")

    def gutter(self, text: str) -> str:
        return self(text, fg="blue", bold=True)


def _plural(count: int, word: str, plural: str = "") -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def location(d, style: Optional[_Style] = None) -> str:
    """`path:line:col`, or `nb.ipynb:cell 3:line:col` (ruff's form, which editors follow)."""
    style = style or _Style(False)
    sep = style.separator()
    where = f"{d.line}{sep}{d.column}"
    if d.cell is not None:
        where = f"cell {d.cell}{sep}{where}"
    return f"{style.path(d.path)}{sep}{where}"


def line(d, unsafe_fixes: bool, style: Optional[_Style] = None) -> str:
    """The one-line form of a diagnostic."""
    style = style or _Style(False)
    return f"{location(d, style)}{style.separator()} {_body(d, unsafe_fixes, style)}"


def _body(d, unsafe_fixes: bool, style: _Style) -> str:
    """What a line says after the location: code, name, message and the `[*]` marker."""
    sep = style.separator()
    if is_error(d):
        return f"{style.code(d.name.replace('-', ' '))}{sep} {d.message}"
    marker = " " + style.marker("[*]") if fix_applies(d, unsafe_fixes) else ""
    return f"{style.code(d.code)} {d.name}{sep} {d.message}{marker}"


def _grouped(diagnostics: list, documents: dict, style: _Style) -> list[str]:
    """Each file's name, then its findings as `line:col` (`cell N:line:col`) and a blank line."""
    out: list[str] = []
    by_path: dict[str, list] = {}
    for d in diagnostics:
        by_path.setdefault(d.path, []).append(d)
    for path, found in by_path.items():
        unsafe = documents.get(path, (None, False))[1]
        sep = style.separator()
        rows = [(f"cell {d.cell}:" if d.cell is not None else "") + str(d.line) for d in found]
        row_width = max(len(row) for row in rows)
        column_width = max(len(str(d.column)) for d in found)
        out.append(f"{style.path(path)}{sep}\n")
        for d, row in zip(found, rows):  # rows right-aligned, columns left-aligned, as ruff's
            where = f"{row:>{row_width}}:{d.column:<{column_width}}".replace(":", sep)
            out.append(f"  {where} {_body(d, unsafe, style)}\n")
        out.append("\n")
    return out


def diff(text: str, color: bool) -> str:
    """A unified diff, coloured like git's when asked: headers bold, hunks cyan, removals red, additions green."""
    if not color:
        return text
    styled = []
    for row in text.splitlines(keepends=True):
        body, end = row.rstrip("\r\n"), row[len(row.rstrip("\r\n")):]
        if row.startswith(("--- ", "+++ ")):
            body = click.style(body, bold=True)
        elif row.startswith("@@"):
            body = click.style(body, fg="cyan")
        elif row.startswith("-"):
            body = click.style(body, fg="red")
        elif row.startswith("+"):
            body = click.style(body, fg="green")
        styled.append(body + end)
    return "".join(styled)


def _snippet(d, document, style: _Style) -> str:
    """Source lines around the finding, carets under the reported node (its first line)."""
    source = document.lines(d) if document is not None else []
    if not 0 < d.line <= len(source):
        return ""
    first = max(d.line - CONTEXT_LINES, 1)
    last = min(d.line + CONTEXT_LINES, len(source))
    width = len(str(last))
    pad = " " * width
    out = [f"{pad} {style.gutter('|')}\n"]
    for number in range(first, last + 1):
        text = source[number - 1].rstrip("\r")
        out.append(f"{style.gutter(f'{number:>{width}} |')} {text}\n".replace(" \n", "\n"))
        if number == d.line:
            end = d.end_column if d.end_line == d.line else len(text) + 1
            carets = "^" * max(end - d.column, 1)
            out.append(f"{pad} {style.gutter('|')} {' ' * (d.column - 1)}{style.code(carets + ' ' + d.code)}\n")
    out.append(f"{pad} {style.gutter('|')}\n")
    return "".join(out)


def _notes(d, unsafe_fixes: bool, style: _Style) -> str:
    """The `= help:` line (why, what to do) and the fix, under a full-format finding."""
    pad = " " * 2
    out = []
    if d.help:
        out.append(f"{pad}{style.gutter('=')} {style('help', bold=True)}: {d.help}\n")
    if d.fix is not None:
        kind = "safe fix" if d.fix.applicability == "safe" else "unsafe fix"
        if not fix_applies(d, unsafe_fixes):
            kind += ", needs --unsafe-fixes"
        out.append(f"{pad}{style.gutter('=')} {style('fix', bold=True)}: {d.fix.description} ({kind})\n")
    if not is_error(d):
        out.append(f"{pad}{style.gutter('=')} {style('docs', bold=True)}: accumlint explain {d.code}\n")
    return "".join(out)


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


def _statistics(run, style: _Style) -> str:
    """Counts per rule in aligned columns, most frequent first, and their total."""
    rows = statistics(run)
    if not rows:
        return ""
    total = sum(row["count"] for row in rows)
    width = len(str(total))
    code_width = max(len(row["code"]) for row in rows)
    out = []
    for row in rows:
        code = style.code(row["code"].ljust(code_width))
        fixable = style.marker("[*]") if row["fixable"] else "[ ]"
        out.append(f"{row['count']:>{width}}  {code}  {fixable} {row['name']}\n")
    out.append(f"{total:>{width}}  total\n")
    return "".join(out)


def render(run, options: ReportOptions) -> str:
    style = _Style(options.color)
    if options.statistics:
        return _statistics(run, style)
    documents = {f.path: (f.document, f.unsafe_fixes) for f in run.files}
    out = _grouped(run.diagnostics, documents, style) if options.grouped else []
    for d in [] if options.grouped else run.diagnostics:
        document, unsafe = documents.get(d.path, (None, False))
        out.append(line(d, unsafe, style) + "\n")
        if options.full:
            out.append(_snippet(d, document, style))
            out.append(_notes(d, unsafe, style))
            out.append("\n")
    if not options.quiet:
        out.extend(summary + "\n" for summary in _summary(run, options))
    return "".join(out)
