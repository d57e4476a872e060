"""What native code writes to standard error, silenced inside a check's workers.

LibCST's parser is native code: when it dies (an allocation failure, a stack
overflow) it prints to file descriptor 2 before the process ends. In a worker that
text would reach the user's terminal beside the parent's own report of the same
death, so the parse runs with descriptor 2 pointed at the null device there. The
check's worker pool (a later stage) sets `in_worker`; this module imports nothing of
accumlint.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

# Whether this process is one of the check's workers (set by `accumlint.check.workers`
# when a worker's life begins).
in_worker = False


@contextlib.contextmanager
def native_errors_silenced() -> Iterator[None]:
    """In a worker, send what native code writes to standard error nowhere while the
    block runs: what it prints as it dies (the Rust parser's "memory allocation of N
    bytes failed" and its backtrace) would reach the user's terminal, and the parent
    reports that death once, as the file's error. Elsewhere (the run's own process, an
    editor's server) standard error is left alone."""
    if not in_worker:
        yield
        return
    try:
        kept = os.dup(2)
    except OSError:
        yield
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        yield
    finally:
        os.dup2(kept, 2)
        os.close(kept)
