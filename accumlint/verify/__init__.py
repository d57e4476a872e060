"""Runtime verifier: proves that a training loop's gradient accumulation matches
the full batch by running it (imports torch, only on request).

Importing this package is cheap: the public names below are loaded on first
use, so the CLI can register `accumlint verify` without importing torch.

Stage 7: imports `accumlint.check` and the stages below it (torch only inside
its own modules); never `report`, `server` or the command line.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "check_equivalence": "accumlint.verify.equivalence",
    "Setup": "accumlint.verify.setup",
    "synthetic_setup": "accumlint.verify.setup",
    "VerificationReport": "accumlint.verify.report",
    "Explanation": "accumlint.verify.report",
    "assert_accumulation_equivalent": "accumlint.verify.pytest_plugin",
    "AccumulationNotEquivalent": "accumlint.verify.pytest_plugin",
    "verify_fixed_file": "accumlint.verify.fixcheck",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'accumlint.verify' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
