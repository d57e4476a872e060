"""What a run does besides producing gradients, seen without changing the user's code.

While the runs execute, a few torch entry points are wrapped: backward
calls, gradient clipping (its return value is the pre-clip norm), the AMP
scaler's `scale`/`update`/`unscale_` (the scale a clip ran under when the
gradients were not yet unscaled), LR scheduler steps, accelerate's `accumulate()`,
the optimizer step hooks and a forward hook that sees the dtype the model
computes in (autocast included). Each wrapper reports to the *recorder of
the calling thread*: the two runs may execute in two threads (lockstep), and
an oracle run may nest inside one of them, so evidence never mixes. Calls
from threads without a recorder pass straight through.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Final, Iterator, Literal, Optional, Protocol

import torch
from torch.nn.modules.module import register_module_forward_hook
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

# What a run counts (see `Recorder.event`).
RunEvent = Literal["backward", "clip", "scaler.update", "scaler.unscale_", "scaler.scale", "allreduce",
                   "backward after all-reduce", "scheduler.step", "accumulate"]
BACKWARD: Final = "backward"
CLIP: Final = "clip"
SCALER_UPDATE: Final = "scaler.update"
SCALER_UNSCALE: Final = "scaler.unscale_"
SCALER_SCALE: Final = "scaler.scale"
ALLREDUCE: Final = "allreduce"
# A backward call after the window's all-reduce: DDP synced a micro-batch that was not the last.
BACKWARD_AFTER_SYNC: Final = "backward after all-reduce"
SCHEDULER: Final = "scheduler.step"
ACCUMULATE: Final = "accumulate"


class Recorder(Protocol):
    """What a wrapper reports to (runs.RunRecorder implements it)."""

    def event(self, kind: RunEvent) -> None: ...

    def clip_norm(self, norm: Any, max_norm: Any = None) -> None: ...

    def loss_scaled(self, scaler: Any) -> None: ...

    def compute_dtype(self, dtype: torch.dtype) -> None: ...

    def before_step(self, optimizer: torch.optim.Optimizer) -> None: ...

    def after_step(self, optimizer: torch.optim.Optimizer) -> None: ...


_local = threading.local()


def current() -> Optional[Recorder]:
    """The calling thread's recorder, if a run is recording in it."""
    return getattr(_local, "recorder", None)


@contextmanager
def recording_into(recorder: Optional[Recorder]) -> Iterator[None]:
    """Make `recorder` the calling thread's recorder for the block."""
    previous = current()
    _local.recorder = recorder
    try:
        yield
    finally:
        _local.recorder = previous


_install_lock = threading.Lock()
_installed = 0


@contextmanager
def instrumented(user_globals: tuple[dict, ...] = ()) -> Iterator[None]:
    """Install every wrapper for the block (re-entrant); `user_globals` are the
    module namespaces of the user's code, where a name imported with
    `from torch.nn.utils import clip_grad_norm_` is swapped as well."""
    global _installed
    with _install_lock:
        _installed += 1
        first = _installed == 1
    undo: list[Callable[[], None]] = []
    try:
        if first:
            undo.extend(_install_patches())
        undo.extend(_swap_user_names(user_globals))
        yield
    finally:
        for action in reversed(undo):
            action()
        with _install_lock:
            _installed -= 1


def _patch(owner: Any, name: str, make: Callable[[Callable], Callable]) -> Callable[[], None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, make(original))
    return lambda: setattr(owner, name, original)


