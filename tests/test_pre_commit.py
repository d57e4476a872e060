"""pre-commit runs accumlint's hooks as README.md tells users to declare them.

pre-commit itself (the `test` extra) builds each hook's environment, pip
installs accumlint into it from this checkout, and runs the hook on a new
git repository holding a training script with a mistake: the forms that work
before any release is tagged, a `repo: local` hook whose
`additional_dependencies` name a checkout, and the repository pinned to a
commit (`rev: <sha>`), with both hook ids. The pip of these environments
reaches the package index as the suite's own install does (for the build
backend and accumlint's dependencies).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pre_commit")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

BUGGY = textwrap.dedent("""\
    def train(model, loader, optimizer, criterion):
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
    """)
FIXED = BUGGY.replace("loss.backward()", "(loss / 4).backward()")


def _git(cwd: Path, *args: str) -> str:
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, **identity}, timeout=120)
    return done.stdout.strip()


def _readme_config(title: str) -> dict:
    """The YAML block of README.md's pre-commit section that follows the words `title`."""
    section = README.split("\n## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(re.escape(title) + r".*?```yaml\n(.*?)```", section, re.S)
    assert match, f"README.md has no pre-commit example after {title!r}"
    return yaml.safe_load(match.group(1))


def _user_repository(folder: Path, config: dict) -> Path:
    folder.mkdir()
    _git(folder, "init", "-q")
    (folder / "train.py").write_text(BUGGY)
    (folder / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git(folder, "add", "-A")
    return folder


def _pre_commit(repository: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never", *args]
    return subprocess.run(command, cwd=repository, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PRE_COMMIT_HOME": str(home)})


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture(scope="module")
def accumlint_repository(tmp_path_factory) -> tuple[Path, str]:
    """This checkout's files (committed or not) as a git repository of one commit, and that commit."""
    copy = tmp_path_factory.mktemp("accumlint-repo")
    files = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for name in files:
        if name and (ROOT / name).is_file() and not name.startswith("benchmarks/"):
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "commit", "-q", "-m", "accumlint")
    return copy, _git(copy, "rev-parse", "HEAD")


def test_a_local_hook_installs_accumlint_from_a_checkout(tmp_path, home, accumlint_repository):
    checkout, _ = accumlint_repository
    config = _readme_config("From a checkout")
    (hook,) = config["repos"][0]["hooks"]
    assert config["repos"][0]["repo"] == "local" and hook["language"] == "python"
    hook["additional_dependencies"] = [str(checkout)]  # README: the path of the user's checkout
    repository = _user_repository(tmp_path / "user", config)
    done = _pre_commit(repository, home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "train.py:4:9: GA201 missing-loss-scaling" in done.stdout
    (repository / "train.py").write_text(FIXED)
    done = _pre_commit(repository, home)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_repository_pinned_to_a_commit(tmp_path, home, accumlint_repository):
    checkout, commit = accumlint_repository
    config = _readme_config("Pinned to a commit")
    (entry,) = config["repos"]
    assert re.fullmatch(r"<[^>]*commit[^>]*>", str(entry["rev"])), entry["rev"]
    entry["repo"], entry["rev"] = str(checkout), commit
    entry["hooks"] = [{"id": "accumlint"}, {"id": "accumlint-fix"}]
    repository = _user_repository(tmp_path / "user", config)
    done = _pre_commit(repository, home, "accumlint")
    assert done.returncode == 1 and "GA201 missing-loss-scaling" in done.stdout, done.stdout + done.stderr
    done = _pre_commit(repository, home, "accumlint-fix")
    assert done.returncode == 1, done.stdout + done.stderr  # pre-commit fails a hook that changed files
    assert "files were modified by this hook" in done.stdout
    assert (repository / "train.py").read_text() == FIXED
    assert _pre_commit(repository, home).returncode == 0
