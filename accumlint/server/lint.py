"""The checks on an editor's text: findings, and the texts their fixes give.

An editor document is a `Unit`: a `.py` file's text, or a notebook's cells
(each an editor document of its own). Every call reads the configuration
afresh (a new `Resolver`), so an edited `pyproject.toml` applies to the next
check without restarting the server; a run over one file reads a handful of
small files, which costs far less than the analysis. A configuration that
cannot be used does not stop the checks: the defaults apply meanwhile, and
the problem is returned with the findings for the server to show once.

These functions run the analysis in the calling process; the server calls
them in a child process (`children`), never on its event loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple, Optional

from accumlint.check.config import Config, Overrides, Resolver, Settings
from accumlint.diagnostics import Diagnostic
from accumlint.check.engine import FileResult, Request, check
from accumlint.source.documents import load_document


@dataclass(frozen=True)
class Cell:
    uri: str
    text: str
    is_code: bool


@dataclass(frozen=True)
class Unit:
    """One document as the editor has it: `.py` text, or a notebook's cells in order."""

    path: str
    text: str = ""
    cells: Optional[tuple[Cell, ...]] = None

    def data(self) -> bytes:
        if self.cells is None:
            return self.text.encode("utf-8")
        notebook = {
            "cells": [
                {"cell_type": "code" if cell.is_code else "markdown", "metadata": {}, "source": cell.text,
                 **({"execution_count": None, "outputs": []} if cell.is_code else {})}
                for cell in self.cells
            ],
            "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        return json.dumps(notebook).encode("utf-8")

    def uri_of(self, diagnostic: Diagnostic, uri: str) -> str:
        """The editor document a finding is in: the file's own, or its cell's."""
        if self.cells is None or diagnostic.cell is None or not 0 < diagnostic.cell <= len(self.cells):
            return uri
        return self.cells[diagnostic.cell - 1].uri

    def texts(self, document) -> dict[Optional[str], str]:
        """New texts from a (fixed) document: by cell uri for notebooks, under None for a file."""
        if self.cells is None:
            return {None: document.text}
        return {self.cells[cell.number - 1].uri: cell.text for cell in document.cells}


class Findings(NamedTuple):
    """A unit's findings, and why its configuration could not be used (None when it could)."""

    diagnostics: list[Diagnostic]
    config_problem: Optional[str] = None


class _Defaults(Resolver):
    """The settings of a project without configuration: what applies while the user's is broken."""

    def settings_for(self, path: str, is_dir: Optional[bool] = None) -> Settings:
        return self._settings(Config())


def _resolver(unit: Unit, overrides: Overrides = Overrides()) -> tuple[Resolver, Optional[str]]:
    """The unit's resolver, or the defaults' and the reason when its configuration cannot be used."""
    resolver = Resolver(overrides)
    try:
        resolver.settings_for(unit.path)
    except Exception as error:  # noqa: BLE001 - whatever is wrong with the file, the checks go on
        return _Defaults(overrides), str(error) or type(error).__name__
    return resolver, None


def _run(unit: Unit, *, fix: bool) -> tuple[FileResult, Optional[str]]:
    resolver, problem = _resolver(unit, Overrides(unsafe_fixes=False) if fix else Overrides())
    request = Request(
        paths=("-",), stdin=unit.data(), stdin_filename=unit.path, fix=fix, write=False, use_cache=False, jobs=1
    )
    return check(request, resolver).files[0], problem


def findings(unit: Unit) -> Findings:
    """The findings of the unit's current text, located as `check` locates them (cells for notebooks)."""
    result, problem = _run(unit, fix=False)
    return Findings(result.diagnostics, problem)


def fix_all(unit: Unit) -> Optional[dict[Optional[str], str]]:
    """The texts after every safe fix (the LSP's `source.fixAll`), or None when nothing changes."""
    result, _ = _run(unit, fix=True)
    return unit.texts(result.document) if result.changed else None


def fix_one(unit: Unit, target: Diagnostic) -> Optional[dict[Optional[str], str]]:
    """The texts after the fix of one finding alone (safe or unsafe), or None if it cannot apply."""
    from accumlint.check.analysis import AnalysisOptions
    from accumlint.check.fixes import fix_text

    document = load_document(unit.path, unit.data())
    config = _resolver(unit)[0].settings_for(unit.path).config
    line = document.text_line(target)

    def only_target(text: str, d: Diagnostic) -> bool:
        return text == document.text and (d.code, d.line, d.column) == (target.code, line, target.column)

    outcome = fix_text(
        document.text, unit.path, AnalysisOptions(config.optimizer_names, config.accumulation_names),
        unsafe=True, keep=only_target,
    )
    if not outcome.fixed:
        return None
    return unit.texts(document.replaced(outcome.text))


def with_noqa(unit: Unit, target: Diagnostic) -> Optional[dict[Optional[str], str]]:
    """The texts with `# noqa: CODE` on the finding's line, or None if the line cannot take one."""
    from accumlint.check.noqa import add_noqa

    document = load_document(unit.path, unit.data())
    text, added, _ = add_noqa(document.text, {document.text_line(target): {target.code}})
    return unit.texts(document.replaced(text)) if added else None
