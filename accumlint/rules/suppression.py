"""AL0xx: the checks of the suppression comments themselves (ruff's PGH004 and RUF100).

They read `# noqa` comments, not the model of the loops, so their checks live
with the comments' parser in `accumlint.check.noqa`; here they are defined
like every rule, for the catalog, the documents and the reports. Importing
this module is cheap (no libcst): the check stage reads it for every text.
"""

from __future__ import annotations

from accumlint.rules.catalog import Rule

MALFORMED_NOQA = Rule(
    code="AL001",
    name="malformed-noqa",
    fix="safe",
    summary="A `# noqa` comment lists accumlint codes without the colon, or has a colon and no code where a "
    "finding is.",
)

UNUSED_NOQA = Rule(
    code="AL002",
    name="unused-noqa",
    fix="safe",
    summary="A `# noqa` comment names an accumlint code that is not reported on its line or statement.",
)
