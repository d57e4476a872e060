"""pytest plugin: guard a loop's accumulation equivalence in a user's own tests.

    from accumlint.verify import assert_accumulation_equivalent

    def test_accumulation(accumulation_equivalence):
        accumulation_equivalence(train, setup=make_setup, accum_steps=4)
        # or, without the fixture:
        assert_accumulation_equivalent(train, setup=make_setup, accum_steps=4)

Loaded by every pytest run where accumlint is installed (the `pytest11`
entry point), so it imports nothing heavy: torch comes with the first check.
"""

from __future__ import annotations

from typing import Any, Callable, Union

import pytest


class AccumulationNotEquivalent(AssertionError):
    """The verifier found the loop not equivalent, or could not run it; the
    message is the full report, then the end of what the training code
    printed (it ran in a child process, beyond pytest's capture). `.report`
    holds the report object."""

    def __init__(self, report: Any) -> None:
        output = report.format_output()
        super().__init__(report.format_text() + (f"\n{output}" if output else ""))
        self.report = report


def assert_accumulation_equivalent(function: Union[str, Callable[..., Any]], **options: Any) -> Any:
    """Run `accumlint.verify.check_equivalence(function, **options)` and raise
    AccumulationNotEquivalent unless it passes; returns the report."""
    from accumlint.verify.equivalence import check_equivalence

    report = check_equivalence(function, **options)
    if not report.passed:
        raise AccumulationNotEquivalent(report)
    return report


@pytest.fixture
def accumulation_equivalence() -> Callable[..., Any]:
    """The `assert_accumulation_equivalent` helper, as a fixture."""
    return assert_accumulation_equivalent
