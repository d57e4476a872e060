"""The rule catalog as data: stable codes, names, fix kinds and one-line summaries.

This module is imported by the command line (`accumlint rules`, selection by
code or prefix) without importing any rule implementation or libcst.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Optional

FixKind = Literal["safe", "unsafe", "none"]


class RuleInfo(NamedTuple):
    """One rule's entry (a NamedTuple: cheaper to create at start-up than a frozen dataclass)."""

    code: str
    name: str
    fix: FixKind
    summary: str
    any_loop: bool = False

    @property
    def fix_applicability(self) -> Optional[str]:
        return None if self.fix == "none" else self.fix


RULES: tuple[RuleInfo, ...] = (
    RuleInfo("GA101", "zero-grad-every-micro-batch", "safe",
             "Gradients are zeroed on every micro-batch of an accumulation loop."),
    RuleInfo("GA102", "step-every-micro-batch", "unsafe",
             "The optimizer steps on every micro-batch while the loop accumulates."),
    RuleInfo("GA103", "backward-after-step", "unsafe",
             "The backward runs after the gated step, so windows are shifted by one micro-batch."),
    RuleInfo("GA104", "zero-grad-before-step", "safe",
             "Gradients are zeroed between the backward and the step, so the step applies zeros.",
             any_loop=True),
    RuleInfo("GA105", "missing-zero-grad", "none",
             "Nothing ever zeroes the gradients, so they grow across all updates.", any_loop=True),
    RuleInfo("GA106", "off-by-one-boundary", "safe",
             "A 0-based counter is tested with `i % K == 0`, shifting every window."),
    RuleInfo("GA107", "dropped-tail-window", "unsafe",
             "The last partial window of a sized iterable never reaches an optimizer step."),
    RuleInfo("GA108", "accumulate-without-steps", "unsafe",
             "`accelerator.accumulate()` on an Accelerator built without `gradient_accumulation_steps`."),
    RuleInfo("GA109", "step-counter-counts-micro-batches", "unsafe",
             "An optimizer-step counter is incremented on every micro-batch but compared with a budget in steps."),
    RuleInfo("GA110", "backward-outside-micro-loop", "none",
             "The backward follows the micro-step loop and only sees the last micro-batch's loss."),
    RuleInfo("GA111", "framework-scales-without-windows", "unsafe",
             "accelerate divides every loss by K, but no `accumulate()` or gate holds the step back.",
             any_loop=True),
    RuleInfo("GA201", "missing-loss-scaling", "safe",
             "The loss reaching backward in an accumulation loop is not divided by K."),
    RuleInfo("GA202", "inverted-loss-scaling", "safe",
             "The loss is multiplied by K (or divided by 1/K) instead of divided by K."),
    RuleInfo("GA203", "scaling-after-backward", "unsafe",
             "The loss is divided by K only after backward ran."),
    RuleInfo("GA204", "double-loss-scaling", "safe",
             "The loss is divided by K although it is already divided by K elsewhere."),
    RuleInfo("GA205", "mismatched-scaling-factor", "none",
             "The loss is divided by something other than the gate's K."),
    RuleInfo("GA206", "token-mean-bias", "none",
             "A padded token-level loss is averaged per micro-batch, biasing the window mean."),
    RuleInfo("GA207", "trainer-loss-not-normalized", "unsafe",
             "A Hugging Face Trainer's `compute_loss` override ignores `num_items_in_batch`, so the loss grows with K."),
    RuleInfo("GA301", "scheduler-every-micro-batch", "safe",
             "The LR scheduler steps on every micro-batch while the optimizer steps every K."),
    RuleInfo("GA302", "clip-every-micro-batch", "safe",
             "Gradients are clipped on every micro-batch, on partial sums."),
    RuleInfo("GA303", "scaler-every-micro-batch", "safe",
             "The AMP GradScaler updates or unscales on every micro-batch."),
    RuleInfo("GA304", "clip-before-unscale", "safe",
             "Gradients are clipped while still multiplied by the GradScaler's scale.", any_loop=True),
    RuleInfo("GA305", "schedule-counts-micro-batches", "unsafe",
             "An LR schedule's length counts micro-batches while it steps once per window."),
    RuleInfo("GA306", "ema-every-micro-batch", "safe",
             "An EMA of the weights updates on every micro-batch while the optimizer steps every K."),
    RuleInfo("GA401", "sync-every-micro-batch", "unsafe",
             "A DDP/FSDP model all-reduces gradients on every micro-batch."),
    RuleInfo("GA402", "manual-gate-in-framework-accumulate", "unsafe",
             "A manual `% K` gate inside a framework that already accumulates."),
    RuleInfo("GA403", "sync-control-misplaced", "unsafe",
             "A DDP sync control does not cover the forward, or its condition is not the step gate's complement."),
    RuleInfo("GA404", "repeated-accumulate-context", "none",
             "One iteration enters `accelerator.accumulate()` twice, so windows close after K/2 micro-batches."),
    RuleInfo("GA501", "graph-kept-alive", "safe",
             "A loss tensor is accumulated for logging without `.detach()`, keeping graphs alive.",
             any_loop=True),
    RuleInfo("GA502", "retain-graph-in-loop", "none",
             "`backward(retain_graph=True)` in a loop with no second backward over the graph."),
    RuleInfo("GA601", "logged-loss-scaled", "unsafe",
             "The logged training loss is the loss divided by K, so it reads K times too small."),
)

# Checks of the suppression comments themselves (ruff's PGH004 and RUF100): not rules of the loop
# model, so `accumlint rules` lists them apart and they never count among the GA rules.
SUPPRESSION_RULES: tuple[RuleInfo, ...] = (
    RuleInfo("AL001", "malformed-noqa", "safe",
             "A `# noqa` comment lists accumlint codes without the colon, or has a colon and no code where a finding is."),
    RuleInfo("AL002", "unused-noqa", "safe",
             "A `# noqa` comment names an accumlint code that is not reported on its line or statement."),
)

ALL_RULES: tuple[RuleInfo, ...] = RULES + SUPPRESSION_RULES
RULES_BY_CODE: dict[str, RuleInfo] = {rule.code: rule for rule in ALL_RULES}
RULES_BY_NAME: dict[str, RuleInfo] = {rule.name: rule for rule in ALL_RULES}


def rule(code: str) -> RuleInfo:
    return RULES_BY_CODE[code]


def codes_matching(selector: str) -> list[str]:
    """Codes selected by a code or a prefix (`GA2`, `GA20`, `GA201`, `AL`, `ALL`)."""
    selector = selector.strip().upper()
    if selector == "ALL":
        return [r.code for r in ALL_RULES]
    return [r.code for r in ALL_RULES if r.code.startswith(selector)]
