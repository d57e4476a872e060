"""Running the user's training function once and recording every optimizer step.

Recording uses torch's *global* optimizer step pre-hook, so any optimizer
works, user subclasses included, and the user's code is called unchanged. A
step counts when its optimizer holds at least one parameter of the run's
model; the hook keeps each such parameter's gradient and value at that moment
(the value is where the gradient was computed, which the diagnosis needs).
"""

from __future__ import annotations

import copy
import os
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from accumlint.verify.binding import ACCUM_STEPS, LOADER, LOSS_FN, MODEL, OPTIMIZER, Binding
from accumlint.verify.layers import pin_eval_mode


class UserCodeError(Exception):
    """The training function raised; `where` is `file:line` in the user's code and
    `steps_before` the optimizer steps it had taken by then."""

    def __init__(self, where: str, error: BaseException, steps_before: int) -> None:
        super().__init__(f"{where}: {type(error).__name__}: {error}")
        self.where = where
        self.error = error
        self.steps_before = steps_before


@dataclass
class StepRecord:
    """One optimizer step: each parameter's gradient (None if it had none) and
    its value just before the step."""

    gradients: dict[str, Optional[torch.Tensor]]
    parameters: dict[str, torch.Tensor]

    def has_gradient(self) -> bool:
        return any(g is not None and bool(torch.any(g != 0)) for g in self.gradients.values())


@dataclass
class RunRecord:
    """Everything one run leaves: its steps and the final parameters."""

    steps: list[StepRecord] = field(default_factory=list)
    final: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class RunInputs:
    """What one call of the training function receives (besides its own copy of
    the model and a fresh optimizer)."""

    model: nn.Module
    optimizer_factory: Callable[[Any], torch.optim.Optimizer]
    batches: list
    accum_steps: int
    loss_fn: Optional[Callable] = None


def run_training(
    function: Callable[..., Any],
    binding: Binding,
    inputs: RunInputs,
    *,
    seed: int,
    eval_mode: bool = False,
    wrap: Optional[Callable[[nn.Module], nn.Module]] = None,
) -> RunRecord:
    """Call `function` on a deep copy of the model and record its steps.

    `wrap` (e.g. DistributedDataParallel) wraps the copy before the call;
    parameter names are those of the unwrapped copy. Raises UserCodeError.
    """
    model = copy.deepcopy(inputs.model)
    if eval_mode:
        pin_eval_mode(model)
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    called = wrap(model) if wrap is not None else model
    objects = {
        MODEL: called,
        OPTIMIZER: inputs.optimizer_factory(model.parameters()),
        LOADER: inputs.batches,
        ACCUM_STEPS: inputs.accum_steps,
        LOSS_FN: inputs.loss_fn,
    }
    args, kwargs = binding.arguments(objects)
    record = RunRecord()
    with _seeded(seed, _device_of(model)), _recording(names, record.steps):
        try:
            function(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - user code may raise anything
            raise UserCodeError(_user_location(error, function), error, len(record.steps)) from error
    record.final = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    return record


@contextmanager
def _recording(names: dict[int, str], steps: list[StepRecord]) -> Iterator[None]:
    # A subclass whose step() calls super().step() runs the global hooks at
    # both levels; only the outermost call of each optimizer is a step.
    depth: Counter = Counter()

    def before(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        depth[id(optimizer)] += 1
        if depth[id(optimizer)] > 1:
            return
        gradients: dict[str, Optional[torch.Tensor]] = {}
        values: dict[str, torch.Tensor] = {}
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                name = names.get(id(parameter))
                if name is None:
                    continue
                grad = parameter.grad
                gradients[name] = None if grad is None else grad.detach().clone()
                values[name] = parameter.detach().clone()
        if gradients:
            steps.append(StepRecord(gradients, values))

    def after(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        depth[id(optimizer)] -= 1

    handles = [register_optimizer_step_pre_hook(before), register_optimizer_step_post_hook(after)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def _seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch's global RNG for the run and give the caller's state back."""
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def _device_of(model: nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def _user_location(error: BaseException, function: Callable[..., Any]) -> str:
    """`file:line` of the deepest frame in the function's own file, else the
    deepest frame of all."""
    frames = traceback.extract_tb(error.__traceback__)
    home = os.path.abspath(getattr(getattr(function, "__code__", None), "co_filename", ""))
    own = [frame for frame in frames if os.path.abspath(frame.filename) == home]
    frame = (own or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"
