"""One run of the user's training function, and what it leaves at every optimizer step.

Recording uses torch's *global* optimizer step hooks (see `instruments`), so
any optimizer works, user subclasses included, and the user's code is called
unchanged. A step counts when its optimizer holds at least one parameter of
the run's model. At each step the recorder notes the learning rate of every
param group, the events since the previous step (backward calls, clipping,
scaler and scheduler calls), the last pre-clip norm and how much of the
loader was consumed; it hands the live gradients and model state to
`on_step` (the lockstep comparison reads them while the run is paused) and
keeps tensor copies only for the first `keep` steps, which the diagnosis
needs, and only when `retain()` says so. Memory therefore does not grow
with the number of windows.
"""

from __future__ import annotations

import copy
import os
import random
import sys
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Optional

import torch
from torch import nn

from accumlint.verify.binding import (
    ACCUM_STEPS,
    LOADER,
    LOSS_FN,
    MODEL,
    NAMED_PREFIX,
    OPTIMIZER,
    Binding,
    named_object,
)
from accumlint.verify.instruments import (
    ALLREDUCE,
    BACKWARD,
    BACKWARD_AFTER_SYNC,
    SCALER_UNSCALE,
    RunEvent,
    instrumented,
    recording_into,
)
from accumlint.verify.layers import pin_eval_mode
from accumlint.verify.loaders import counting_loader
from accumlint.verify.loading import user_errors

Tensors = dict[str, Optional[torch.Tensor]]


class UserCodeError(Exception):
    """The training function raised; `where` is `file:line` in the user's code and
    `steps_before` the optimizer steps it had taken by then."""

    def __init__(self, where: str, error: BaseException, steps_before: int) -> None:
        super().__init__(f"{where}: {type(error).__name__}: {error}")
        self.where = where
        self.error = error
        self.steps_before = steps_before


class VerifierFault(BaseException):
    """A failure of the verifier's own code while the user's code runs (in a
    step hook). A BaseException, so that neither the user's `except
    Exception` nor the wrapping into UserCodeError swallows it."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def guarded(action: Callable[..., Any], *args: Any) -> Any:
    """Run the verifier's `action` inside a hook: its failures become VerifierFault."""
    try:
        return action(*args)
    except Exception as error:  # noqa: BLE001 - reported as the verifier's own failure
        raise VerifierFault(error) from error


@dataclass
class StepRecord:
    """One optimizer step. `gradients` (None where a parameter had none) are
    the optimizer's parameters'; `state` is the whole model's parameters and
    buffers just before the step (where the gradient was computed). Both are
    empty once the step is no longer kept."""

    index: int
    has_gradient: bool
    lrs: tuple[float, ...]
    events: dict[str, int]
    clip_norm: Optional[float]
    consumed: int
    gradients: Tensors = field(default_factory=dict)
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    # Which optimizer stepped (0, 1, ... in the order of their first steps),
    # the clip's max_norm, and the GradScaler's scale when the clip ran on
    # gradients not yet unscaled (None when it ran after unscale_ or without a scaler).
    optimizer: int = 0
    max_norm: Optional[float] = None
    scale_at_clip: Optional[float] = None

    def kept(self) -> "StepRecord":
        """A copy that owns its tensors."""
        return replace(
            self,
            gradients={n: None if g is None else g.detach().clone() for n, g in self.gradients.items()},
            state={n: t.detach().clone() for n, t in self.state.items()},
        )

    def light(self) -> "StepRecord":
        """A copy without tensors."""
        return replace(self, gradients={}, state={})


@dataclass
class RunRecord:
    """Everything one run leaves: its steps, final parameters and evidence."""

    steps: list[StepRecord] = field(default_factory=list)
    final: dict[str, torch.Tensor] = field(default_factory=dict)
    consumed: int = 0
    trailing_events: dict[str, int] = field(default_factory=dict)
    compute_dtypes: set = field(default_factory=set)
    # A batch size the loop fetched other than the run's (a loader rebuilt from its dataset).
    foreign_batch_size: Optional[int] = None


@dataclass
class RunInputs:
    """What one call of the training function receives (besides its own copy of
    the model and a fresh optimizer)."""

    model: nn.Module
    optimizer_factory: Callable[[Any], torch.optim.Optimizer]
    batches: Any
    accum_steps: int
    loss_fn: Optional[Callable] = None
    as_dataloader: bool = False
    # Objects the setup returns by name (a loss scaler, a tokenizer): each run gets its own copy.
    named: dict[str, Any] = field(default_factory=dict)


