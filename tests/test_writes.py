"""No edit is lost: a fix is written only when that loses nothing, and says why when it is not."""

from __future__ import annotations

import os
import signal

import pytest
from samples import UNSCALED_LOOP as TRAIN
from click.testing import CliRunner

from accumlint.cli import cli
from accumlint.source.files import WriteRefused, write_atomic



def fix(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(cli, ["check", "--fix", "--no-cache", *args], input=stdin, catch_exceptions=False)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def _refused(result, reason: str) -> None:
    lines = result.stdout.splitlines()
    assert result.exit_code == 2
    assert f"train.py:1:1: io error: not fixed: {reason}" in lines
    assert any(" GA201 " in line for line in lines)  # the finding stays
    assert not any(line.startswith("Fixed") or "fixed," in line for line in lines)


def test_a_fix_is_written(project):
    result = fix("train.py")
    assert result.exit_code == 0, result.stdout
    assert "(loss / accum_steps).backward()" in (project / "train.py").read_text()


def test_a_file_edited_during_the_run_is_not_overwritten(project, monkeypatch):
    import accumlint.check.engine

    analyse = accumlint.check.engine.execute
    edited = TRAIN + "# saved by the user while accumlint ran\n"

    def analyse_then_edit(*args, **kwargs):
        outcome = analyse(*args, **kwargs)
        (project / "train.py").write_text(edited)
        return outcome

    monkeypatch.setattr(accumlint.check.engine, "execute", analyse_then_edit)
    result = fix("train.py")
    _refused(result, "the file changed on disk during the run; check it again")
    assert (project / "train.py").read_text() == edited


def test_a_read_only_file_is_not_rewritten(project):
    os.chmod(project / "train.py", 0o444)
    _refused(fix("train.py"), "the file is read-only")
    assert (project / "train.py").read_text() == TRAIN


def test_hard_links_are_not_broken(project):
    os.link(project / "train.py", project / "other_name.py")
    result = fix("train.py")
    _refused(result, "the file has 2 hard links, which a rewritten file would break")
    assert (project / "other_name.py").read_text() == (project / "train.py").read_text() == TRAIN


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_owner_and_group_are_kept(project):
    os.chown(project / "train.py", 4321, 4322)
    assert fix("train.py").exit_code == 0
    status = os.stat(project / "train.py")
    assert (status.st_uid, status.st_gid) == (4321, 4322)
    assert "(loss / accum_steps)" in (project / "train.py").read_text()


def test_a_symlink_out_of_the_tree_is_not_followed_silently(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "shared.py").write_text(TRAIN)
    tree = tmp_path / "project"
    tree.mkdir()
    (tree / "train.py").symlink_to(outside / "shared.py")
    monkeypatch.chdir(tree)
    result = fix(".")
    assert result.exit_code == 2
    assert f"train.py:1:1: io error: not fixed: it is a symbolic link to {outside / 'shared.py'}, " \
           "outside the checked folder ." in result.stdout.splitlines()
    assert (outside / "shared.py").read_text() == TRAIN
    # named on the command line, the link is the user's choice: its target is fixed
    assert fix("train.py").exit_code == 0
    assert "(loss / accum_steps)" in (outside / "shared.py").read_text()
    assert (tree / "train.py").is_symlink()


def test_undecodable_stdin_is_echoed_unchanged(project):
    data = b"x = '\xff\xfe'\nloss.backward()\n"
    result = CliRunner().invoke(cli, ["check", "--fix", "-"], input=data, catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stdout_bytes == data


def test_an_interrupt_during_a_write_waits_for_the_swap(tmp_path, monkeypatch):
    target = tmp_path / "f.py"
    target.write_text("old\n")
    real_fsync = os.fsync

    def interrupted_fsync(fd):
        os.kill(os.getpid(), signal.SIGINT)  # arrives now, is handled after the replace
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", interrupted_fsync)
    # Python's own SIGINT handler, whatever an earlier test in this process left installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            write_atomic(str(target), b"new\n", expected=b"old\n")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert target.read_bytes() == b"new\n"
    assert os.listdir(tmp_path) == ["f.py"]


def test_a_refused_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "f.py"
    target.write_text("mine\n")
    with pytest.raises(WriteRefused):
        write_atomic(str(target), b"new\n", expected=b"what was analysed\n")
    assert target.read_text() == "mine\n" and os.listdir(tmp_path) == ["f.py"]
