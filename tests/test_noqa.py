"""Suppression comments: line `# noqa` (bare or with codes) and file-level `# accumlint: noqa`."""

from __future__ import annotations

from click.testing import CliRunner
from fake_analysis import fake_analysis  # noqa: F401 - fixture

from accumlint.cli import cli
from accumlint.diagnostics import Diagnostic, syntax_error
from accumlint.noqa import Suppressions


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
    assert result.stdout.splitlines() == ["t.py:3:19: GA502 retain-graph-in-loop: fake finding GA502"]


def test_noqa_is_evaluated_on_the_text_being_fixed(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    original = "for x in y:\n    loss.backward()  # noqa: GA201\n    optimizer.step()\n"
    (tmp_path / "t.py").write_text(original)
    CliRunner().invoke(cli, ["check", "--fix", "--unsafe-fixes"])
    assert (tmp_path / "t.py").read_text() == original.replace("optimizer.step()", "step_when_due(optimizer)")
