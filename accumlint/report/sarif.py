"""`--output-format sarif`: SARIF 2.1.0, for GitHub code scanning and other CI viewers.

Written by hand with `json`: the only Python object model for SARIF on PyPI
(sarif-om) has not been released since 2019, and the subset a linter needs
(tool, rules, results with locations) is small and stable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

import accumlint
from accumlint.report import ReportOptions
from accumlint.rules.catalog import RULES

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    """Relative paths stay relative (viewers resolve them against the checkout)."""
    if os.path.isabs(path):
        return Path(path).as_uri()
    return quote(Path(path).as_posix())


def _rule(rule) -> dict:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "help": {"text": f"Run `accumlint explain {rule.code}` for the rule's document."},
        "defaultConfiguration": {"level": "error"},
        "properties": {"fix": rule.fix},
    }


def _result(d, rule_index: dict[str, int]) -> dict:
    region = {"startLine": d.line, "startColumn": d.column, "endLine": d.end_line, "endColumn": d.end_column}
    result = {
        "ruleId": d.code,
        "level": "error",
        "message": {"text": d.message if d.code in rule_index else f"{d.name.replace('-', ' ')}: {d.message}"},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(d.path)}, "region": region}}],
    }
    if d.code in rule_index:
        result["ruleIndex"] = rule_index[d.code]
    if d.cell is not None:
        result["properties"] = {"cell": d.cell}
    return result


def render(run, options: ReportOptions) -> str:
    rule_index = {rule.code: index for index, rule in enumerate(RULES)}
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "accumlint",
                        "version": accumlint.__version__,
                        "rules": [_rule(rule) for rule in RULES],
                    }
                },
                "results": [_result(d, rule_index) for d in run.diagnostics],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