def _counting(kind: RunEvent) -> Callable[[Callable], Callable]:
    def make(original: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            recorder = current()
            if recorder is not None:
                recorder.event(kind)
            return original(*args, **kwargs)

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    return make


def _clipping(original: Callable) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        recorder = current()
        if recorder is not None:
            recorder.event(CLIP)
        norm = original(*args, **kwargs)
        if recorder is not None:
            recorder.clip_norm(norm, kwargs.get("max_norm", args[1] if len(args) > 1 else None))
        return norm

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__accumlint_wrapper__ = True  # type: ignore[attr-defined]
    return wrapper


def _scaling_loss(original: Callable) -> Callable:
    """GradScaler.scale: counted, and the scaler noted (its scale is what a
    clip before `unscale_` sees the gradients multiplied by)."""

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = current()
        if recorder is not None:
            recorder.event(SCALER_SCALE)
            recorder.loss_scaled(self)
        return original(self, *args, **kwargs)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


_CLIP_FUNCTIONS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


# The clipping functions as torch defines them, noted before they are wrapped,
# so that a user's `from torch.nn.utils import clip_grad_norm_` is recognised.
_CLIP_ORIGINALS: dict[int, Callable] = {}


def _note_clip_originals() -> None:
    import torch.nn.utils.clip_grad as clip_grad

    for name in _CLIP_FUNCTIONS:
        function = getattr(clip_grad, name, None)
        if function is not None and not hasattr(function, "__accumlint_wrapper__"):
            _CLIP_ORIGINALS[id(function)] = function


def _install_patches() -> list[Callable[[], None]]:
    import torch.nn.utils as nn_utils
    import torch.nn.utils.clip_grad as clip_grad
    from torch.amp.grad_scaler import GradScaler
    from torch.optim import lr_scheduler

    _note_clip_originals()
    undo = [_patch(torch.autograd, "backward", _counting(BACKWARD))]
    for module in (nn_utils, clip_grad):
        for name in _CLIP_FUNCTIONS:
            if hasattr(module, name):
                undo.append(_patch(module, name, _clipping))
    undo.append(_patch(GradScaler, "scale", _scaling_loss))
    undo.append(_patch(GradScaler, "update", _counting(SCALER_UPDATE)))
    undo.append(_patch(GradScaler, "unscale_", _counting(SCALER_UNSCALE)))
    for scheduler in (lr_scheduler.LRScheduler, lr_scheduler.ReduceLROnPlateau):
        if "step" in scheduler.__dict__:
            undo.append(_patch(scheduler, "step", _counting(SCHEDULER)))
    accelerator = _accelerator_class()
    if accelerator is not None:
        undo.append(_patch(accelerator, "accumulate", _counting(ACCUMULATE)))
    handles = [
        register_optimizer_step_pre_hook(_before_step),
        register_optimizer_step_post_hook(_after_step),
        register_module_forward_hook(_forward),
    ]
    undo.extend(handle.remove for handle in handles)
    return undo


def _accelerator_class() -> Optional[type]:
    """accelerate's Accelerator when the user's code has imported accelerate."""
    module = sys.modules.get("accelerate")
    return getattr(module, "Accelerator", None) if module is not None else None


def _swap_user_names(namespaces: tuple[dict, ...]) -> list[Callable[[], None]]:
    undo: list[Callable[[], None]] = []
    for namespace in namespaces:
        for name, value in list(namespace.items()):
            original = _CLIP_ORIGINALS.get(id(value))
            if original is not None and value is original:
                namespace[name] = _clipping(original)
                undo.append(lambda ns=namespace, n=name, v=value: ns.__setitem__(n, v))
    return undo


def _before_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
    recorder = current()
    if recorder is None:
        return None
    # `args` holds the optimizer itself first, then step()'s own arguments
    closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
    if not callable(closure):
        recorder.before_step(optimizer)
        return None
    # `optimizer.step(closure)` (Lightning's automatic optimization, LBFGS): the
    # closure runs the window's last backward inside the step, so the gradients
    # that reach the update exist only once it has returned, before the update.
    recorded = False

    def recording_closure() -> Any:
        nonlocal recorded
        loss = closure()
        if not recorded:
            recorded = True
            recorder.before_step(optimizer)
        return loss

    if "closure" in kwargs:
        return args, {**kwargs, "closure": recording_closure}
    return (args[0], recording_closure, *args[2:]), kwargs


def _after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    recorder = current()
    if recorder is not None:
        recorder.after_step(optimizer)


def _forward(module: torch.nn.Module, inputs: Any, output: Any) -> None:
    recorder = current()
    if recorder is None or not isinstance(output, torch.Tensor) or not output.is_floating_point():
        return
    if any(parameter is not None for parameter in module._parameters.values()):
        recorder.compute_dtype(output.dtype)
