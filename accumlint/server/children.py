"""Work that needs an analysis runs in a forked child process, never on the server's event loop.

An analysis of a big file takes seconds; run on the loop, it would hold up
every request (a hover, a code action, `shutdown`) until it ends. A thread
would not do either: the analysis holds the GIL, and a thread cannot be
stopped when its text is superseded. A forked child costs a millisecond to
start, shares the already imported modules, and is ended at once: it leads
a process group of its own (the engine's analysis worker it starts belongs
to it), and cancelling the coroutine that awaits it kills that group.

The child sends back its function's pickled result (or the exception's
description) on a pipe and exits; the parent reads the pipe without
blocking its loop and reaps the child. POSIX only, as the engine's workers.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import struct
import traceback
from typing import Any, Callable

_LENGTH = struct.Struct("!Q")
# Process groups of the children still running (killed when the server ends).
_running: set[int] = set()


class ChildFailed(Exception):
    """The child's function raised, or the child died before it answered."""


def _child(function: Callable[..., Any], args: tuple, write_fd: int) -> None:
    """In the child: run, send the outcome, exit without running the parent's exit handlers."""
    status = 0
    try:
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)  # never read the protocol's input, never write into its output
        os.dup2(devnull, 1)
        try:
            outcome = (True, function(*args))
        except BaseException as error:  # noqa: BLE001 - everything is reported to the parent
            outcome = (False, "".join(traceback.format_exception_only(type(error), error)).strip()
                       + "\n" + traceback.format_exc())
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_LENGTH.pack(len(data)) + data)
        while view:
            view = view[os.write(write_fd, view):]
    except BaseException:  # noqa: BLE001 - a child never returns into the server's code
        status = 1
    finally:
        os._exit(status)


async def run_in_child(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)` in a forked child; cancelling the awaiting task kills the child at once.

    Raises ChildFailed when the function raised or the child died."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(function, args, write_fd)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)  # also done by the child: whichever runs first
    except OSError:
        pass
    _running.add(pid)
    received = bytearray()
    finished: asyncio.Future = loop.create_future()

    def readable() -> None:
        try:
            chunk = os.read(read_fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError as error:
            chunk = b""
            if not finished.done():
                finished.set_exception(ChildFailed(f"cannot read the analysis process's answer: {error}"))
        if chunk:
            received.extend(chunk)
        elif not finished.done():
            finished.set_result(None)

    os.set_blocking(read_fd, False)
    loop.add_reader(read_fd, readable)
    answered = False
    try:
        await finished
        answered = True
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)
        if not answered:  # cancelled (superseded, or the server is stopping), or unreadable
            kill(pid)
        _running.discard(pid)
        _reap(loop, pid)
    if len(received) < _LENGTH.size or len(received) != _LENGTH.size + _LENGTH.unpack_from(received)[0]:
        raise ChildFailed("the analysis process ended without an answer")
    ok, value = pickle.loads(bytes(received[_LENGTH.size:]))
    if not ok:
        raise ChildFailed(value)
    return value


def kill(pid: int) -> None:
    """End a child and everything it started."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
            return
        except OSError:
            continue


def _reap(loop: asyncio.AbstractEventLoop, pid: int) -> None:
    """Collect the child's exit status once it has one (at once, or when it has exited)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return
    if done == 0:
        loop.call_later(0.05, _reap, loop, pid)


def kill_all() -> None:
    """End every child still running and reap them (the server is stopping)."""
    for pid in list(_running):
        kill(pid)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        _running.discard(pid)
