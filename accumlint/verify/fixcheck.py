"""`accumlint check --fix --verify`: prove each fixed training loop by running it.

For each function and method of the (already fixed) file that holds a
training loop (a `for`/`while` whose body calls `.backward(`), bind its
parameters and run the verifier with the file's `[tool.accumlint.verify]`
settings (the synthetic setup without one). Loops that cannot be bound or run
are "not verifiable", with the reason, never an error of the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, Optional

import libcst as cst

from accumlint.verify.binding import BindingError, bind_parameters

FixStatus = Literal["verified", "not equivalent", "not verifiable"]
VERIFIED: Final = "verified"
NOT_EQUIVALENT_STATUS: Final = "not equivalent"
NOT_VERIFIABLE: Final = "not verifiable"


@dataclass(frozen=True)
class FixVerification:
    """The outcome for one function: `status` is "verified", "not equivalent"
    or "not verifiable"; `reason` says why when it is not verified."""

    function: str
    status: FixStatus
    reason: Optional[str] = None


def verify_fixed_file(path: str, accum_steps: int = 4, settings: Any = None) -> list[FixVerification]:
    """Verify every training-loop function and method of the file at `path`.

    `settings` is the file's `[tool.accumlint.verify]` (config.VerifySettings):
    its setup, K, windows, seeds, tolerances and bindings apply. The partial
    last window defaults to 0 here: a fix proves the mistake it fixed, and a
    loop over a loader of unknown length cannot be told to flush its tail.
    """
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        return [FixVerification("<module>", NOT_VERIFIABLE, f"the file does not parse: {error.message}")]
    options = _options(settings, accum_steps)
    return [_verify_one(path, source, name, options) for name in training_functions(module)]


def _options(settings: Any, accum_steps: int) -> dict[str, Any]:
    from accumlint.verify.binding import parse_arg_options, parse_bind_options

    options: dict[str, Any] = {"accum_steps": accum_steps, "tail": 0}
    if settings is None:
        return options
    for key in ("accum_steps", "setup", "device", "dtype", "windows", "micro_batch", "seed", "tail", "rtol",
                "atol", "nproc", "timeout", "script_args"):
        value = getattr(settings, key, None)
        if value is not None:
            options[key] = value
    if getattr(settings, "eval_mode", None):
        options["eval_mode"] = True
    if getattr(settings, "bind", ()):
        options["bind"] = parse_bind_options(settings.bind)
    if getattr(settings, "arg", ()):
        options["args"] = parse_arg_options(settings.arg)
    return options


def training_functions(module: cst.Module) -> list[str]:
    """Names of the functions (top level) and methods (`Class.method`, one
    class level) that contain a loop calling `.backward(`."""
    names = []
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and _has_training_loop(statement):
            names.append(statement.name.value)
        elif isinstance(statement, cst.ClassDef):
            for member in statement.body.body:
                if isinstance(member, cst.FunctionDef) and _has_training_loop(member):
                    names.append(f"{statement.name.value}.{member.name.value}")
    return names


def _verify_one(path: str, source: str, name: str, options: dict[str, Any]) -> FixVerification:
    if "." not in name and "setup" not in options:  # a setup's named objects bind only once it is built
        try:
            bind_parameters(source, name, options.get("bind"), options.get("args"))
        except BindingError as error:
            return FixVerification(name, NOT_VERIFIABLE, str(error))
    from accumlint.verify.equivalence import check_equivalence
    from accumlint.verify.report import EQUIVALENT, NOT_EQUIVALENT

    report = check_equivalence(f"{path}::{name}", **options)
    if report.verdict == EQUIVALENT:
        return FixVerification(name, VERIFIED)
    if report.verdict == NOT_EQUIVALENT:
        explained = "; ".join(e.line() for e in report.explanations)
        return FixVerification(name, NOT_EQUIVALENT_STATUS, report.reason + (f" ({explained})" if explained else ""))
    return FixVerification(name, NOT_VERIFIABLE, report.reason)


def _has_training_loop(function: cst.FunctionDef) -> bool:
    found: list[bool] = []

    class _Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.loops = 0

        def visit_For(self, node: cst.For) -> None:
            self.loops += 1

        def leave_For(self, original_node: cst.For) -> None:
            self.loops -= 1

        def visit_While(self, node: cst.While) -> None:
            self.loops += 1

        def leave_While(self, original_node: cst.While) -> None:
            self.loops -= 1

        def visit_Call(self, node: cst.Call) -> None:
            if self.loops and isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
                found.append(True)

    function.visit(_Finder())
    return bool(found)
