"""Fuzzing in the test suite (issue 12, item 6): a few examples per run here,
many with benchmarks/fuzz.py. See tests/fuzzing.py for the properties."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from fuzzing import grammar_programs, mutated_fixtures, problems

# derandomized: CI runs the same examples each time; the fuzz script explores
CI = settings(max_examples=25, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))


@CI
@given(mutated_fixtures())
def test_mutated_fixtures_check_and_fix_cleanly(text: str) -> None:
    assert problems(text) == []


@settings(CI, max_examples=15)
@given(grammar_programs())
def test_generated_programs_check_and_fix_cleanly(text: str) -> None:
    assert problems(text) == []


def test_problems_are_reported() -> None:
    """The property finds what it claims to find (a check that cannot fail proves nothing)."""
    from unittest import mock

    from accumlint import fixes

    text = "import torch\n\nfor i, b in enumerate(data):\n    loss = torch.nn.functional.mse_loss(b, b)\n    loss.backward()\n    if i % 4 == 0:\n        opt.step()\n        opt.zero_grad()\n"
    assert problems(text) == []  # GA106's fix is clean
    broken = fixes.FixOutcome(text.replace("opt.step()", "undefined_name.step()"), [], [], True)
    with mock.patch("fuzzing.fix_text", side_effect=[broken, broken]):
        assert any("undefined" in problem for problem in problems(text))
