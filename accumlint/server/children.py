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
blocking its loop and reaps the child.

Where `os.fork` is missing, or where ACCUMLINT_START_METHOD is `spawn`
(`accumlint.check.workers.start_method`), the child is a fresh interpreter
instead (`serve_spawned`): it is handed the pickled function (by name) and
arguments on its standard input and answers on its standard output, as a
forked child does on its pipe. It leads a session of its own where the
platform has them, so cancelling kills it with what it started; elsewhere it
is killed alone, and the analysis worker it started ends when its input does.

A child is ended with its whole process group (SIGKILL), and its owner waits
until no process of that group is left, not only for the child itself: the
child's analysis workers are its own children, killed with it but reaped by
whoever adopts them, and a worker that holds a big file's tree takes a while
to die. Whoever shuts the server down (or supersedes a text) may count on
every process that worked for it being gone when it is told so. Should the
server itself be killed outright, a child ends as soon as nobody can read its
answer any more (`end_with_owner`), and its workers with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import struct
import sys
import time
import traceback
from typing import Any, Callable

from accumlint.check.workers import end_with_owner, python_command, start_method

_LENGTH = struct.Struct("!Q")
# The longest an owner waits for a killed child's process group to be gone (seconds).
GROUP_EXIT_WAIT = 10.0
# How often it looks meanwhile (seconds).
_GROUP_POLL = 0.005
# Process groups of the children still running (killed when the server ends).
_running: set[int] = set()
# Spawned children still running (killed when the server ends).
_spawned: set["asyncio.subprocess.Process"] = set()


class ChildFailed(Exception):
    """The child's function raised, or the child died before it answered."""


def _child(function: Callable[..., Any], args: tuple, write_fd: int) -> None:
    """In the forked child: run, send the outcome, exit without running the parent's exit handlers."""
    status = 0
    try:
        os.setpgid(0, 0)
        end_with_owner(write_fd)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)  # never read the protocol's input, never write into its output
        os.dup2(devnull, 1)
        _answer(function, args, write_fd)
    except BaseException:  # noqa: BLE001 - a child never returns into the server's code
        status = 1
    finally:
        os._exit(status)


def _answer(function: Callable[..., Any], args: tuple, write_fd: int) -> None:
    """Run `function(*args)` and write its outcome, pickled and length-prefixed, to `write_fd`."""
    try:
        outcome = (True, function(*args))
    except BaseException as error:  # noqa: BLE001 - everything is reported to the parent
        outcome = (False, "".join(traceback.format_exception_only(type(error), error)).strip()
                   + "\n" + traceback.format_exc())
    data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(write_fd, view):]


def serve_spawned() -> None:
    """In a spawned child: read the pickled (function, args) to the end of standard input,
    answer on what was standard output (pointed at the null device, as standard input is,
    while the function runs), exit."""
    status = 0
    try:
        request = sys.stdin.buffer.read()
        answer_fd = os.dup(1)
        end_with_owner(answer_fd)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        function, args = pickle.loads(request)
        _answer(function, args, answer_fd)
    except BaseException:  # noqa: BLE001 - the parent reports a child that did not answer
        status = 1
    finally:
        os._exit(status)


async def run_in_child(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)` in a forked child; cancelling the awaiting task kills the child at once.

    Raises ChildFailed when the function raised or the child died."""
    if start_method() == "spawn":
        return _outcome(await _run_spawned(function, args))
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
            with contextlib.suppress(BaseException):  # cancelled again: the kill is sent all the same
                await _group_ended(pid)
        _running.discard(pid)
        _reap(loop, pid)
    return _outcome(bytes(received))


def _outcome(received: bytes) -> Any:
    """The function's value from the child's answer; ChildFailed when it raised or did not answer."""
    if len(received) < _LENGTH.size or len(received) != _LENGTH.size + _LENGTH.unpack_from(received)[0]:
        raise ChildFailed("the analysis process ended without an answer")
    ok, value = pickle.loads(received[_LENGTH.size:])
    if not ok:
        raise ChildFailed(value)
    return value


async def _run_spawned(function: Callable[..., Any], args: tuple) -> bytes:
    """The answer of a spawned child running `function(*args)`; killed at once when cancelled."""
    request = pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL)
    process = await asyncio.create_subprocess_exec(
        *python_command(__name__, serve_spawned.__name__),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        start_new_session=_leads_group(),
    )
    _spawned.add(process)
    try:
        received, _ = await process.communicate(request)
    except BaseException:  # cancelled (superseded, or the server is stopping)
        _kill_spawned(process)
        with contextlib.suppress(BaseException):
            await process.wait()  # killed: at once; its pipes are closed with it
            if _leads_group():
                await _group_ended(process.pid)
        raise
    finally:
        _spawned.discard(process)
    return received


def _leads_group() -> bool:
    """Whether a spawned child leads a session (and process group) of its own: where the
    platform has them."""
    return hasattr(os, "setsid") and hasattr(os, "killpg")


def _kill_spawned(process: "asyncio.subprocess.Process") -> None:
    """End a spawned child and, where it leads a session, everything it started."""
    if process.returncode is not None:
        return
    try:
        if _leads_group():
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:
        pass


def kill(pid: int) -> None:
    """End a forked child and everything it started."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
            return
        except OSError:
            continue


def _group_left(pgid: int) -> bool:
    """Whether a process of the group `pgid` is still there (a zombie counts until it is
    reaped). Reaps those of them that are this process's own children: the killed child,
    and its workers where this process adopted them (a subreaper, or the system's first
    process)."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return False  # not ours to ask about: nothing to wait for
    return True


async def _group_ended(pgid: int) -> None:
    """Wait (without holding up the event loop) until no process of the killed group
    `pgid` is left, for at most GROUP_EXIT_WAIT seconds."""
    deadline = asyncio.get_running_loop().time() + GROUP_EXIT_WAIT
    while _group_left(pgid) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(_GROUP_POLL)


def _wait_group_ended(pgid: int) -> None:
    """Wait until no process of the killed group `pgid` is left, for at most GROUP_EXIT_WAIT seconds."""
    deadline = time.monotonic() + GROUP_EXIT_WAIT
    while _group_left(pgid) and time.monotonic() < deadline:
        time.sleep(_GROUP_POLL)


def _reap(loop: asyncio.AbstractEventLoop, pid: int) -> None:
    """Collect the child's exit status once it has one (at once, or when it has exited)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return
    if done == 0:
        loop.call_later(0.05, _reap, loop, pid)


def kill_all() -> None:
    """End every child still running, with everything it started, and return when they
    are all gone (the server is stopping)."""
    groups = []
    for process in list(_spawned):
        _kill_spawned(process)
        if hasattr(os, "waitpid") and hasattr(os, "WNOHANG") and process.returncode is None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(process.pid, 0)
        if _leads_group():
            groups.append(process.pid)
        _spawned.discard(process)
    for pid in list(_running):
        kill(pid)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        groups.append(pid)
        _running.discard(pid)
    for pgid in groups:
        _wait_group_ended(pgid)
