"""Every rule implementation by code, and running them over a module's windows."""

from __future__ import annotations

from accumlint.model.window import Window
from accumlint.rules import distributed, memory, per_window, scaling, window
from accumlint.rules.base import Finding, Rule

RULES: dict[str, Rule] = {
    **window.RULES, **scaling.RULES, **per_window.RULES, **distributed.RULES, **memory.RULES,
}


def run_rules(windows: list[Window]) -> list[Finding]:
    """Findings of all rules; a node inside a helper shared by several loops is reported once."""
    seen: set[tuple[str, int]] = set()
    findings = []
    for loop_window in windows:
        for code, check in RULES.items():
            for finding in check(loop_window):
                key = (code, id(finding.node))
                if key not in seen:
                    seen.add(key)
                    findings.append(finding)
    return findings
