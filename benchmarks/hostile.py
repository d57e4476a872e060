"""The hostile battery: accumlint run as a hostile user would, black box.

    python benchmarks/hostile.py                 # the whole battery (a few minutes)
    python benchmarks/hostile.py --flips 200     # more damaged cache files
    python benchmarks/hostile.py --keep out/     # keep the folders of the failed inputs

Every input is a folder made here and one or more `accumlint` commands run in it,
each in a process of its own under a time limit, with a result cache of the
input's own. Each input says what it expects; what is counted:

- crashes: a command that died of a signal, printed a traceback, or ended the
  whole run with "internal error" (one file's internal error is a line, not a crash);
- hangs: a command that ran past its time limit;
- data lost: a file of the user's (anything but accumlint's cache) changed, went
  or lost an extended attribute, where the input expects it kept;
- wrong exit codes: an exit status other than the one expected.

The inputs: the cache-folder traps (`--cache-dir .`, `$ACCUMLINT_CACHE_DIR` in a
shared folder, `clean` on folders accumlint did not make), FIFOs, devices and
sockets named `.py` and `.ipynb`, files over `max-file-size`, paths that cannot
be read, damaged result-cache entries (wrong shapes, byte flips), damaged kept
compiled code (byte flips), CR-only and mixed line endings, form feeds, extended
attributes, lone surrogates in notebooks, broken `pyproject.toml` files,
`--file-timeout nan`, and readers that stop early. Exit status 1 when anything
failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from samples import UNSCALED_LOOP as TRAIN  # noqa: E402

LOOP = "for batch in loader:\n    model(batch).backward()\n"
TIME_LIMIT = 60.0


@dataclass
class Outcome:
    command: list[str]
    status: Optional[int]  # None: it hung
    stdout: bytes = b""
    stderr: bytes = b""


@dataclass
class Tally:
    inputs: int = 0
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    wrong_exit: list[str] = field(default_factory=list)


class Battery:
    """Runs the inputs and counts what went wrong."""

    def __init__(self, keep: Optional[Path]) -> None:
        self.tally = Tally()
        self.keep = keep
        self.scratch = Path(tempfile.mkdtemp(prefix="accumlint-hostile-"))

    def folder(self, name: str) -> Path:
        folder = self.scratch / name
        folder.mkdir(parents=True)
        return folder

    def accumlint(self, folder: Path, *args: str, env: Optional[dict] = None, limit: float = TIME_LIMIT) -> Outcome:
        command = [sys.executable, "-m", "accumlint.cli", *args]
        environment = {**os.environ, "ACCUMLINT_CACHE_DIR": str(folder.parent / f"{folder.name}.cache")}
        environment.update(env or {})
        environment = {key: value for key, value in environment.items() if value is not None}
        try:
            done = subprocess.run(command, cwd=folder, capture_output=True, timeout=limit, env=environment)
        except subprocess.TimeoutExpired:
            return Outcome(command, None)
        return Outcome(command, done.returncode, done.stdout, done.stderr)

    def judge(self, name: str, outcome: Outcome, expected: tuple[int, ...], folder: Optional[Path] = None) -> bool:
        """Count one command's outcome against the exit statuses it may have; True when fine."""
        where = f"{name}: {' '.join(outcome.command[3:])}"
        fine = True
        if outcome.status is None:
            self.tally.hangs.append(where)
            fine = False
        elif outcome.status < 0 or outcome.status >= 128 or b"Traceback" in outcome.stderr or (
            b"accumlint: error: internal error" in outcome.stderr
        ):
            self.tally.crashes.append(f"{where} -> {outcome.status}: {outcome.stderr.decode(errors='replace')[-300:]}")
            fine = False
        elif outcome.status not in expected:
            self.tally.wrong_exit.append(f"{where} -> {outcome.status}, expected {expected}: {outcome.stderr.decode(errors='replace')[-200:]}")
            fine = False
        if not fine and self.keep is not None and folder is not None:
            shutil.copytree(folder, self.keep / name, symlinks=True, dirs_exist_ok=True, ignore_dangling_symlinks=True,
                            ignore=lambda directory, names: [n for n in names if not (Path(directory) / n).is_file()])
        return fine

    def run(self, name: str, make: Callable[[Path], None], steps: list[tuple[tuple[str, ...], tuple[int, ...]]],
            kept: Optional[Callable[[Path], dict]] = None, env: Optional[dict] = None) -> None:
        """One input: a folder `make` fills, commands and their allowed exit statuses, and
        (`kept`) what of the user's must be the same after every command."""
        self.tally.inputs += 1
        folder = self.folder(name)
        make(folder)
        before = kept(folder) if kept else None
        for args, expected in steps:
            outcome = self.accumlint(folder, *args, env=env)
            self.judge(name, outcome, expected, folder)
            if kept is not None:
                after = kept(folder)
                if after != before:
                    changed = sorted(set(before) ^ set(after) | {k for k in before if k in after and before[k] != after[k]})
                    self.tally.lost.append(f"{name}: {' '.join(args)} changed {changed[:5]}")
                    break

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def snapshot(folder: Path, skip: tuple[str, ...] = (".accumlint_cache",)) -> dict:
    """Every file, link and folder below `folder` (outside accumlint's cache) with its
    bytes, link target and extended attributes."""
    found: dict = {}
    for directory, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in dirnames + filenames:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, folder)
            if os.path.islink(path):
                found[relative] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[relative] = ("folder",)
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    found[relative] = ("file", handle.read(), _attributes(path))
            else:
                found[relative] = ("special",)
    return found


