"""The wheel ships every package of the source tree: a package missing from
pyproject's list installs fine from a checkout (editable) and fails everywhere
else (pre-commit, pip install from a path or a URL)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent


def test_every_package_under_accumlint_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "accumlint").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set()
