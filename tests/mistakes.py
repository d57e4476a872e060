"""Gradient-accumulation mistakes that can be put into a correct training loop.

Each mistake is a function from a script's text to the same script with the
mistake made, or None when the script has no place for it (no `(i + 1) % K`
gate to shift, no gated zeroing to hoist...). They work on the line shapes our
fixtures and real scripts use, so several can be spliced into one loop: the
fix-composition test and the fuzzer apply them in pairs and check that the
fixer's combined result is correct.
"""

from __future__ import annotations

import re
import warnings
from typing import Callable, Optional

Mistake = Callable[[str], Optional[str]]

_GATE = re.compile(r"^(?P<indent>\s*)if \((?P<counter>\w+) \+ 1\) % (?P<k>[\w.]+) == 0(?P<rest>.*):$", re.M)
_BACKWARD = re.compile(r"^(?P<indent>\s*)(?:\((?P<loss>\w+) / (?P<k>[\w.]+)\)|(?P<plain>\w+))\.backward\(\)$", re.M)
_GATED_CALL = r"^(?P<indent>\s+)(?P<receiver>\w[\w.]*)\.{method}\(\)$"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _block_end(lines: list[str], header: int) -> int:
    """Index after the last line of the block opened at `header` (blank lines excluded)."""
    level = _indent(lines[header])
    end = header + 1
    for index in range(header + 1, len(lines)):
        if lines[index].strip() and _indent(lines[index]) <= level:
            break
        if lines[index].strip():
            end = index + 1
    return end


def _gate_line(lines: list[str]) -> Optional[int]:
    for index, line in enumerate(lines):
        if _GATE.match(line.rstrip("\n")):
            return index
    return None


def _loop_header(lines: list[str], inner: int) -> Optional[int]:
    """The `for`/`while` line that holds line `inner` directly in its body."""
    level = _indent(lines[inner])
    for index in range(inner - 1, -1, -1):
        line = lines[index]
        if line.strip() and _indent(line) < level:
            stripped = line.strip()
            return index if stripped.startswith(("for ", "while ")) and stripped.endswith(":") else None
    return None


def off_by_one(text: str) -> Optional[str]:
    """`(i + 1) % K == 0` -> `i % K == 0` (GA106)."""
    new, count = _GATE.subn(lambda m: f"{m['indent']}if {m['counter']} % {m['k']} == 0{m['rest']}:", text, count=1)
    return new if count else None


def unscaled_loss(text: str) -> Optional[str]:
    """`(loss / K).backward()` -> `loss.backward()` (GA201 when the loss is known mean-reduced)."""
    new, count = _BACKWARD.subn(
        lambda m: f"{m['indent']}{m['loss']}.backward()" if m["loss"] else m[0], text, count=1
    )
    return new if count and new != text else None


def inverted_scaling(text: str) -> Optional[str]:
    """`(loss / K).backward()` -> `(loss * K).backward()` (GA202)."""
    new, count = _BACKWARD.subn(
        lambda m: f"{m['indent']}({m['loss']} * {m['k']}).backward()" if m["loss"] else m[0], text, count=1
    )
    return new if count and new != text else None


def zero_every_micro_batch(text: str) -> Optional[str]:
    """The gated `optimizer.zero_grad()` moved to the top of the loop body (GA101)."""
    lines = _lines(text)
    gate = _gate_line(lines)
    if gate is None:
        return None
    pattern = re.compile(_GATED_CALL.format(method="zero_grad"))
    for index in range(gate + 1, _block_end(lines, gate)):
        match = pattern.match(lines[index].rstrip("\n"))
        if match is None:
            continue
        header = _loop_header(lines, gate)
        if header is None:
            return None
        zero = lines.pop(index)
        lines.insert(header + 1, " " * _indent(lines[gate]) + zero.lstrip())
        return "".join(lines)
    return None


def zero_before_step(text: str) -> Optional[str]:
    """`optimizer.step(); optimizer.zero_grad()` in the gate swapped (GA104)."""
    lines = _lines(text)
    gate = _gate_line(lines)
    if gate is None:
        return None
    step = re.compile(_GATED_CALL.format(method="step"))
    zero = re.compile(_GATED_CALL.format(method="zero_grad"))
    for index in range(gate + 1, _block_end(lines, gate) - 1):
        first, second = step.match(lines[index].rstrip("\n")), zero.match(lines[index + 1].rstrip("\n"))
        if first and second and first["receiver"] == second["receiver"]:
            lines[index], lines[index + 1] = lines[index + 1], lines[index]
            return "".join(lines)
    return None


