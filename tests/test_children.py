"""The editor server's child processes: an answer, a failure, a cancellation, on both start methods."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest

from accumlint.server import children
from owners import MARKER_VARIABLE, gone, survives_its_owner_killed


@pytest.fixture(autouse=True, params=["fork", "spawn"])
def method(request, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ACCUMLINT_START_METHOD", request.param)
    return request.param


def _pid_plus(number: int) -> tuple[int, int]:
    return os.getpid(), number + 1


def _fail(message: str) -> None:
    raise ValueError(message)


def _sleep_then_write(path: str) -> None:
    with open(path, "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(60)


def _slow_item(path: str) -> int:
    """A worker's item that never ends, in a process holding enough memory that it takes a
    moment to die once killed; says its process id in `path`."""
    ballast = b"x" * (64 << 20)
    with open(path, "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(60)
    return len(ballast)


def _pool_with_a_slow_item(path: str) -> None:
    """A child's work as the server's is: a worker pool, here running one item that never ends."""
    from accumlint.check.workers import WorkerPool

    with WorkerPool(1, _slow_item, 600.0) as pool:
        list(pool.map([path]))


async def _written_pid(marker: Path) -> int:
    while not marker.exists() or not marker.read_text():
        await asyncio.sleep(0.05)
    return int(marker.read_text())


def test_the_childs_answer_comes_back():
    pid, value = asyncio.run(children.run_in_child(_pid_plus, 41))
    assert value == 42 and pid != os.getpid()


def test_an_exception_in_the_child_is_a_child_failed_with_its_description():
    with pytest.raises(children.ChildFailed, match="ValueError: no such thing"):
        asyncio.run(children.run_in_child(_fail, "no such thing"))


def test_cancelling_the_awaiting_task_kills_the_child(tmp_path):
    marker = tmp_path / "pid"

    async def body() -> int:
        task = asyncio.ensure_future(children.run_in_child(_sleep_then_write, str(marker)))
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return int(marker.read_text())

    pid = asyncio.run(body())
    deadline = time.monotonic() + 30  # killed at once; reaped by the event loop's watcher meanwhile
    while not gone(pid) and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    assert gone(pid) or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def test_where_fork_is_missing_the_child_is_spawned(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ACCUMLINT_START_METHOD")
    monkeypatch.delattr(os, "fork")
    pid, value = asyncio.run(children.run_in_child(_pid_plus, 1))
    assert value == 2 and pid != os.getpid()



@pytest.mark.parametrize("ending", ["superseded", "server stopping"])
def test_a_child_is_ended_only_once_its_workers_are_gone_too(tmp_path, ending: str):
    """A cancelled run (its text superseded) is over, and the server's `kill_all` (it is
    stopping) returns, only when no process the child started is left, reaped included."""
    marker = tmp_path / "pid"

    async def body() -> bool:
        task = asyncio.ensure_future(children.run_in_child(_pool_with_a_slow_item, str(marker)))
        worker = await _written_pid(marker)
        if ending == "server stopping":
            children.kill_all()
            ended = gone(worker)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, children.ChildFailed):
            await task
        if ending == "superseded":
            ended = gone(worker)
        return ended

    assert asyncio.run(body())


def _server_with_a_slow_child() -> None:
    """A server's part (in a process of its own): a child whose worker runs an item that lasts
    a minute, after writing its pid in the file MARKER_VARIABLE names."""
    asyncio.run(children.run_in_child(_pool_with_a_slow_item, os.environ[MARKER_VARIABLE]))


def test_a_child_and_its_workers_end_with_the_server_killed_outright(tmp_path):
    assert not survives_its_owner_killed(__name__, _server_with_a_slow_child.__name__, tmp_path / "pid")
