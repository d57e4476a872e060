"""`--output-format sarif`: SARIF 2.1.0, for GitHub code scanning and other CI viewers.

Written by hand with `json`: the only Python object model for SARIF on PyPI
(sarif-om) has not been released since 2019, and the subset a linter needs
(tool, rules, results with locations) is small and stable.

Each rule carries its whole document (`accumlint explain`) as help, so a
code-scanning alert explains itself. A notebook finding points at the line
of the `.ipynb` file (its JSON, which is what viewers show) that holds the
source line, names the cell in its message and a logical location, and
keeps the cell, line and column inside the cell as properties.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

import accumlint
from accumlint.report import ReportOptions
from accumlint.rules.catalog import ALL_RULES

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    """Relative paths stay relative (viewers resolve them against the checkout)."""
    if os.path.isabs(path):
        return Path(path).as_uri()
    # the file name's own bytes, percent-encoded: names that are not UTF-8 stay exact
    return quote(os.fsencode(Path(path).as_posix()))


def _document(code: str) -> str:
    try:
        from accumlint.rules.docs import rule_document

        return rule_document(code)
    except (ImportError, OSError, LookupError):
        return f"Run `accumlint explain {code}` for the rule's document."


def _rule(rule) -> dict:
    document = _document(rule.code)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.summary},
        "help": {"text": document, "markdown": document},
        "defaultConfiguration": {"level": "error"},
        "properties": {"fix": rule.fix},
    }


def _result(d, rule_index: dict[str, int], document) -> dict:
    message = d.message if d.code in rule_index else f"{d.name.replace('-', ' ')}: {d.message}"
    region = {"startLine": d.line, "startColumn": d.column, "endLine": d.end_line, "endColumn": d.end_column}
    location: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(d.path)}, "region": region}}
    properties = {}
    if d.cell is not None:
        file_line = document.file_line(d) if hasattr(document, "file_line") else None
        location["physicalLocation"]["region"] = {"startLine": file_line or 1}
        location["logicalLocations"] = [{"name": f"cell {d.cell}", "fullyQualifiedName": f"{d.path}:cell {d.cell}"}]
        message = f"cell {d.cell}, line {d.line}: {message}"
        properties = {"cell": d.cell, "cellLine": d.line, "cellColumn": d.column}
    result = {"ruleId": d.code, "level": "error", "message": {"text": message}, "locations": [location]}
    if d.code in rule_index:
        result["ruleIndex"] = rule_index[d.code]
    if properties:
        result["properties"] = properties
    return result


def render(run, options: ReportOptions) -> str:
    rule_index = {rule.code: index for index, rule in enumerate(ALL_RULES)}
    documents = {f.path: f.document for f in run.files}
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "accumlint",
                        "version": accumlint.__version__,
                        "rules": [_rule(rule) for rule in ALL_RULES],
                    }
                },
                "results": [_result(d, rule_index, documents.get(d.path)) for d in run.diagnostics],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
