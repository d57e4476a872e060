"""What the model says an iteration accumulates (`accumlint.model.accumulators`) and
which loss a running mean combines (`accumlint.model.loss.operand_in`), asked of the
model directly: GA501's fixtures prove the same shapes through the rule."""

from __future__ import annotations

import textwrap

import libcst
import pytest

from accumlint.check.analysis import AnalysisOptions
from accumlint.model.accumulators import accumulations, backpropagated_later, graphs_kept
from accumlint.model.build import windows_of
from accumlint.model.loss import operand_in
from accumlint.model.names import code


def _window(source: str):
    text = textwrap.dedent(source)
    (window,) = windows_of(libcst.parse_module(text), text, AnalysisOptions())
    return window


def _loop(body: str, before: str = "", after: str = "") -> str:
    """An accumulation loop over `loader` that runs `body` after its backward."""
    head = "for i, (x, y) in enumerate(loader):\n    loss = criterion(model(x), y) / K\n    loss.backward()\n"
    gate = "    if (i + 1) % K == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n"
    return before + head + textwrap.indent(textwrap.dedent(body), "    ") + gate + after


def _read(source: str) -> list[tuple[str, str]]:
    window = _window(source)
    assert window.loop.backwards  # the loop was modelled
    return [(found.holder, code(found.added)) for found in accumulations(window)]


@pytest.mark.parametrize("body", [
    "running += loss\n",
    "running = running + loss\n",
    "running = loss + running\n",
])
def test_a_running_sum_outlives_the_iteration(body: str) -> None:
    assert _read(_loop(body, before="running = 0\n")) == [("running", "loss")]


def test_a_list_of_losses_outlives_the_iteration() -> None:
    assert _read(_loop("losses.append(loss)\n", before="losses = []\n")) == [("losses", "loss")]


def test_a_sum_reset_at_the_window_boundary_still_outlives_the_iteration() -> None:
    body = """\
    running += loss
    if (i + 1) % K == 0:
        running = 0
    """
    assert _read(_loop(body, before="running = 0\n")) == [("running", "loss")]


def test_a_sum_rebound_on_every_iteration_does_not_outlive_it() -> None:
    body = """\
    running = 0
    running += loss
    """
    assert _read(_loop(body)) == []


def test_an_append_on_a_metric_object_keeps_nothing() -> None:
    before = "from monai.metrics import CumulativeAverage\nrun_loss = CumulativeAverage()\n"
    assert _read(_loop("run_loss.append(loss)\n", before=before)) == []


def test_a_sum_of_the_micro_step_loop_reset_only_outside_it_keeps_the_window() -> None:
    source = """\
    for batch in loader:
        total = 0
        for micro in batch.chunk(K):
            loss = model(micro).mean() / K
            loss.backward()
            total += loss
        optimizer.step()
        optimizer.zero_grad()
    """
    assert _read(source) == [("total", "loss")]


def test_a_sum_reset_inside_the_micro_step_loop_does_not_outlive_its_iteration() -> None:
    source = """\
    for batch in loader:
        for micro in batch.chunk(K):
            total = 0
            loss = model(micro).mean() / K
            loss.backward()
            total += loss
        optimizer.step()
        optimizer.zero_grad()
    """
    assert _read(source) == []


def test_other_statements_accumulate_nothing() -> None:
    body = """\
    steps = steps * 2
    log(loss)
    losses.extend([loss])
    """
    assert _read(_loop(body, before="steps = 1\nlosses = []\n")) == []


def test_a_queue_of_graphs_for_a_later_backward_is_backpropagated_later() -> None:
    window = _window(_loop("losses.append(loss)\n", before="losses = []\n", after="sum(losses).backward()\n"))
    assert [found.holder for found in accumulations(window)] == ["losses"]
    assert backpropagated_later(window, "losses")


@pytest.mark.parametrize("after", [
    "print(sum(losses))\n",
    "other_losses = []\nsum(other_losses).backward()\n",
])
def test_a_log_read_after_the_loop_is_not_backpropagated_later(after: str) -> None:
    window = _window(_loop("losses.append(loss)\n", before="losses = []\n", after=after))
    assert [found.holder for found in accumulations(window)] == ["losses"]
    assert not backpropagated_later(window, "losses")


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


def _kept(source: str) -> list[tuple[str, str]]:
    window = _window(source)
    assert window.loop.backwards  # the loop was modelled
    return [(found.holder, name) for found, name in graphs_kept(window)]


def test_a_copy_of_the_loss_keeps_its_graph_in_its_own_scope() -> None:
    assert _kept(_loop("kept = loss\nrunning += kept\n", before="running = 0\n")) == [("running", "kept")]


def test_a_helpers_copy_of_the_loss_is_not_the_loops_name() -> None:
    helper = "def note(loss):\n    kept = loss\n    print(kept.item())\n\n"
    source = _loop("note(loss)\nkept = accuracy(model(x), y)\nrunning += kept\n", before=helper + "running = 0\n")
    assert _kept(source) == []


def test_a_value_detached_before_it_is_summed_keeps_no_graph() -> None:
    assert _kept(_loop("running += loss.item()\n", before="running = 0\n")) == []
