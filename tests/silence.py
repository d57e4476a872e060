"""Silence tests that can fail: the model must see the training loop first.

A test that correct training code yields no finding passes just as well when
the model never recognised the loop, and then it proves nothing. So
`assert_silent` first asserts that the model found a training loop (and, when
the test names it, the window's K: the loop was modelled as accumulating over
that count), and only then that no finding exists. A test about text with no
training loop at all keeps the plain `== []` form.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

import libcst

from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.model.build import model_of
from accumlint.project import view_for

_EMPTY = libcst.Module(body=[])


def window_ks(text: str, path: str, options: AnalysisOptions = AnalysisOptions()) -> list[Optional[str]]:
    """For each training loop the model builds for `text` at `path`, the count its
    window accumulates over, as source text: the window's K, else the K of the
    Accelerator whose `accumulate()` it enters (None: neither). The project around
    `path` is read when it is a file in one, as the analysis reads it."""
    module = libcst.parse_module(text)
    model = model_of(module, text, options, view_for(path, text, module))
    try:
        ks = [w.k if w.k is not None else w.accumulate_k for w in model.windows]
        return [None if k is None else _EMPTY.code_for_node(k) for k in ks]
    finally:
        model.release()


def assert_silent(
    source: str,
    *,
    k: Optional[str] = None,
    accumulating: bool = False,
    code: Optional[str] = None,
    path: str = "train.py",
    options: AnalysisOptions = AnalysisOptions(),
) -> None:
    """Assert that the model finds a training loop in `source` (dedented) whose
    window accumulates over `k` (source text, e.g. `"accum_steps"`) when `k` is
    given, or over some known count when `accumulating`, and then that the
    analysis reports nothing (nothing of rule `code`, when given)."""
    text = textwrap.dedent(source)
    ks = window_ks(text, path, options)
    assert ks, f"{path}: no training loop was modelled, so its silence proves nothing"
    if k is not None:
        assert k in ks, f"{path}: no window accumulates over `{k}`; the windows' K: {ks}"
    if accumulating:
        assert any(ks), f"{path}: no window was modelled as accumulating over a known K"
    found = [d for d in analyze(text, path, options) if code is None or d.code == code]
    assert found == [], f"{path}: expected no finding{'' if code is None else ' of ' + code}, got:\n" + "\n".join(
        f"    {d.line}:{d.column} {d.code} {d.message}" for d in found
    )


def assert_file_silent(path: Path, *, k: Optional[str] = None) -> None:
    """`assert_silent` on a file, checked in the project around it."""
    assert_silent(path.read_text(encoding="utf-8"), k=k, path=str(path))
