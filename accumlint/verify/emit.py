"""`--emit-test PATH`: a pytest file that keeps a verified equivalence guarded in CI.

The test names the training file relative to itself, so the emitted file
keeps working wherever the repository is checked out.
"""

from __future__ import annotations

import os
from typing import Any

_TEMPLATE = '''"""Written by `accumlint verify --emit-test`: fails if the gradient accumulation
of {function}() in {relative} stops matching the full batch."""

import pathlib

from accumlint.verify import assert_accumulation_equivalent

TARGET = str(pathlib.Path(__file__).parent / {relative!r}) + "::{function}"


def test_{function}_accumulation_is_equivalent():
    assert_accumulation_equivalent(TARGET, {options})
'''


def render_test(test_path: str, target_file: str, function: str, options: dict[str, Any]) -> str:
    """The text of the test for `target_file::function`, checked with `options`
    (keyword arguments of check_equivalence), to be written at `test_path`."""
    relative = os.path.relpath(os.path.abspath(target_file), os.path.dirname(os.path.abspath(test_path)))
    rendered = ", ".join(f"{key}={value!r}" for key, value in options.items())
    return _TEMPLATE.format(function=function, relative=relative.replace(os.sep, "/"), options=rendered)
