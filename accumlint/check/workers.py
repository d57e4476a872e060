"""Worker processes that run one file's analysis each and cannot take the run down.

LibCST's native parser can crash its process (a stack overflow on a long
boolean chain), a bug in the model can loop or recurse without end, and a
huge file can take gigabytes. So no analysis runs in the process that holds
the run's results: each file is analysed in a forked worker, under a time
budget and a memory limit. The budget counts the worker's CPU time where the
system tells it (a busy machine must not fail big files), and wall time up to
WALL_FACTOR times the budget in any case (a worker that waits forever). A worker that crashes, is killed, or runs past the
budget costs exactly that one file, which gets a `Failure` naming what
happened; a fresh worker takes its place. When the pool closes (normally, on
an exception, or on a signal turned into one) every worker is killed and
reaped: no process outlives the run. Nor one whose run was killed outright
(`end_with_owner`): a worker ends as soon as its task pipe hangs up.

Plain `os.fork` and pipes, not `multiprocessing`: importing that costs more
than the whole of a small check. A worker is handed its items a few at a
time (`_chunk`), in one message, and sends each result back as soon as it
has it: a round trip per file (the worker waiting for the parent, then the
parent for the worker) would cost system time and context switches. Each result carries the worker's CPU time, so the
budget of the item it starts next counts from there; a worker that dies or
runs past the budget costs the item it was running, and the rest of its
chunk goes to a fresh worker.

Nor does the parent wake for every result: while each busy worker has more
than its running item left, none of them will need a chunk soon, so the
parent naps (`_nap`: at most NAP seconds, and less than the items left would
take) and then reads every result waiting. Each wake-up costs both processes
system time (on this project's machines, about as much as a small file's
analysis); a nap never leaves a worker without work, since a worker on its
last item is waited for as before.

Where `os.fork` is missing (Windows), or where the environment variable
ACCUMLINT_START_METHOD is `spawn` (to test that path on Linux), each worker is
a fresh interpreter instead (`python_command`), speaking the same protocol on
its standard input and output; its `Start` (function, memory budget,
initializer) is pickled, the functions by name. Both kinds call the
initializer first, so that a spawned worker starts in the state a forked one
inherits. A spawned worker keeps every guarantee the platform allows: a crash
costs one item, and
the pool kills and reaps it on close; the budget counts CPU time where /proc
tells it (elsewhere wall time), and the memory limit holds where
`resource` can set one. A thread per spawned worker reads its results (a pipe
cannot be waited on with `select` on Windows), and the pool waits on them all
at once.
"""

from __future__ import annotations

import faulthandler
import functools
import json
import os
import pickle
import select
import signal
import struct
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Optional, Sequence, Union, cast

from accumlint.source import native

if TYPE_CHECKING:
    import subprocess
    import threading

_HEADER = struct.Struct("!Q")
# The most items a worker is handed at once.
CHUNK_ITEMS = 16
# The longest the parent naps before it reads the results waiting (seconds).
NAP = 0.1
# However little CPU it gets, an item ends after this many times its budget in wall time.
WALL_FACTOR = 10
# The longest a spawned worker may take to start (seconds), beside its first item's own limits.
SPAWN_WAIT = 60.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Names how worker processes start: "fork" or "spawn" (where fork exists, fork unless this says spawn).
START_METHOD_VARIABLE = "ACCUMLINT_START_METHOD"
# Windows' exit codes of a process that crashed (NTSTATUS), in a user's words.
_WINDOWS_CRASHES = {
    0xC00000FD: "it crashed (stack overflow, usually in LibCST's parser on very deep code)",
    0xC0000005: "it crashed (access violation)",
    0xC0000017: "it ran out of memory",
}


def start_method() -> str:
    """How worker processes start: "fork" where `os.fork` exists, unless the environment
    variable ACCUMLINT_START_METHOD says "spawn"; "spawn" (a fresh interpreter) elsewhere.
    Any other value of the variable leaves the automatic choice."""
    if not hasattr(os, "fork"):
        return "spawn"
    return "spawn" if os.environ.get(START_METHOD_VARIABLE, "").strip().lower() == "spawn" else "fork"


def python_command(module: str, function: str) -> list[str]:
    """The command line of a fresh interpreter that calls `module.function()` with this
    process's `sys.path` (so that what this process imports by name, it imports too)."""
    boot = f"import json, sys; sys.path[:] = json.loads(sys.argv[1]); from {module} import {function}; {function}()"
    return [sys.executable, "-c", boot, json.dumps(sys.path)]


class Failure(NamedTuple):
    """Why one item has no result (the worker died, or ran past the budget)."""

    message: str