StepCallback = Callable[[StepRecord], None]


class RunRecorder:
    """Receives the instruments' reports for one run (see `instruments.Recorder`)."""

    def __init__(self, model: nn.Module, loader: Any, on_step: Optional[StepCallback], keep: int) -> None:
        self.model = model
        self.loader = loader
        self.names = {id(parameter): name for name, parameter in model.named_parameters()}
        self.on_step = on_step
        self.keep = keep
        # Whether the first `keep` steps are worth copying (the lockstep
        # comparison keeps them only once a step has failed: the diagnosis
        # needs them, a passing run does not).
        self.retain: Callable[[], bool] = lambda: True
        self.record = RunRecord()
        self._events: Counter = Counter()
        self._clip: Optional[float] = None
        self._max_norm: Optional[float] = None
        self._scale_at_clip: Optional[float] = None
        self._scaler: Any = None
        self._optimizers: dict[int, int] = {}
        self._depth: Counter = Counter()

    def event(self, kind: RunEvent) -> None:
        if kind == BACKWARD and self._events.get(ALLREDUCE, 0):
            self._events[BACKWARD_AFTER_SYNC] += 1
        self._events[kind] += 1

    def clip_norm(self, norm: Any, max_norm: Any = None) -> None:
        try:
            self._clip = float(norm)
        except (TypeError, ValueError):
            self._clip = self._max_norm = self._scale_at_clip = None
            return
        self._max_norm = _number(max_norm) if max_norm is not None else None
        self._scale_at_clip = None
        if self._scaler is not None and self._events.get(SCALER_UNSCALE, 0) == 0:
            # The loss was scaled and nothing unscaled the gradients yet.
            try:
                self._scale_at_clip = float(self._scaler.get_scale())
            except Exception:  # noqa: BLE001 - a scaler-like object without get_scale()
                self._scale_at_clip = None

    def loss_scaled(self, scaler: Any) -> None:
        self._scaler = scaler if getattr(scaler, "is_enabled", lambda: True)() else None

    def compute_dtype(self, dtype: torch.dtype) -> None:
        self.record.compute_dtypes.add(dtype)

    def before_step(self, optimizer: torch.optim.Optimizer) -> None:
        # A subclass whose step() calls super().step() runs the global hooks at
        # both levels; only the outermost call of each optimizer is a step.
        self._depth[id(optimizer)] += 1
        if self._depth[id(optimizer)] > 1:
            return
        gradients: Tensors = {}
        lrs = []
        for group in optimizer.param_groups:
            lrs.append(_number(group.get("lr")))
            for parameter in group["params"]:
                name = self.names.get(id(parameter))
                if name is not None:
                    gradients[name] = None if parameter.grad is None else parameter.grad.detach()
        if not gradients:
            return
        record = StepRecord(
            index=len(self.record.steps),
            has_gradient=any(g is not None and bool(torch.any(g != 0)) for g in gradients.values()),
            lrs=tuple(lrs),
            events=dict(self._events),
            clip_norm=self._clip,
            consumed=getattr(self.loader, "taken", 0),
            gradients=gradients,
            state=_model_state(self.model),
            optimizer=self._optimizers.setdefault(id(optimizer), len(self._optimizers)),
            max_norm=self._max_norm if self._clip is not None else None,
            scale_at_clip=self._scale_at_clip if self._clip is not None else None,
        )
        self._events, self._clip, self._max_norm, self._scale_at_clip = Counter(), None, None, None
        self.record.steps.append(record.light())
        if self.on_step is not None:
            self.on_step(record)
        if record.index < self.keep and self.retain():
            # Still inside the step hook: the live tensors are those of this step.
            self.record.steps[record.index] = record.kept()

    def after_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self._depth[id(optimizer)] > 0:
            self._depth[id(optimizer)] -= 1

    def finish(self) -> RunRecord:
        # The run's model is its own deep copy, unused once the run ended: no clone.
        self.record.final = {name: p.detach() for name, p in self.model.named_parameters()}
        self.record.consumed = getattr(self.loader, "taken", 0)
        self.record.trailing_events = dict(self._events)
        self.record.foreign_batch_size = getattr(self.loader, "foreign_batch_size", None)
        return self.record


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    state = {name: p.detach() for name, p in model.named_parameters()}
    state.update((name, b.detach()) for name, b in model.named_buffers())
    return state


@dataclass
class PreparedRun:
    """A call of the training function, ready to be made, and its recorder."""

    call: Callable[[], None]
    recorder: RunRecorder