def _attributes(path: str) -> tuple:
    if not hasattr(os, "listxattr"):
        return ()
    try:
        return tuple(sorted((name, os.getxattr(path, name)) for name in os.listxattr(path)))
    except OSError:
        return ()


def write(folder: Path, files: dict[str, object]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else str(content).encode())


def project(folder: Path) -> None:
    write(folder, {".git/HEAD": "ref: refs/heads/main\n", ".git/objects/keep": "", ".gitignore": "*.log\n", "train.py": TRAIN})


# ---------------------------------------------------------------- the inputs


def cache_folders(battery: Battery) -> None:
    never_lost = snapshot
    battery.run("cache-dir-dot", project, [(("check", "--cache-dir", ".", "train.py"), (1,)),
                                           (("check", "--cache-dir", ".", "train.py"), (1,)),
                                           (("clean", "--cache-dir", "."), (0,))], kept=never_lost)
    battery.run("cache-dir-dot-clean-first", project, [(("clean", "--cache-dir", "."), (0,))], kept=never_lost)

    def shared(folder: Path) -> None:
        project(folder)
        write(folder, {"home/.cache/pip/selfcheck.json": "{}", "home/.cache/CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n"})

    for env_name in ("env-shared-cache", "env-shared-cache-clean"):
        battery.tally.inputs += 1
        folder = battery.folder(env_name)
        shared(folder)
        before = snapshot(folder)
        env = {"ACCUMLINT_CACHE_DIR": str(folder / "home" / ".cache")}
        steps = [("check", "train.py"), ("clean",)] if env_name.endswith("clean") else [("check", "train.py")]
        for args in steps:
            battery.judge(env_name, battery.accumlint(folder, *args, env=env), (1,) if args[0] == "check" else (0,), folder)
        if snapshot(folder) != before:
            battery.tally.lost.append(f"{env_name}: the shared folder changed")

    def json_data(folder: Path) -> None:
        project(folder)
        write(folder, {"data/v1/weights.json": "[1]", "data/v2/" + "0" * 64 + ".json": "[]"})

    battery.run("cache-dir-json-data", json_data, [(("check", "--cache-dir", "data", "train.py"), (1,)),
                                                    (("clean", "--cache-dir", "data"), (0,))], kept=never_lost)

    for name, target in (("cache-dir-src", "src"), ("cache-dir-git", ".git"), ("cache-dir-parent", "..")):
        def make(folder: Path) -> None:
            project(folder)
            write(folder, {"src/model.py": "x = 1\n"})

        battery.run(name, make, [(("check", "--cache-dir", target, "train.py"), (1,)), (("clean", "--cache-dir", target), (0,))],
                    kept=lambda folder: snapshot(folder.parent if target == ".." else folder,
                                                 skip=(".accumlint_cache", ".git") if target == ".." else (".accumlint_cache",)))


def special_files(battery: Battery) -> None:
    def fifos(folder: Path) -> None:
        write(folder, {"train.py": TRAIN})
        if hasattr(os, "mkfifo"):
            os.mkfifo(folder / "p.py")
            os.mkfifo(folder / "p.ipynb")
        for name, target in (("z.py", "/dev/zero"), ("n.py", "/dev/null"), ("u.ipynb", "/dev/urandom")):
            if os.path.exists(target):
                os.symlink(target, folder / name)
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(folder / "s.py"))
        server.close()

    for args in ((".",), ("p.py",), ("p.ipynb",), ("z.py",), ("u.ipynb",), ("s.py", "train.py"), ("--fix", ".")):
        battery.run(f"special-{'-'.join(args).strip('.-') or 'dot'}", fifos, [(("check", *args), (2,))],
                    kept=lambda folder: {k: v for k, v in snapshot(folder).items() if k != "train.py"})

    battery.run("over-max-file-size", lambda folder: write(folder, {
        "pyproject.toml": "[tool.accumlint]\nmax-file-size = 1000\n", "big.py": TRAIN + "#" * 2000 + "\n", "train.py": TRAIN,
    }), [(("check", "."), (2,)), (("check", "--fix", "."), (2,))], kept=lambda folder: {"big.py": (folder / "big.py").read_bytes()})
    battery.run("unreadable-named-path", lambda folder: write(folder, {"train.py": TRAIN}),
                [(("check", "a" * 300 + "/x.py", "train.py"), (2,)), (("check", "missing.py", "train.py"), (2,))])


