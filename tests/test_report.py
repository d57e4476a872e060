"""Output formats: text summaries, JSON objects, SARIF 2.1.0 and GitHub annotations."""

from __future__ import annotations

import json

import pytest

from accumlint.diagnostics import Diagnostic, FixInfo, syntax_error
from accumlint.check.engine import FileResult, RunResult
from accumlint.report import ReportOptions, render
from accumlint.rules.catalog import RULES, SUPPRESSION_RULES

SAFE = Diagnostic("src/t.py", 3, 5, 3, 20, "GA201", "missing-loss-scaling", "divide by K", FixInfo("safe", "scale"))
UNSAFE = Diagnostic("src/t.py", 7, 9, 7, 25, "GA102", "step-every-micro-batch", "gate it", FixInfo("unsafe", "gate"))
NONE = Diagnostic("nb.ipynb", 2, 1, 2, 9, "GA502", "retain-graph-in-loop", "a, b: 100%", None, cell=3)
ERROR = syntax_error("bad.py", 1, 7, "expected ':'")


def run_of(*diagnostics: Diagnostic, unsafe: bool = False, fixed: int = 0) -> RunResult:
    files: dict[str, FileResult] = {}
    for d in diagnostics:
        files.setdefault(d.path, FileResult(d.path, unsafe_fixes=unsafe)).diagnostics.append(d)
    results = list(files.values()) or [FileResult("clean.py")]
    results[0].fixed = [SAFE] * fixed
    return RunResult(results)


# ---------------------------------------------------------------- text


def test_text_lines_and_summary():
    out = render("text", run_of(SAFE, UNSAFE, NONE, ERROR)).splitlines()
    assert out == [
        "bad.py:1:7: syntax error: expected ':'",
        "nb.ipynb:cell 3:2:1: GA502 retain-graph-in-loop: a, b: 100%",
        "src/t.py:3:5: GA201 missing-loss-scaling: divide by K [*]",
        "src/t.py:7:9: GA102 step-every-micro-batch: gate it",
        "Found 4 errors.",
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]


def test_text_with_unsafe_fixes_enabled():
    out = render("text", run_of(UNSAFE, unsafe=True)).splitlines()
    assert out == ["src/t.py:7:9: GA102 step-every-micro-batch: gate it [*]", "Found 1 error.",
                   "[*] 1 fixable with the `--fix` option."]


