"""Suppression comments: line `# noqa` (bare or with codes) and file-level `# accumlint: noqa`."""

from __future__ import annotations

from click.testing import CliRunner
from fake_analysis import fake_analysis  # noqa: F401 - fixture

from accumlint.cli import cli
from accumlint.diagnostics import Diagnostic, syntax_error
from accumlint.check.noqa import Correction, Suppressions


def finding(line: int, code: str = "GA201") -> Diagnostic:
    return Diagnostic("t.py", line, 1, line, 2, code, "name", "message")


def silenced(text: str, line: int, code: str = "GA201") -> bool:
    return Suppressions.parse(text).suppresses(finding(line, code))


def test_bare_noqa_silences_every_code_on_its_line_only():
    text = "a()  # noqa\nb()\n"
    assert silenced(text, 1, "GA201") and silenced(text, 1, "GA101")
    assert not silenced(text, 2)


def test_noqa_with_codes_silences_only_those():
    text = "a()  # noqa: GA201, GA101\nb()  # NOQA:GA102 because\n"
    assert silenced(text, 1, "GA201") and silenced(text, 1, "GA101")
    assert not silenced(text, 1, "GA102")
    assert silenced(text, 2, "GA102") and not silenced(text, 2, "GA201")


def test_noqa_inside_a_string_is_not_a_comment():
    text = 's = "# noqa"\nt = """\n# accumlint: noqa\n"""\n'
    assert not silenced(text, 1)
    assert not silenced(text, 3)


def test_file_level_comment_silences_the_file():
    text = "a()\n# accumlint: noqa\nb()\n"
    assert silenced(text, 1) and silenced(text, 3, "GA502")


def test_file_level_comment_with_codes():
    text = "# accumlint: noqa: GA201\na()\n"
    assert silenced(text, 2, "GA201") and not silenced(text, 2, "GA101")


def test_syntax_errors_are_never_silenced():
    assert not Suppressions.parse("# accumlint: noqa\n").suppresses(syntax_error("t.py", 1, 1, "bad"))


def test_untokenizable_text_falls_back_to_line_scan():
    text = "a()  # noqa: GA201\ns = '''unterminated\n"
    assert silenced(text, 1)


