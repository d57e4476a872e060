"""Which loss a running mean combines (`accumlint.model.loss.operand_in`), asked of the
model directly: GA501's fixtures prove the same shapes through the rule."""

from __future__ import annotations

import libcst
import pytest

from accumlint.model.loss import operand_in


def _expression(text: str) -> libcst.BaseExpression:
    return libcst.parse_expression(text)


@pytest.mark.parametrize("expression", [
    "(loss - running) / step",
    "(loss - running) * (1 / step)",
    "-loss * 0.5 + running",
])
def test_a_running_mean_combines_its_loss(expression: str) -> None:
    assert operand_in(_expression(expression), {"loss", "running"}, "running") == "loss"


@pytest.mark.parametrize("expression", [
    "(loss - running) / len(loader)",  # calls something
    "(loss + aux_loss - running) / step",  # two losses
    "running / step",  # only the holder
    "loss[0] - running",  # not a plain name
])
def test_no_single_loss_is_combined(expression: str) -> None:
    assert operand_in(_expression(expression), {"loss", "aux_loss", "running"}, "running") is None
