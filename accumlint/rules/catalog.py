"""The rule catalog: every rule's code, name, fix kind, summary and document.

A rule is defined once, in the module of its family (`accumlint/rules/*.py`),
by a module-level `Rule(...)` (below) that names its code, name, fix kind,
summary and the functions that find it; its document is `rules/<code>.md`.

The command line (`accumlint rules`, selection by code or prefix), the
configuration, the reports, the editor server and the verifier need the
rules' identity but none of their functions, and importing a rule module
imports libcst and the model, which a pre-commit hook must not pay for files
that never reach the parser. So this module reads the definitions from the
rule modules' text instead of importing them, which is why a definition's
identity is written in literal keywords and its closing parenthesis stands
alone on its line. `accumlint.rules.registry` imports the modules and checks
that what they define is what was read here.

Importing this module is cheap: no libcst, no rule implementation.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Literal, NamedTuple, Optional

if TYPE_CHECKING:
    from accumlint.model.build import ModuleModel
    from accumlint.model.window import Window
    from accumlint.rules.base import Finding

    WindowCheck = Callable[[Window], Iterable[Finding]]
    ModuleCheck = Callable[[ModuleModel], Iterable[Finding]]

FixKind = Literal["safe", "unsafe", "none"]
FIX_KINDS: tuple[FixKind, ...] = ("safe", "unsafe", "none")
CODE_SHAPE = re.compile(r"^[A-Z]{2}\d{3}$")
_NAME_SHAPE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

# Codes of the checks of suppression comments (ruff's PGH004 and RUF100): not rules of the loop
# model, so `accumlint rules` lists them apart and they never count among the GA rules.
SUPPRESSION_PREFIX = "AL"


class RuleInfo(NamedTuple):
    """One rule's identity (a NamedTuple: cheaper to create at start-up than a frozen dataclass)."""

    code: str
    name: str
    fix: FixKind
    summary: str
    any_loop: bool = False  # applies to every training loop, not only to loops that accumulate

    @property
    def fix_applicability(self) -> Optional[str]:
        return None if self.fix == "none" else self.fix

    @property
    def document(self) -> str:
        """The file name of the rule's document in `rules/` (package `accumlint.ruledocs`)."""
        return f"{self.code}.md"


class Rule:
    """A rule's one definition: its identity and the functions that find it.

    `check` runs on every accumulation window of a module, `module_check` once
    per module (a `Trainer` subclass, an `Accelerator` built without K), loops
    or not; a rule may have both. The suppression checks have neither: they
    read comments, not the model (`accumlint.check.noqa`). Findings name no
    code: the registry gives each one its rule's.
    """

    __slots__ = ("info", "check", "module_check")

    def __init__(
        self,
        *,
        code: str,
        name: str,
        fix: FixKind,
        summary: str,
        any_loop: bool = False,
        check: Optional[WindowCheck] = None,
        module_check: Optional[ModuleCheck] = None,
    ) -> None:
        self.info = RuleInfo(code, name, fix, summary, any_loop)
        self.check = check
        self.module_check = module_check

    @property
    def code(self) -> str:
        return self.info.code

    def __repr__(self) -> str:
        return f"Rule({self.info.code} {self.info.name})"


class RuleDefinitionError(ValueError):
    """A rule definition that the catalog cannot read from its module's text."""


# `NAME = Rule(` at the start of a line, up to the `)` that stands alone at the start of a line
_DEFINITION = re.compile(r"^(?P<variable>\w+) = Rule\(\n(?P<arguments>.*?)^\)$", re.MULTILINE | re.DOTALL)


def read_definitions(directory: Path) -> list[tuple[str, RuleInfo]]:
    """(variable, identity) of every rule defined in the modules of `directory`, in file order."""
    found: list[tuple[str, RuleInfo]] = []
    for path in sorted(directory.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if " = Rule(\n" in text:
            found.extend((match["variable"], _identity(match, path, text)) for match in _DEFINITION.finditer(text))
    return found


def _identity(match: "re.Match[str]", path: Path, text: str) -> RuleInfo:
    line = text.count("\n", 0, match.start()) + 1
    try:
        call = ast.parse("Rule(\n" + match["arguments"] + ")", mode="eval").body
    except SyntaxError as error:
        raise RuleDefinitionError(f"{path}:{line}: the rule definition does not parse: {error.msg}") from None
    if not isinstance(call, ast.Call) or call.args:
        raise RuleDefinitionError(f"{path}:{line}: a rule definition takes keyword arguments only")
    identity = {}
    for keyword in call.keywords:
        if keyword.arg in RuleInfo._fields:
            try:
                identity[keyword.arg] = ast.literal_eval(keyword.value)
            except ValueError:
                raise RuleDefinitionError(
                    f"{path}:{line + keyword.value.lineno - 1}: `{keyword.arg}` of a rule definition must be "
                    "a literal (the catalog reads it without importing the module)"
                ) from None
    missing = [field for field in RuleInfo._fields if field not in identity and field not in RuleInfo._field_defaults]
    if missing:
        raise RuleDefinitionError(f"{path}:{line}: the rule definition lacks {', '.join(missing)}")
    info = RuleInfo(**identity)
    wrong = _wrong_identity(info)
    if wrong:
        raise RuleDefinitionError(f"{path}:{line}: {wrong}")
    return info


def _wrong_identity(info: RuleInfo) -> str:
    """What is wrong with a rule's identity ("" when nothing is)."""
    if not isinstance(info.code, str) or not CODE_SHAPE.match(info.code):
        return f"the code {info.code!r} is not two capital letters and three digits (GA201)"
    if not isinstance(info.name, str) or not _NAME_SHAPE.match(info.name):
        return f"the name {info.name!r} is not kebab-case (missing-loss-scaling)"
    if info.fix not in FIX_KINDS:
        return f"the fix kind {info.fix!r} is not one of {', '.join(FIX_KINDS)}"
    if not isinstance(info.summary, str) or not info.summary.strip():
        return "the summary is not a sentence"
    if not isinstance(info.any_loop, bool):
        return f"any_loop is {info.any_loop!r}, not True or False"
    return ""


_DEFINED = sorted((info for _, info in read_definitions(Path(__file__).parent)), key=lambda info: info.code)

RULES: tuple[RuleInfo, ...] = tuple(info for info in _DEFINED if not info.code.startswith(SUPPRESSION_PREFIX))
SUPPRESSION_RULES: tuple[RuleInfo, ...] = tuple(info for info in _DEFINED if info.code.startswith(SUPPRESSION_PREFIX))
ALL_RULES: tuple[RuleInfo, ...] = RULES + SUPPRESSION_RULES


def _index(key: str) -> dict[str, RuleInfo]:
    """The rules by code or by name; one defined twice is an error."""
    index: dict[str, RuleInfo] = {}
    for info in ALL_RULES:
        value = getattr(info, key)
        if value in index:
            raise RuleDefinitionError(f"two rules are defined with the {key} {value!r}")
        index[value] = info
    return index


RULES_BY_CODE: dict[str, RuleInfo] = _index("code")
RULES_BY_NAME: dict[str, RuleInfo] = _index("name")


def rule(code: str) -> RuleInfo:
    return RULES_BY_CODE[code]


def codes_matching(selector: str) -> list[str]:
    """Codes selected by a code or a prefix (`GA2`, `GA20`, `GA201`, `AL`, `ALL`)."""
    selector = selector.strip().upper()
    if selector == "ALL":
        return [r.code for r in ALL_RULES]
    return [r.code for r in ALL_RULES if r.code.startswith(selector)]