def backward_after_step(text: str) -> Optional[str]:
    """The backward moved after the gated step (GA103)."""
    lines = _lines(text)
    gate = _gate_line(lines)
    if gate is None:
        return None
    for index in range(gate - 1, -1, -1):
        line = lines[index]
        if line.strip() and _indent(line) < _indent(lines[gate]):
            return None
        if _BACKWARD.match(line.rstrip("\n")) and _indent(line) == _indent(lines[gate]):
            end = _block_end(lines, gate)
            backward = lines.pop(index)
            lines.insert(end - 1, backward)
            return "".join(lines)
    return None


def step_every_micro_batch(text: str) -> Optional[str]:
    """The gate removed: its block runs on every micro-batch (GA102)."""
    lines = _lines(text)
    gate = _gate_line(lines)
    if gate is None:
        return None
    end = _block_end(lines, gate)
    if end < len(lines) and lines[end].strip().startswith(("else", "elif")):
        return None
    shift = _indent(lines[gate + 1]) - _indent(lines[gate])
    body = [line[shift:] if line.strip() else line for line in lines[gate + 1:end]]
    return "".join(lines[:gate] + body + lines[end:])


def _after_backward(text: str, make: Callable[[str, re.Match], str]) -> Optional[str]:
    lines = _lines(text)
    gate = _gate_line(lines)
    for index, line in enumerate(lines):
        match = _BACKWARD.match(line.rstrip("\n"))
        if match and gate is not None and index < gate and _indent(line) == _indent(lines[gate]):
            lines.insert(index + 1, match["indent"] + make(text, match) + "\n")
            return "".join(lines)
    return None


def clip_every_micro_batch(text: str) -> Optional[str]:
    """`clip_grad_norm_` right after the backward, outside the gate (GA302)."""
    if not re.search(r"^import torch$", text, re.M) or not re.search(r"\bmodel\b", text) or "clip_grad" in text:
        return None
    return _after_backward(text, lambda _, m: "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")


def kept_graph(text: str) -> Optional[str]:
    """`running_loss += loss` on every micro-batch, without `.detach()` (GA501)."""
    lines = _lines(text)
    gate = _gate_line(lines)
    header = _loop_header(lines, gate) if gate is not None else None
    if header is None or "running_loss" in text:
        return None
    with_sum = _after_backward(text, lambda _, m: f"running_loss += {m['loss'] or m['plain']}")
    if with_sum is None:
        return None
    lines = _lines(with_sum)
    lines.insert(header, " " * _indent(lines[header]) + "running_loss = 0.0\n")
    return "".join(lines)


MISTAKES: dict[str, Mistake] = {
    "off_by_one": off_by_one,
    "unscaled_loss": unscaled_loss,
    "inverted_scaling": inverted_scaling,
    "zero_every_micro_batch": zero_every_micro_batch,
    "zero_before_step": zero_before_step,
    "backward_after_step": backward_after_step,
    "step_every_micro_batch": step_every_micro_batch,
    "clip_every_micro_batch": clip_every_micro_batch,
    "kept_graph": kept_graph,
}

# The rule each mistake breaks: a finding the fixer leaves may be one of these (a
# mistake another one hid until it was fixed), never one the fixes made.
CODES = {
    "off_by_one": "GA106",
    "unscaled_loss": "GA201",
    "inverted_scaling": "GA202",
    "zero_every_micro_batch": "GA101",
    "zero_before_step": "GA104",
    "backward_after_step": "GA103",
    "step_every_micro_batch": "GA102",
    "clip_every_micro_batch": "GA302",
    "kept_graph": "GA501",
}


def spliced(text: str, *names: str) -> Optional[str]:
    """`text` with each named mistake made in turn, or None when one has no place
    (or the result is not Python: a line shape the mistakes misread)."""
    for name in names:
        made = MISTAKES[name](text)
        if made is None:
            return None
        text = made
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<spliced>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return text
