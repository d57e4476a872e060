"""`--emit-test PATH`: a pytest file that keeps a verified equivalence guarded in CI.

The test names the training file relative to itself, so the emitted file
keeps working wherever the repository is checked out.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Optional

_TEMPLATE = '''"""Written by `accumlint verify --emit-test`: fails if the gradient accumulation
of {function}() in {relative} stops matching the full batch."""

import pathlib
import sys

from accumlint.verify import assert_accumulation_equivalent

HERE = pathlib.Path(__file__).parent
TARGET = str(HERE / {relative!r}) + "::{function}"
{setup_path}

def test_{function}_accumulation_is_equivalent():
    assert_accumulation_equivalent(TARGET, {options})
'''


def render_test(test_path: str, target_file: str, function: str, options: dict[str, Any]) -> str:
    """The text of the test for `target_file::function`, checked with `options`
    (keyword arguments of check_equivalence), to be written at `test_path`.
    A `module:factory` setup gets the folder it was imported from on
    `sys.path`, relative to the test, so the test runs from any directory."""
    here = os.path.dirname(os.path.abspath(test_path))
    relative = os.path.relpath(os.path.abspath(target_file), here)
    rendered = ", ".join(f"{key}={value!r}" for key, value in options.items())
    setup_path = ""
    root = _import_root(options.get("setup"))
    if root is not None:
        setup_path = (
            f"SETUP_ROOT = str(HERE / {os.path.relpath(root, here).replace(os.sep, '/')!r})\n"
            "if SETUP_ROOT not in sys.path:\n    sys.path.insert(0, SETUP_ROOT)\n"
        )
    return _TEMPLATE.format(function=function, relative=relative.replace(os.sep, "/"), options=rendered,
                            setup_path=setup_path)


def _import_root(setup: Any) -> Optional[str]:
    """The sys.path folder a `module:factory` setup is imported from, if it is a file."""
    if not isinstance(setup, str) or ":" not in setup:
        return None
    module = setup.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    folder = os.path.dirname(os.path.abspath(spec.origin))
    depth = module.count(".") + (1 if os.path.basename(spec.origin) == "__init__.py" else 0)
    for _ in range(depth):
        folder = os.path.dirname(folder)
    return folder