def damaged_result_cache(battery: Battery, flips: int, rng: random.Random) -> None:
    shapes = ["[1]", '{"a": 1}', "{}", "[]", "[{}]", "null", '[{"line": "1"}]', "", "\0" * 64, "[" * 100000]
    reference = battery.folder("result-cache-reference")
    write(reference, {"train.py": TRAIN})
    first = battery.accumlint(reference, "check", "--output-format", "json", "train.py")
    entries = list(reference.parent.glob(f"{reference.name}.cache/**/*.json"))
    if first.status != 1 or len(entries) != 1:
        battery.tally.wrong_exit.append(f"result-cache-reference: {first.status}, {len(entries)} entries")
        return
    entry, good = entries[0], entries[0].read_bytes()
    damaged = [shape.encode() for shape in shapes]
    for _ in range(flips):
        data = bytearray(good)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        damaged.append(bytes(data))
    for index, content in enumerate(damaged):
        battery.tally.inputs += 1
        entry.write_bytes(content)
        outcome = battery.accumlint(reference, "check", "--output-format", "json", "train.py")
        if battery.judge(f"result-cache-{index}", outcome, (1,)) and outcome.stdout != first.stdout:
            battery.tally.wrong_exit.append(f"result-cache-{index}: other findings than the undamaged run's")


