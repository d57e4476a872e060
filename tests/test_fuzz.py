"""Fuzzing in the test suite: a few examples per run here,
many with benchmarks/fuzz.py. See tests/fuzzing.py for the properties."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from fuzzing import grammar_programs, line_ending_problems, mixed_line_endings, mutated_fixtures, problems

# derandomized: CI runs the same examples each time; the fuzz script explores
CI = settings(max_examples=25, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))


@CI
@given(mutated_fixtures())
def test_mutated_fixtures_check_and_fix_cleanly(text: str) -> None:
    assert problems(text) == []


@settings(CI, max_examples=15)
@given(grammar_programs())
def test_generated_programs_check_and_fix_cleanly(text: str) -> None:
    assert problems(text) == []


@settings(CI, max_examples=15)
@given(mixed_line_endings())
def test_mixed_line_endings_check_and_fix_as_line_feeds_do(text: str) -> None:
    assert line_ending_problems(text) == []


def test_problems_are_reported() -> None:
    """The property finds what it claims to find (a check that cannot fail proves nothing)."""
    from unittest import mock

    from accumlint.check import fixes

    text = "import torch\n\nfor i, b in enumerate(data):\n    loss = torch.nn.functional.mse_loss(b, b)\n    loss.backward()\n    if i % 4 == 0:\n        opt.step()\n        opt.zero_grad()\n"
    assert problems(text) == []  # GA106's fix is clean
    broken = fixes.FixOutcome(text.replace("opt.step()", "undefined_name.step()"), [], [], True)
    with mock.patch("fuzzing.fix_text", side_effect=[broken, broken]):
        assert any("undefined" in problem for problem in problems(text))


def _json_values():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=12), max_leaves=20)


def _entry_fields():
    """Dictionaries over a finding's own field names (and a few others), of any JSON values."""
    from hypothesis import strategies as st

    from accumlint.diagnostics import Diagnostic

    names = st.sampled_from([*Diagnostic._fields, "extra"])
    return st.lists(st.dictionaries(names, _json_values(), max_size=14), max_size=3)


@settings(CI, max_examples=60)
@given(content=_json_values() | _entry_fields())
def test_a_cache_entry_of_any_json_with_a_valid_checksum_is_trusted_only_in_shape(tmp_path_factory, content) -> None:
    """A hand-made entry (its checksum right, its content anything) is a miss unless it is
    exactly a list of findings: reading it never raises, and what it gives is findings."""
    import json

    from accumlint.check import cache as cache_module
    from accumlint.diagnostics import Diagnostic

    cache = cache_module.Cache(tmp_path_factory.mktemp("cache"))
    cache.put("k", [])
    payload = json.dumps(content)
    (cache.directory / "k.json").write_text(f"{cache_module._checksum('k', payload)}\n{payload}")
    found = cache.get("k", "t.py")
    assert found is None or (isinstance(found, list) and all(isinstance(d, Diagnostic) for d in found))
    if found:
        assert all(type(d.line) is int and type(d.message) is str and d.path == "t.py" for d in found)
