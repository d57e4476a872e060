"""The code `dataclasses` writes is kept between runs, and what it gives is what
`dataclasses` would have compiled itself."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import marshal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from accumlint.compat import generated_code

# The hook runs in accumlint's own command only (accumlint.compat.enable).
pytestmark = pytest.mark.usefixtures("speedups_on")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """The cache file in a scratch folder, with writing allowed whatever the environment says."""
    path = tmp_path / "pycache" / "dataclasses-code.marshal"
    monkeypatch.setattr(generated_code, "cache_file", lambda: path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return path


def _define(fields: tuple[str, str] = ("x", "y")) -> type:
    """A fresh frozen dataclass (its second field defaults to 0), defined while the cache is active."""
    first, second = fields
    with generated_code.cached():
        return dataclasses.make_dataclass("Point", [(first, int), (second, int, dataclasses.field(default=0))], frozen=True)


def _kept(path: Path) -> dict:
    """The kept code by text (dataclasses' texts are compiled with no `__future__` feature)."""
    data = path.read_bytes()
    assert data.startswith(importlib.util.MAGIC_NUMBER)
    codes = generated_code._loads(data)
    assert all(features == 0 for features, _ in codes)
    return {text: code for (_, text), code in codes.items()}


def _compile_refused(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("compiled although the code was kept")

    monkeypatch.setattr(generated_code, "compile", refuse, raising=False)


def test_a_first_run_keeps_what_it_compiled_and_the_next_compiles_nothing(cache, monkeypatch) -> None:
    first = _define()
    assert first(1) == first(1, 0) and repr(first(1, 2)) == "Point(x=1, y=2)"
    texts = _kept(cache)
    assert any("def __init__(self,x:" in text for text in texts) and any("def __hash__" in text for text in texts)
    _compile_refused(monkeypatch)
    second = _define()
    assert second(3, 4) == second(3, 4) and hash(second(3, 4)) == hash(first(3, 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        second(1).x = 2
    assert _kept(cache) == texts  # nothing changed, nothing rewritten


def test_kept_code_is_what_compile_makes_of_the_text(cache) -> None:
    _define()
    for text, code in _kept(cache).items():
        assert code == compile(text, "<string>", "exec", dont_inherit=True)


def test_the_hook_is_gone_after_the_block_even_when_it_raises(cache) -> None:
    with pytest.raises(RuntimeError):
        with generated_code.cached():
            assert dataclasses.exec.__self__.__class__.__name__ == "_Cache"
            raise RuntimeError
    assert "exec" not in vars(dataclasses)
    assert not cache.exists()  # an import that failed writes nothing
    _define()
    assert "exec" not in vars(dataclasses)


def test_imports_of_different_classes_share_the_file_without_rewriting_it_in_turn(cache, monkeypatch) -> None:
    _define(("x", "y"))
    _define(("a", "b"))
    kept = _kept(cache)
    assert any("(self,x:" in text for text in kept) and any("(self,a:" in text for text in kept)
    written = cache.stat().st_mtime_ns
    _compile_refused(monkeypatch)
    _define(("x", "y"))  # uses half of what is kept: a hit, nothing to write
    assert cache.stat().st_mtime_ns == written and _kept(cache) == kept


def test_what_an_upgrade_leaves_unused_goes_when_it_outnumbers_what_is_used(cache) -> None:
    cache.parent.mkdir(parents=True)
    stale = {(0, f"# an old release's text {n}\n"): compile("", "<string>", "exec") for n in range(50)}
    cache.write_bytes(generated_code._dumps(stale))
    _define()
    kept = _kept(cache)
    assert kept and not any(text.startswith("# an old release") for text in kept)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not marshal at all",
        marshal.dumps((b"\0\0\0\0", {})),
        marshal.dumps([1, 2]),
        marshal.dumps((importlib.util.MAGIC_NUMBER, {})),  # the format without a checksum
        generated_code._dumps([1, 2]),  # (a checksum that holds over something else)
    ],
)
def test_an_unreadable_or_foreign_file_is_an_empty_cache(cache, content) -> None:
    cache.parent.mkdir(parents=True)
    cache.write_bytes(content)
    point = _define()
    assert point(1, 2).y == 2
    assert _kept(cache)  # rewritten with what this run compiled


def test_nothing_is_written_when_python_is_told_not_to_write_bytecode(cache, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _define()
    assert not cache.exists()


def test_an_unwritable_folder_keeps_no_cache_and_the_run_goes_on(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setattr(generated_code, "cache_file", lambda: blocker / "cache.marshal")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert _define()(1).x == 1


def test_another_hook_on_dataclasses_is_left_alone(cache, monkeypatch) -> None:
    calls = []

    def theirs(source, globals=None, locals=None):
        calls.append(source)
        exec(source, globals, locals)

    monkeypatch.setattr(dataclasses, "exec", theirs, raising=False)
    _define()
    assert calls and dataclasses.exec is theirs
    assert not cache.exists()


def test_the_hook_runs_other_calls_as_the_built_in_would(cache) -> None:
    hook = generated_code._Cache({})
    namespace: dict = {}
    hook.exec(compile("a = 1", "<test>", "exec"), namespace, namespace)
    assert namespace["a"] == 1
    hook.exec("seen = REPO", None, namespace)  # no globals: the caller's, as `exec` would take
    assert namespace["seen"] == REPO
    only_globals = {"b": 2}
    hook.exec(compile("c = b + 1", "<test>", "exec"), only_globals)  # no locals: the globals serve
    assert only_globals["c"] == 3


def test_a_text_is_compiled_with_its_callers_future_features(cache) -> None:
    """This test module uses `from __future__ import annotations`, as `exec` would pass on."""
    hook = generated_code._Cache({})
    namespace: dict = {}
    hook.exec("def f(x: undefined_name): pass", namespace, namespace)
    assert namespace["f"].__annotations__ == {"x": "undefined_name"}
    ((features, _),) = hook.used
    assert features & __import__("__future__").annotations.compiler_flag


def test_a_damaged_entry_is_compiled_again(cache) -> None:
    _define()
    damaged = {(0, text): "print('not code')" for text in _kept(cache)}
    cache.write_bytes(generated_code._dumps(damaged))
    point = _define()
    assert point(1, 2) == point(1, 2)
    assert all(type(code) is type(compile("", "", "exec")) for code in _kept(cache).values())


_METHODS = """
import dataclasses, hashlib, json, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
if {cached}:
    import accumlint.compat, accumlint.compat.generated_code as generated_code
    accumlint.compat.enable()
    generated_code.cache_file = lambda: Path({path!r})
    sys.dont_write_bytecode = False
    from accumlint.check.analysis import load_analysis
    load_analysis()
else:
    import libcst
    import accumlint.fix.guard, accumlint.model.build, accumlint.rules.registry

def fingerprint(code):
    parts = [code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
             code.co_filename, getattr(code, "co_qualname", code.co_name), code.co_firstlineno, code.co_linetable, code.co_flags]
    # a frozenset constant (`name in {{'x', 'y'}}`, Python 3.13) iterates in an order of its string hashes
    parts += [fingerprint(c) if hasattr(c, "co_code") else repr(sorted(c)) if isinstance(c, frozenset) else repr(c)
              for c in code.co_consts]
    return hashlib.sha256(repr(parts).encode()).hexdigest()

seen = {{}}
for module in list(sys.modules.values()):
    for value in list(vars(module).values()) if module is not None else []:
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            for name, member in vars(value).items():
                code = getattr(member, "__code__", None)
                if code is not None and code.co_filename == "<string>":
                    seen[f"{{value.__module__}}.{{value.__qualname__}}.{{name}}"] = fingerprint(code)
print(json.dumps(seen))
"""


def test_libcst_and_accumlint_dataclasses_get_the_same_methods_with_the_cache(tmp_path) -> None:
    """A fresh interpreter without the cache, one that fills it and one that reads it:
    every method `dataclasses` wrote has the same code in all three."""
    path = str(tmp_path / "cache.marshal")
    runs = []
    for cached in (False, True, True):
        script = _METHODS.format(repo=str(REPO), cached=cached, path=path)
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout))
    without, filling, reading = runs
    assert len(without) > 500  # LibCST's node types and ours, each with several methods
    assert filling == without and reading == without
    assert len(generated_code._loads(Path(path).read_bytes())) > 100  # one text per class from Python 3.13 on
