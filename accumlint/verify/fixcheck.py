"""`accumlint check --fix --verify`: prove each fixed training loop by running it.

For each top-level function of the (already fixed) file that holds a training
loop (a `for`/`while` whose body calls `.backward(`), bind its parameters and
run the verifier with the synthetic setup. Functions that cannot be bound or
run are "not verifiable", with the reason, never an error of the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from accumlint.verify.binding import BindingError, bind_parameters

VERIFIED = "verified"
NOT_EQUIVALENT_STATUS = "not equivalent"
NOT_VERIFIABLE = "not verifiable"


@dataclass(frozen=True)
class FixVerification:
    """The outcome for one function: `status` is "verified", "not equivalent"
    or "not verifiable"; `reason` says why when it is not verified."""

    function: str
    status: str
    reason: Optional[str] = None


def verify_fixed_file(path: str, accum_steps: int = 4) -> list[FixVerification]:
    """Verify every top-level training-loop function of the file at `path`."""
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        return [FixVerification("<module>", NOT_VERIFIABLE, f"the file does not parse: {error.message}")]
    return [_verify_one(path, source, name, accum_steps) for name in training_functions(module)]


def training_functions(module: cst.Module) -> list[str]:
    """Names of the top-level functions that contain a loop calling `.backward(`."""
    return [
        statement.name.value
        for statement in module.body
        if isinstance(statement, cst.FunctionDef) and _has_training_loop(statement)
    ]


def _verify_one(path: str, source: str, name: str, accum_steps: int) -> FixVerification:
    try:
        bind_parameters(source, name)
    except BindingError as error:
        return FixVerification(name, NOT_VERIFIABLE, str(error))
    from accumlint.verify.equivalence import check_equivalence
    from accumlint.verify.report import EQUIVALENT, NOT_EQUIVALENT

    report = check_equivalence(f"{path}::{name}", accum_steps=accum_steps)
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
