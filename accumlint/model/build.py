"""Building the model of a module: facts, roles, loops and their windows, once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Protocol, Sequence

import libcst as cst

from accumlint.model.facts import ModuleFacts, collect_facts
from accumlint.model.loop import Statement, build_loops, release
from accumlint.model.loss import LossReader
from accumlint.model.names import code
from accumlint.model.roles import Objects
from accumlint.model.window import Window, build_window

if TYPE_CHECKING:
    from accumlint.project import ProjectView


class ModelOptions(Protocol):
    """What configuration changes about the model (the check's `AnalysisOptions`)."""

    @property
    def optimizer_names(self) -> Sequence[str]: ...

    @property
    def accumulation_names(self) -> Sequence[str]: ...


@dataclass(frozen=True, eq=False)
class ModuleModel:
    """Everything the rules may ask about one module: its facts, what its objects
    are, and the window of every training loop (a module may have none: an HF
    `Trainer` subclass's `compute_loss` is checked without a loop)."""

    facts: ModuleFacts
    objects: Objects
    windows: list[Window]
    statements: list[Statement]  # every statement the loop walks made, windows' or not

    def release(self) -> None:
        """Done with the model: its statements let go of their events (`loop.release`)."""
        release(self.statements)


def model_of(module: cst.Module, text: str, options: ModelOptions, project: Optional[ProjectView] = None) -> ModuleModel:
    """The model of one module; `project` (a `ProjectView`) lets it read the project's other modules."""
    code.cache_clear()  # texts remembered for one module at a time: the last one's nodes can go
    facts = collect_facts(module, text, project)
    objects = Objects(facts, tuple(options.optimizer_names))
    reader = LossReader(facts, objects)
    statements: list[Statement] = []
    loops = [] if other_framework(facts) else build_loops(facts, objects, tuple(options.accumulation_names), statements)
    windows = [build_window(loop, facts, objects, reader, tuple(options.accumulation_names)) for loop in loops]
    return ModuleModel(facts, objects, windows, statements)


_OTHER_FRAMEWORKS = frozenset({"mxnet", "jax", "flax", "optax", "tensorflow", "keras", "paddle", "mindspore", "oneflow"})


def other_framework(facts: ModuleFacts) -> bool:
    """The module trains with another framework (MXNet, JAX, TensorFlow...) and does not
    import torch: its `loss.backward()` and `trainer.step(n)` are out of scope."""
    roots = {full.split(".")[0] for full in facts.imports.values()}
    return bool(roots & _OTHER_FRAMEWORKS) and "torch" not in roots


def windows_of(module: cst.Module, text: str, options: ModelOptions) -> list[Window]:
    return model_of(module, text, options).windows
