"""The project a checked module belongs to: what the analysis may read beside it.

What README's "The project around a file" describes: the root (the folder above the checked paths
holding `pyproject.toml`, `setup.cfg`, `setup.py` or `.git`), the modules that
imports name (relative imports, and absolute ones whose first part is a
package or module at the root, under `src/`, or beside the importing script),
a summary of each such module (`summary`, cached by `modules`), and the
configuration files the code names by a literal path (`configs`). The model
asks `ProjectView` (one per analysed module, `index`) about imported names;
anything third-party, dynamic or built at run time stays unknown.

Importing the package is cheap: the names below load `index` (and LibCST) when
first asked for, so the gate's project clause (`reach`) and the result cache
(`importers`) never pay for LibCST.

Stage 3: imports `accumlint.model`, `accumlint.source`, `accumlint.compat` and
`accumlint.diagnostics`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accumlint.project.index import ProjectView, view_for, view_for_file
    from accumlint.project.modules import ProjectIndex
    from accumlint.project.root import find_root

__all__ = ["ProjectIndex", "ProjectView", "find_root", "view_for", "view_for_file"]
_HOMES = {"ProjectIndex": "modules", "ProjectView": "index", "find_root": "root", "view_for": "index",
          "view_for_file": "index"}


def __getattr__(name: str) -> Any:
    """The package's names, imported from their modules when first asked for (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
