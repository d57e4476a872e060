"""The verifier's answer: a plain-data report, rendered as text or JSON.

Torch-free on purpose: the CLI and the pytest plugin format reports without
paying for the torch import before a run is asked for.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Final, Literal, Optional

Verdict = Literal["equivalent", "not equivalent", "could not run"]
EQUIVALENT: Final = "equivalent"
NOT_EQUIVALENT: Final = "not equivalent"
COULD_NOT_RUN: Final = "could not run"

_EXIT_CODES: dict[Verdict, int] = {EQUIVALENT: 0, NOT_EQUIVALENT: 1, COULD_NOT_RUN: 2}


@dataclass(frozen=True)
class Explanation:
    """Why the runs differ: a rule code and name when it is a known mistake,
    none for a known property of the setup (dropout, sum loss, ...)."""

    summary: str
    detail: str
    code: Optional[str] = None
    name: Optional[str] = None

    @classmethod
    def of_rule(cls, code: str, summary: str, detail: str) -> "Explanation":
        """A known mistake, named as its rule is (the catalog; no libcst, no torch)."""
        from accumlint.rules.catalog import rule

        return cls(summary=summary, detail=detail, code=code, name=rule(code).name)

    def line(self) -> str:
        head = f"{self.code} {self.name}: " if self.code else ""
        return f"{head}{self.summary} {self.detail}".strip()


@dataclass(frozen=True)
class StepReport:
    """The worst parameter of one comparison; `step` is 1-based, None for the
    final parameters."""

    step: Optional[int]
    worst_parameter: str
    max_abs_error: float
    max_rel_error: float
    ok: bool
    judged: str = "full batch"


@dataclass
class VerificationReport:
    """The verdict, the runs' step counts, per-step worst parameters and the
    explanations. `exit_code` is the CLI's: 0 equivalent, 1 not, 2 could not run."""

    target: str
    verdict: Verdict
    accum_steps: int
    windows: int
    reason: Optional[str] = None
    steps_accumulated: Optional[int] = None
    steps_full: Optional[int] = None
    steps: list[StepReport] = field(default_factory=list)
    final: Optional[StepReport] = None
    explanations: list[Explanation] = field(default_factory=list)
    dtype: Optional[str] = None
    device: Optional[str] = None
    tolerance: Optional[dict[str, float]] = None
    binding: dict[str, str] = field(default_factory=dict)
    binding_evidence: dict[str, list[str]] = field(default_factory=dict)
    tail: int = 0
    fed: Optional[int] = None
    used: Optional[int] = None
    compute_dtypes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    # Which comparisons the verdict rests on (the two runs, the textbook reference) and their outcome.
    comparisons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The tails of what the user's code wrote (kept apart from the report's own lines).
    stdout: str = ""
    stderr: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == EQUIVALENT

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self.verdict]

    @property
    def codes(self) -> list[str]:
        """The rule codes the diagnosis names, in order."""
        return [e.code for e in self.explanations if e.code]

    @property
    def worst(self) -> Optional[StepReport]:
        """The first failing step, else the step furthest apart, else the final parameters."""
        failing = next((s for s in self.steps if not s.ok), None)
        if failing is not None or not self.steps:
            return failing or self.final
        return max(self.steps, key=lambda s: s.max_rel_error)

    @property
    def worst_parameter(self) -> Optional[str]:
        return self.worst.worst_parameter if self.worst else None

    @property
    def max_abs_error(self) -> Optional[float]:
        return self.worst.max_abs_error if self.worst else None

    @property
    def max_rel_error(self) -> Optional[float]:
        return self.worst.max_rel_error if self.worst else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(
            passed=self.passed,
            exit_code=self.exit_code,
            worst_parameter=self.worst_parameter,
            max_abs_error=self.max_abs_error,
            max_rel_error=self.max_rel_error,
        )
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> "VerificationReport":
        """The report whose fields `data` holds (as `dataclasses.asdict` gives
        them: how a report crosses from the verifying process); other keys
        (the derived ones of `to_dict`) are ignored."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["steps"] = [StepReport(**step) for step in values.get("steps") or []]
        if values.get("final") is not None:
            values["final"] = StepReport(**values["final"])
        values["explanations"] = [Explanation(**e) for e in values.get("explanations") or []]
        return cls(**values)

    def format_output(self, lines: int = 20) -> str:
        """The last `lines` lines of each stream the user's code wrote, labelled
        (empty when it wrote nothing)."""
        blocks = []
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            kept = text.splitlines()
            if not kept:
                continue
            shown = kept[-lines:]
            left_out = f", last {len(shown)} lines" if len(shown) < len(kept) else ""
            blocks.append(f"--- the training code's {name}{left_out} ---")
            blocks.extend(shown)
        if blocks:
            blocks.append("--- end of the training code's output ---")
        return "\n".join(blocks)

    def format_text(self) -> str:
        lines = [f"accumlint verify {self.target}"]
        if self.binding:
            bound = ", ".join(
                f"{name} as {role} ({'; '.join(self.binding_evidence.get(name, []))})"
                for name, role in self.binding.items()
            )
            lines.append(f"  bound {bound}")
        if self.dtype:
            partial = f" and a partial window of {self.tail}" if self.tail else ""
            computed = f" (computing in {', '.join(self.compute_dtypes)})" if self.compute_dtypes else ""
            lines.append(
                f"  {self.windows} windows of {self.accum_steps} micro-batches{partial}, "
                f"{self.dtype} on {self.device}{computed}"
            )
        if self.fed is not None:
            lines.append(f"  micro-batches: {self.fed} fed, {self.used} used by the accumulated run")
        if self.steps_accumulated is not None:
            lines.append(
                f"  optimizer steps: {self.steps_accumulated} accumulated (K={self.accum_steps}), "
                f"{self.steps_full} full batch"
            )
        for step in self.steps:
            lines.append("  " + _format_step(f"step {step.step}", step))
        if self.final is not None:
            # On an equivalent verdict the final parameters' drift is rounding carried over
            # the steps: shown, never flagged (the verdict is judged per step).
            lines.append("  " + _format_step("final parameters", self.final, flag=self.verdict != EQUIVALENT))
        lines.extend(f"  evidence: {line}" for line in self.evidence)
        lines.extend(f"  compared: {line}" for line in self.comparisons)
        lines.append(self._headline())
        lines.extend(f"  note: {note}" for note in self.notes)
        lines.extend(f"  {explanation.line()}" for explanation in self.explanations)
        return "\n".join(lines)

    def _headline(self) -> str:
        if self.verdict == COULD_NOT_RUN:
            return f"COULD NOT RUN: {self.reason}"
        if self.verdict == EQUIVALENT:
            return (
                f"EQUIVALENT: {self.accum_steps} accumulated micro-batches match the full batch "
                f"at every step (rtol={self.tolerance['rtol']:g}, atol={self.tolerance['atol']:g})"
            )
        return f"NOT EQUIVALENT: {self.reason}"


def _format_step(label: str, step: StepReport, flag: bool = True) -> str:
    status = (" ok" if step.ok else " DIFFERS") if flag else ""
    judged = f" ({step.judged})" if step.judged != "full batch" else ""
    return (
        f"{label}: worst {step.worst_parameter or '-'} max abs {step.max_abs_error:.3g} "
        f"max rel {step.max_rel_error:.3g}{status}{judged}"
    )