def test_noqa_through_the_command_line(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text(
        "for x in y:\n"
        "    loss.backward()  # noqa: GA201\n"
        "    loss.backward(retain_graph=True)  # noqa: GA201\n"
        "    loss.backward()  # noqa\n"
    )
    result = CliRunner().invoke(cli, ["check", "-q"])
    assert result.stdout.splitlines() == [
        "t.py:3:19: GA502 retain-graph-in-loop: fake finding GA502",
        "t.py:3:39: AL002 unused-noqa: unused `noqa` directive (`GA201`) [*]",
    ]


def test_noqa_is_evaluated_on_the_text_being_fixed(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    original = "for x in y:\n    loss.backward()  # noqa: GA201\n    optimizer.step()\n"
    (tmp_path / "t.py").write_text(original)
    CliRunner().invoke(cli, ["check", "--fix", "--unsafe-fixes"])
    assert (tmp_path / "t.py").read_text() == original.replace("optimizer.step()", "step_when_due(optimizer)")


# ---------------------------------------------------------------- AL001 / AL002


ENABLED = frozenset({"GA201", "GA101", "GA106", "AL001", "AL002"})


def checked(text: str, raw=(), enabled=ENABLED) -> list[tuple]:
    return [(d.line, d.column, d.code, d.message) for d in Suppressions.parse(text).check("t.py", list(raw), enabled)]


def test_codes_without_colon_silence_only_those_codes_and_are_malformed():
    text = "if i % k == 0:  # noqa GA106\n"
    assert silenced(text, 1, "GA106") and not silenced(text, 1, "GA201")
    assert checked(text, [finding(1, "GA106")]) == [
        (1, 17, "AL001", "malformed `noqa`: the codes need a colon after `noqa`")
    ]


def test_colon_without_codes_silences_nothing_and_is_malformed_where_it_meets_a_finding():
    """ruff reads `# noqa:` naming no code as invalid: the findings stay, and the comment is reported."""
    text = "a()  # noqa:\nb()  # accumlint: noqa:\n"
    assert not silenced(text, 1, "GA201") and not silenced(text, 2, "GA201")
    assert checked(text, [finding(1)]) == [
        (1, 6, "AL001", "malformed `noqa`: `noqa:` names no code, so it silences nothing"),
        (2, 6, "AL001", "malformed `noqa`: `noqa:` names no code, so it silences nothing"),
    ]
    assert checked("a()  # noqa:\n") == []  # nothing of accumlint's is reported there: another tool's comment


def test_naming_the_codes_after_an_empty_colon_is_an_unsafe_fix():
    text = "a()  # noqa:\nb()  # noqa:\n"
    raw = [finding(1, "GA201"), finding(1, "GA101")]
    (issue,) = Suppressions.parse(text).check("t.py", raw, ENABLED)
    assert issue.fix.applicability == "unsafe"
    assert corrected(text, raw).text == text
    assert corrected(text, raw, unsafe=True).text == "a()  # noqa: GA101, GA201\nb()  # noqa:\n"


def test_comments_for_other_tools_are_not_judged():
    """flake8's `# noqa F811` (no colon) and `# noqa: E501` name no code of accumlint's and silence none of its findings."""
    text = "import os  # noqa F811\nx = 1  # noqa: E501\ny = 2  # NOQA F401, E501\n"
    raw = [finding(line) for line in (1, 2, 3)]
    assert checked(text) == [] and checked(text, raw) == []
    assert not any(silenced(text, line) for line in (1, 2, 3))


def test_file_level_codes_without_colon_are_malformed():
    text = "# accumlint: noqa GA201\na()\n"
    assert silenced(text, 2, "GA201") and not silenced(text, 2, "GA101")
    assert [code for _, _, code, _ in checked(text, [finding(2)])] == ["AL001"]


def test_a_remark_after_a_bare_noqa_is_not_a_code_list():
    assert checked("a()  # noqa because it is fine\n") == []


def test_unused_codes_are_reported_used_ones_are_not():
    text = "a()  # noqa: GA201, GA101\nb()  # noqa: GA201\n"
    assert checked(text, [finding(1, "GA201"), finding(2, "GA201")]) == [
        (1, 6, "AL002", "unused `noqa` code: `GA101`")
    ]
    assert checked(text, [finding(2, "GA201")]) == [(1, 6, "AL002", "unused `noqa` directive (`GA101`, `GA201`)")]


def test_other_tools_codes_bare_noqa_and_disabled_codes_are_never_unused():
    text = "a()  # noqa: E501, F401\nb()  # noqa\nc()  # noqa: GA502\n"
    assert checked(text) == []


def test_unknown_accumlint_codes_are_unused():
    assert [code for _, _, code, _ in checked("a()  # noqa: GA999\n")] == ["AL002"]


def test_file_level_code_is_used_anywhere_in_the_file():
    text = "# accumlint: noqa: GA201\na()\n"
    assert checked(text, [finding(2)]) == []
    assert [code for _, _, code, _ in checked(text)] == ["AL002"]


def test_suppression_findings_are_silenced_only_by_their_own_code():
    text = "a()  # noqa:\nb()  # noqa GA201  # noqa: AL001\n"
    rules = Suppressions.parse(text)
    assert not rules.suppresses(Diagnostic("t.py", 1, 6, 1, 12, "AL001", "malformed-noqa", "m"))
    assert rules.suppresses(Diagnostic("t.py", 2, 6, 2, 12, "AL001", "malformed-noqa", "m"))


def test_unused_noqa_in_fix_mode_sees_the_suppressed_findings(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("for x in y:\n    loss.backward()  # noqa: GA201\n    optimizer.step()\n")
    result = CliRunner().invoke(cli, ["check", "--fix", "--unsafe-fixes", "-q"])
    assert result.stdout == ""
    assert result.exit_code == 0


def test_suppression_codes_can_be_ignored(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("for x in y:\n    loss.backward(retain_graph=True)  # noqa: GA201\n")
    assert "AL002" in CliRunner().invoke(cli, ["check", "-q"]).stdout
    assert "AL002" not in CliRunner().invoke(cli, ["check", "-q", "--ignore", "AL"]).stdout


def corrected(text: str, raw=(), enabled=ENABLED, unsafe: bool = False) -> Correction:
    return Suppressions.parse(text).corrected(text, "t.py", list(raw), enabled, unsafe=unsafe)


def test_fix_adds_the_colon_and_drops_unused_codes_keeping_line_numbers():
    text = (
        "if i % k == 0:  # noqa GA106\n"
        "a()  # noqa: GA201, GA101 - reason\n"
        "b()  # noqa: GA201\n"
        "c()  # why  # noqa: GA101\n"
        "d()  # noqa: GA101 - reason\n"
        "e()  # noqa: E501, GA101\n"
    )
    raw = [finding(1, "GA106"), finding(2, "GA201")]
    assert corrected(text, raw).text == (
        "if i % k == 0:  # noqa: GA106\n"
        "a()  # noqa: GA201 - reason\n"
        "b()\n"
        "c()  # why\n"
        "d()  # - reason\n"
        "e()  # noqa: E501\n"
    )


def test_fix_leaves_suppressed_or_disabled_comment_findings_alone():
    text = "b()  # noqa: GA201  # noqa: AL002\n"
    assert corrected(text) == (text, [])
    assert corrected("b()  # noqa: GA201\n", enabled=frozenset({"GA201", "AL001"})).text == "b()  # noqa: GA201\n"


def test_fix_of_comments_through_the_command_line(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("for x in y:\n    loss.backward(retain_graph=True)  # noqa: GA201\n")
    result = CliRunner().invoke(cli, ["check", "--fix"])
    assert (tmp_path / "t.py").read_text() == "for x in y:\n    loss.backward(retain_graph=True)\n"
    assert "Found 2 errors (1 fixed, 1 remaining)." in result.stdout


def test_another_tools_word_after_the_colon_is_not_malformed():
    """torch writes `# noqa: set_linter` for its own linter: not accumlint's to judge."""
    from accumlint.check.noqa import _directive, _directive_pattern

    directive = _directive(3, 0, _directive_pattern().search("x = 1  # noqa: set_linter"))
    assert directive.problem == ""
    assert _directive(3, 0, _directive_pattern().search("x = 1  # noqa:")).problem


_COMMENTS = [
    "import os  # noqa: F401\nx = 1  # noqa: E501, W291\n",
    "import os  # noqa: F401\nloss.backward()  # noqa\n",
    "import os  # noqa: F401\nloss.backward()  # noqa: GA201\n",
    "x = 1  # noqa GA201\n",
    "x = 1  # noqa:\n",
    "s = '# noqa: F401'  # noqa: GA105\n",
    "s = '# noqa: GA105'  # noqa: F401\n",
    "# accumlint: noqa: E501\n",
    "# accumlint: noqa\n",
    "x = 1  # why  # NOQA: ga201\n",
]


def test_the_checks_suppressions_are_those_of_every_comment_for_accumlint_codes():
    """Skipping the tokenizer when only other tools' codes are named changes nothing a check reports."""
    from accumlint.check.noqa import suppressions

    for text in _COMMENTS:
        lines = range(1, text.count("\n") + 1)
        found = [finding(line, code) for line in lines for code in ("GA201", "GA105")]
        every, relevant = Suppressions.parse(text), suppressions(text)
        assert [every.suppresses(d) for d in found] == [relevant.suppresses(d) for d in found], text
        enabled = frozenset({"GA201", "GA105", "AL001", "AL002"})
        for raw in ([], found[:1]):
            assert every.check("x.py", raw, enabled) == relevant.check("x.py", raw, enabled), text
            for unsafe in (False, True):
                fixed = every.corrected(text, "x.py", raw, enabled, unsafe=unsafe)
                assert fixed == relevant.corrected(text, "x.py", raw, enabled, unsafe=unsafe), text


def test_other_tools_directives_alone_are_not_tokenized(monkeypatch):
    from accumlint.check import noqa

    def no_tokenizing(*args):
        raise AssertionError("tokenized")

    monkeypatch.setattr(noqa.tokenize, "generate_tokens", no_tokenizing)
    text = "import os  # noqa: F401\n" * 1000 + "s = '#'  # noqa: E501\n"
    assert noqa.suppressions(text).directives == ()
    try:
        noqa.suppressions(text + "x = 1  # noqa: GA201\n")
    except AssertionError:
        pass
    else:
        raise AssertionError("a directive naming an accumlint code must be tokenized")


# ---------------------------------------------------------------- statements over several lines

CONTINUED = (
    "if step % k \\\n"  # 1: a backslash continuation
    "        == 0:  # noqa: GA106\n"  # 2
    "    loss.backward(\n"  # 3: brackets
    "        retain_graph=True,\n"  # 4
    "    )  # noqa: GA201, GA502\n"  # 5
    "    note = '''\n"  # 6: a multi-line string
    "    '''; optimizer.step()  # noqa: GA101\n"  # 7
    "    total = (a +  # noqa: GA204\n"  # 8: a comment inside the brackets
    "             b)\n"  # 9
)


def test_a_comment_on_a_statements_last_line_silences_every_line_of_it():
    assert silenced(CONTINUED, 1, "GA106") and silenced(CONTINUED, 2, "GA106")
    assert silenced(CONTINUED, 3, "GA201") and silenced(CONTINUED, 4, "GA502") and silenced(CONTINUED, 5, "GA201")
    assert silenced(CONTINUED, 6, "GA101") and silenced(CONTINUED, 7, "GA101")
    assert not silenced(CONTINUED, 3, "GA106") and not silenced(CONTINUED, 6, "GA201")


def test_a_comment_inside_the_brackets_silences_its_own_line_only():
    assert silenced(CONTINUED, 8, "GA204") and not silenced(CONTINUED, 9, "GA204")


def test_a_comment_that_silences_a_finding_elsewhere_in_its_statement_is_used():
    raw = [finding(1, "GA106"), finding(3, "GA201"), finding(4, "GA502"), finding(6, "GA101"), finding(8, "GA204")]
    enabled = ENABLED | {"GA502", "GA204"}
    assert checked(CONTINUED, raw, enabled) == []
    assert [(line, code) for line, _, code, _ in checked(CONTINUED, raw[:1], enabled)] == [
        (5, "AL002"), (7, "AL002"), (8, "AL002"),
    ]


def test_a_form_feed_does_not_shift_the_line_a_fix_edits():
    """`str.splitlines` breaks at a form feed (GNU style puts them between functions); tokenize does not."""
    text = "a = 1\n\x0cdef f():\n    b()  # noqa: GA201, GA101\n"
    assert corrected(text, [finding(3, "GA201")]).text == text.replace("GA201, GA101", "GA201")


def test_comments_for_other_tools_in_a_file_without_findings_are_silent(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("import os  # noqa F811\nfor x in y:\n    loss.backward(retain_graph=False)  # noqa:\n")
    result = CliRunner().invoke(cli, ["check", "-q"])
    assert result.stdout == "" and result.exit_code == 0


# ---------------------------------------------------------------- --fix until nothing is left


def test_fix_repeats_its_rounds_until_no_comment_is_left_to_fix(tmp_path, monkeypatch, fake_analysis):
    """The colon added to `# noqa GA201` leaves a code that nothing reports: the next round removes it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("for x in y:\n    z = 1  # noqa GA201\n    loss.backward()\n")
    result = CliRunner().invoke(cli, ["check", "--fix", "--no-cache", "-v"])
    assert (tmp_path / "t.py").read_text() == "for x in y:\n    z = 1\n    (loss / 4).backward()\n"
    assert result.exit_code == 0
    assert "Fixed 3 errors." in result.stdout
    assert "accumlint: t.py: fixed in 3 rounds" in result.stderr


def test_the_number_of_rounds_is_told_only_when_asked(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("for x in y:\n    loss.backward()\n")
    result = CliRunner().invoke(cli, ["check", "--fix", "--no-cache"])
    assert "round" not in result.stdout + result.stderr


def test_an_empty_colon_is_filled_with_the_reported_codes_only_with_unsafe_fixes(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    original = "for x in y:\n    loss.backward(retain_graph=True)  # noqa:\n"
    (tmp_path / "t.py").write_text(original)
    safe = CliRunner().invoke(cli, ["check", "--fix", "--no-cache", "-q"])
    assert (tmp_path / "t.py").read_text() == original
    assert [line.split(": ")[1].split()[0] for line in safe.stdout.splitlines()] == ["GA502", "AL001"]
    unsafe = CliRunner().invoke(cli, ["check", "--fix", "--unsafe-fixes", "--no-cache"])
    assert (tmp_path / "t.py").read_text() == original.replace("# noqa:", "# noqa: GA502")
    assert unsafe.exit_code == 0 and "Fixed 1 error." in unsafe.stdout
