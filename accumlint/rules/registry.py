"""Every rule implementation by code, and running them over a module's model.

Most rules ask about one loop's window; a few (a `Trainer` subclass's
`compute_loss`, an `Accelerator` built without K) ask about the module as a
whole and run once per module, loops or not.
"""

from __future__ import annotations

from accumlint.model.build import ModuleModel
from accumlint.rules import (
    accumulate_context,
    counters,
    distributed,
    memory,
    micro_loop,
    per_window,
    reporting,
    scaling,
    schedule,
    sync,
    trainer,
    window,
)
from accumlint.rules.base import Finding, ModuleRule, Rule

RULES: dict[str, Rule] = {
    **window.RULES, **micro_loop.RULES, **counters.RULES, **scaling.RULES, **per_window.RULES,
    **schedule.RULES, **distributed.RULES, **sync.RULES, **accumulate_context.RULES, **memory.RULES, **reporting.RULES,
}

MODULE_RULES: dict[str, ModuleRule] = {**accumulate_context.MODULE_RULES, **trainer.MODULE_RULES}


def run_rules(model: ModuleModel) -> list[Finding]:
    """Findings of all rules; a node inside a helper shared by several loops is reported once."""
    seen: set[tuple[str, int]] = set()
    findings = []

    def keep(finding: Finding) -> None:
        key = (finding.code, id(finding.node))
        if key not in seen:
            seen.add(key)
            findings.append(finding)

    for loop_window in model.windows:
        for check in RULES.values():
            for finding in check(loop_window):
                keep(finding)
    for module_check in MODULE_RULES.values():
        for finding in module_check(model):
            keep(finding)
    return findings
