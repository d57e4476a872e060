"""benchmarks/ecosystem.py: the comparison of accumlint's findings with hand labels.

The matching logic is tested on made-up findings, and the whole script once
on a tiny synthetic checkout (two training loops written for this test),
never on real repositories (CI has no network to get them).
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ecosystem.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("ecosystem_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


eco = _load_script()
Finding = eco.Finding


def test_compare_sorts_findings_into_matched_unexpected_missing_errors_and_doubtful():
    expected = [Finding("a.py", "GA201", 10, "undivided"), Finding("a.py", "GA106", 12, "off by one")]
    doubtful = [Finding("a.py", "GA107", 12, "arguable tail")]
    found = [
        Finding("a.py", "GA201", 10),  # matches, wherever the message differs
        Finding("a.py", "GA106", 13),  # right code, wrong line: both unexpected and missing
        Finding("a.py", "GA107", 12),  # arguable: counted nowhere
        Finding("a.py", "internal-error", 1, "RecursionError"),
    ]
    result = eco.compare(expected, found, doubtful)
    assert [f.key for f in result.matched] == [("a.py", "GA201", 10)]
    assert result.matched[0].reason == "undivided"  # the label's reason is kept for the report
    assert [f.key for f in result.unexpected] == [("a.py", "GA106", 13)]
    assert [f.key for f in result.missing] == [("a.py", "GA106", 12)]
    assert [f.code for f in result.errors] == ["internal-error"]
    assert [f.key for f in result.doubtful] == [("a.py", "GA107", 12)]
    assert result.precision == 0.5 and result.recall == 0.5


def test_findings_count_once_per_place_as_labels_do():
    """Two findings of one code on one line (two length arguments written on one line)
    are one place, matched or unexpected once, as a label file keyed the same way is."""
    expected = [Finding("a.py", "GA305", 3)]
    found = [Finding("a.py", "GA305", 3), Finding("a.py", "GA305", 3), Finding("a.py", "GA101", 9),
             Finding("a.py", "GA101", 9)]
    result = eco.compare(expected, found)
    assert [f.key for f in result.matched] == [("a.py", "GA305", 3)]
    assert [f.key for f in result.unexpected] == [("a.py", "GA101", 9)]


def test_ratios_are_undefined_without_findings():
    result = eco.compare([], [])
    assert result.precision is None and result.recall is None


def _write_labels(path: Path, body: str) -> Path:
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_a_label_without_a_judgement_is_refused(tmp_path):
    labels = _write_labels(
        tmp_path / "repos.toml",
        """
        [[repo]]
        name = "o/r"
        commit = "0000000000000000000000000000000000000000"
        [[repo.file]]
        path = "a.py"
        findings = []
        """,
    )
    with pytest.raises(SystemExit, match="judged"):
        eco.load_labels(labels)


def test_a_file_labelled_twice_is_refused(tmp_path):
    entry = '[[repo.file]]\npath = "a.py"\njudged = "read"\nfindings = []\n'
    labels = _write_labels(tmp_path / "repos.toml", '[[repo]]\nname = "o/r"\ncommit = "0"\n' + entry + entry)
    with pytest.raises(SystemExit, match="twice"):
        eco.load_labels(labels)


def test_checkout_arguments_must_name_a_listed_repository(tmp_path):
    repositories = [eco.Repository("o/r", "0", ())]
    assert eco.parse_checkouts([f"o/r={tmp_path}"], None, repositories) == {"o+r": tmp_path}
    with pytest.raises(SystemExit, match="not in"):
        eco.parse_checkouts([f"x+y={tmp_path}"], None, repositories)
    with pytest.raises(SystemExit, match="owner"):
        eco.parse_checkouts(["o+r"], None, repositories)


ACCUMULATING = """\
import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
accum_steps = 4
loader = [(torch.randn(3, 2), torch.randn(3, 1)) for _ in range(8)]
for i, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""

ZERO_BEFORE_STEP = """\
import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
loader = [(torch.randn(3, 2), torch.randn(3, 1)) for _ in range(8)]
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
"""

LABELS = """\
[[repo]]
name = "someone/trainer"
commit = "1111111111111111111111111111111111111111"

[[repo.file]]
path = "train.py"
judged = "gated step, loss never divided"
findings = [
  { code = "GA201", line = 10, reason = "undivided loss" },
  { code = "GA106", line = 11, reason = "a label accumlint will not confirm" },
]
doubtful = [{ code = "GA107", line = 11, reason = "tail of a sized list" }]

[[repo.file]]
path = "sub/plain.py"
judged = "labelled correct on purpose, though it zeroes before the step"
findings = []

[[repo.file]]
path = "gone.py"
judged = "not in the checkout"
findings = []
"""


def test_the_script_reports_the_differences_on_a_synthetic_checkout(tmp_path, capsys):
    checkout = tmp_path / "someone+trainer"
    (checkout / "sub").mkdir(parents=True)
    (checkout / "train.py").write_text(ACCUMULATING, encoding="utf-8")
    (checkout / "sub" / "plain.py").write_text(ZERO_BEFORE_STEP, encoding="utf-8")
    labels = _write_labels(tmp_path / "repos.toml", LABELS)

    assert eco.main(["--labels", str(labels), f"someone+trainer={checkout}"]) == 0
    out = capsys.readouterr().out

    unexpected = out.split("unexpected findings")[1].split("missing findings")[0]
    missing = out.split("missing findings")[1].split("errors")[0]
    errors = out.split("errors (")[1].split("doubtful")[0]
    doubtful = out.split("doubtful findings reported")[1].split("per code")[0]
    assert "someone/trainer:sub/plain.py:10: GA104" in unexpected
    assert "someone/trainer:train.py:11: GA106 -- a label accumlint will not confirm" in missing
    assert "GA201" not in missing and "GA201" not in unexpected
    assert "someone/trainer:gone.py:0: missing-file" in errors
    assert "train.py:11: GA107" in doubtful
    assert "precision 0.500, recall 0.500" in out
    assert "GA201 1/1 +0" in out and "GA104 0/0 +1" in out


def test_the_committed_labels_load_and_name_pinned_commits():
    repositories = eco.load_labels()
    assert len(repositories) >= 15
    assert sum(len(repo.files) for repo in repositories) >= 60
    for repo in repositories:
        assert len(repo.commit) == 40 and int(repo.commit, 16) >= 0, repo.name
        for labelled in repo.files:
            assert all(f.reason for f in labelled.expected + labelled.doubtful), (repo.name, labelled.path)
