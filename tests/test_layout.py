"""The package's layout by stage: imports go down the stages, and no module imports
itself back through others (lazy imports inside functions included).

The stages and what each may import are written in `accumlint/__init__.py`. An
import inside `if TYPE_CHECKING:` names a type only and never runs, so it is not
counted (the model names the project's view as a type; the project fills it in).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "accumlint"

# Stage of each top-level part of the package; a module may import its own stage's
# package and any lower stage. Parts at the same number never import each other.
STAGES = {
    "compat": 0,
    "diagnostics": 0,
    "source": 1,
    "model": 2,
    "project": 3,
    "fix": 4,
    "rules": 5,
    "check": 6,
    "report": 7,
    "verify": 7,
    "server": 8,
    "cli": 9,
    "__main__": 10,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, module: str | None = None) -> set[str]:
    """Every accumlint module the module at `path` (named `module`, by default from its
    place in the package) imports, at any depth, outside TYPE_CHECKING blocks."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            for alias in node.names:  # `from accumlint.check import fixes` imports a module
                found.add(f"{target}.{alias.name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {name for name in found if name == "accumlint" or name.startswith("accumlint.")}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: {target for target in _imports(path) if target in modules and target != name} for name, path in modules.items()}


def _stage(module: str) -> int | None:
    parts = module.split(".")
    return STAGES.get(parts[1]) if len(parts) > 1 else None


def test_every_part_of_the_package_has_a_stage():
    parts = {path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()}
    parts = {part for part in parts if not part.startswith(("_", ".")) or part == "__main__"}
    assert parts - {"__init__"} <= set(STAGES), sorted(parts - set(STAGES))


def test_no_import_goes_up_a_stage():
    upward = []
    for module, targets in _graph().items():
        stage = _stage(module)
        for target in targets:
            target_stage = _stage(target)
            if stage is None or target_stage is None:
                continue
            same_part = module.split(".")[1] == target.split(".")[1]
            if target_stage > stage or (target_stage == stage and not same_part):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that go up (or across) a stage:\n" + "\n".join(sorted(upward))


def test_no_import_cycle():
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if target.endswith(".__init__") or target not in graph:
                continue
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from accumlint.check import engine\n", {"accumlint.check", "accumlint.check.engine"}),
        ("def f():\n    import accumlint.rules.catalog\n", {"accumlint.rules.catalog"}),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from accumlint.check import engine\n", set()),
    ],
)
def test_the_import_reader_sees_lazy_imports_and_skips_type_only_ones(tmp_path, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    assert _imports(path, "accumlint.source.probe") == expected
