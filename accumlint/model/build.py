"""Building the model of a module: facts, roles, loops and their windows, once."""

from __future__ import annotations

import libcst as cst

from accumlint.model.facts import collect_facts
from accumlint.model.loop import build_loops
from accumlint.model.loss import LossReader
from accumlint.model.roles import Objects
from accumlint.model.window import Window, build_window


def windows_of(module: cst.Module, text: str, options) -> list[Window]:
    facts = collect_facts(module, text)
    objects = Objects(facts, tuple(options.optimizer_names))
    reader = LossReader(facts, objects)
    return [
        build_window(loop, facts, objects, reader, tuple(options.accumulation_names))
        for loop in build_loops(facts, objects, tuple(options.accumulation_names))
    ]
