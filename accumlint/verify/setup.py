"""What the two runs train: a model, an optimizer factory, micro-batches, a loss.

A user's *setup factory* returns these for their own loop; without one the
built-in synthetic setup serves loops of the canonical shape
`train(model, optimizer, loader, accum_steps, loss_fn)` over `(x, y)` batches.

A factory may return:
- a `Setup` (this module's dataclass),
- a dict with keys `model`, `optimizer` (or `optimizer_factory`), `batches`
  (or `micro_batches`, or a `DataLoader`: the runs then get DataLoaders too)
  and optionally `loss_fn` and `construct` (for `FILE::Class.method`: a
  callable taking the run's objects by role name and returning the instance);
  any other key names an object (a loss scaler, a tokenizer) that a
  parameter of that name, or one bound with `--bind NAME=setup.KEY`,
  receives: each run its own deep copy,
- a tuple `(model, optimizer_factory, batches)` or
  `(model, optimizer_factory, batches, loss_fn)`.
`optimizer_factory` is a callable from an iterable of parameters to a fresh
optimizer: each run gets its own. The factory is called with those of the
keyword arguments `accum_steps`, `windows`, `micro_batch`, `seed`, `device`
and `dtype` that its signature accepts, so it can size its data.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch import nn
from torch.utils.data import DataLoader

from accumlint.verify.batches import map_tensors
from accumlint.verify.loading import user_errors

OptimizerFactory = Callable[[Any], torch.optim.Optimizer]

SYNTHETIC_FEATURES = 8
SYNTHETIC_HIDDEN = 16
SYNTHETIC_CLASSES = 4


class SetupError(Exception):
    """The setup could not be loaded or has the wrong shape."""


@dataclass
class Setup:
    """The ingredients of both runs; `batches` are the micro-batches of run A."""

    model: nn.Module
    optimizer_factory: OptimizerFactory
    batches: list
    loss_fn: Optional[Callable] = None
    as_dataloader: bool = False
    # For FILE::Class.method: builds the instance from the run's objects.
    construct: Optional[Callable[..., Any]] = None
    # Other objects by name, for the parameters bound to them (see the module docstring).
    objects: dict[str, Any] = field(default_factory=dict)


def synthetic_setup(
    *,
    accum_steps: int,
    windows: int,
    micro_batch: int,
    seed: int,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
) -> Setup:
    """A small classifier on random data, deterministic for a seed.

    Tanh keeps the loss smooth and every gradient non-zero; SGD with momentum
    makes a wrong gradient scale visible in the final weights as well.
    """
    generator = torch.Generator().manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(SYNTHETIC_FEATURES, SYNTHETIC_HIDDEN),
        nn.Tanh(),
        nn.Linear(SYNTHETIC_HIDDEN, SYNTHETIC_CLASSES),
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    count = windows * accum_steps
    inputs = torch.randn(count, micro_batch, SYNTHETIC_FEATURES, generator=generator)
    targets = torch.randint(0, SYNTHETIC_CLASSES, (count, micro_batch), generator=generator)
    batches = [(inputs[i], targets[i]) for i in range(count)]
    setup = Setup(
        model=model,
        optimizer_factory=lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
        batches=batches,
        loss_fn=nn.CrossEntropyLoss(),
    )
    return place(setup, device=device, dtype=dtype)


def place(setup: Setup, *, device: str, dtype: Optional[torch.dtype]) -> Setup:
    """Move the model and every tensor of the batches to `device` (and `dtype`
    for floating-point tensors, when given)."""

    def move(tensor: torch.Tensor) -> torch.Tensor:
        if dtype is not None and tensor.is_floating_point():
            return tensor.to(device=device, dtype=dtype)
        return tensor.to(device=device)

    setup.model.to(device=device)
    if dtype is not None:
        setup.model.to(dtype=dtype)
    setup.batches = [map_tensors(batch, move) for batch in setup.batches]
    return setup


def load_factory(spec: str) -> Callable[..., Any]:
    """`package.module:factory` -> the callable (the module is imported)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise SetupError(f"--setup expects module:factory, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except user_errors() as error:  # any import failure, or exit, is the user's to see
        raise SetupError(f"cannot import setup module {module_name!r}: {type(error).__name__}: {error}") from error
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise SetupError(f"{module_name} has no callable {attribute!r}")
    return factory


def build_setup(factory: Callable[..., Any], **context: Any) -> Setup:
    """Call a user factory with the context it accepts and normalise its result."""
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        accepted = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    kwargs = {key: value for key, value in context.items() if takes_all or key in accepted}
    try:
        value = factory(**kwargs)
    except user_errors() as error:  # the user's factory may raise anything, or exit
        raise SetupError(f"the setup factory raised {type(error).__name__}: {error}") from error
    return as_setup(value)


# The keys of a setup dict that are not named objects.
_SETUP_KEYS = frozenset(
    {"model", "optimizer", "optimizer_factory", "batches", "micro_batches", "loss_fn", "construct"}
)


def as_setup(value: Any) -> Setup:
    """A `Setup` from a Setup, dict or tuple (see the module docstring)."""
    if isinstance(value, Setup):
        setup = value
    elif isinstance(value, dict):
        try:
            setup = Setup(
                model=value["model"],
                optimizer_factory=value.get("optimizer_factory", value.get("optimizer")),
                batches=value.get("batches", value.get("micro_batches")),
                loss_fn=value.get("loss_fn"),
                construct=value.get("construct"),
                objects={key: item for key, item in value.items() if key not in _SETUP_KEYS},
            )
        except KeyError as error:
            raise SetupError(f"the setup dict has no {error.args[0]!r} key") from None
    elif isinstance(value, (tuple, list)) and len(value) in (3, 4):
        setup = Setup(*value)
    else:
        raise SetupError(
            "a setup factory must return a Setup, a dict or a tuple "
            "(model, optimizer_factory, batches[, loss_fn])"
        )
    if not isinstance(setup.model, nn.Module):
        raise SetupError("the setup's model is not a torch.nn.Module")
    if not callable(setup.optimizer_factory):
        raise SetupError("the setup's optimizer factory is not callable (params -> optimizer)")
    if setup.batches is None:
        raise SetupError("the setup has no batches")
    if isinstance(setup.batches, DataLoader):
        setup.as_dataloader = True
    try:
        setup.batches = list(setup.batches)
    except Exception as error:  # noqa: BLE001 - the user's loader may raise anything
        raise SetupError(f"iterating the setup's batches raised {type(error).__name__}: {error}") from error
    return setup
