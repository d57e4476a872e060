"""Whether a module's loops reach a backward through another project module.

The text gate (`accumlint.source.gate`) drops a module with no backward call of
its own. A loop whose backward runs in a helper of another project module
(`backward_step(loss, optimizer, k)`, SPEC section 2: a training loop's body
includes the project functions it calls) is a training loop all the same, and
its own statements (a zeroing on every micro-batch) are its module's findings.
This is the gate's project clause: cheap text tests first (a loop, an import
of a name the module calls), then the resolved module's text (`backward` in
it), and only then its summary (`ast`) says whether that function runs a
backward. The standard library and torch's sources rarely get past the text.
"""

from __future__ import annotations

import os
import re

from accumlint.project.modules import module_summary, root_of
from accumlint.project.root import resolve_module, resolve_submodule
from accumlint.project.summary import BACKWARD

_LOOP = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:for|while)\b", re.MULTILINE)
# `from a.b import c, d as e` (one line or in brackets) and `import a.b as c`
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.MULTILINE)
_IMPORT_AS = re.compile(r"^[ \t]*import[ \t]+([\w.]+)[ \t]+as[ \t]+(\w+)", re.MULTILINE)
_ALIAS = re.compile(r"(\w+)(?:\s+as\s+(\w+))?")


def loop_reaches_project_backward(path: str, text: str) -> bool:
    """Whether the module at `path` has a loop and calls an imported function of another
    project module that runs a backward itself (one call deep from the module)."""
    if "import" not in text or _LOOP.search(text) is None or not os.path.isfile(path):
        return False
    root: "str | None" = None
    for match in _FROM_IMPORT.finditer(text):
        level, module, names = len(match.group(1)), match.group(2), match.group(3)
        for alias in _ALIAS.finditer(names.strip("()")):
            name, local = alias.group(1), alias.group(2) or alias.group(1)
            if not _called(text, local) and not _called(text, local + "."):
                continue
            root = root or root_of(path)
            if _runs_backward(resolve_module(root, path, module, level), name):
                return True
            sub = resolve_submodule(root, path, module, level, name)
            if sub is not None and _module_runs_backward(text, local, sub):
                return True
    for match in _IMPORT_AS.finditer(text):
        module, local = match.group(1), match.group(2)
        if _called(text, local + "."):
            root = root or root_of(path)
            found = resolve_module(root, path, module, 0)
            if found is not None and _module_runs_backward(text, local, found):
                return True
    return False


def _called(text: str, name: str) -> bool:
    """Whether the text calls `name` (`name(`), or reads an attribute of it (`name.` given)."""
    if name.endswith("."):
        return re.search(rf"(?<![\w.]){re.escape(name)}\w+\s*\(", text) is not None
    return re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", text) is not None


def _module_runs_backward(text: str, local: str, module_path: str) -> bool:
    """`import pkg.steps as steps` ... `steps.backward_step(...)`."""
    called = set(re.findall(rf"(?<![\w.]){re.escape(local)}\.(\w+)\s*\(", text))
    return any(_runs_backward(module_path, name) for name in called)


def _runs_backward(module_path: "str | None", name: str) -> bool:
    if module_path is None:
        return False
    summary = module_summary(module_path, hint="backward")
    if summary is None:
        return False
    function = summary.functions.get(name)
    return function is not None and BACKWARD in function.effects
