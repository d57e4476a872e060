"""The project a checked module belongs to: what the analysis may read beside it.

What README's "The project around a file" describes: the root (the folder above the checked paths
holding `pyproject.toml`, `setup.cfg`, `setup.py` or `.git`), the modules that
imports name (relative imports, and absolute ones whose first part is a
package or module at the root, under `src/`, or beside the importing script),
a summary of each such module (`summary`), and the configuration files the
code names by a literal path (`configs`). The model asks `ProjectView` (one
per analysed module, `index`) about imported names; anything third-party,
dynamic or built at run time stays unknown.

Stage 3: imports `accumlint.model`, `accumlint.source`, `accumlint.compat` and
`accumlint.diagnostics`.
"""

from accumlint.project.index import ProjectIndex, ProjectView, view_for, view_for_file
from accumlint.project.root import find_root

__all__ = ["ProjectIndex", "ProjectView", "find_root", "view_for", "view_for_file"]
