"""Entry point of the static analysis: source text in, diagnostics out.

STUB (being written): parses and returns no findings yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from accumlint.diagnostics import Diagnostic

# A file can only hold a training loop (or a Lightning module whose loss the
# trainer backpropagates) if one of these appears in its text.
_PREFILTER = re.compile(r"backward\s*\(|accumulate_grad_batches|training_step")


def might_hold_training_code(text: str) -> bool:
    """Cheap text test run before parsing: most files of a tree fail it."""
    return _PREFILTER.search(text) is not None


@dataclass(frozen=True)
class AnalysisOptions:
    """What configuration changes about the analysis itself."""

    optimizer_names: tuple[str, ...] = ()
    accumulation_names: tuple[str, ...] = ()


class ParseFailure(Exception):
    """The text is not Python that LibCST can parse; carries a 1-based position."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.column = column
        self.message = message


def analyze(text: str, path: str, options: AnalysisOptions = AnalysisOptions()) -> list[Diagnostic]:
    """All findings in one module's text, sorted by position; raises ParseFailure."""
    import libcst

    try:
        libcst.parse_module(text)
    except libcst.ParserSyntaxError as error:
        raise ParseFailure(error.raw_line, error.raw_column + 1, error.message) from None
    return []
