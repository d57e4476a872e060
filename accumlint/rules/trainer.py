"""Hugging Face `Trainer` subclasses: an override of `compute_loss` that breaks the
Trainer's own 1/K (GA207), or divides by K again once the Trainer does (GA204).

These rules run once per module: a trainer class has no loop of its own."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from accumlint.fix.edits import Edit, insert_after, insert_before, replace
from accumlint.model.build import ModuleModel
from accumlint.model.facts import Function
from accumlint.model.trainers import (
    TRAINER_K,
    TrainerClass,
    division_by_trainer_k,
    loss_kwargs_model_in_module,
    super_init,
    trainer_classes,
    uses_items_in_batch,
)
from accumlint.rules.base import Finding
from accumlint.rules.catalog import Rule


def trainer_loss_not_normalized(model: ModuleModel) -> Iterable[Finding]:
    classes = trainer_classes(model.facts)
    if not classes:
        return
    hf_model = loss_kwargs_model_in_module(model.facts)
    for trainer in classes:
        compute_loss = trainer.compute_loss
        if compute_loss is None or trainer.disables_loss_kwargs or trainer.owns_training_step \
                or not (hf_model or trainer.trl):
            continue  # an own `training_step` replaces the Trainer's division (and its skipping)
        if uses_items_in_batch(compute_loss):
            continue
        yield Finding(
            compute_loss,
            f"`{trainer.node.name.value}.compute_loss` ignores `num_items_in_batch`, so the Trainer "
            "no longer divides its loss by `gradient_accumulation_steps`",
            _disable_edits(trainer, compute_loss),
            "Set `self.model_accepts_loss_kwargs = False` after `super().__init__(...)`",
            help="with an HF model (transformers 4.46 and later) the Trainer skips its own 1/K when "
            "`compute_loss` may normalise by the window's token count; this override does not, so gradients "
            "and the logged loss grow with K. Use `num_items_in_batch`, or set "
            "`self.model_accepts_loss_kwargs = False` so the Trainer divides again",
        )


def _disable_edits(trainer: TrainerClass, compute_loss: Function) -> tuple[Edit, ...]:
    flag = cst.parse_statement("self.model_accepts_loss_kwargs = False\n")
    if trainer.init is not None:
        statement = super_init(trainer.init)
        return (insert_after(statement, flag),) if statement is not None else ()
    init = cst.parse_statement(
        "def __init__(self, *args, **kwargs):\n"
        "    super().__init__(*args, **kwargs)\n"
        "    self.model_accepts_loss_kwargs = False\n"
    )
    return (insert_before(compute_loss, init.with_changes(leading_lines=compute_loss.leading_lines)),)


def trainer_double_scaling(model: ModuleModel) -> Iterable[Finding]:
    """GA204 in `compute_loss`: the Trainer divides by K (loss kwargs disabled) and so does the override."""
    for trainer in trainer_classes(model.facts):
        if trainer.compute_loss is None or not trainer.disables_loss_kwargs:
            continue
        division = division_by_trainer_k(trainer.compute_loss)
        if division is None:
            continue
        yield Finding(
            division,
            f"the division by `{TRAINER_K}` is extra: the Trainer already divides the loss by K",
            (replace(division, division.left),),
            "Remove the extra division",
            help="with `model_accepts_loss_kwargs = False` the Trainer divides `compute_loss`'s result by "
            "`gradient_accumulation_steps` itself, so gradients are K times too small",
        )


TRAINER_LOSS_NOT_NORMALIZED = Rule(
    code="GA207",
    name="trainer-loss-not-normalized",
    fix="unsafe",
    summary="A Hugging Face Trainer's `compute_loss` override ignores `num_items_in_batch`, so the loss grows with K.",
    module_check=trainer_loss_not_normalized,
)
