"""Layers whose training-mode output depends on the batch or on the RNG.

Dropout draws masks of the batch's shape, so micro-batches and their
concatenation see different masks: no run with dropout on can match another,
whatever the loop does, so both runs always train with dropout off (layers
pinned in eval mode; dropout that a module applies itself through
`self.training`, `F.dropout(x, p, self.training)` or SDPA's
`dropout_p=self.dropout if self.training else 0`, turned off at torch's
functions by `dropout_off`). Batch-norm normalises by the statistics of the
batch it is given: a real difference between accumulation and the large
batch, so it stays in training mode unless the user asks for eval mode, and
is explained when the runs differ.
"""

from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Callable, Iterator

from torch import nn
from torch.nn import functional
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd


def batch_dependent_layers(model: nn.Module) -> list[tuple[str, str]]:
    """(qualified name, kind) of every dropout with p > 0 and every batch-norm."""
    found = []
    for name, module in model.named_modules():
        if isinstance(module, _DropoutNd) and module.p > 0:
            found.append((name, "dropout"))
        elif isinstance(module, _BatchNorm):
            found.append((name, "batch-norm"))
    return found


def dropout_layers(model: nn.Module) -> list[str]:
    """Qualified names of the dropout layers with p > 0."""
    return [name or "<model>" for name, kind in batch_dependent_layers(model) if kind == "dropout"]


def pin_eval_mode(model: nn.Module, *, batch_norm: bool = True) -> None:
    """Put dropout layers (and batch-norm layers, with `batch_norm`) in eval
    mode for good: a later `model.train()` in the user's loop leaves them in
    eval mode."""
    pinned = (_DropoutNd, _BatchNorm) if batch_norm else (_DropoutNd,)
    for module in model.modules():
        if isinstance(module, pinned):
            module.eval()
            module.train = types.MethodType(_stay_in_eval, module)


def _stay_in_eval(self: nn.Module, mode: bool = True) -> nn.Module:
    return self


# torch.nn.functional's dropout functions: (name, index of `training` among the positional arguments).
_DROPOUT_FUNCTIONS = (
    ("dropout", 2), ("dropout1d", 2), ("dropout2d", 2), ("dropout3d", 2),
    ("alpha_dropout", 2), ("feature_alpha_dropout", 2),
)
# Attention functions: (name, index of `dropout_p` among the positional arguments).
_ATTENTION_FUNCTIONS = (("scaled_dot_product_attention", 4), ("multi_head_attention_forward", 10))


@contextlib.contextmanager
def dropout_off() -> Iterator[None]:
    """For the block, torch.nn.functional's dropout functions run as in eval
    mode and its attention functions with `dropout_p=0`, whatever the calling
    module's `training` says (code that took the function itself, `from
    torch.nn.functional import dropout`, before the block keeps the original)."""
    undo = []
    for name, index in _DROPOUT_FUNCTIONS:
        undo.append(_replace_argument(name, index, "training", False))
    for name, index in _ATTENTION_FUNCTIONS:
        undo.append(_replace_argument(name, index, "dropout_p", 0.0))
    try:
        yield
    finally:
        for action in reversed(undo):
            action()


def _replace_argument(name: str, index: int, keyword: str, value: Any) -> Callable[[], None]:
    original = getattr(functional, name, None)
    if original is None:
        return lambda: None

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(args) > index:
            args = (*args[:index], value, *args[index + 1:])
        else:
            kwargs[keyword] = value
        return original(*args, **kwargs)

    setattr(functional, name, wrapper)
    return lambda: setattr(functional, name, original)
