"""One home per rule: each rule is one `Rule(...)` in its module, and everything else derives from it.

The catalog reads the definitions from the rule modules' text (cheap, no
libcst); the registry imports the modules. These tests hold the two to the
same rules, hold the reader to clear errors, and check that no other part of
the package writes a rule's identity out again.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from accumlint.rules import catalog
from accumlint.rules.catalog import RuleDefinitionError, read_definitions

PACKAGE = Path(catalog.__file__).resolve().parent.parent


def test_the_catalog_reads_every_rule_the_modules_define():
    from accumlint.rules import registry

    assert [rule.info for rule in registry.RULES] == sorted(catalog.ALL_RULES)
    assert catalog.ALL_RULES == catalog.RULES + catalog.SUPPRESSION_RULES


def test_the_registry_refuses_rules_the_catalog_did_not_read(monkeypatch):
    from accumlint.rules import registry

    monkeypatch.setattr(registry, "ALL_RULES", catalog.ALL_RULES[1:])
    with pytest.raises(RuleDefinitionError, match=catalog.ALL_RULES[0].code):
        registry._defined()


def test_definitions_are_named_after_their_rule():
    definitions = read_definitions(PACKAGE / "rules")
    assert definitions, "no rule definition read"
    for variable, info in definitions:
        assert variable == info.name.upper().replace("-", "_"), info.code


def test_rules_of_the_loop_model_have_checks_and_suppression_checks_have_none():
    from accumlint.rules import registry

    for rule in registry.RULES:
        has_check = rule.check is not None or rule.module_check is not None
        assert has_check == (rule.info in catalog.RULES), rule.code


def test_findings_get_their_rules_code_from_the_registry():
    from accumlint.check.analysis import AnalysisOptions, parse
    from accumlint.model.build import model_of
    from accumlint.rules import docs, registry

    for info in catalog.RULES:
        text = docs.rule_examples(info.code).invalid
        model = model_of(parse(text), text, AnalysisOptions(), None)
        assert [finding.code for finding in registry.run_rules(model)] == [info.code]


def test_every_rule_has_its_document():
    from accumlint.rules import docs

    assert sorted(info.document for info in catalog.ALL_RULES) == [f"{code}.md" for code in docs.documented_codes()]


# --- the reader of the definitions -------------------------------------------------


def _module(directory: Path, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "family.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_reader_takes_literal_keywords_and_ignores_the_checks(tmp_path):
    _module(tmp_path, '''
        """A family."""

        def found(window):
            return []


        SOME_RULE = Rule(
            code="GA999",
            name="some-rule",
            fix="unsafe",
            summary="Said on one line "
            "or two (with a parenthesis).",
            check=found,
        )
        ''')
    assert read_definitions(tmp_path) == [
        ("SOME_RULE", catalog.RuleInfo("GA999", "some-rule", "unsafe", "Said on one line or two (with a parenthesis)."))
    ]


@pytest.mark.parametrize(
    "arguments, message, line",
    [
        ('    code=CODE,\n    name="x",\n    fix="none",\n    summary="s",\n', "`code` of a rule definition must be a literal", 3),
        ('    code="GA999",\n    name="x",\n    summary="s",\n', "lacks fix", 2),
        ('    "GA999",\n    name="x",\n    fix="none",\n    summary="s",\n', "keyword arguments only", 2),
        ('    code="GA99",\n    name="x",\n    fix="none",\n    summary="s",\n', "the code 'GA99' is not", 2),
        ('    code="GA999",\n    name="Some_Rule",\n    fix="none",\n    summary="s",\n', "not kebab-case", 2),
        ('    code="GA999",\n    name="x",\n    fix="maybe",\n    summary="s",\n', "the fix kind 'maybe'", 2),
        ('    code="GA999",\n    name="x",\n    fix="none",\n    summary="s",\n    any_loop=1,\n', "any_loop is 1", 2),
    ],
)
def test_the_reader_names_the_file_and_line_of_a_definition_it_cannot_read(tmp_path, arguments, message, line):
    path = _module(tmp_path, "import x\nSOME_RULE = Rule(\n" + arguments + ")\n")
    with pytest.raises(RuleDefinitionError, match=re.escape(f"{path}:{line}: ") + ".*" + re.escape(message)):
        read_definitions(tmp_path)


# --- no second home -----------------------------------------------------------------


def test_the_verifier_names_rules_from_the_catalog_only():
    written, unknown = {}, set()
    for path in sorted((PACKAGE / "verify").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        names = [info.name for info in catalog.ALL_RULES if f'"{info.name}"' in text]
        if names:
            written[path.name] = names
        unknown |= set(re.findall(r'\bof_rule\(\s*"(\w+)"', text)) - set(catalog.RULES_BY_CODE)
    assert written == {}
    assert unknown == set()


def test_explanations_of_a_rule_carry_its_catalog_name():
    from accumlint.verify.report import Explanation

    explanation = Explanation.of_rule("GA201", "summary.", "detail.")
    assert (explanation.code, explanation.name) == ("GA201", catalog.rule("GA201").name)
    assert explanation.line() == f"GA201 {catalog.rule('GA201').name}: summary. detail."


def test_the_suppression_checks_report_their_definitions_names():
    from accumlint.check import noqa
    from accumlint.rules.suppression import MALFORMED_NOQA, UNUSED_NOQA

    assert noqa.NAMES == {rule.code: rule.info.name for rule in (MALFORMED_NOQA, UNUSED_NOQA)}


@pytest.mark.parametrize(
    "module",
    ["accumlint.rules.catalog", "accumlint.rules.suppression", "accumlint.check.noqa", "accumlint.verify.report"],
)
def test_the_catalog_and_its_readers_never_import_libcst(module):
    code = f"import sys, {module}\nprint('libcst' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_the_verifiers_explanations_still_do_not_import_libcst():
    pytest.importorskip("torch")
    code = "import sys, accumlint.verify.explanations\nprint('libcst' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
