"""`--output-format pylint`: pylint's parseable lines, `path:line: [CODE] message`, as ruff writes them.

Tools that read pylint's output (editors' problem matchers, CI warning
parsers) take these lines as they are. A notebook finding names its cell as
the concise format does (`nb.ipynb:cell 3:4: [GA201] ...`); an unreadable or
unparsable file is `[syntax-error]`, `[io-error]` or `[internal-error]`.
"""

from __future__ import annotations

from accumlint.report import ReportOptions


def render(run, options: ReportOptions) -> str:
    out = []
    for d in run.diagnostics:
        where = f"{d.path}:cell {d.cell}:{d.line}" if d.cell is not None else f"{d.path}:{d.line}"
        out.append(f"{where}: [{d.code}] {d.message}\n")
    return "".join(out)
