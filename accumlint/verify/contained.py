"""Running the verification in a child process that contains the user's code.

The user's module, setup and training function run in a forked child, in a
process group of its own, with stdin on /dev/null and stdout/stderr captured
into files. Whatever that code does, the verifier answers:
- an exit (`sys.exit`, `os._exit`), a signal (a segfault) or an exception is
  a "could not run" report with the reason;
- past the time limit the child's whole process group is killed;
- at the end the group is killed and every process of it reaped, so a fork
  in the user's code leaves nothing behind (on Linux this process is a child
  subreaper meanwhile: orphans of the group come back to it to be reaped).
The report crosses the process boundary as plain data (JSON of its fields).

Forking, not a fresh interpreter: the API receives functions and setups
holding lambdas, which do not pickle. A fork carries them as they are, and
memory is shared copy-on-write. Where a fork cannot serve (no `os.fork`, or
CUDA already initialized in this process, which a forked child cannot use)
the verification runs in this process, and the report says so.

This module does not import torch: the command line forks before torch is
imported, so the child starts torch fresh. When the caller had imported
torch already, its OpenMP thread pool does not survive the fork (a parallel
region in the child would wait forever for threads that are not there), so
the child computes with one intra-op thread; and what torch loads on first
use in a training run (its compiler, with sympy, when the first optimizer is
built: a second or more) is loaded here once, before the first fork, rather
than in every child.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import gc
import io
import json
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from typing import Any, Callable, Iterator, Optional

from accumlint.verify.report import COULD_NOT_RUN, VerificationReport

# Seconds a verification may take unless told otherwise (CLI --timeout,
# `timeout=` in the API, `timeout` in [tool.accumlint.verify]).
DEFAULT_TIMEOUT = 600.0

# How much of the user's output a report keeps, per stream.
OUTPUT_LINES = 100
OUTPUT_BYTES = 16384

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37

# Set in the child: its pid, and the phase file, open.
_phase_fd: Optional[int] = None
_child_pid: Optional[int] = None


def inside_child() -> bool:
    """Whether this process is a verification child (then every exception the
    user's code raises, KeyboardInterrupt included, is the code's own: the
    terminal's Ctrl-C reaches the parent's process group, not this one)."""
    return _child_pid is not None and _child_pid == os.getpid()


def note_phase(text: str) -> None:
    """Say what the child is doing now (`importing loop.py`, `running train()`),
    for the reason given when it dies or runs out of time there."""
    if _phase_fd is None or not inside_child():
        return
    data = text.encode("utf-8", errors="replace")
    try:
        os.pwrite(_phase_fd, data, 0)
        os.ftruncate(_phase_fd, len(data))
    except OSError:
        pass


def check_contained(
    function: Any,
    verify: Callable[..., VerificationReport],
    describe: Callable[[Any], str],
    *,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    **options: Any,
) -> VerificationReport:
    """`verify(function, **options)` in a contained child; the report it returned,
    or a "could not run" report saying what became of the child. `describe` names
    the function in that report; `timeout` is in seconds (None: no limit). The
    verification itself is passed in, so this module knows nothing of it."""
    target = function if isinstance(function, str) else describe(function)
    if timeout is not None and not timeout > 0:
        return _could_not_run(target, options, f"timeout must be a positive number of seconds, got {timeout}")
    reason = _why_not_forked()
    if reason is not None:
        return _in_this_process(lambda: verify(function, **options), reason)
    return run_contained(lambda: verify(function, **options), target=target, options=options, timeout=timeout)


def _why_not_forked() -> Optional[str]:
    if not hasattr(os, "fork"):
        return "this platform cannot fork"
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        return "CUDA is initialized in this process and a forked process cannot use it"
    return None


def _in_this_process(work: Callable[[], VerificationReport], why: str) -> VerificationReport:
    """The verification in this process, its output captured at the Python
    level (no time limit, no containment: the report says so)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        report = work()
    report.stdout, report.stderr = _tail_text(stdout.getvalue()), _tail_text(stderr.getvalue())
    report.notes.append(f"ran in this process, without a time limit or containment: {why}")
    return report


def run_contained(
    work: Callable[[], VerificationReport],
    *,
    target: str,
    options: dict[str, Any],
    timeout: Optional[float],
) -> VerificationReport:
    """`work()` in a forked child (see the module docstring)."""
    folder = tempfile.mkdtemp(prefix="accumlint-verify-")
    files = {name: os.path.join(folder, name) for name in ("result.json", "stdout", "stderr", "phase")}
    torch_imported = "torch" in sys.modules
    if torch_imported:
        _load_what_training_loads()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        with _subreaper():
            # Objects that exist now are not the child's garbage: frozen, its
            # collector does not walk them (which would copy every page that
            # holds one, a copy-on-write fault per page).
            gc.freeze()
            try:
                pid = os.fork()
            except BaseException:
                gc.unfreeze()
                raise
            if pid == 0:  # the child never returns from here
                _child(work, files, folder, torch_imported)
            gc.unfreeze()
            _set_group(pid)
            try:
                status = _wait(pid, None if timeout is None else time.monotonic() + timeout)
            finally:
                _end_group(pid)
        return _outcome(status, files, target=target, options=options, timeout=timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _load_what_training_loads() -> None:
    """Build a throwaway optimizer with the caller's torch: torch imports its compiler the
    first time one is built, which every child would otherwise do again."""
    torch = sys.modules["torch"]
    with contextlib.suppress(Exception):  # only a cost saved: a torch that refuses is left alone
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)


def _set_group(pid: int) -> None:
    """Put the child in its own process group (done on both sides of the fork,
    so that neither the group kill nor the child's first fork can race it)."""
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)


