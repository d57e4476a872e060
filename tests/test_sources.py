"""Finding files (.gitignore, virtualenvs, tool folders) and reading/writing them faithfully."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_analysis import fake_analysis  # noqa: F401 - fixture
from hypothesis import given, settings
from hypothesis import strategies as st

import accumlint.source.files as sources
from accumlint.cli import cli
from accumlint.source.files import PythonDocument, SourceError, decode_python, discover, write_atomic

BUGGY = "def train(loader):\n    for x in loader:\n        loss.backward()\n"


def found(*paths: str) -> list[str]:
    return [source.display for source in discover(list(paths), lambda path, is_dir: False)]


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


# ---------------------------------------------------------------- discovery


def test_walk_skips_tool_folders_and_environments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path, "a.py", "nb.ipynb", "notes.txt", "pkg/b.py", "__pycache__/c.py", ".git/d.py",
          "build/e.py", ".venv/f.py", "venv/g.py", "env2/h.py", "env2/pyvenv.cfg", "x.egg-info/i.py")
    assert found(".") == ["a.py", "nb.ipynb", "pkg/b.py"]


def test_gitignore_root_nested_and_negated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q"], check=True)
    (tmp_path / ".gitignore").write_text("ignored/\n*_gen.py\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / ".gitignore").write_text("local.py\n!keep_gen.py\n")
    touch(tmp_path, "a.py", "a_gen.py", "ignored/b.py", "pkg/local.py", "pkg/keep_gen.py", "pkg/drop_gen.py",
          "pkg/ok.py")
    assert found(".") == ["a.py", "pkg/keep_gen.py", "pkg/ok.py"]
    # Rules from folders above the one checked apply too (up to the repository root).
    assert found("pkg") == ["pkg/keep_gen.py", "pkg/ok.py"]
    # An ignored folder named explicitly is still walked.
    assert found("ignored") == ["ignored/b.py"]


def test_gitignore_outside_a_repository_applies_below_the_checked_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".gitignore").write_text("skip.py\n")
    touch(tmp_path, "skip.py", "keep.py")
    assert found(".") == ["keep.py"]


def test_named_files_are_checked_even_if_ignored_and_only_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".gitignore").write_text("gen.py\n")
    touch(tmp_path, "gen.py", "other.txt")
    assert found("gen.py", "./gen.py", "other.txt") == ["gen.py", "other.txt"]


def test_missing_path_is_yielded_so_it_is_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert found("missing.py") == ["missing.py"]


# ---------------------------------------------------------------- reading


def test_pep263_encoding_is_honoured():
    data = "# -*- coding: latin-1 -*-\nname = 'café'\n".encode("latin-1")
    text, encoding = decode_python(data)
    assert "café" in text and encoding == "iso-8859-1"


def test_bom_is_detected_and_kept_out_of_the_text():
    text, encoding = decode_python(b"\xef\xbb\xbfx = 1\r\n")
    assert text == "x = 1\r\n" and encoding == "utf-8-sig"


def test_undecodable_bytes_give_a_position():
    with pytest.raises(SourceError) as caught:
        decode_python(b"x = 1\ny = '\xff'\n")
    assert caught.value.line == 2 and caught.value.column == 6
    assert "cannot decode file as utf-8" in caught.value.message


def test_unknown_declared_encoding_reads_utf8_text():
    """A codec an installed package would register (`future_fstrings`) reads UTF-8 text:
    without it, UTF-8 bytes are read as UTF-8, and other bytes cannot be decoded."""
    text, encoding = decode_python("# -*- coding: future_fstrings -*-\nname = 'é'\n".encode())
    assert text.endswith("name = 'é'\n") and encoding == "utf-8"
    with pytest.raises(SourceError, match="cannot decode file: unknown encoding"):
        decode_python(b"# coding: klingon\nx = '\xff'\n")


def test_undecodable_file_is_reported_not_crashed(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_bytes(b"loss.backward()\nx = '\xff'\n")
    (tmp_path / "good.py").write_text(BUGGY)
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 2
    assert "bad.py:2:6: syntax error: cannot decode file as utf-8" in result.stdout
    assert "good.py:3:9: GA201" in result.stdout


def test_oversized_file_is_a_per_file_message(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("accumlint.check.engine.MAX_ANALYSED_CHARS", 100)
    (tmp_path / "big.py").write_text(BUGGY + "# " + "x" * 200 + "\n")
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 2
    assert "big.py:1:1: internal error: file too large to check" in result.stdout


# ---------------------------------------------------------------- writing


@pytest.mark.parametrize(
    "raw",
    [
        b"\xef\xbb\xbfdef train(loader):\r\n    for x in loader:\r\n        loss.backward()\r\n",
        "# -*- coding: latin-1 -*-\n# café\nfor x in y:\n    loss.backward()".encode("latin-1"),
    ],
)
def test_fix_keeps_encoding_bom_line_endings_and_mode(tmp_path, monkeypatch, fake_analysis, raw):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.py"
    path.write_bytes(raw)
    os.chmod(path, 0o751)
    result = CliRunner().invoke(cli, ["check", "--fix"])
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == raw.replace(b"loss.backward()", b"(loss / 4).backward()")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751


def test_fix_through_a_symlink_keeps_the_link(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real.py").write_text(BUGGY)
    (tmp_path / "link.py").symlink_to("real.py")
    CliRunner().invoke(cli, ["check", "--fix", "link.py"])
    assert (tmp_path / "link.py").is_symlink()
    assert "(loss / 4)" in (tmp_path / "real.py").read_text()


def test_failed_write_leaves_the_original_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_text("old\n")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(sources.os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_atomic(str(path), b"new\n")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["train.py"]


def test_write_error_is_reported_per_file(tmp_path, monkeypatch, fake_analysis):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(BUGGY)
    def failing_write(path, data, expected=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("accumlint.check.engine.write_atomic", failing_write)
    result = CliRunner().invoke(cli, ["check", "--fix"])
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert "train.py:1:1: io error: not fixed: cannot write the file: No space left on device" in lines
    # not counted as fixed, and its finding stays, where it is in the file on disk
    assert any(line.startswith("train.py:3:9: GA201 ") for line in lines)
    assert lines[-1] == "Found 2 errors."  # none counted as fixed
    assert (tmp_path / "train.py").read_text() == BUGGY


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=20), max_size=8),
    newline=st.sampled_from(["\n", "\r\n"]),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]),
)
def test_read_write_round_trip_is_byte_exact(tmp_path_factory, lines, newline, encoding):
    lines = ["# -*- coding: latin-1 -*-", *lines] if encoding == "latin-1" else lines
    text = newline.join(lines)
    try:
        raw = text.encode(encoding)
    except UnicodeEncodeError:
        return
    path = tmp_path_factory.mktemp("rt") / "f.py"
    path.write_bytes(raw)
    document = PythonDocument.from_bytes(str(path), path.read_bytes())
    write_atomic(str(path), document.encoded())
    assert path.read_bytes() == raw


def test_a_path_below_a_folder_is_cut_out_of_it_as_relpath_would():
    from accumlint.source.files import _below

    assert _below("/repo/src/train.py", "/repo") == os.path.relpath("/repo/src/train.py", "/repo") == "src/train.py"
    assert _below("/train.py", "/") == "train.py"
    assert _below("/repo2/train.py", "/repo") == os.path.relpath("/repo2/train.py", "/repo")  # a prefix, not a parent
