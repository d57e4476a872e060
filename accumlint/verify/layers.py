"""Layers whose training-mode output depends on the batch or on the RNG.

Dropout draws masks of the batch's shape, so micro-batches and their
concatenation see different masks; batch-norm normalises by the statistics of
the batch it is given. Either breaks the accumulation identity by design, so
the verifier explains them instead of failing bare, and can pin them in eval
mode for a run that isolates the loop's own logic.
"""

from __future__ import annotations

import types

from torch import nn
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


def pin_eval_mode(model: nn.Module) -> None:
    """Put dropout and batch-norm layers in eval mode for good: a later
    `model.train()` in the user's loop leaves them in eval mode."""
    for module in model.modules():
        if isinstance(module, (_DropoutNd, _BatchNorm)):
            module.eval()
            module.train = types.MethodType(_stay_in_eval, module)


def _stay_in_eval(self: nn.Module, mode: bool = True) -> nn.Module:
    return self