def _child(work: Callable[[], VerificationReport], files: dict[str, str], folder: str, torch_imported: bool) -> None:
    global _phase_fd, _child_pid
    try:
        _child_pid = os.getpid()
        _set_group(0)
        _die_with_parent()
        _redirect(files["stdout"], files["stderr"])
        faulthandler.enable(file=sys.stderr, all_threads=True)
        _phase_fd = os.open(files["phase"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        tempfile.tempdir = folder  # what the run writes through tempfile goes when the run ends
        if torch_imported:
            import torch

            torch.set_num_threads(1)
        try:
            data: dict[str, Any] = {"report": asdict(work())}
        except BaseException as error:  # noqa: BLE001 - whatever escapes is the answer
            data = {"error": f"{type(error).__name__}: {error}".strip()}
        if os.getpid() == _child_pid:  # not a fork of the user's code that returned here
            _write_json(files["result.json"], data)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


def _die_with_parent() -> None:
    """Linux: the child is killed when the verifier dies (a SIGKILL to it)."""
    libc = _libc()
    if libc is not None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _redirect(stdout: str, stderr: str) -> None:
    """stdin from /dev/null (the child is not in the terminal's foreground
    group), stdout and stderr into files, at the descriptor level so that C
    code and subprocesses are captured too; Python's streams rebuilt on them."""
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives as long as the child
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115


def _write_json(path: str, data: dict[str, Any]) -> None:
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(data, handle, default=str)
    os.replace(partial, path)


def _wait(pid: int, deadline: Optional[float]) -> Optional[int]:
    """The child's wait status, or None when the deadline passed first."""
    pidfd = _pidfd(pid)
    try:
        delay = 0.001
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(delay if left is None else min(delay, left))
                delay = min(delay * 2, 0.05)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _pidfd(pid: int) -> Optional[int]:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


def _end_group(pid: int) -> None:
    """Kill the child's process group and reap the child and, where this
    process is their subreaper, every orphan of the group."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    while True:
        try:
            os.waitpid(-pid, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


@contextlib.contextmanager
def _subreaper() -> Iterator[None]:
    """Linux: make this process the subreaper of its descendants for the block,
    so that orphans of the child's group are reparented here and reaped."""
    libc = _libc()
    if libc is None:
        yield
        return
    import ctypes

    before = ctypes.c_int(0)
    libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (OSError, AttributeError):
        return None


# --- what came back -------------------------------------------------------------


def _outcome(
    status: Optional[int], files: dict[str, str], *, target: str, options: dict[str, Any], timeout: Optional[float]
) -> VerificationReport:
    stdout, stderr = _tail_file(files["stdout"]), _tail_file(files["stderr"])
    phase = _read(files["phase"]).strip()
    result = _load(files["result.json"])
    if status is None:
        report = _could_not_run(
            target, options,
            f"stopped after the time limit of {timeout:g} s{_during(phase)}: the verification did not finish "
            "(raise it with --timeout SECONDS, or verify fewer windows)",
        )
    elif result is not None and "report" in result:
        report = VerificationReport.from_dict(result["report"])
    elif result is not None:
        report = _could_not_run(target, options, f"the training code ended the verification{_during(phase)}: "
                                                 f"{result.get('error')}")
    else:
        report = _could_not_run(target, options, _death(status, phase, stderr, target.rpartition("::")[0]))
    report.stdout, report.stderr = stdout, stderr
    return report


def _death(status: int, phase: str, stderr: str, home: str) -> str:
    """Why a child that wrote no result ended."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        described = signal.strsignal(number) if hasattr(signal, "strsignal") else None
        where = _crash_site(stderr, home)
        return (f"the process running the training code was killed by {name}"
                + (f" ({described.lower()})" if described else "")
                + (f" at {where}" if where else "") + _during(phase))
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return (f"the process running the training code exited with status {code}{_during(phase)}, before the "
            "verification finished (os._exit, or an exit from C code)")


def _during(phase: str) -> str:
    return f" while {phase}" if phase else ""


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


def _crash_site(stderr: str, home: str) -> Optional[str]:
    """`file:line` where the crashing thread was, from a faulthandler dump
    ("Current thread ... (most recent call first)"): its innermost frame in
    the target's file `home`, else its innermost frame."""
    start = stderr.rfind("Current thread")
    if start < 0:
        return None
    block = stderr[start:].split("\n\n", 1)[0]
    frames = [(frame["file"], frame["line"]) for frame in _FRAME.finditer(block)]
    if not frames:
        return None
    own = [frame for frame in frames if os.path.abspath(frame[0]) == os.path.abspath(home)]
    file, line = (own or frames)[0]
    return f"{file}:{line}"


def _could_not_run(target: str, options: dict[str, Any], reason: str) -> VerificationReport:
    return VerificationReport(
        target=target,
        verdict=COULD_NOT_RUN,
        accum_steps=options.get("accum_steps", 4),
        windows=options.get("windows", 3),
        reason=reason,
    )


def _load(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _tail_file(path: str) -> str:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            handle.seek(max(0, size - OUTPUT_BYTES))
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > OUTPUT_BYTES:
        text = text.partition("\n")[2]  # drop the cut line
    return _tail_text(text, cut=size > OUTPUT_BYTES)


def _tail_text(text: str, cut: bool = False) -> str:
    lines = text.splitlines()
    if len(lines) > OUTPUT_LINES:
        lines, cut = lines[-OUTPUT_LINES:], True
    kept = "\n".join(lines)
    return f"[... earlier output left out]\n{kept}" if cut and kept else kept