def damaged_compiled_code(battery: Battery, flips: int, rng: random.Random) -> None:
    """Byte flips of the kept compiled code, kept under a scratch PYTHONPYCACHEPREFIX (the
    installed copy's file is never touched)."""
    folder = battery.folder("compiled-code")
    write(folder, {"train.py": TRAIN})
    prefix = battery.scratch / "pycache-prefix"
    env = {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": None}
    first = battery.accumlint(folder, "check", "--no-cache", "--output-format", "json", "train.py", env=env)
    kept = list(prefix.rglob("dataclasses-code.*.marshal"))
    if first.status != 1 or len(kept) != 1:
        battery.tally.wrong_exit.append(f"compiled-code reference: {first.status}, {len(kept)} files")
        return
    path, good = kept[0], kept[0].read_bytes()
    positions = sorted(rng.sample(range(len(good)), min(flips, len(good))))
    for position in positions:
        battery.tally.inputs += 1
        data = bytearray(good)
        data[position] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        outcome = battery.accumlint(folder, "check", "--no-cache", "--output-format", "json", "train.py", env=env)
        if battery.judge(f"compiled-code-flip-{position}", outcome, (1,)) and outcome.stdout != first.stdout:
            battery.tally.wrong_exit.append(f"compiled-code-flip-{position}: other findings than the undamaged run's")
        again = battery.accumlint(folder, "check", "--no-cache", "--output-format", "json", "train.py", env=env)
        battery.judge(f"compiled-code-flip-{position}-after", again, (1,))


def text_oddities(battery: Battery) -> None:
    lines = TRAIN.split("\n")
    fixed = "(loss / accum_steps).backward()"
    endings = {
        "cr-only": "\r".join(lines),
        "cr-and-lf": "".join(line + ("\r" if index % 2 else "\n") for index, line in enumerate(lines)),
        "crlf": "\r\n".join(lines),
    }
    for name, text in endings.items():
        def make(folder: Path, text: str = text) -> None:
            write(folder, {"train.py": text.encode()})

        battery.run(f"endings-{name}-check", make, [(("check", "train.py"), (1,))])
        battery.tally.inputs += 1
        folder = battery.folder(f"endings-{name}-fix")
        make(folder)
        battery.judge(f"endings-{name}-fix", battery.accumlint(folder, "check", "--fix", "train.py"), (0,), folder)
        if (folder / "train.py").read_bytes() != text.replace("loss.backward()", fixed).encode():
            battery.tally.lost.append(f"endings-{name}-fix: not fixed, or its line endings changed")

    for name, text in (("form-feed-indent", TRAIN.replace("        loss.backward()", "\f        loss.backward()")),
                       ("form-feed-line", TRAIN.replace("import torch\n", "import torch\n\f\n"))):
        battery.tally.inputs += 1
        folder = battery.folder(name)
        write(folder, {"train.py": text})
        check = battery.accumlint(folder, "check", "--output-format", "json", "train.py")
        battery.judge(name, check, (1,), folder)
        offered = check.status == 1 and any(d["fix"] for d in json.loads(check.stdout))
        battery.judge(name, battery.accumlint(folder, "check", "--fix", "train.py"), (0,) if offered else (1,), folder)
        if offered != ((folder / "train.py").read_text() != text):
            battery.tally.wrong_exit.append(f"{name}: marked fixable {offered}, but --fix {'did not fix' if offered else 'fixed'} it")

    def attributes(folder: Path) -> None:
        write(folder, {"train.py": TRAIN})
        try:
            os.setxattr(folder / "train.py", "user.origin", b"kept")
        except (AttributeError, OSError):
            pass

    battery.tally.inputs += 1
    folder = battery.folder("xattr-fix")
    attributes(folder)
    before = _attributes(str(folder / "train.py"))
    battery.judge("xattr-fix", battery.accumlint(folder, "check", "--fix", "train.py"), (0,), folder)
    if _attributes(str(folder / "train.py")) != before:
        battery.tally.lost.append("xattr-fix: the extended attributes were lost")

    surrogate = '{"cells": [{"cell_type": "code", "source": "x = \\"\\ud800\\"\\nfor b in l:\\n    m(b).backward()\\n"}]}'
    battery.run("notebook-lone-surrogate", lambda folder: write(folder, {"nb.ipynb": surrogate, "train.py": TRAIN}),
                [(("check", "."), (2,)), (("check", "--output-format", "full", "."), (2,)), (("check", "--fix", "."), (2,))])
    for name, content in (("pyproject-not-utf-8", b"[tool.accumlint]\nselect = [\"\xff\"]\n"),
                          ("pyproject-deep", b"[tool.accumlint]\nx = " + b"[" * 100000 + b"]" * 100000 + b"\n")):
        battery.run(name, lambda folder, content=content: write(folder, {"pyproject.toml": content, "train.py": TRAIN}),
                    [(("check", "train.py"), (2,))])
    for value in ("nan", "inf", "-inf", "1e400"):
        battery.run(f"file-timeout-{value}", lambda folder: write(folder, {"train.py": TRAIN}),
                    [(("check", "--file-timeout", value, "train.py"), (2,))])


def early_readers(battery: Battery) -> None:
    """`accumlint ... | head -1`: the reader closes the pipe after one line."""
    folder = battery.folder("early-reader")
    write(folder, {f"train{index:03d}.py": TRAIN for index in range(200)})
    write(folder, {"zz_broken.py": LOOP + "x = (\n"})
    for args, expected in ((("check", "--output-format", "full", "."), 2), (("check", "--show-files", "."), 0),
                           (("check", "--statistics", "."), 2), (("rules",), 0)):
        battery.tally.inputs += 1
        command = [sys.executable, "-m", "accumlint.cli", *args]
        env = {**os.environ, "ACCUMLINT_CACHE_DIR": str(battery.scratch / "early.cache")}
        process = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        process.stdout.readline()
        process.stdout.close()
        try:
            stderr = process.stderr.read()
            status: Optional[int] = process.wait(timeout=TIME_LIMIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            status, stderr = None, b""
        outcome = Outcome(command, status, b"", stderr)
        # a reader that stops is not an error: the run's own status, or click's 1 for the plain listings
        if battery.judge(f"early-reader-{args[-1]}", outcome, (expected, 1) if args == ("rules",) else (expected,)) and stderr:
            battery.tally.wrong_exit.append(f"early-reader {' '.join(args)}: said {stderr[-200:]!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flips", type=int, default=40, help="damaged copies of each cache file (default 40)")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--keep", type=Path, help="folder for the inputs that failed")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    battery = Battery(args.keep)
    started = time.perf_counter()
    try:
        cache_folders(battery)
        special_files(battery)
        damaged_result_cache(battery, args.flips, rng)
        damaged_compiled_code(battery, args.flips, rng)
        text_oddities(battery)
        early_readers(battery)
    finally:
        battery.close()
    tally = battery.tally
    print(f"{tally.inputs} inputs in {time.perf_counter() - started:.0f} s: {len(tally.crashes)} crashes, "
          f"{len(tally.hangs)} hangs, {len(tally.lost)} data lost, {len(tally.wrong_exit)} wrong exit codes")
    for kind, items in (("crash", tally.crashes), ("hang", tally.hangs), ("data lost", tally.lost), ("wrong exit", tally.wrong_exit)):
        for item in items:
            print(f"  {kind}: {item}")
    return 1 if tally.crashes or tally.hangs or tally.lost or tally.wrong_exit else 0


if __name__ == "__main__":
    raise SystemExit(main())
