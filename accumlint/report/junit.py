"""`--output-format junit`: JUnit XML, the test report CI systems ingest (GitLab, Jenkins, Azure, CircleCI).

Every checked file is a `<testsuite>`; each finding is a failing
`<testcase>` (`name` the code and rule, `classname` the path, `file` and
`line` attributes as pytest and ruff write them) whose `<failure>` holds the
message and the concise line; a file that could not be read, parsed or
analysed is an `<error>`; a file without findings is one passing test case,
so the report counts what was checked. The root `<testsuites>` adds the
counts up.

Written with the standard library's ElementTree (escaping, encoding), which
needs no dependency; characters XML 1.0 cannot hold (control characters, lone
surrogates from file names that are not UTF-8) are replaced first.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from accumlint.check.engine import is_error
from accumlint.report import ReportOptions
from accumlint.report.text import line as concise_line

_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """The text with every character XML 1.0 forbids replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _case(suite: ElementTree.Element, d, unsafe_fixes: bool) -> None:
    where = f"cell {d.cell}, line {d.line}" if d.cell is not None else f"line {d.line}"
    name = d.name.replace("-", " ") if is_error(d) else f"{d.code} {d.name} ({where}, column {d.column})"
    attributes = {"name": name, "classname": d.path, "file": d.path, "line": str(d.line)}
    case = ElementTree.SubElement(suite, "testcase", {key: _xml(value) for key, value in attributes.items()})
    outcome = ElementTree.SubElement(case, "error" if is_error(d) else "failure", {"message": _xml(d.message), "type": d.code})
    body = concise_line(d, unsafe_fixes)
    if d.help:
        body += f"\n{d.help}"
    outcome.text = _xml(body)


def render(run, options: ReportOptions) -> str:
    root = ElementTree.Element("testsuites", {"name": "accumlint"})
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for result in sorted(run.files, key=lambda f: f.path):
        suite = ElementTree.SubElement(root, "testsuite", {"name": _xml(result.path)})
        found = sorted(result.diagnostics, key=lambda d: d.sort_key())
        for d in found:
            _case(suite, d, result.unsafe_fixes)
        if not found:
            ElementTree.SubElement(suite, "testcase", {"name": "accumlint", "classname": _xml(result.path), "file": _xml(result.path)})
        counts = {
            "tests": max(len(found), 1),
            "failures": sum(not is_error(d) for d in found),
            "errors": sum(is_error(d) for d in found),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
