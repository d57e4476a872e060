"""`[tool.accumlint]`: lookup, validation (errors name the key and file), selection, overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_analysis import fake_analysis  # noqa: F401 - fixture

from accumlint.cli import cli
from accumlint.check.config import (
    ConfigError,
    Overrides,
    Resolver,
    SelectionLayer,
    VerifySettings,
    load_config,
    resolve_selection,
)
from accumlint.rules.catalog import ALL_RULES

BUGGY = "def train(loader):\n    for x in loader:\n        loss.backward()\n        optimizer.step()\n"


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(BUGGY)
    return tmp_path


def configure(root: Path, body: str) -> Path:
    path = root / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\n\n[tool.accumlint]\n" + body)
    return path


def codes(*args: str) -> set[str]:
    return {d["code"] for d in json.loads(run("check", "--output-format", "json", *args).stdout)}


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "body, expected",
    [
        ('selct = ["GA2"]\n', "unknown key `selct` in [tool.accumlint] (did you mean `select`?)"),
        ('select = "GA2"\n', "`select` must be a list of strings"),
        ("unsafe-fixes = 1\n", "`unsafe-fixes` must be true or false"),
        ('ignore = ["GA9"]\n', "unknown rule selector 'GA9'"),
        ('per-file-ignores = ["x"]\n', "`per-file-ignores` must be a table"),
        ('[tool.accumlint.per-file-ignores]\n"tests/*" = "GA201"\n', "`per-file-ignores.tests/*` must be a list"),
        ("[tool.accumlint.verify]\naccum-steps = 0\n", "`accum-steps` must be a positive integer"),
        ('[tool.accumlint.verify]\ndevice = "tpu"\n', "`device` must be"),
        ('[tool.accumlint.verify]\ndtype = "float16"\n', "`dtype` must be"),
        ('[tool.accumlint.verify]\nsetup = "nocolon"\n', "`setup` must be a string 'module:factory'"),
        ("[tool.accumlint.verify]\nsteps = 3\n", "unknown key `steps` in [tool.accumlint.verify]"),
        ("select = [\n", "invalid TOML"),
    ],
)
def test_bad_configuration_exits_2_naming_key_and_file(project, fake_analysis, body, expected):
    path = configure(project, body)
    result = run("check")
    assert result.exit_code == 2
    assert expected in result.stderr
    assert str(path) in result.stderr


def test_another_tools_broken_pyproject_on_the_way_up_does_not_stop_the_run(project, fake_analysis):
    package = project / "packages" / "data"
    package.mkdir(parents=True)
    (package / "pyproject.toml").write_text("[tool.hatch.build]\nx = 1\n[tool.hatch.build]\ny = 2\n")
    (package / "train.py").write_text(BUGGY)
    result = run("check", "--output-format", "json")
    assert result.exit_code == 1, result.stderr
    assert {d["path"] for d in json.loads(result.stdout)} == {"train.py", "packages/data/train.py"}


def test_a_broken_pyproject_that_names_accumlint_still_stops_the_run(project, fake_analysis):
    package = project / "packages" / "data"
    package.mkdir(parents=True)
    (package / "pyproject.toml").write_text("[tool.accumlint]\nselect = [\n")
    (package / "train.py").write_text(BUGGY)
    result = run("check")
    assert result.exit_code == 2 and "invalid TOML" in result.stderr


def test_missing_config_file(project, fake_analysis):
    result = run("check", "--config", "nope.toml")
    assert result.exit_code == 2 and "nope.toml: configuration file not found" in result.stderr


def test_verify_table_is_exposed(tmp_path):
    path = configure(
        tmp_path,
        '[tool.accumlint.verify]\naccum-steps = 4\nsetup = "pkg.setup:make"\ndevice = "cuda:1"\n'
        'dtype = "float64"\nwindows = 3\nmicro-batch = 2\nseed = 0\n',
    )
    assert load_config(path).verify == VerifySettings(4, "pkg.setup:make", "cuda:1", "float64", 3, 2, 0)


def test_pyproject_without_table_is_skipped(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert load_config(tmp_path / "pyproject.toml") is None


# ---------------------------------------------------------------- lookup and overrides


def test_config_is_found_upwards_from_the_checked_path(project, fake_analysis):
    configure(project, 'select = ["GA2"]\n')
    (project / "src" / "deep").mkdir(parents=True)
    (project / "src" / "deep" / "t.py").write_text(BUGGY)
    assert codes("src/deep/t.py") == {"GA201"}
    assert codes("src") == {"GA201"}


def test_nearest_config_wins(project, fake_analysis):
    configure(project, 'select = ["GA2"]\n')
    (project / "sub").mkdir()
    (project / "sub" / "t.py").write_text(BUGGY)
    configure(project / "sub", 'select = ["GA1"]\n')
    found = json.loads(run("check", "--output-format", "json").stdout)
    assert {(d["path"], d["code"]) for d in found} == {("train.py", "GA201"), ("sub/t.py", "GA102")}


def test_explicit_config_path(project, fake_analysis, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("cfg")
    configure(project, 'select = ["GA2"]\n')
    path = configure(elsewhere, 'select = ["GA1"]\n')
    assert codes("--config", str(path)) == {"GA102"}


def test_command_line_overrides_config(project, fake_analysis):
    configure(project, 'select = ["GA2"]\nignore = ["GA201"]\n')
    assert codes() == set()
    assert codes("--select", "GA1") == {"GA102"}
    assert codes("--extend-select", "GA201") == {"GA201"}


def test_extend_select_and_ignore_in_config(project, fake_analysis):
    configure(project, 'select = ["GA1"]\nextend-select = ["GA201"]\nignore = ["GA102"]\n')
    assert codes() == {"GA201"}


def test_per_file_ignores(project, fake_analysis):
    configure(project, '[tool.accumlint.per-file-ignores]\n"tests/*" = ["GA2"]\n"train.py" = ["GA102"]\n')
    (project / "tests").mkdir()
    (project / "tests" / "t.py").write_text(BUGGY)
    found = json.loads(run("check", "--output-format", "json").stdout)
    assert {(d["path"], d["code"]) for d in found} == {("tests/t.py", "GA102"), ("train.py", "GA201")}


def test_exclude(project, fake_analysis):
    configure(project, 'exclude = ["generated/", "*_old.py"]\n')
    for name in ("generated/t.py", "train_old.py", "keep/t.py"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text(BUGGY)
    paths = {d["path"] for d in json.loads(run("check", "--output-format", "json").stdout)}
    assert paths == {"train.py", "keep/t.py"}


def test_unsafe_fixes_from_config_and_flag(project, fake_analysis):
    configure(project, "unsafe-fixes = true\n")
    assert "fake finding GA102 [*]" in run("check").stdout
    assert "fake finding GA102 [*]" not in run("check", "--no-unsafe-fixes").stdout


def test_names_reach_the_analysis(project, fake_analysis):
    configure(project, 'optimizer-names = ["trainer_opt"]\naccumulation-names = ["n_micro"]\n')
    run("check", "--no-cache")
    assert fake_analysis.options[-1].optimizer_names == ("trainer_opt",)
    assert fake_analysis.options[-1].accumulation_names == ("n_micro",)


# ---------------------------------------------------------------- selection semantics


def _family(prefix: str) -> set[str]:
    """The codes of a family, from the catalog (a family grows when a rule is added)."""
    return {rule.code for rule in ALL_RULES if rule.code.startswith(prefix)}


def test_most_specific_selector_wins():
    layer = SelectionLayer(select=("GA2",), ignore=("GA201",))
    assert resolve_selection([(layer, "t")]) == _family("GA2") - {"GA201"}
    assert resolve_selection([(SelectionLayer(select=("GA201",), ignore=("GA2",)), "t")]) == {"GA201"}
    assert resolve_selection([(SelectionLayer(select=("ALL",), ignore=("ALL",)), "t")]) == set()


def test_later_layer_select_replaces_earlier_one():
    layers = [(SelectionLayer(select=("GA1",)), "config"), (SelectionLayer(select=("GA5",)), "cli")]
    assert resolve_selection(layers) == _family("GA5")


def test_unknown_selector_raises():
    with pytest.raises(ConfigError, match="unknown rule selector 'GA7'"):
        resolve_selection([(SelectionLayer(ignore=("GA7",)), "t")])


def test_resolver_reads_each_config_once(tmp_path):
    configure(tmp_path, 'select = ["GA2"]\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    resolver = Resolver(Overrides())
    first = resolver.settings_for(str(tmp_path / "a" / "b" / "x.py"))
    assert first is resolver.settings_for(str(tmp_path / "y.py"))
    assert resolver.config_paths() == [tmp_path / "pyproject.toml"]


@pytest.mark.parametrize(
    "body, message",
    [
        ('exclude = ["!"]\n', "`exclude` holds an invalid pattern '!'"),
        ('exclude = ["src/[z-a].py"]\n', "`exclude` holds an invalid pattern 'src/[z-a].py'"),
        ('[tool.accumlint.per-file-ignores]\n"!" = ["GA1"]\n', "`per-file-ignores` holds an invalid pattern '!'"),
        ('select = [""]\n', "empty rule selector ''"),
        ('ignore = ["  "]\n', "empty rule selector '  '"),
    ],
)
def test_bad_patterns_and_empty_selectors_name_the_key_and_file(project, body, message):
    path = configure(project, body)
    result = run("check", "--no-cache", ".")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"accumlint: error: {path}: {message}")


def test_an_empty_command_line_selector_is_an_error(project):
    result = run("check", "--no-cache", "--select", "", ".")
    assert result.exit_code == 2
    assert "command line: empty rule selector" in result.stderr


# ---------------------------------------------------------------- fixable, unfixable, extend-exclude


def _fix_and_list(*args: str) -> tuple[str, list[tuple[str, bool]]]:
    """Fix the project with these options; its text, and (code, offers a fix) for each finding left."""
    run("check", "--no-cache", "--fix", "--unsafe-fixes", *args)
    found = json.loads(run("check", "--no-cache", "--output-format", "json", *args).stdout)
    return Path("train.py").read_text(), [(d["code"], d["fix"] is not None) for d in found]


@pytest.mark.parametrize(
    "body, args, fixed",
    [
        ("", (), {"GA201", "GA102"}),
        ('unfixable = ["GA1"]\n', (), {"GA201"}),
        ('fixable = ["GA102"]\n', (), {"GA102"}),
        ('fixable = ["GA1"]\nextend-fixable = ["GA201"]\n', (), {"GA201", "GA102"}),
        ('fixable = ["GA"]\nunfixable = ["GA201"]\n', (), {"GA102"}),
        ('unfixable = ["GA1"]\n', ("--fixable", "GA201"), {"GA201"}),
        ("", ("--unfixable", "GA2"), {"GA102"}),
        ('fixable = ["GA102"]\n', ("--extend-fixable", "GA201"), {"GA201", "GA102"}),
    ],
)
def test_fixable_and_unfixable_decide_what_fix_touches(project, fake_analysis, body, args, fixed):
    configure(project, body)
    text, left = _fix_and_list(*args)
    assert ("(loss / 4).backward()" in text) == ("GA201" in fixed)
    assert ("step_when_due(optimizer)" in text) == ("GA102" in fixed)
    # like ruff, an unfixable rule's findings are still reported, offering no fix
    assert sorted(left) == sorted((code, False) for code in {"GA201", "GA102"} - fixed)


def test_unfixable_findings_lose_their_fix_marker(project, fake_analysis):
    configure(project, 'unfixable = ["GA201"]\n')
    out = run("check", "--no-cache", "--unsafe-fixes").stdout
    assert "GA201 missing-loss-scaling: fake finding GA201\n" in out
    assert "GA102 step-every-micro-batch: fake finding GA102 [*]\n" in out


def test_bad_fixable_selector_names_the_key_and_file(project):
    path = configure(project, 'unfixable = ["GA9"]\n')
    result = run("check", "--no-cache")
    assert result.exit_code == 2 and f"{path}: unknown rule selector 'GA9'" in result.stderr
    configure(project, "")
    assert "command line: unknown rule selector 'XX1'" in run("check", "--fixable", "XX1").stderr


def test_extend_exclude_in_config_and_on_the_command_line(project, fake_analysis):
    for name in ("gen/a.py", "legacy_b.py", "src/c.py", "src/d.py"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text(BUGGY)
    configure(project, 'exclude = ["gen/"]\nextend-exclude = ["legacy_*.py"]\n')
    files = run("check", "--show-files").stdout.splitlines()
    assert files == ["src/c.py", "src/d.py", "train.py"]
    files = run("check", "--show-files", "--extend-exclude", "src/d.py,train.py").stdout.splitlines()
    assert files == ["src/c.py"]
    # command-line patterns are relative to the current folder, the config's to the config's folder
    sub = project / "src"
    import os

    os.chdir(sub)
    assert run("check", "--show-files", "--extend-exclude", "c.py", str(project)).stdout.splitlines() == [
        str(project / "src" / "d.py"), str(project / "train.py")
    ]
    found = json.loads(run("check", "--no-cache", "--output-format", "json", "--extend-exclude", "d.py", ".").stdout)
    assert {d["path"] for d in found} == {"c.py"}


def test_bad_extend_exclude_pattern_on_the_command_line(project):
    result = run("check", "--extend-exclude", "!", ".")
    assert result.exit_code == 2
    assert "command line: `--extend-exclude` holds an invalid pattern '!'" in result.stderr


def test_show_settings_prints_the_fixable_rules(project):
    configure(project, 'select = ["GA2"]\nunfixable = ["GA201"]\n')
    out = run("check", "--show-settings", "train.py", "--unfixable", "GA202").stdout.splitlines()
    fixable = next(line for line in out if line.startswith("fixable = "))
    assert "GA203" in fixable and "GA201" not in fixable and "GA202" not in fixable and "GA101" not in fixable
    assert not any(line.startswith("fix-selection") for line in out)


def test_unfixable_noqa_checks_leave_the_comments_alone(project, fake_analysis):
    text = BUGGY + "    y = 2  # noqa: GA502\n"
    (project / "train.py").write_text(text)
    configure(project, 'unfixable = ["AL002", "GA"]\n')
    result = run("check", "--no-cache", "--fix")
    assert "AL002" in result.stdout and (project / "train.py").read_text() == text
    configure(project, 'unfixable = ["GA"]\n')
    run("check", "--no-cache", "--fix")
    assert (project / "train.py").read_text() == BUGGY + "    y = 2\n"
