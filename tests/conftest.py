"""Shared test set-up: keep accumlint's result cache out of the checkout, and
run every test from the checkout's root.

Each test gets its own cache folder, so no test sees results cached by
another (some tests replace the analysis with a fake). Tests name files by
paths relative to the checkout (as the fixtures' expectations do), so the
working directory is the checkout's root whichever folder pytest starts in.
"""

from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-expect",
        action="store_true",
        dest="update_expect",
        help="rewrite the fixtures' .expect sidecars from the current findings instead of checking them "
        "(tests/test_fixtures.py; review the diff before committing)",
    )


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ACCUMLINT_CACHE_DIR", str(tmp_path_factory.mktemp("accumlint_cache")))


@pytest.fixture(autouse=True)
def _checkout_as_working_directory(monkeypatch):
    monkeypatch.chdir(CHECKOUT)


@pytest.fixture
def speedups_on(monkeypatch):
    """The process-wide speed-ups on, as in accumlint's own `check` command (accumlint.compat.enable);
    skipped in a run with the kill switch set, where what is under test is the public paths."""
    import accumlint.compat

    if not accumlint.compat.speedups_allowed():
        pytest.skip("ACCUMLINT_NO_SPEEDUPS is set: the speed-ups are off in this run")
    monkeypatch.setattr(accumlint.compat, "_process_wide", True)
