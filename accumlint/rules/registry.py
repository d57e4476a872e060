"""Every rule definition, found by importing the rule modules, and running them over a module's model.

Each module of this package may define rules (`NAME = Rule(...)` at module
level, `accumlint.rules.catalog.Rule`); none has to be listed anywhere else.
Most rules ask about one loop's window; a few (a `Trainer` subclass's
`compute_loss`, an `Accelerator` built without K) ask about the module as a
whole and run once per module, loops or not. Rules run in the order of their
codes, the window checks first.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import TYPE_CHECKING, Iterator

import accumlint.rules
from accumlint.model.build import ModuleModel
from accumlint.model.window import Window
from accumlint.rules.base import Finding
from accumlint.rules.catalog import ALL_RULES, Rule, RuleDefinitionError

if TYPE_CHECKING:
    from accumlint.rules.catalog import ModuleCheck, WindowCheck


def _defined() -> tuple[Rule, ...]:
    """The rules the package's modules define, by code, checked against the catalog
    (which reads them from the same modules' text)."""
    found: dict[int, Rule] = {}
    for module_info in pkgutil.iter_modules(accumlint.rules.__path__):
        if module_info.name == __name__.rpartition(".")[2]:
            continue
        module = importlib.import_module(f"{accumlint.rules.__name__}.{module_info.name}")
        found.update((id(value), value) for value in vars(module).values() if type(value) is Rule)
    rules = tuple(sorted(found.values(), key=lambda rule: rule.code))
    if sorted(rule.info for rule in rules) != sorted(ALL_RULES):
        differing = sorted({rule.info for rule in rules} ^ set(ALL_RULES))
        raise RuleDefinitionError(
            "the rule modules define other rules than the catalog read from their text: "
            f"{', '.join(f'{info.code} {info.name}' for info in differing)}; write each as `NAME = Rule(` at "
            "module level, its identity in literal keywords, its closing parenthesis alone on its line"
        )
    return rules


RULES: tuple[Rule, ...] = _defined()
WINDOW_CHECKS: tuple[tuple[str, WindowCheck, bool], ...] = tuple(
    (rule.code, rule.check, rule.info.any_loop) for rule in RULES if rule.check is not None
)
MODULE_CHECKS: tuple[tuple[str, ModuleCheck], ...] = tuple(
    (rule.code, rule.module_check) for rule in RULES if rule.module_check is not None
)


def window_findings(window: Window) -> Iterator[Finding]:
    """The findings of every window check on one window, each with its rule's code. A
    window of one micro-batch (K known to be 1) is a plain loop: only the rules that apply
    to every training loop ask about it."""
    plain = window.single_micro_batch
    for code, check, any_loop in WINDOW_CHECKS:
        if plain and not any_loop:
            continue
        for finding in check(window):
            yield dataclasses.replace(finding, code=code)


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
        for finding in window_findings(loop_window):
            keep(finding)
    for code, module_check in MODULE_CHECKS:
        for finding in module_check(model):
            keep(dataclasses.replace(finding, code=code))
    return findings