def prepare_run(
    function: Callable[..., Any],
    binding: Binding,
    inputs: RunInputs,
    *,
    eval_mode: bool = False,
    wrap: Optional[Callable[[nn.Module], nn.Module]] = None,
    on_step: Optional[StepCallback] = None,
    keep: int = 0,
) -> PreparedRun:
    """Build a deep copy of the model, a fresh optimizer and a counting loader,
    and the call of `function` on them. `wrap` (e.g. DistributedDataParallel)
    wraps the copy; parameter names are those of the unwrapped copy. The call
    raises UserCodeError."""
    model = copy.deepcopy(inputs.model)
    pin_eval_mode(model, batch_norm=eval_mode)
    called = wrap(model) if wrap is not None else model
    loader = counting_loader(inputs.batches, inputs.as_dataloader)
    objects = {
        MODEL: called,
        OPTIMIZER: inputs.optimizer_factory(model.parameters()),
        LOADER: loader,
        ACCUM_STEPS: inputs.accum_steps,
        LOSS_FN: inputs.loss_fn,
    }
    used = {named_object(role) for _, role in binding.bound_roles()} | {
        named_object(role) for role in binding.constructed_roles}
    objects.update((f"{NAMED_PREFIX}{name}", _own_copy(value)) for name, value in inputs.named.items() if name in used)
    args, kwargs = binding.arguments(objects)
    recorder = RunRecorder(model, loader, on_step, keep)

    def call() -> None:
        with recording_into(recorder):
            try:
                function(*args, **kwargs)
            except VerifierFault:
                raise
            except user_errors() as error:  # user code may raise anything, or exit
                where = _user_location(error, function)
                raise UserCodeError(where, error, len(recorder.record.steps)) from error

    return PreparedRun(call, recorder)


def _own_copy(value: Any) -> Any:
    """A run's own copy of a setup object (a scaler keeps state across steps);
    the object itself when it cannot be copied (then it is stateless, or shared)."""
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - any object may refuse to be copied
        return value


def run_training(
    function: Callable[..., Any],
    binding: Binding,
    inputs: RunInputs,
    *,
    seed: int,
    eval_mode: bool = False,
    wrap: Optional[Callable[[nn.Module], nn.Module]] = None,
    on_step: Optional[StepCallback] = None,
    keep: int = 0,
) -> RunRecord:
    """One seeded run of `function`, start to end, in the calling thread.
    Raises UserCodeError."""
    run = prepare_run(function, binding, inputs, eval_mode=eval_mode, wrap=wrap, on_step=on_step, keep=keep)
    with seeded(seed, device_of(run.recorder.model)), instrumented(user_namespaces(function)):
        run.call()
    return run.recorder.finish()


def user_namespaces(function: Callable[..., Any]) -> tuple[dict, ...]:
    """The module namespace(s) the user's function looks its names up in."""
    target = getattr(function, "__func__", function)
    namespace = getattr(target, "__globals__", None)
    return (namespace,) if isinstance(namespace, dict) else ()


# --- random number generators -------------------------------------------------


def rng_state(device: torch.device) -> tuple:
    """Every generator a training loop may draw from: torch's (CPU and the
    run's CUDA device), Python's `random`, and numpy's when it is imported."""
    numpy = sys.modules.get("numpy")
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return (
        torch.get_rng_state(),
        cuda,
        random.getstate(),
        numpy.random.get_state() if numpy is not None else None,
    )


def set_rng_state(state: tuple, device: torch.device) -> None:
    cpu, cuda, python, numpy_state = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda, device)
    random.setstate(python)
    numpy = sys.modules.get("numpy")
    if numpy is not None and numpy_state is not None:
        numpy.random.set_state(numpy_state)


def seed_all(seed: int, device: torch.device) -> None:
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


@contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed every generator for the block and give the caller's states back."""
    saved = rng_state(device)
    seed_all(seed, device)
    try:
        yield
    finally:
        set_rng_state(saved, device)


def device_of(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for none)."""
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def _user_location(error: BaseException, function: Callable[..., Any]) -> str:
    """`file:line` of the deepest frame in the function's own file, else the
    deepest frame of all."""
    frames = traceback.extract_tb(error.__traceback__)
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    home = os.path.abspath(getattr(code, "co_filename", ""))
    own = [frame for frame in frames if os.path.abspath(frame.filename) == home]
    if not frames:
        return "<unknown>"
    frame = (own or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"
