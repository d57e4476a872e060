"""A cache of the code that `dataclasses` writes, kept beside accumlint's bytecode.

LibCST's node types are some two hundred dataclasses, and `dataclasses`
builds each one's methods (`__init__`, `__repr__`, `__eq__`, ...) by writing
their source text and compiling it: over half of `import libcst` (README,
"Speed"), paid again by every check, so on every commit of a pre-commit hook. The texts are the same from
run to run, so their compiled code is kept, as Python keeps a module's
bytecode in `__pycache__`.

While `cached()` is active, the `exec` that `dataclasses` calls is this
module's: for a text compiled before it runs the kept code object, which is
what `compile` would make of the same text under the same Python (the file
carries the interpreter's bytecode magic number and a checksum, and is keyed by the whole
text and the `from __future__` features it is compiled with, so a new LibCST,
a new accumlint or a new Python only misses); for any other text it compiles
and keeps it, and any other call (a code object) goes to the built-in `exec`. On leaving, the
file is rewritten (atomically) only when some text was missing: with what it
kept and what was added, or, once the entries this import did not use
outnumber those it did (what an upgrade leaves), with this import's alone.
Runs that import different sets of modules meanwhile thus share one file
instead of rewriting it in turn. Nothing is written when Python is told not
to write bytecode (`PYTHONDONTWRITEBYTECODE`) or the folder is not writable;
a file that cannot be read, or whose checksum does not hold, is a cache with
nothing in it (and is rewritten).

`dataclasses`' use of a module-level `exec` and `sys._getframe` are CPython's
private details, and the hook is `dataclasses`' for the whole process: `cached()`
hooks nothing, and `dataclasses` compiles as usual, unless accumlint's own
command runs (`accumlint.compat.enable`), `sys._getframe` exists and some
function of `dataclasses` calls `exec` by name (`HOOKABLE`).
"""

from __future__ import annotations

import __future__
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
import threading
import zlib
from pathlib import Path
from types import CodeType
from typing import Iterator, Optional

from accumlint.compat import process_wide

# What `dataclasses` compiles its texts as: `exec(text)` names it so.
_FILENAME = "<string>"
# The compiler flags of every `from __future__` feature (what a text inherits from its caller).
_FUTURE_FEATURES = sum(getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)
Key = tuple[int, str]  # (future features, text)
_lock = threading.Lock()


def _dataclasses_call_exec() -> bool:
    """Whether a function of `dataclasses` (or a method of one of its classes: 3.13's
    `_FuncBuilder`) looks `exec` up by name, so that a module global named `exec` is used."""
    functions = []
    for value in vars(dataclasses).values():
        if isinstance(value, type) and value.__module__ == dataclasses.__name__:
            functions.extend(vars(value).values())
        else:
            functions.append(value)
    return any("exec" in getattr(getattr(function, "__code__", None), "co_names", ()) for function in functions)


# Whether the hook can work here: its caller's frame readable, and `dataclasses` calling `exec` by name.
HOOKABLE: bool = getattr(sys, "_getframe", None) is not None and _dataclasses_call_exec()


def cache_file() -> Optional[Path]:
    """Where the kept code lives: beside this module's own bytecode (`sys.pycache_prefix`
    honoured), one file per interpreter; None where Python keeps no bytecode."""
    try:
        bytecode = importlib.util.cache_from_source(__file__)
    except NotImplementedError:  # sys.implementation.cache_tag is None
        return None
    optimized = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""  # -O removes asserts
    return Path(bytecode).with_name(f"dataclasses-code.{sys.implementation.cache_tag}{optimized}.marshal")


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """`with cached(): import libcst`: the dataclasses defined meanwhile reuse kept code."""
    path = cache_file() if HOOKABLE and process_wide() else None
    if path is None or not _lock.acquire(blocking=False):
        yield  # not here, no place for it, or another thread's import already holds the hook
        return
    try:
        if "exec" in vars(dataclasses):  # someone else's hook: leave it alone
            yield
            return
        cache = _Cache(_read(path))
        dataclasses.exec = cache.exec
        try:
            yield
        finally:
            del dataclasses.exec
        if cache.missed and not sys.dont_write_bytecode:
            _write(path, cache.to_keep())
    finally:
        _lock.release()


class _Cache:
    """The kept code of each text, and which texts this import asked for."""

    def __init__(self, kept: dict[Key, CodeType]) -> None:
        self.kept = kept
        self.used: dict[Key, CodeType] = {}
        self.missed = False

    def to_keep(self) -> dict[Key, CodeType]:
        """What the file should hold after an import that compiled something."""
        unused = len(self.kept.keys() - self.used.keys())
        return self.used if unused > len(self.used) else {**self.kept, **self.used}

    def exec(self, source, globals=None, locals=None, /) -> None:
        """`exec` as `dataclasses` calls it: a text, its globals and a namespace."""
        caller = sys._getframe(1)
        if globals is None:  # the built-in runs it in its caller's namespaces
            globals = caller.f_globals
            locals = caller.f_locals if locals is None else locals
        if type(source) is not str:
            return builtins.exec(source, globals, locals)
        # the built-in compiles a text with its caller's `from __future__` features
        key = (caller.f_code.co_flags & _FUTURE_FEATURES, source)
        code = self.used.get(key) or self.kept.get(key)
        if type(code) is not CodeType:  # not kept (or a damaged entry)
            code = compile(source, _FILENAME, "exec", key[0], dont_inherit=True)
            self.missed = True
        self.used[key] = code
        builtins.exec(code, globals, locals)


def _dumps(codes: dict[Key, CodeType]) -> bytes:
    """The file's bytes: the interpreter's bytecode magic number, a CRC-32 of the rest, then
    the marshalled code."""
    payload = marshal.dumps(codes)
    return importlib.util.MAGIC_NUMBER + zlib.crc32(payload).to_bytes(4, "big") + payload


def _loads(data: bytes) -> dict[Key, CodeType]:
    """The kept code of a file's bytes; empty unless its magic number and checksum hold.

    The checksum is checked before anything is unmarshalled: marshalled code is not
    checked by Python when it runs, so a damaged byte could make an invalid opcode
    (what a disk or a copy can do). Any damage is thus a cache with nothing in it,
    and the file is rewritten on leaving. (CRC-32 finds every error of up to 32
    bits in a row, and `zlib` imports much faster than `hashlib`.)
    """
    magic = importlib.util.MAGIC_NUMBER
    header = len(magic) + 4
    if len(data) < header or data[: len(magic)] != magic:
        return {}
    payload = data[header:]
    if zlib.crc32(payload) != int.from_bytes(data[len(magic) : header], "big"):
        return {}
    try:
        codes = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return {}
    if type(codes) is not dict:
        return {}
    return codes


def _read(path: Path) -> dict[Key, CodeType]:
    """The kept code, or nothing: only a regular file is read (a FIFO put in its place
    would wait forever), opened without waiting and checked again once open."""
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return {}
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return {}
            return _loads(handle.read())
    except OSError:
        return {}


def _write(path: Path, codes: dict[Key, CodeType]) -> None:
    import tempfile  # only a run that changed the cache pays its import

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(_dumps(codes))
            os.chmod(temporary, os.stat(__file__).st_mode & 0o666)  # as importlib does for bytecode
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass  # an unwritable folder keeps no cache
