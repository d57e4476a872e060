"""GA110: the backward follows the micro-step loop and sees only its last loss."""

from __future__ import annotations

from typing import Iterable

from accumlint.model.micro import lost_micro_losses
from accumlint.model.window import Window
from accumlint.rules.base import Finding
from accumlint.rules.catalog import Rule


def backward_outside_micro_loop(window: Window) -> Iterable[Finding]:
    for lost in lost_micro_losses(window):
        yield Finding(
            lost.backward.role.call,
            "the backward runs after the micro-step loop and sees only the last micro-batch's loss",
            related=lost.definition.node,
            help="each micro-batch's loss is assigned ({related}) and overwritten by the next one, so K-1 "
            "forwards are wasted and the update uses one micro-batch; run the backward inside the loop "
            "(on the loss divided by K)",
        )


BACKWARD_OUTSIDE_MICRO_LOOP = Rule(
    code="GA110",
    name="backward-outside-micro-loop",
    fix="none",
    summary="The backward follows the micro-step loop and only sees the last micro-batch's loss.",
    check=backward_outside_micro_loop,
)