class Start(NamedTuple):
    """What a worker's life is made of: its function, its memory budget, and what it calls
    before its first item (`initializer(*initargs)`, when given), so that a spawned worker,
    which inherits nothing, and a forked one, which inherits everything, start in the same
    state. A spawned worker is handed it pickled (its functions by name)."""

    function: Callable[[Any], Any]
    memory: Optional[int] = None
    initializer: Optional[Callable[..., None]] = None
    initargs: tuple = ()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _death(code: int) -> str:
    """What a worker's exit code says (negative: the signal that ended it), in a user's words."""
    if code < 0:
        number = -code
        why = {
            signal.SIGSEGV: "it crashed (segmentation fault, usually a stack overflow in LibCST's parser on very deep code)",
            signal.SIGKILL: "it was killed (SIGKILL, usually the system running out of memory)",
            signal.SIGABRT: "it aborted (SIGABRT, usually a failed memory allocation)",
        }.get(number, f"it was ended by {_signal_name(number)}")
        return f"the analysis process failed on this file: {why}"
    why = _WINDOWS_CRASHES.get(code & 0xFFFFFFFF, f"it exited with status {code}")
    return f"the analysis process failed on this file: {why}"


def _write_message(fd: int, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_message(fd: int) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return pickle.loads(_read_exactly(fd, size))


def _readable(fd: int) -> bool:
    """Whether reading `fd` would not block (a result, or the end of a dead worker's pipe)."""
    return bool(select.select([fd], [], [], 0)[0])


def _nap(busy: Iterable["_Worker"]) -> float:
    """How long the parent may wait before reading results: zero when a busy worker runs
    its last item (it will want a chunk), else less than the items left behind the
    running ones would take (at the pace of each worker's last item), at most NAP."""
    nap = NAP
    for worker in busy:
        behind = len(worker.queue) - 1
        if behind < 1:
            return 0.0
        nap = min(nap, behind * worker.item_seconds / 2)
    return nap


def _limit_memory(budget: Optional[int]) -> None:
    """Cap the worker's address space at what it has now plus `budget` bytes."""
    if not budget:
        return
    try:
        import resource

        with open("/proc/self/statm") as handle:
            current = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = current + budget
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        pass  # no limit where the platform cannot say how much is in use


def _serve(tasks: int, results: int, start: Start) -> None:
    """The worker's life: start (`Start`), then read an item, send back its result, until
    the pool closes the pipe. An initializer that fails is said of every item."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent decides
    for name in ("SIGTERM", "SIGHUP"):  # the parent's handlers raise into the parent's code
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    faulthandler.disable()  # a crash is reported once, by the parent, as that file's error
    native.in_worker = True
    end_with_owner(tasks)  # before the memory limit: the watching thread's stack counts as in use
    function = start.function
    if start.initializer is not None:
        try:
            start.initializer(*start.initargs)
        except Exception as error:  # noqa: BLE001 - said of every item, by the parent, once each
            function = functools.partial(_cannot_start, f"cannot start ({type(error).__name__}: {error})")
    _limit_memory(start.memory)
    while True:
        try:
            chunk = _read_message(tasks)
        except (EOFError, OSError):
            return
        for index, item in chunk:
            try:
                result = function(item)
            except BaseException as error:  # noqa: BLE001 - reported as that item's failure
                result = Failure(f"internal error while checking this file: {type(error).__name__}: {error}")
            used = _own_cpu_seconds()
            try:
                _write_message(results, (index, result, used))
            except (pickle.PicklingError, TypeError, AttributeError) as error:
                _write_message(results, (index, Failure(f"internal error: result cannot be sent back ({error})"), used))
            except OSError:
                return


def end_with_owner(pipe: int) -> None:
    """End this process as soon as its owner's end of `pipe` is closed, even in the middle
    of its work: the owner closed it, or died (killed outright, it kills nothing it
    started). `pipe` is the end this process holds: the read end of what its owner writes
    (nothing can write any more: hang-up), or the write end of what its owner reads
    (nothing can read any more: an error). A thread waits for that without reading or
    writing. Where the platform cannot `poll` a pipe, the process ends when it next uses it."""
    if not hasattr(select, "poll"):
        return
    import threading

    def watch() -> None:
        poller = select.poll()
        poller.register(pipe, 0)  # hang-up and errors are reported whatever is asked for
        while True:
            if any(event & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, event in poller.poll()):
                os._exit(0)

    threading.Thread(target=watch, name="accumlint-owner-watch", daemon=True).start()


def _own_cpu_seconds() -> float:
    """This process's CPU time, user + system (what /proc/PID/stat tells its parent)."""
    times = os.times()
    return times.user + times.system



def serve_spawned() -> None:
    """A spawned worker's life (`python_command`): the first message on standard input
    is its `Start`, then it serves as a forked worker does, with
    its results on what was standard output (what the analysis prints goes to standard
    error instead, never into the results)."""
    tasks, results = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    status = 0
    try:
        try:
            start: Start = _read_message(tasks)
        except (EOFError, OSError):
            return
        except Exception as error:  # noqa: BLE001 - said of every item, by the parent, once each
            why = f"cannot load its function ({type(error).__name__}: {error})"
            start = Start(functools.partial(_cannot_start, why))
        _write_message(results, _Started(_own_cpu_seconds()))
        _serve(tasks, results, start)
    except BaseException:  # noqa: BLE001 - a worker must end here, whatever happens
        status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        os._exit(status)


class _Started(NamedTuple):
    """A spawned worker's first message: it has started, after this much CPU time (which
    its first item's budget does not count)."""

    cpu_seconds: float


def _cannot_start(why: str, item: Any) -> "Failure":
    return Failure(f"internal error: the analysis process {why}")


class _Worker:
    """One worker process and the items it holds (the running one first)."""

    pid: int

    def __init__(self) -> None:
        self.queue: deque[int] = deque()  # the items given and not yet answered, the running one first
        self.deadline = 0.0
        self.cutoff = 0.0  # the wall-time limit
        self.cpu_at_start: Optional[float] = None
        self.item_seconds = 0.0  # the CPU time its last item took

    def send(self, chunk: list[tuple[int, Any]]) -> None:
        raise NotImplementedError

    def receive(self) -> tuple[int, Any, float]:
        """The next result (index, result, CPU seconds); EOFError or OSError when the worker died."""
        raise NotImplementedError

    def waiting(self) -> bool:
        """Whether another result (or the worker's end) can be received without waiting."""
        raise NotImplementedError

    def stop(self) -> int:
        """Kill the process (if it still runs), reap it and close its pipes; its exit code
        (negative: the signal that ended it)."""
        raise NotImplementedError

    def cpu_seconds(self) -> Optional[float]:
        """CPU time the process has used (user + system), or None where /proc cannot say."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            return None

    @property
    def index(self) -> Optional[int]:
        """The item the worker runs now."""
        return self.queue[0] if self.queue else None

    def give(self, chunk: list[tuple[int, Any]], budget: float) -> None:
        self.send(chunk)
        self.queue.extend(index for index, _ in chunk)
        self._start(budget, self.cpu_seconds())

    def answered(self, cpu_seconds: float, budget: float) -> None:
        """The running item's result came; the next one of the chunk starts now."""
        if self.cpu_at_start is not None:
            self.item_seconds = max(cpu_seconds - self.cpu_at_start, 0.0)
        self.queue.popleft()
        if self.queue:
            self._start(budget, cpu_seconds)

    def _start(self, budget: float, cpu_seconds: Optional[float]) -> None:
        now = time.monotonic()
        self.deadline = now + budget
        self.cutoff = now + budget * WALL_FACTOR
        self.cpu_at_start = cpu_seconds

    def past_budget(self, budget: float, now: float) -> bool:
        """At the deadline: whether the item used its budget (else the deadline moves on)."""
        if now >= self.cutoff or self.cpu_at_start is None:
            return True
        used = self.cpu_seconds()
        if used is None or used - self.cpu_at_start >= budget:
            return True
        self.deadline = min(now + max(budget - (used - self.cpu_at_start), 0.01), self.cutoff)
        return False


class _ForkedWorker(_Worker):
    """A forked process and its two pipes."""

    def __init__(self, start: Start, inherited: list[int]) -> None:
        super().__init__()
        task_read, self.task_write = os.pipe()
        self.result_read, result_write = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # buffered output must not be printed twice
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into the caller's code
            status = 0
            try:
                for fd in (*inherited, self.task_write, self.result_read):
                    os.close(fd)
                _serve(task_read, result_write, start)
            except BaseException:  # noqa: BLE001 - a worker must end here, whatever happens
                status = 1
            finally:
                os._exit(status)
        os.close(task_read)
        os.close(result_write)

    @property
    def fds(self) -> tuple[int, int]:
        return self.task_write, self.result_read

    def send(self, chunk: list[tuple[int, Any]]) -> None:
        _write_message(self.task_write, chunk)

    def receive(self) -> tuple[int, Any, float]:
        return _read_message(self.result_read)

    def waiting(self) -> bool:
        return _readable(self.result_read)

    @staticmethod
    def ready(busy: list["_ForkedWorker"], timeout: float) -> list["_ForkedWorker"]:
        """The busy workers that have results waiting (or have died), after at most `timeout` seconds."""
        by_fd = {worker.result_read: worker for worker in busy}
        found, _, _ = select.select(list(by_fd), [], [], timeout)
        return [by_fd[fd] for fd in found]

    def stop(self) -> int:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status = os.waitpid(self.pid, 0)
        for fd in self.fds:
            os.close(fd)
        return os.waitstatus_to_exitcode(status)


class _SpawnedWorker(_Worker):
    """A fresh interpreter (`serve_spawned`) on two pipes, and the thread that reads its results
    into `inbox` (a result, or the exception that ended the reading), waking the pool."""

    def __init__(self, start: Start, arrived: "threading.Condition") -> None:
        import subprocess
        import threading

        super().__init__()
        self.process: "subprocess.Popen[bytes]" = subprocess.Popen(
            python_command(__name__, serve_spawned.__name__), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        self.pid = self.process.pid
        self.inbox: deque[Union[tuple[int, Any, float], _Started, BaseException]] = deque()
        self.arrived = arrived
        self.started = False  # its interpreter has started and loaded the function
        self.budget = 0.0
        self.listener = threading.Thread(target=self._listen, name=f"accumlint-worker-{self.pid}", daemon=True)
        self.listener.start()
        try:
            self.send(start)
        except OSError:
            pass  # it died at once: its end is in the inbox, and the items handed to it come back

    def send(self, chunk: Any) -> None:
        _write_message(self.process.stdin.fileno(), chunk)  # type: ignore[union-attr]

    def _listen(self) -> None:
        fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        while True:
            try:
                message: Union[tuple[int, Any, float], _Started, BaseException] = _read_message(fd)
            except BaseException as error:  # noqa: BLE001 - handed to the pool's thread, raised there
                message = error
            with self.arrived:
                self.inbox.append(message)
                self.arrived.notify_all()
            if isinstance(message, BaseException):
                return

    def receive(self) -> tuple[int, Any, float]:
        self.waiting()  # takes the message that it has started
        with self.arrived:
            message = self.inbox.popleft()
        if isinstance(message, BaseException):
            self.inbox.appendleft(message)  # the worker stays ended
            raise message
        return cast("tuple[int, Any, float]", message)  # `waiting` took the start message

    def waiting(self) -> bool:
        with self.arrived:
            if self.inbox and isinstance(self.inbox[0], _Started):
                self.started = True
                if self.queue:  # the running item's budget counts from now
                    self._start(self.budget, self.inbox[0].cpu_seconds)
                self.inbox.popleft()
            return bool(self.inbox)

    def give(self, chunk: list[tuple[int, Any]], budget: float) -> None:
        self.budget = budget
        super().give(chunk, budget)
        if not self.started:
            self.cutoff = max(self.cutoff, time.monotonic() + SPAWN_WAIT)

    def past_budget(self, budget: float, now: float) -> bool:
        """Before the worker has started, only the wall-time limit counts."""
        if not self.started:
            self.deadline = min(now + budget, self.cutoff)
            return now >= self.cutoff
        return super().past_budget(budget, now)

    def stop(self) -> int:
        self.process.kill()
        code = self.process.wait()
        self.listener.join()  # the process is gone: its pipe has ended
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        return code


class WorkerPool:
    """Up to `size` workers running `function` on items, each item under `budget` seconds.

    `function` and the items must be picklable results' makers: what crosses
    back is `function(item)`, or a `Failure`. Workers start by `start_method()`;
    a spawned worker imports `function` and `initializer` by their modules' names.
    Each worker calls `initializer(*initargs)` before its first item, whichever
    way it started: what a worker needs of the run's state goes there, never
    through what a forked worker happens to inherit.
    """

    def __init__(
        self,
        size: int,
        function: Callable[[Any], Any],
        budget: float,
        memory: Optional[int] = None,
        initializer: Optional[Callable[..., None]] = None,
        initargs: tuple = (),
    ) -> None:
        self.size = max(size, 1)
        self.start = Start(function, memory, initializer, initargs)
        self.budget = budget
        self.start_method = start_method()
        self._arrived: Optional["threading.Condition"] = None  # wakes the pool when a spawned worker answers
        self._workers: list[_Worker] = []
        self._waiting_weight = 0  # of the items not yet handed to a worker

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill and reap every worker; safe to call twice."""
        while self._workers:
            self._workers.pop().stop()

    def _spawn(self) -> _Worker:
        worker: _Worker
        if self.start_method == "spawn":
            if self._arrived is None:
                import threading

                self._arrived = threading.Condition()
            worker = _SpawnedWorker(self.start, self._arrived)
        else:
            inherited = [fd for other in self._workers if isinstance(other, _ForkedWorker) for fd in other.fds]
            worker = _ForkedWorker(self.start, inherited)
        self._workers.append(worker)
        return worker

    def _ready(self, busy: list[_Worker], timeout: float) -> list[_Worker]:
        """The busy workers with results waiting (or that died), after at most `timeout` seconds."""
        if self._arrived is None:
            return cast("list[_Worker]", _ForkedWorker.ready(busy, timeout))  # type: ignore[arg-type]
        with self._arrived:
            self._arrived.wait_for(lambda: any(worker.waiting() for worker in busy), timeout)
            return [worker for worker in busy if worker.waiting()]

    def _retire(self, worker: _Worker) -> int:
        self._workers.remove(worker)
        return worker.stop()

    def map(self, items: Sequence[Any], weights: Optional[Sequence[int]] = None) -> Iterator[tuple[int, Any]]:
        """(index, result or Failure) for every item, as they complete, in any order.
        `weights` (a file's size, say) keep one worker from being handed most of the work."""
        waiting = deque(range(len(items)))
        weights = weights if weights is not None else [1] * len(items)
        self._waiting_weight = sum(weights)
        idle = [self._spawn() for _ in range(min(self.size, len(items)))]
        busy: list[_Worker] = []
        while waiting or busy:
            while idle and waiting:
                worker = idle.pop()
                chunk = self._chunk(waiting, weights)
                try:
                    worker.give([(index, items[index]) for index in chunk], self.budget)
                except OSError:  # it died before taking the items: not their fault
                    self._retire(worker)
                    self._requeue(chunk, waiting, weights)
                    idle.append(self._spawn())
                    continue
                busy.append(worker)
            timeout = max(min(worker.deadline for worker in busy) - time.monotonic(), 0.0)
            nap = min(_nap(busy), timeout)
            if nap > 0:
                time.sleep(nap)
                timeout -= nap
            for worker in self._ready(busy, timeout):
                yield from self._results(worker, busy, idle, waiting, weights)
            now = time.monotonic()
            for worker in list(busy):
                if worker.deadline <= now and worker.past_budget(self.budget, now):
                    busy.remove(worker)
                    index = worker.index
                    self._give_back(worker, waiting, weights)
                    self._retire(worker)
                    if waiting:
                        idle.append(self._spawn())
                    yield index, Failure(
                        f"analysis took longer than the per-file budget of {self.budget:g} s; file not checked"
                    )

    def _results(
        self, worker: _Worker, busy: list[_Worker], idle: list[_Worker], waiting: deque, weights: Sequence[int]
    ) -> Iterator[tuple[int, Any]]:
        """Every result waiting from a busy worker; a worker that has answered all it was
        given goes idle, one that died costs its running item and is replaced."""
        while True:
            try:
                index, result, cpu_seconds = worker.receive()
            except (EOFError, OSError, pickle.UnpicklingError):
                busy.remove(worker)
                assert worker.index is not None  # a busy worker has an item running
                index = worker.index
                self._give_back(worker, waiting, weights)
                result = Failure(_death(self._retire(worker)))
                if waiting:
                    idle.append(self._spawn())
            else:
                worker.answered(cpu_seconds, self.budget)
                if not worker.queue:
                    busy.remove(worker)
                    idle.append(worker)
            yield index, result
            if worker not in busy or not worker.waiting():
                return

    def _chunk(self, waiting: deque, weights: Sequence[int]) -> list[int]:
        """The next items for one worker: at most CHUNK_ITEMS, and at least one, of at
        most half a worker's share of the weight that waits (with the biggest items
        first, the first chunks are single items and the last ones full)."""
        share = self._waiting_weight / (2 * self.size)
        chunk = [waiting.popleft()]
        weight = weights[chunk[0]]
        while waiting and len(chunk) < CHUNK_ITEMS and weight + weights[waiting[0]] <= share:
            weight += weights[waiting[0]]
            chunk.append(waiting.popleft())
        self._waiting_weight -= weight
        return chunk

    def _give_back(self, worker: _Worker, waiting: deque, weights: Sequence[int]) -> None:
        """The items a failed worker was given but had not started: they wait again, first."""
        worker.queue.popleft()
        self._requeue(list(worker.queue), waiting, weights)
        worker.queue.clear()

    def _requeue(self, indices: list[int], waiting: deque, weights: Sequence[int]) -> None:
        self._waiting_weight += sum(weights[index] for index in indices)
        waiting.extendleft(reversed(indices))
