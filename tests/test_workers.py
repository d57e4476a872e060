"""The worker pool: a crash, a hang or a memory blow-up costs one item, and no process outlives the pool."""

from __future__ import annotations

import os
import signal
import time

import pytest

from accumlint.check import workers
from accumlint.check.workers import CHUNK_ITEMS, NAP, WALL_FACTOR, Failure, WorkerPool, _death, _nap, start_method
from owners import MARKER_VARIABLE, gone, survives_its_owner_killed


@pytest.fixture(autouse=True, params=["fork", "spawn"])
def method(request, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with forked workers and with spawned ones (the path where fork is missing)."""
    monkeypatch.setenv("ACCUMLINT_START_METHOD", request.param)
    assert start_method() == request.param
    return request.param


def _work(item):
    """What the tests' workers do with an item: report their pid, or misbehave."""
    if item == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if item == "hang":
        time.sleep(60)
    if item == "hog":
        return len(bytearray(1 << 34))  # 16 GiB, far beyond the memory limit
    if item == "raise":
        raise ValueError("bad item")
    if item == "print":
        print("what the analysis prints never reaches the results", flush=True)
    return os.getpid()


def _write_pid_then_hang(path: str) -> None:
    with open(path, "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(60)


def _own_a_pool_with_a_slow_item() -> None:
    """A pool's owner (in a process of its own) whose one worker runs an item that does not
    end for a minute, after writing its pid in the file ACCUMLINT_TEST_MARKER names."""
    with WorkerPool(1, _write_pid_then_hang, 600.0) as pool:
        list(pool.map([os.environ[MARKER_VARIABLE]]))


def _run(items, size=2, budget=10.0, memory=None):
    with WorkerPool(size, _work, budget, memory) as pool:
        return dict(pool.map(items))


def test_results_come_back_for_every_item():
    results = _run(["a", "b", "c", "d", "e"])
    assert sorted(results) == [0, 1, 2, 3, 4]
    assert all(isinstance(pid, int) and pid != os.getpid() for pid in results.values())
    assert all(gone(pid) for pid in results.values())  # closed: killed and reaped


def test_a_crash_costs_only_its_item_and_the_worker_is_replaced():
    results = _run(["a", "crash", "b", "c"], size=1)
    assert isinstance(results[1], Failure) and "segmentation fault" in results[1].message
    pids = {results[0], results[2], results[3]}
    assert all(isinstance(pid, int) for pid in pids)
    assert results[0] != results[2]  # a fresh worker took over after the crash


def _spin(item):
    if item == "spin":
        while True:
            pass
    return os.getpid()


def test_an_item_past_its_cpu_budget_is_killed_and_reported():
    started = time.monotonic()
    with WorkerPool(2, _spin, 0.3) as pool:
        results = dict(pool.map(["spin", "a", "b"]))
    assert time.monotonic() - started < 3 * WALL_FACTOR * 0.3
    assert isinstance(results[0], Failure) and "per-file budget of 0.3 s" in results[0].message
    assert isinstance(results[1], int) and isinstance(results[2], int)


def test_a_waiting_item_is_ended_by_the_wall_time_limit():
    # sleeping uses no CPU: the wall-time cutoff (WALL_FACTOR times the budget) ends it
    started = time.monotonic()
    results = _run(["hang", "a"], size=2, budget=0.1)
    elapsed = time.monotonic() - started
    assert WALL_FACTOR * 0.1 <= elapsed < 10
    assert isinstance(results[0], Failure) and "per-file budget of 0.1 s" in results[0].message
    assert isinstance(results[1], int)


def test_memory_is_limited_per_worker():
    results = _run(["hog", "a"], size=1, memory=512 << 20)
    assert isinstance(results[0], Failure) and "MemoryError" in results[0].message
    assert isinstance(results[1], int)


def test_an_exception_in_the_function_is_a_failure_of_that_item():
    results = _run(["raise", "a"], size=1)
    assert isinstance(results[0], Failure) and "ValueError: bad item" in results[0].message
    assert isinstance(results[1], int)


def test_closing_early_ends_every_worker():
    pool = WorkerPool(2, _work, 10.0)
    items = pool.map(["a", "hang", "hang"])
    first = next(items)
    pids = [worker.pid for worker in pool._workers]
    pool.close()
    assert first[1] != os.getpid()
    assert pids and all(gone(pid) for pid in pids)


def test_a_worker_ends_with_its_pools_process_even_in_the_middle_of_an_item(tmp_path):
    """Killed outright, the pool's process closes nothing: its worker, in an item that lasts
    a minute, ends at once all the same (its task pipe has hung up)."""
    assert not survives_its_owner_killed(__name__, _own_a_pool_with_a_slow_item.__name__, tmp_path / "pid")


def _run_state_here(item) -> tuple:
    from accumlint.compat import process_wide
    from accumlint.project.root import checked_parent

    return checked_parent(), process_wide()


@pytest.mark.parametrize("kill_switch", ["", "1"])
def test_a_worker_starts_in_the_state_of_its_run(tmp_path, monkeypatch: pytest.MonkeyPatch, kill_switch: str):
    """Forked or spawned, a worker has the run's checked paths' parent, and the speed-ups
    on where the run's process has them on (unless the kill switch says otherwise)."""
    import accumlint.compat
    from accumlint.check.engine import RunState, enter_run
    from accumlint.project import root

    monkeypatch.setattr(accumlint.compat, "_process_wide", True)  # as in the check command
    monkeypatch.setenv(accumlint.compat.KILL_SWITCH, kill_switch)
    monkeypatch.setattr(root, "_checked_parent", None)
    root.set_checked_paths([str(tmp_path / "tools" / "train.py"), str(tmp_path / "src")])
    with WorkerPool(1, _run_state_here, 10.0, None, enter_run, (RunState.here(),)) as pool:
        [(_, state)] = pool.map(["a"])
    assert state == (str(tmp_path), not kill_switch)


def test_an_initializer_that_fails_is_said_of_each_item():
    with WorkerPool(1, _work, 10.0, None, _fail_to_start, ("no such run",)) as pool:
        results = dict(pool.map(["a", "b"]))
    assert all(isinstance(outcome, Failure) and "cannot start (ValueError: no such run)" in outcome.message
               for outcome in results.values())


def _fail_to_start(why: str) -> None:
    raise ValueError(why)


@pytest.mark.parametrize("size", [1, 3])
def test_no_items_no_workers(size):
    assert _run([], size=size) == {}


def _burn(item):
    """Spend `item` seconds of CPU (or spin forever on "spin"), then report the pid."""
    if item == "spin":
        while True:
            pass
    if isinstance(item, float):
        end = time.process_time() + item
        while time.process_time() < end:
            pass
    return os.getpid()


def _chunks(size: int, weights: list[int]) -> list[int]:
    """The chunk sizes a pool of `size` workers hands out, in order, for items of these weights."""
    from collections import deque

    pool = WorkerPool(size, _work, 10.0)
    pool._waiting_weight = sum(weights)
    waiting = deque(range(len(weights)))
    found = []
    while waiting:
        found.append(len(pool._chunk(waiting, weights)))
    return found


def test_a_worker_is_handed_a_share_of_the_items_at_once():
    assert _chunks(1, [1] * 100)[:3] == [CHUNK_ITEMS] * 3
    assert _chunks(1, [1] * 6) == [3, 1, 1, 1]  # half of what waits: a failure hands back little
    assert _chunks(4, [1] * 10)[0] == 1  # every worker gets some
    # the biggest first (as the engine orders files): a big one alone, then the small ones together
    assert _chunks(2, [1000, 400] + [1] * 100)[:3] == [1, 1, CHUNK_ITEMS]
    assert _chunks(2, [1000, 400, 10, 10]) == [1, 1, 1, 1]


def test_a_crash_inside_a_chunk_costs_only_its_item():
    items = ["a", "b", "crash", "c", "d", "e", "f", "g"]
    results = _run(items, size=1)
    assert isinstance(results[2], Failure) and "segmentation fault" in results[2].message
    assert all(isinstance(results[index], int) for index in range(len(items)) if index != 2)
    assert results[0] == results[1] != results[3]  # the rest of the chunk went to a fresh worker


def test_an_item_past_its_budget_inside_a_chunk_costs_only_itself():
    with WorkerPool(1, _burn, 0.3) as pool:
        results = dict(pool.map(["a", "spin", "b", "c", "d", "e"]))
    assert isinstance(results[1], Failure) and "per-file budget of 0.3 s" in results[1].message
    assert all(isinstance(results[index], int) for index in (0, 2, 3, 4, 5))


def test_each_item_of_a_chunk_has_a_budget_of_its_own():
    """Four items of 0.2 s each in one chunk, under a budget of 0.35 s: the budget counts
    from the result before each, not from when the chunk was handed over."""
    with WorkerPool(1, _burn, 0.35) as pool:
        results = dict(pool.map([0.2] * 8))
    assert all(isinstance(pid, int) for pid in results.values()) and len(set(results.values())) == 1


class _Busy:
    """What `_nap` reads of a worker: its queue (the running item first) and its last item's CPU time."""

    def __init__(self, queued: int, item_seconds: float) -> None:
        self.queue = list(range(queued))
        self.item_seconds = item_seconds


def test_the_parent_naps_only_while_every_busy_worker_has_items_left_behind_the_running_one():
    assert _nap([_Busy(16, 0.01)]) == pytest.approx(min(NAP, 15 * 0.01 / 2))
    assert _nap([_Busy(3, 0.001)]) == pytest.approx(0.001)  # less than the two items left would take
    assert _nap([_Busy(16, 1.0)]) == NAP
    assert _nap([_Busy(16, 0.01), _Busy(1, 0.01)]) == 0.0  # a worker on its last item wants a chunk soon
    assert _nap([_Busy(16, 0.0)]) == 0.0  # no item done yet: nothing to go by


def test_results_that_wait_together_are_all_read_after_one_wake_up(monkeypatch: pytest.MonkeyPatch, method: str):
    """One long nap at the start: every result of the first chunk is waiting when the parent
    looks, and all of them are read before it waits again."""
    first_chunk = 8  # half of what waits
    naps = iter([0.5])

    def nap(busy):
        if method == "spawn":  # a fresh interpreter's start takes long: the first nap lasts until the chunk is answered
            if next(naps, None) is None:
                return 0.0
            (worker,) = busy
            with worker.arrived:
                worker.arrived.wait_for(lambda: sum(type(m) is tuple for m in worker.inbox) >= first_chunk, 60)
            return 0.0
        return next(naps, 0.0)

    monkeypatch.setattr(workers, "_nap", nap)
    real_ready = WorkerPool._ready
    read_between_waits = [0]

    def counted(self, busy, timeout):
        read_between_waits.append(0)
        return real_ready(self, busy, timeout)

    monkeypatch.setattr(WorkerPool, "_ready", counted)
    with WorkerPool(1, _work, 10.0) as pool:
        for _ in pool.map(["a"] * 16, [1] * 16):
            read_between_waits[-1] += 1
    assert read_between_waits[:2] == [0, first_chunk] and sum(read_between_waits) == 16


def _burn_then_crash(item):
    if item == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return _burn(item)


def test_results_waiting_before_a_crash_are_all_kept():
    items = [0.02] * 6 + ["crash"] + [0.02] * 3
    with WorkerPool(1, _burn_then_crash, 10.0) as pool:
        results = dict(pool.map(items, [1] * len(items)))
    assert isinstance(results[6], Failure) and "segmentation fault" in results[6].message
    assert all(isinstance(results[index], int) for index in range(len(items)) if index != 6)
    assert len({results[index] for index in range(6)}) == 1 and results[0] != results[7]


def test_what_a_worker_prints_does_not_disturb_the_results():
    results = _run(["print", "a", "print"], size=1)
    assert all(isinstance(pid, int) for pid in results.values())


def test_where_fork_is_missing_workers_are_spawned(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ACCUMLINT_START_METHOD")
    assert start_method() == "fork"
    monkeypatch.setenv("ACCUMLINT_START_METHOD", "threads")  # not a method: the automatic choice
    assert start_method() == "fork"
    monkeypatch.delattr(os, "fork")
    assert start_method() == "spawn"
    with WorkerPool(2, _work, 10.0) as pool:
        results = dict(pool.map(["a", "crash", "b"]))
        assert pool._workers and all(isinstance(worker, workers._SpawnedWorker) for worker in pool._workers)
    assert isinstance(results[0], int) and isinstance(results[2], int) and results[0] != os.getpid()
    assert isinstance(results[1], Failure) and "segmentation fault" in results[1].message


def test_a_spawned_worker_that_cannot_load_its_function_fails_each_item_saying_so(
    monkeypatch: pytest.MonkeyPatch, method: str
):
    import sys
    import types

    if method == "fork":
        pytest.skip("a forked worker has the function already")
    module = types.ModuleType("accumlint_test_not_on_disk")
    exec("import os\ndef work(item):\n    return os.getpid()\n", module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with WorkerPool(1, module.work, 10.0) as pool:  # closed: no listening thread outlives the test
        results = dict(pool.map(["a", "b"]))
    assert all(isinstance(outcome, Failure) and "cannot load its function" in outcome.message
               and "accumlint_test_not_on_disk" in outcome.message for outcome in results.values())


@pytest.mark.parametrize(
    "code, said",
    [(-11, "segmentation fault"), (-9, "SIGKILL"), (3, "exited with status 3"),
     (0xC00000FD, "stack overflow")],  # Windows' exit code of a stack overflow
)
def test_an_exit_code_is_said_in_a_users_words(code, said):
    assert said in _death(code)
