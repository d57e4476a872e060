"""The project view's shortcuts answer as the questions they stand for, on every fixture project.

`ProjectView.returned_call` remembers the calls it found no returned call for, and
what a function returns is read through its bindings once per text
(`index._bound_returns`, one walk of the function for every returned name). Each
must give what the question asked afresh gives: these tests ask both ways on every
module of the multi-module fixtures.
"""

from __future__ import annotations

from pathlib import Path

import libcst

from accumlint.model.names import code
from accumlint.model.tree import walk
from accumlint.project import index, view_for
from accumlint.project.summary import summarize

REPO = Path(__file__).resolve().parent.parent
MODULES = sorted((REPO / "fixtures" / "projects").rglob("*.py"))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _written(value) -> object:
    return None if value is None else code(value)


def test_fixture_projects_are_found():
    assert len(MODULES) > 100


def _function_sources() -> list[str]:
    sources = []
    for path in MODULES:
        summary = summarize(str(path), _text(path))
        sources.extend(f.source for f in summary.functions.values() if "return" in f.source)
    return sources


def _bound_alone(function, value):
    """`_bound_call` as the question reads: for each returned name, every statement of the
    function walked again for the statements that hold and bind it."""
    if type(value) is libcst.Tuple:
        return value.with_changes(elements=[e.with_changes(value=_bound_alone(function, e.value)) for e in value.elements])
    if type(value) is not libcst.Name:
        return value
    bound = [node for node in walk(function.body)
             if type(node) in (libcst.Assign, libcst.AnnAssign, libcst.AugAssign, libcst.For, libcst.With, libcst.NamedExpr)
             and value.value in {n.value for n in walk(node) if type(n) is libcst.Name}
             and any(index._dotted(t) == value.value for t in index._targets(node))]
    if len(bound) != 1 or type(bound[0]) is not libcst.Assign or type(bound[0].value) is not libcst.Call:
        return value
    return bound[0].value


def test_bound_returns_are_those_bound_one_by_one():
    """One walk of the function serves every returned name: the values are those found by
    walking the function again for each name."""
    sources = _function_sources()
    compared = changed = 0
    for source in sources:
        node, values = index._returned_values(source)
        if node is None:
            continue
        alone = [_written(_bound_alone(node, value)) for value in values]
        remembered = [_written(value) for value in index._bound_returns(source)]
        assert remembered == alone, source
        compared += len(values)
        changed += sum(a != _written(v) for a, v in zip(alone, values))
    assert compared > 50
    assert changed > 0  # some returned name is bound to a call: the walk is exercised


def test_bound_returns_replace_a_name_bound_once_to_a_call():
    """A name bound once to a call (an element of a tuple target counts) becomes that call;
    a name bound twice, or a parameter, stays the name."""
    source = (
        "def build(net, args):\n"
        "    model = wrap(net)\n"
        "    opt = make_opt(model)\n"
        "    opt = other(opt)\n"
        "    sched, _ = pair(opt)\n"
        "    return model, opt, sched, args\n"
    )
    (returned,) = index._bound_returns(source)
    assert _written(returned) == "wrap(net), opt, pair(opt), args"


def _bound_calls(module: libcst.Module) -> list[tuple[str, object]]:
    """(callee, element) of every `x = f(...)` and `a, b = f(...)` in the module, as the
    facts ask `returned_call` of them."""
    found: list[tuple[str, object]] = []

    class Visitor(libcst.CSTVisitor):
        def visit_Assign(self, node: libcst.Assign) -> None:
            if isinstance(node.value, libcst.Call):
                callee = code(node.value.func)
                found.append((callee, None))
                target = node.targets[0].target
                if isinstance(target, libcst.Tuple):
                    found.extend((callee, i) for i in range(len(target.elements)))

    module.visit(Visitor())
    return found


def test_returned_call_remembered_is_the_one_asked_afresh():
    """A view asked again answers as it did, and as a new view of the same text does, for
    calls it found no returned call for and calls it found one for alike."""
    answered = found = 0
    for path in MODULES:
        text = _text(path)
        try:
            module = libcst.parse_module(text)
        except libcst.ParserSyntaxError:
            continue
        asked = _bound_calls(module)
        view = view_for(str(path), text, module)
        if view is None or not asked:
            continue
        first = [_written(view.returned_call(callee, position)) for callee, position in asked]
        again = [_written(view.returned_call(callee, position)) for callee, position in asked]
        fresh = []
        for callee, position in asked:
            other = view_for(str(path), text, module)
            assert other is not None
            fresh.append(_written(other.returned_call(callee, position)))
        assert first == again == fresh, path
        answered += len(asked)
        found += sum(value is not None for value in first)
    assert answered > 100
    assert found > 3  # fixture projects whose helper returns a wrap or a scheduler


def test_middles_searched_by_name_are_those_indexed(monkeypatch):
    """The files whose import lines mention a module name are the same whether the name is
    looked for in the texts (the first names a scan is asked) or read from the index of
    every file's import lines."""
    from accumlint.project import importers

    root = str(REPO / "fixtures" / "projects")
    names = sorted({importers._stem(str(path)) for path in MODULES} | {"torch", "utils", "os", "nowhere"})
    monkeypatch.setattr(importers, "SEARCHED_NAMES", len(names) + 1)
    searched = importers._scan(root)
    by_search = {name: importers._middles(searched, name) for name in names}
    assert searched.all_index is None  # each answered by searching the texts
    monkeypatch.setattr(importers, "SEARCHED_NAMES", 0)
    indexed = importers._scan(root)
    by_index = {name: importers._middles(indexed, name) for name in names}
    assert indexed.all_index is not None
    assert by_search == by_index
    assert sum(bool(found) for found in by_index.values()) > 20
    monkeypatch.setattr(importers, "SEARCHED_NAMES", len(names) + 1)
    monkeypatch.setattr(importers, "SEARCHED_CHARS", searched.chars - 1)
    large = importers._scan(root)
    assert {name: importers._middles(large, name) for name in names[:1]} == {names[0]: by_index[names[0]]}
    assert large.all_index is not None  # a tree larger than SEARCHED_CHARS is indexed at once


def test_imports_resolved_in_a_run_are_remembered_until_forgotten(tmp_path):
    """Within a check run the file an import names is remembered; `forget` (what a run does
    once it has written fixes) reads the disk again, and outside a run every question does."""
    from accumlint.project.importers import forget, one_run
    from accumlint.project.root import resolve_module, resolve_submodule

    root = str(tmp_path)
    script = str(tmp_path / "train.py")
    (tmp_path / "train.py").write_text("from helpers import wrap\nfrom pkg import steps\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    with one_run():
        assert resolve_module(root, script, "helpers", 0) is None
        assert resolve_submodule(root, script, "pkg", 0, "steps") is None
        (tmp_path / "helpers.py").write_text("def wrap(m):\n    return m\n")
        (tmp_path / "pkg" / "steps.py").write_text("")
        assert resolve_module(root, script, "helpers", 0) is None  # remembered for the run
        assert resolve_submodule(root, script, "pkg", 0, "steps") is None
        forget()
        assert resolve_module(root, script, "helpers", 0) == str(tmp_path / "helpers.py")
        assert resolve_submodule(root, script, "pkg", 0, "steps") == str(tmp_path / "pkg" / "steps.py")
    (tmp_path / "helpers.py").unlink()
    assert resolve_module(root, script, "helpers", 0) is None  # outside a run: the disk as it is
    (tmp_path / "helpers.py").write_text("")
    assert resolve_module(root, script, "helpers", 0) == str(tmp_path / "helpers.py")
