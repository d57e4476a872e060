"""A LazyPattern answers as the compiled pattern would, and compiles only when it is first used."""

from __future__ import annotations

import re

from accumlint.source.patterns import LazyPattern

_SOURCE = r"(^|_)optimi[sz]er(s)?($|_)"
_TEXTS = ["optimizer", "OPTIMISER", "gen_optimizers_2", "adoptimizer", "opt", ""]


def test_it_answers_as_the_compiled_pattern():
    lazy, compiled = LazyPattern(_SOURCE, re.IGNORECASE), re.compile(_SOURCE, re.IGNORECASE)
    for text in _TEXTS:
        assert bool(lazy.search(text)) == bool(compiled.search(text))
        assert bool(lazy.match(text)) == bool(compiled.match(text))
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in compiled.finditer(text)]
        assert lazy.sub("X", text) == compiled.sub("X", text)
    assert (lazy.pattern, lazy.flags) == (compiled.pattern, compiled.flags)
    assert lazy.search("OPTIMIZER") and not LazyPattern(_SOURCE).search("OPTIMIZER")  # flags are kept


def test_it_compiles_once_and_only_when_used(monkeypatch):
    compiled = []
    original = re.compile

    def counting(pattern, flags=0):
        compiled.append(pattern)
        return original(pattern, flags)

    monkeypatch.setattr(re, "compile", counting)
    lazy = LazyPattern(_SOURCE)
    assert compiled == []
    for text in _TEXTS:
        lazy.search(text)
        lazy.match(text)
    assert compiled == [_SOURCE]
