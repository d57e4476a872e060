"""Importing the user's training function from `FILE::FUNCTION`.

This is the one place accumlint runs a user's module: the file is imported
(its top level executes) under a private module name, with its folder on
`sys.path` so that its sibling imports resolve as they would for the user.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import shlex
import sys
import textwrap
from typing import Any, Callable, Iterator, Optional, Sequence, Union

from accumlint.verify.contained import inside_child

# A script's own command-line arguments: a string split as a shell would, or a list.
ScriptArgs = Union[None, str, Sequence[str]]


class LoadError(Exception):
    """The target could not be imported or named no function; `exited` when
    importing it called sys.exit (a script parsing its arguments, say)."""

    def __init__(self, message: str, exited: bool = False) -> None:
        super().__init__(message)
        self.exited = exited


def user_errors() -> tuple[type[BaseException], ...]:
    """What the user's code may raise that is its own failure: any exception
    and sys.exit; in the contained child KeyboardInterrupt too (there the
    terminal's Ctrl-C cannot reach it, so the code raised it)."""
    return (BaseException,) if inside_child() else (Exception, SystemExit)


@contextlib.contextmanager
def script_argv(target: Any, script_args: ScriptArgs) -> Iterator[None]:
    """`sys.argv` as the script would see it, run as `python FILE ARGS...`:
    the target's file, then `script_args` (never the verifier's own)."""
    if isinstance(target, str):
        path = target.rpartition("::")[0] or target
    else:
        code = getattr(getattr(target, "__func__", target), "__code__", None)
        path = code.co_filename if code is not None else sys.argv[0] if sys.argv else ""
    if script_args is None:
        arguments: list[str] = []
    elif isinstance(script_args, str):
        arguments = shlex.split(script_args)
    else:
        arguments = [str(argument) for argument in script_args]
    saved = sys.argv
    sys.argv = [path, *arguments]
    try:
        yield
    finally:
        sys.argv = saved


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
    except user_errors() as error:  # the user's module may raise anything, or exit
        sys.modules.pop(module_name, None)
        if isinstance(error, SystemExit):
            raise LoadError(f"importing {path} called sys.exit({error.code!r})", exited=True) from error
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