@pytest.mark.parametrize(
    "diagnostics, fixed, summary",
    [
        ((), 0, ["All checks passed!"]),
        ((), 2, ["Fixed 2 errors."]),
        ((NONE,), 1, ["Found 2 errors (1 fixed, 1 remaining)."]),
        ((UNSAFE,), 1, ["Found 2 errors (1 fixed, 1 remaining).",
                        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)."]),
    ],
)
def test_fix_mode_summaries(diagnostics, fixed, summary):
    out = render("text", run_of(*diagnostics, fixed=fixed), ReportOptions(fix=True)).splitlines()
    assert out[len(diagnostics):] == summary


# ---------------------------------------------------------------- json


def test_json_objects():
    data = json.loads(render("json", run_of(SAFE, NONE, ERROR)))
    assert data[0] == {
        "path": "bad.py", "line": 1, "column": 7, "end_line": 1, "end_column": 7,
        "code": "syntax-error", "name": "syntax-error", "message": "expected ':'", "help": None, "fix": None,
    }
    with_help = json.loads(render("json", run_of(Diagnostic("t.py", 1, 1, 1, 2, "GA201", "n", "m", help="why"))))
    assert with_help[0]["help"] == "why"
    assert data[1]["cell"] == 3 and data[1]["fix"] is None
    assert data[2]["fix"] == {"applicability": "safe", "message": "scale"}
    assert "cell" not in data[2]


def test_json_statistics():
    data = json.loads(render("json", run_of(SAFE, SAFE, NONE), ReportOptions(statistics=True)))
    assert data == [
        {"code": "GA201", "name": "missing-loss-scaling", "count": 2, "fixable": True},
        {"code": "GA502", "name": "retain-graph-in-loop", "count": 1, "fixable": False},
    ]


# ---------------------------------------------------------------- sarif


def test_sarif_document():
    data = json.loads(render("sarif", run_of(SAFE, NONE, ERROR)))
    assert data["version"] == "2.1.0" and data["$schema"].endswith("sarif-2.1.0.json")
    (sarif_run,) = data["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "accumlint"
    assert [rule["id"] for rule in driver["rules"]] == [rule.code for rule in RULES + SUPPRESSION_RULES]
    ga201_rule = driver["rules"][[rule["id"] for rule in driver["rules"]].index("GA201")]
    assert ga201_rule["help"]["markdown"].startswith("# GA201 missing-loss-scaling\n")
    assert "## Why is this bad?" in ga201_rule["help"]["text"]
    results = {result["ruleId"]: result for result in sarif_run["results"]}
    ga201 = results["GA201"]
    assert driver["rules"][ga201["ruleIndex"]]["id"] == "GA201"
    location = ga201["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/t.py"
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 20}
    assert results["GA502"]["properties"] == {"cell": 3, "cellLine": 2, "cellColumn": 1}
    assert results["GA502"]["message"]["text"] == "cell 3, line 2: a, b: 100%"
    assert results["GA502"]["locations"][0]["logicalLocations"] == [
        {"name": "cell 3", "fullyQualifiedName": "nb.ipynb:cell 3"}
    ]
    assert "ruleIndex" not in results["syntax-error"]
    assert results["syntax-error"]["message"]["text"] == "syntax error: expected ':'"


# ---------------------------------------------------------------- github


def test_github_annotations():
    out = render("github", run_of(SAFE, NONE, ERROR)).splitlines()
    assert out == [
        "::error file=bad.py,line=1,col=7,endLine=1,endColumn=7,title=syntax error::syntax-error: expected ':'",
        "::error file=nb.ipynb,title=GA502::retain-graph-in-loop: cell 3, line 2: a, b: 100%25",
        "::error file=src/t.py,line=3,col=5,endLine=3,endColumn=20,title=GA201::missing-loss-scaling: divide by K",
    ]


def test_unknown_format():
    with pytest.raises(ValueError):
        render("xml", run_of())


def test_plural_hidden_fixes():
    out = render("text", run_of(UNSAFE, UNSAFE)).splitlines()
    assert out[-1] == "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option)."


def test_github_annotation_carries_the_help_on_a_second_line():
    finding = Diagnostic("t.py", 1, 1, 1, 2, "GA201", "missing-loss-scaling", "short", help="why: 50%")
    assert render("github", run_of(finding)).endswith("::missing-loss-scaling: short%0Awhy: 50%25\n")


# ---------------------------------------------------------------- grouped, pylint, gitlab, junit


def test_grouped_lines_under_each_file():
    out = render("grouped", run_of(SAFE, UNSAFE, NONE, ERROR)).splitlines()
    assert out == [
        "bad.py:",
        "  1:7 syntax error: expected ':'",
        "",
        "nb.ipynb:",
        "  cell 3:2:1 GA502 retain-graph-in-loop: a, b: 100%",
        "",
        "src/t.py:",
        "  3:5 GA201 missing-loss-scaling: divide by K [*]",
        "  7:9 GA102 step-every-micro-batch: gate it",
        "",
        "Found 4 errors.",
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]
    far = SAFE._replace(line=120, column=13)
    assert render("grouped", run_of(SAFE, far), ReportOptions(quiet=True)).splitlines()[1:3] == [
        "    3:5  GA201 missing-loss-scaling: divide by K [*]",
        "  120:13 GA201 missing-loss-scaling: divide by K [*]",
    ]


def test_pylint_lines():
    assert render("pylint", run_of(SAFE, NONE, ERROR)).splitlines() == [
        "bad.py:1: [syntax-error] expected ':'",
        "nb.ipynb:cell 3:2: [GA502] a, b: 100%",
        "src/t.py:3: [GA201] divide by K",
    ]


def test_gitlab_code_quality_report(monkeypatch, tmp_path):
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path))
    absolute = SAFE._replace(path=str(tmp_path / "pkg" / "t.py"))
    moved = SAFE._replace(line=30)  # the same finding after code above it moved
    issues = json.loads(render("gitlab", run_of(SAFE, NONE, ERROR, absolute)))
    assert sorted((issue["location"] for issue in issues), key=lambda location: location["path"]) == [
        {"path": "bad.py", "lines": {"begin": 1}},
        {"path": "nb.ipynb", "lines": {"begin": 1}},  # no notebook document here: its first line
        {"path": "pkg/t.py", "lines": {"begin": 3}},
        {"path": "src/t.py", "lines": {"begin": 3}},
    ]
    for issue in issues:
        assert set(issue) == {"type", "description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
    by_name = {issue["location"]["path"]: issue for issue in issues}
    assert by_name["src/t.py"]["check_name"] == "GA201"
    assert by_name["src/t.py"]["description"] == "GA201 missing-loss-scaling: divide by K"
    assert by_name["nb.ipynb"]["description"] == "cell 3, line 2: GA502 retain-graph-in-loop: a, b: 100%"
    assert by_name["bad.py"]["severity"] == "critical"
    assert len({issue["fingerprint"] for issue in issues}) == 4
    again = json.loads(render("gitlab", run_of(moved, SAFE._replace(line=40))))
    assert again[0]["fingerprint"] == by_name["src/t.py"]["fingerprint"]  # stable when lines move
    assert again[1]["fingerprint"] != again[0]["fingerprint"]  # a second identical finding is another issue


def test_junit_xml_is_read_back_by_a_junit_parser(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    control = SAFE._replace(message="a \x1b[1mbold\x1b[0m <tag> & more")
    results = run_of(control, UNSAFE, NONE, ERROR).files + [FileResult("clean.py")]
    report = tmp_path / "report.xml"
    report.write_text(render("junit", RunResult(results)), encoding="utf-8")

    xml = junitparser.JUnitXml.fromfile(str(report))
    assert (xml.tests, xml.failures, xml.errors) == (5, 3, 1)
    suites = {suite.name: suite for suite in xml}
    assert sorted(suites) == ["bad.py", "clean.py", "nb.ipynb", "src/t.py"]
    assert (suites["src/t.py"].tests, suites["src/t.py"].failures) == (2, 2)
    first = list(suites["src/t.py"])[0]
    assert first.classname == "src/t.py" and first.name.startswith("GA201 missing-loss-scaling")
    (failure,) = first.result
    assert isinstance(failure, junitparser.Failure)
    assert failure.type == "GA201" and failure.message == "a \ufffd[1mbold\ufffd[0m <tag> & more"
    (error,) = list(suites["bad.py"])[0].result
    assert isinstance(error, junitparser.Error) and error.message == "expected ':'"
    (passed,) = list(suites["clean.py"])
    assert passed.is_passed
    # the attributes CI systems read for a location
    import xml.etree.ElementTree as ElementTree

    cases = ElementTree.parse(report).getroot().iter("testcase")
    assert {(case.get("file"), case.get("line")) for case in cases} >= {("src/t.py", "3"), ("nb.ipynb", "2")}


def test_junit_of_a_clean_run_counts_the_checked_files():
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromstring(render("junit", RunResult([FileResult("a.py"), FileResult("b.py")])).encode())
    assert (xml.tests, xml.failures, xml.errors) == (2, 0, 0)


def test_coloured_diff():
    from accumlint.report.text import diff

    text = "--- a.py\n+++ a.py\n@@ -1 +1 @@\n-old\n+new\n same\n"
    assert diff(text, color=False) == text
    coloured = diff(text, color=True)
    assert click_unstyle(coloured) == text
    lines = coloured.splitlines()
    assert lines[3] == "\x1b[31m-old\x1b[0m" and lines[4] == "\x1b[32m+new\x1b[0m" and lines[5] == " same"


def click_unstyle(text: str) -> str:
    import click

    return click.unstyle(text)
