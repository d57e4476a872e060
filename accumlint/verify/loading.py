"""Importing the user's training function from `FILE::FUNCTION`.

This is the one place accumlint runs a user's module: the file is imported
(its top level executes) under a private module name, with its folder on
`sys.path` so that its sibling imports resolve as they would for the user.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import textwrap
from typing import Any, Callable, Optional


class LoadError(Exception):
    """The target could not be imported or named no function."""


def split_target(target: str) -> tuple[str, str]:
    """`path/train.py::train` -> (path, function name)."""
    path, sep, name = target.rpartition("::")
    if not sep or not path or not name:
        raise LoadError(f"expected FILE::FUNCTION, got {target!r}")
    return path, name


def load_function(target: str) -> Callable[..., Any]:
    """Import the file of `target` and return its function."""
    path, name = split_target(target)
    if not os.path.isfile(path):
        raise LoadError(f"no such file: {path}")
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = _module_name(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - the user's module may raise anything
        sys.modules.pop(module_name, None)
        raise LoadError(f"importing {path} raised {type(error).__name__}: {error}") from error
    owner_name, _, attribute = name.rpartition(".")
    owner = getattr(module, owner_name, None) if owner_name else module
    function = getattr(owner, attribute, None) if owner is not None else None
    if not callable(function):
        what = f"method {attribute!r} in a class {owner_name!r}" if owner_name else f"function {name!r}"
        raise LoadError(f"{path} defines no {what}")
    return function


def owner_class(target: str) -> Optional[type]:
    """The class of a `FILE::Class.method` target once loaded (see load_function)."""
    path, name = split_target(target)
    owner_name = name.rpartition(".")[0]
    if not owner_name:
        return None
    module = sys.modules.get(_module_name(path))
    owner = getattr(module, owner_name, None)
    return owner if isinstance(owner, type) else None


def _module_name(path: str) -> str:
    return "_accumlint_verify_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))


def function_source(function: Callable[..., Any]) -> str:
    """The dedented source of `function` (for the role binding); for a method,
    of its class, so that the method is found by `Class.method`."""
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as error:
        raise LoadError(f"cannot read the source of {getattr(function, '__name__', function)!r}: {error}") from error


def describe(function: Callable[..., Any]) -> str:
    """`file::name` for a function object, as reports name their target."""
    code = getattr(function, "__code__", None)
    name = getattr(function, "__qualname__", getattr(function, "__name__", repr(function)))
    return f"{code.co_filename}::{name}" if code is not None else name
