"""Ending accumlint's own command at once, without the interpreter's teardown.

The interpreter's normal exit frees every module and object one by one
(README, "Speed", gives its share of a check), for a process that is ending
anyway (a pre-commit hook pays it on every commit). `exit_now` runs the exit
handlers (`atexit._run_exitfuncs`, private) and ends the process with
`os._exit`. It declines (returns, and the caller exits as usual) where that
would lose something: the kill switch, no `atexit._run_exitfuncs`, a tracer or
profiler (`sys.settrace`, `sys.setprofile`, a `sys.monitoring` tool: coverage
and cProfile write their data at the normal exit), and a `__main__` that is not
the entry point's own (`python -m cProfile -m accumlint.cli`, a script that
calls it).
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Callable

from accumlint.compat import speedups_allowed


def may_exit_now(entry_point: Callable[[], None]) -> bool:
    """Whether the process may end at once from `entry_point`, the console script's function:
    `__main__` runs it (the console script, `python -m accumlint`, `python -m accumlint.cli`)
    and nothing watches the process."""
    if not speedups_allowed() or not callable(getattr(atexit, "_run_exitfuncs", None)):
        return False
    if sys.gettrace() is not None or sys.getprofile() is not None or _monitored():
        return False
    main = sys.modules.get("__main__")
    return main is not None and getattr(main, entry_point.__name__, None) is entry_point


def _monitored() -> bool:
    """Whether a `sys.monitoring` tool (Python 3.12+: coverage, cProfile, a debugger) is registered."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return False
    return any(monitoring.get_tool(tool) is not None for tool in range(6))


def exit_now(status: int) -> None:
    """Run the exit handlers, then end the process with `status`, skipping the teardown."""
    atexit._run_exitfuncs()
    os._exit(status)
