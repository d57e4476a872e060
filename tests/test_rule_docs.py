"""Every rule document is complete, and its examples say what the analysis does.

For each rule: the `Example` block triggers exactly that rule once, the `Use
instead` block triggers nothing on a loop the model sees, a safe fix turns the example into `Use
instead` (or into the optional block under `Fix safety`), an unsafe fix
removes the finding when unsafe fixes are enabled, and no fix is applied that
the rule's kind does not allow.
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

import libcst
import pytest
from silence import assert_silent, window_ks

from accumlint.rules import docs
from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.check.fixes import fix_text
from accumlint.rules.catalog import RULES, RULES_BY_CODE, SUPPRESSION_RULES

CODES = [rule.code for rule in RULES]
SUPPRESSION_CODES = [rule.code for rule in SUPPRESSION_RULES]
PATH = "example.py"


def _normalize(text: str) -> str:
    """Drop trailing whitespace (line ends and the end of the text), nothing else."""
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip() + "\n"


def _codes(text: str) -> list[str]:
    return [diagnostic.code for diagnostic in analyze(text, PATH)]


# --- the documents themselves -------------------------------------------------


def test_every_catalog_code_has_a_document_and_nothing_else_does() -> None:
    assert docs.documented_codes() == sorted(CODES + SUPPRESSION_CODES)


def test_documents_are_shipped_as_a_package() -> None:
    """The installed copy's documents load through `importlib.resources` (the copy may be
    another checkout's, so only the document's title is compared)."""
    resource = files(docs.RESOURCE_PACKAGE).joinpath("GA201.md")
    assert resource.is_file()
    assert resource.read_text(encoding="utf-8").startswith(f"# GA201 {RULES_BY_CODE['GA201'].name}\n")


def test_a_checkout_reads_its_own_documents() -> None:
    """Code imported from a source checkout (the tests' own) reads that checkout's `rules/`,
    never the documents of another copy installed in the same environment."""
    checkout = Path(docs.__file__).resolve().parents[2] / "rules"
    assert docs.documents() == checkout
    assert docs.rule_document("GA201") == (checkout / "GA201.md").read_text(encoding="utf-8")
    assert docs.documented_codes() == sorted(path.stem for path in checkout.glob("*.md"))


def test_codes_are_case_and_space_insensitive() -> None:
    assert docs.rule_document(" ga201\n") == docs.rule_document("GA201")


@pytest.mark.parametrize("bad", ["GA999", "GA2", "", "E501", "../GA201", "GA201.md", "ga 201"])
def test_unknown_code_is_refused_with_a_clear_message(bad: str) -> None:
    with pytest.raises(KeyError) as caught:
        docs.rule_document(bad)
    assert isinstance(caught.value, ValueError)
    assert "unknown rule code" in str(caught.value)
    assert "GA201" in str(caught.value)  # names the known codes
    with pytest.raises(ValueError):
        docs.rule_examples(bad)


@pytest.mark.parametrize("code", CODES)
def test_document_has_title_header_and_sections(code: str) -> None:
    rule = RULES_BY_CODE[code]
    text = docs.rule_document(code)
    lines = text.splitlines()
    assert lines[0] == f"# {code} {rule.name}"
    header = re.search(
        r"^\*\*Fix\*\*: (safe|unsafe|none) · \*\*Applies to\*\*: (any loop|accumulation loops)"
        r" · \*\*Reported on\*\*: \S.*$",
        text,
        re.MULTILINE,
    )
    assert header, f"{code}: missing or malformed '**Fix**: ... · **Applies to**: ... · **Reported on**: ...' line"
    assert header.group(1) == rule.fix
    assert header.group(2) == ("any loop" if rule.any_loop else "accumulation loops")
    headings = [match.group(1) for match in re.finditer(r"^## +(.+?)\s*$", text, re.MULTILINE)]
    assert headings == list(docs.REQUIRED_SECTIONS)
    for heading, body in docs.sections(text).items():
        assert body.strip(), f"{code}: section {heading!r} is empty"


@pytest.mark.parametrize("code", CODES)
def test_document_refers_only_to_known_codes(code: str) -> None:
    text = docs.rule_document(code)
    mentioned = set(re.findall(r"\bGA\d{3}\b", text))
    assert mentioned <= set(CODES), f"{code} mentions unknown codes {sorted(mentioned - set(CODES))}"
    see_also = docs.sections(text)["See also"]
    assert re.search(r"\bGA\d{3}\b", see_also), f"{code}: 'See also' names no related rule"


@pytest.mark.parametrize("code", CODES)
def test_examples_parse_and_compile(code: str) -> None:
    examples = docs.rule_examples(code)
    blocks = {"Example": examples.invalid, "Use instead": examples.valid}
    if examples.fixed is not None:
        blocks["Fix safety"] = examples.fixed
    for where, source in blocks.items():
        libcst.parse_module(source)
        compile(source, f"{code} {where}", "exec")
    assert _normalize(examples.invalid) != _normalize(examples.valid)


# --- the examples against the analysis and the fixer ---------------------------


@pytest.mark.parametrize("code", CODES)
def test_example_triggers_exactly_this_rule(code: str) -> None:
    rule = RULES_BY_CODE[code]
    diagnostics = analyze(docs.rule_examples(code).invalid, PATH)
    assert [d.code for d in diagnostics] == [code]
    (diagnostic,) = diagnostics
    assert diagnostic.name == rule.name
    assert (diagnostic.fix.applicability if diagnostic.fix else None) == rule.fix_applicability


# Rules whose corrected example holds no training loop: a Trainer subclass's
# `compute_loss` is checked on its own.
WITHOUT_A_LOOP = frozenset({"GA207"})


@pytest.mark.parametrize("code", CODES)
def test_corrected_example_has_no_findings(code: str) -> None:
    examples = docs.rule_examples(code)
    corrected = [examples.valid] + ([examples.fixed] if examples.fixed is not None else [])
    for text in corrected:
        if code in WITHOUT_A_LOOP:
            assert window_ks(text, PATH) == [] and _codes(text) == []
        else:
            assert_silent(text, path=PATH, accumulating=not RULES_BY_CODE[code].any_loop)


@pytest.mark.parametrize("code", [rule.code for rule in RULES if rule.fix == "safe"])
def test_safe_fix_produces_the_corrected_example(code: str) -> None:
    examples = docs.rule_examples(code)
    outcome = fix_text(examples.invalid, PATH, AnalysisOptions(), unsafe=False)
    assert _normalize(outcome.text) == _normalize(examples.expected_fix)
    assert [d.code for d in outcome.fixed] == [code]
    assert outcome.remaining == []


@pytest.mark.parametrize("code", [rule.code for rule in RULES if rule.fix == "unsafe"])
def test_unsafe_fix_applies_only_when_enabled_and_removes_the_finding(code: str) -> None:
    example = docs.rule_examples(code).invalid
    assert fix_text(example, PATH, AnalysisOptions(), unsafe=False).text == example
    outcome = fix_text(example, PATH, AnalysisOptions(), unsafe=True)
    assert outcome.text != example
    libcst.parse_module(outcome.text)
    assert code not in _codes(outcome.text)


@pytest.mark.parametrize("code", [rule.code for rule in RULES if rule.fix == "none"])
def test_rule_without_fix_leaves_the_example_alone(code: str) -> None:
    example = docs.rule_examples(code).invalid
    outcome = fix_text(example, PATH, AnalysisOptions(), unsafe=True)
    assert outcome.text == example
    assert [d.code for d in outcome.remaining] == [code]


# --- the suppression checks (AL codes): their examples through the command line --


def _checked(text: str) -> list[str]:
    import json

    from click.testing import CliRunner

    from accumlint.cli import cli

    args = ["check", "-", "--stdin-filename", PATH, "--output-format", "json", "--no-cache"]
    result = CliRunner().invoke(cli, args, input=text)
    return [d["code"] for d in json.loads(result.stdout)]


@pytest.mark.parametrize("code", SUPPRESSION_CODES)
def test_suppression_document_header_and_sections(code: str) -> None:
    text = docs.rule_document(code)
    assert text.splitlines()[0] == f"# {code} {RULES_BY_CODE[code].name}"
    assert f"**Fix**: {RULES_BY_CODE[code].fix} · **Applies to**: suppression comments · " in text
    assert [m.group(1) for m in re.finditer(r"^## +(.+?)\s*$", text, re.MULTILINE)] == list(docs.REQUIRED_SECTIONS)


@pytest.mark.parametrize("code", SUPPRESSION_CODES)
def test_suppression_examples_are_what_the_check_reports(code: str) -> None:
    examples = docs.rule_examples(code)
    assert _checked(examples.invalid) == [code]
    assert _checked(examples.valid) == []


@pytest.mark.parametrize("code", SUPPRESSION_CODES)
def test_suppression_fix_gives_the_corrected_example(code: str) -> None:
    from click.testing import CliRunner

    from accumlint.cli import cli

    examples = docs.rule_examples(code)
    args = ["check", "-", "--stdin-filename", PATH, "--fix", "--no-cache", "-q"]
    fixed = CliRunner().invoke(cli, args, input=examples.invalid).stdout
    assert _normalize(fixed) == _normalize(examples.expected_fix)
