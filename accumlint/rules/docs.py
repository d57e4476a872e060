"""The rule documents: one Markdown file per rule, shipped as package data.

The documents live in the repository's top-level `rules/` directory, named
by each rule's `RuleInfo.document`; pyproject maps the directory to the
package `accumlint.ruledocs`. Code imported from a source checkout reads that
checkout's `rules/`, so that a checkout on `PYTHONPATH` (a second worktree, a
scratch copy) never reads the documents of another, installed copy; an
installed package reads them with `importlib.resources`, which works for wheels
and editable installs alike.

Each document has the sections `What it does`, `Why is this bad?`, `Example`
(code that triggers exactly this rule), `Use instead` (code with no finding at
all), `Fix safety`, `Known limits` and `See also`. A python block under
`Fix safety` (optional) is the exact output of the autofix when it differs
from `Use instead`.

Importing this module is cheap: no libcst, no rule implementations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from accumlint.rules.catalog import CODE_SHAPE, RULES_BY_CODE

if TYPE_CHECKING:
    from importlib.abc import Traversable

RESOURCE_PACKAGE = "accumlint.ruledocs"
REQUIRED_SECTIONS: tuple[str, ...] = (
    "What it does",
    "Why is this bad?",
    "Example",
    "Use instead",
    "Fix safety",
    "Known limits",
    "See also",
)

_SECTION = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)
_PYTHON_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


class UnknownRuleError(KeyError, ValueError):
    """A code that names no rule (catchable as KeyError or ValueError)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self) -> str:
        known = ", ".join(sorted(RULES_BY_CODE))
        return f"unknown rule code {self.code!r}; known codes: {known}"


@dataclass(frozen=True)
class RuleExamples:
    """The code blocks of one rule document."""

    code: str
    invalid: str
    valid: str
    fixed: Optional[str] = None

    @property
    def expected_fix(self) -> str:
        """What the autofix should turn `invalid` into (`fixed`, else `valid`)."""
        return self.fixed if self.fixed is not None else self.valid


def normalize_code(code: str) -> str:
    """`ga201 ` -> `GA201`; raises UnknownRuleError for anything not in the catalog."""
    normalized = code.strip().upper()
    if not CODE_SHAPE.match(normalized) or normalized not in RULES_BY_CODE:
        raise UnknownRuleError(code)
    return normalized


def documents() -> Optional[Union[Path, "Traversable"]]:
    """The folder of the rule documents: the `rules/` of the source checkout this package
    was imported from (the folder beside a `pyproject.toml` above it), else the installed
    package `accumlint.ruledocs`; None when neither can be found."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "rules").is_dir():
        return root / "rules"
    try:
        from importlib.resources import files

        return files(RESOURCE_PACKAGE)
    except (ImportError, OSError, TypeError, ValueError):
        return None


def rule_document(code: str) -> str:
    """The Markdown document of a rule, e.g. `rule_document("GA201")`."""
    normalized = normalize_code(code)
    filename = RULES_BY_CODE[normalized].document
    folder = documents()
    document = folder.joinpath(filename) if folder is not None else None
    if document is None or not document.is_file():
        raise FileNotFoundError(
            f"the document for rule {normalized} is missing from this installation "
            f"(looked in {folder if folder is not None else f'package {RESOURCE_PACKAGE!r}'})"
        )
    return document.read_text(encoding="utf-8")


def documented_codes() -> list[str]:
    """Codes of every shipped document (including any the catalog lacks)."""
    folder = documents()
    names = {entry.name for entry in folder.iterdir()} if folder is not None and folder.is_dir() else set()
    return sorted(name[:-3] for name in names if name.endswith(".md") and CODE_SHAPE.match(name[:-3]))


def sections(document: str) -> dict[str, str]:
    """Level-2 sections of a document: heading -> body (text up to the next `## `)."""
    matches = list(_SECTION.finditer(document))
    result: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(document)
        result[match.group(1)] = document[match.end():end].strip("\n") + "\n"
    return result


def _first_python_block(body: Optional[str]) -> Optional[str]:
    if body is None:
        return None
    match = _PYTHON_BLOCK.search(body)
    return match.group(1) if match else None


def rule_examples(code: str) -> RuleExamples:
    """The `Example`, `Use instead` and optional fixed-output blocks of a rule."""
    normalized = normalize_code(code)
    parts = sections(rule_document(normalized))
    invalid = _first_python_block(parts.get("Example"))
    valid = _first_python_block(parts.get("Use instead"))
    if invalid is None or valid is None:
        raise ValueError(f"the document of {normalized} lacks a python block under 'Example' or 'Use instead'")
    return RuleExamples(
        code=normalized,
        invalid=invalid,
        valid=valid,
        fixed=_first_python_block(parts.get("Fix safety")),
    )
