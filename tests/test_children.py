"""The editor server's child processes: an answer, a failure, a cancellation, on both start methods."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from accumlint.server import children


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


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


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
    while not _gone(pid) and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    assert _gone(pid) or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def test_where_fork_is_missing_the_child_is_spawned(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ACCUMLINT_START_METHOD")
    monkeypatch.delattr(os, "fork")
    pid, value = asyncio.run(children.run_in_child(_pid_plus, 1))
    assert value == 2 and pid != os.getpid()
