"""Entry point of the static analysis: source text in, diagnostics out.

One parse, one walk for module facts, one model per training loop, then every
rule over every loop. Positions are computed only when something is reported.
"""

from __future__ import annotations

import functools
import gc
from typing import TYPE_CHECKING, NamedTuple

from accumlint.collector import collector_paused
from accumlint.diagnostics import Diagnostic, FixInfo
from accumlint.gate import ParseFailure, Unanalysable

if TYPE_CHECKING:
    import libcst as cst

    from accumlint.model.facts import ModuleFacts
    from accumlint.rules.base import Finding


class AnalysisOptions(NamedTuple):
    """What configuration changes about the analysis itself (a NamedTuple: cheaper to create than a frozen dataclass)."""

    optimizer_names: tuple[str, ...] = ()
    accumulation_names: tuple[str, ...] = ()


class Located(NamedTuple):
    """A finding with the diagnostic it becomes (kept together for the fixer)."""

    finding: "Finding"
    diagnostic: Diagnostic


@functools.lru_cache(maxsize=None)
def load_analysis() -> None:
    """Import LibCST, the model and the rules, once, when the first file needs them (or
    before the engine forks its workers, which inherit them).

    They make tens of thousands of objects that live as long as the process
    (LibCST's node classes, the model's and the rules' functions) and hardly any
    garbage, yet their allocations set off some forty runs of the cyclic
    collector, each rescanning what the last ones kept, freeing nothing. So the
    collector is paused while they load, and what exists then is frozen
    (`gc.freeze`): no later collection scans it again. On a one-file check that
    is 4 % of all instructions. Analysis runs in worker processes, which live
    only as long as the run. The methods `dataclasses` writes for all those
    classes are compiled once, not on every run (`accumlint.generated_code`).
    """
    from accumlint.generated_code import cached

    with collector_paused(), cached():
        try:
            import libcst  # noqa: F401 - what parsing, the model, the rules, the fix guard and positions import

            import accumlint.fixguard  # noqa: F401
            import accumlint.model.build  # noqa: F401
            import accumlint.model.positions  # noqa: F401
            import accumlint.parsing  # noqa: F401
            import accumlint.rules.registry  # noqa: F401
        finally:
            gc.freeze()


def parse(text: str) -> "cst.Module":
    load_analysis()
    import libcst

    from accumlint.parsing import parse_module

    try:
        return parse_module(text)
    except libcst.ParserSyntaxError as error:
        raise ParseFailure(error.editor_line, error.editor_column, error.message) from None
    except RecursionError:
        raise Unanalysable("too deeply nested for LibCST's parser") from None


def find(module: "cst.Module", text: str, path: str, options: AnalysisOptions, project=None) -> list[Located]:
    """All findings of a parsed module, deduplicated, with their diagnostics.

    `project` (a `ProjectView`; by default the one of `path` when it is a file on
    disk) lets the model read helpers, constants and configuration files from the
    project's other modules. A finding whose statement stands in another module is
    not this module's to report."""
    from accumlint.fixguard import guarded
    from accumlint.model.build import model_of
    from accumlint.project import view_for
    from accumlint.rules.registry import run_rules

    if project is None:
        project = view_for(path, text)
    model = model_of(module, text, options, project)
    try:
        findings = run_rules(model)
        if project is not None:
            findings = [f for f in findings if not _elsewhere(model.facts, f)]
        return _locate(module, text, model.facts, guarded(module, findings, model.facts.parents), path) if findings else []
    finally:
        model.release()


def _elsewhere(facts: "ModuleFacts", finding: "Finding") -> bool:
    """A finding on, or with an edit of, a node read from another module."""
    nodes = [finding.node] + [getattr(edit, "target", None) for edit in finding.edits]
    return any(node is not None and facts.foreign(node) for node in nodes)


class ProjectAnalysis(NamedTuple):
    """One module's diagnostics and the project files the analysis read (path -> sha256)."""

    diagnostics: list[Diagnostic]
    reads: dict[str, str]


def analyze_in_project(text: str, path: str, options: AnalysisOptions = AnalysisOptions()) -> ProjectAnalysis:
    """`analyze`, with the project files it read, and one diagnostic for each configuration
    file the module names that does not parse; raises ParseFailure."""
    from accumlint.diagnostics import syntax_error
    from accumlint.project import view_for

    module = parse(text)
    project = view_for(path, text)
    diagnostics = [located.diagnostic for located in find(module, text, path, options, project)]
    if project is None:
        return ProjectAnalysis(diagnostics, {})
    for error in project.configs()[1]:
        diagnostics.append(syntax_error(_shown(error.path), error.line, error.column, error.message))
    return ProjectAnalysis(diagnostics, dict(project.reads))


def _shown(path: str) -> str:
    """A path as the command line shows it: relative to the working folder when inside it."""
    import os

    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def analyze(text: str, path: str, options: AnalysisOptions = AnalysisOptions()) -> list[Diagnostic]:
    """All findings in one module's text, sorted by position; raises ParseFailure."""
    return [located.diagnostic for located in find(parse(text), text, path, options)]


def _locate(module: "cst.Module", text: str, facts: "ModuleFacts", findings: list["Finding"], path: str) -> list[Located]:
    from accumlint.model.positions import positions_of
    from accumlint.rules.catalog import rule

    wanted = [finding.node for finding in findings] + [f.related for f in findings if f.related is not None]
    loops = [(site.node, site.ancestors) for site in facts.loops]
    positions = positions_of(module, wanted, text, facts.calls, loops=loops)
    located = []
    for finding in findings:
        where = positions[finding.node]
        related_line = None
        if finding.related is not None and finding.related in positions:
            related_line = positions[finding.related].start.line
        related = f"line {related_line}" if related_line is not None else "the window's step"
        message = finding.message.replace("{related}", related)
        help_text = finding.help.replace("{related}", related)
        info = rule(finding.code)
        fix = None
        if finding.edits and info.fix != "none":
            fix = FixInfo(applicability=info.fix, description=finding.fix_description)
        located.append(Located(finding, Diagnostic(
            path=path,
            line=where.start.line,
            column=where.start.column + 1,
            end_line=where.end.line,
            end_column=where.end.column + 1,
            code=finding.code,
            name=info.name,
            message=message,
            fix=fix,
            help=help_text,
            related_line=related_line if related_line is not None and related in message + help_text else None,
        )))
    located.sort(key=lambda item: item.diagnostic.sort_key())
    return located
