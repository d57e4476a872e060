"""The model's value flow, asked directly: whether what a name or a call's return holds is
known to carry no autograd graph (`ModuleFacts.holds_no_graph`, `returns_hold_no_graph`),
followed through local bindings, in-place updates and the returns of module functions.
GA501's fixtures prove the same shapes through the rule."""

from __future__ import annotations

import textwrap

import libcst
import pytest

from accumlint.check.analysis import AnalysisOptions
from accumlint.model.build import model_of
from accumlint.model.names import code
from accumlint.model.tree import walk


def _returns_hold_no_graph(source: str, call_text: str, index=None) -> bool:
    text = textwrap.dedent(source)
    module = libcst.parse_module(text)
    facts = model_of(module, text, AnalysisOptions()).facts
    (call,) = [n for n in walk(module) if type(n) is libcst.Call and code(n) == call_text]
    return facts.returns_hold_no_graph(call, index)


HELPERS = """\
    def piece(model, x, n, scale=1):
        loss = model(x).mean()
        (loss / n).backward()
        {piece_return}

    def batch(model, xs, n):
        total = 0
        for x in xs:
            part, _ = piece(model, x, n)
            total += part
        return total, len(xs)

    result = batch(model, xs, 4)
    """


@pytest.mark.parametrize("piece_return, no_graph", [
    ("return loss.item() / n, 0", True),
    ("return loss.detach() * scale, 0", True),
    ("return float(loss), 0", True),
    ("return loss / n, 0", False),  # the tensor itself, graph and all
    ("return compute(loss), 0", False),  # another module's function: unknown
])
def test_returned_sums_of_pieces_follow_the_pieces(piece_return: str, no_graph: bool) -> None:
    source = HELPERS.format(piece_return=piece_return)
    assert _returns_hold_no_graph(source, "batch(model, xs, 4)", 0) is no_graph


def test_a_returned_name_is_read_through_the_bindings_that_reach_the_return() -> None:
    source = """\
        def step(model, x):
            loss = model(x).mean()
            loss.backward()
            loss = loss.item()
            return loss

        value = step(model, x)
        """
    assert _returns_hold_no_graph(source, "step(model, x)")


@pytest.mark.parametrize("default, no_graph", [("", False), ("=0.0", True)])
def test_a_parameter_holds_no_graph_only_with_a_number_for_its_default(default: str, no_graph: bool) -> None:
    source = f"""\
        def scaled(value, aux_loss{default}):
            return value.item() + aux_loss

        out = scaled(loss)
        """
    assert _returns_hold_no_graph(source, "scaled(loss)") is no_graph


@pytest.mark.parametrize("piece_return, no_graph", [
    ("return (float(loss.item()) if loss is not None else None), 0", True),  # both arms hold none
    ("return (loss if keep else None), 0", False),  # one arm is the tensor
    ("return None, 0", True),
])
def test_conditional_and_none_returns(piece_return: str, no_graph: bool) -> None:
    source = HELPERS.format(piece_return=piece_return)
    assert _returns_hold_no_graph(source, "batch(model, xs, 4)", 0) is no_graph


@pytest.mark.parametrize("rate, no_graph", [
    ("running / steps", True),  # numbers summed from `.item()`, divided by a count
    ("running / loss", False),  # a name that holds the tensor
])
def test_arithmetic_of_graph_free_names_holds_no_graph(rate: str, no_graph: bool) -> None:
    source = f"""\
        def report(model, xs):
            running, steps = 0.0, 0
            for x in xs:
                loss = model(x).mean()
                loss.backward()
                running += loss.item()
                steps += 1
            return {rate}

        value = report(model, xs)
        """
    assert _returns_hold_no_graph(source, "report(model, xs)") is no_graph


def test_calls_that_return_plain_numbers_hold_no_graph() -> None:
    source = """\
        import time

        def rate(loader):
            start = time.time()
            steps = len(loader)
            return steps / (time.time() - start)

        value = rate(loader)
        """
    assert _returns_hold_no_graph(source, "rate(loader)")


def _returns_entry_hold_no_graph(source: str, call_text: str, key: str) -> bool:
    text = textwrap.dedent(source)
    module = libcst.parse_module(text)
    facts = model_of(module, text, AnalysisOptions()).facts
    (call,) = [n for n in walk(module) if type(n) is libcst.Call and code(n) == call_text]
    return facts.returns_hold_no_graph(call, key=key)


@pytest.mark.parametrize("returned, no_graph", [
    ("{k: v.detach() for k, v in data.items()}", True),  # every entry taken off the graph
    ("[entry.detach() for entry in data]", True),
    ("{k: v.to('cpu') for k, v in data.items()}", False),  # moved, still on the graph
    ("[entry for entry in data]", False),
])
def test_comprehensions_of_detached_values_hold_no_graph(returned: str, no_graph: bool) -> None:
    source = f"""\
        def off_graph(data):
            return {returned}

        losses = off_graph(losses)
        """
    assert _returns_hold_no_graph(source, "off_graph(losses)") is no_graph


@pytest.mark.parametrize("returned, no_graph", [
    ("data.detach()", True),  # no entry of a value off the graph holds one
    ("{k: v.detach() for k, v in data.items()}", True),
    ("{'total': data['total'].item(), 'ce': data['ce']}", True),  # the entry asked for is a number
    ("{'total': data['total'], 'ce': data['ce'].item()}", False),
])
def test_an_entry_of_a_returned_container_follows_the_container(returned: str, no_graph: bool) -> None:
    source = f"""\
        def off_graph(data):
            return {returned}

        losses = off_graph(losses)
        """
    assert _returns_entry_hold_no_graph(source, "off_graph(losses)", "total") is no_graph


# -- what a name holds where an alias is made: Python's scopes and the callers' arguments ----

def _values_of(source: str, name: str) -> list[str]:
    text = textwrap.dedent(source)
    module = libcst.parse_module(text)
    facts = model_of(module, text, AnalysisOptions()).facts
    return sorted(code(binding.value) for binding in facts.values_of(name))


TWO_TRAINERS = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Wrapped:
        def train(self, loader):
            online = DDP(self.online, device_ids=[0])
            for x in loader:
                online(x).sum().backward()

    class Plain:
        def __init__(self, online, optimizer):
            self.online = online
            self.optimizer = optimizer
    """


@pytest.mark.parametrize("construction, held", [
    # constructed by another module: the parameter holds what that caller passes, unknown here
    ("", ["online"]),
    # the module's one construction passes its own local, read in that function's scope
    ("\ndef main(net):\n    online = torch.nn.Linear(4, 4)\n    return Plain(online, None)\n",
     ["torch.nn.Linear(4, 4)"]),
    # by keyword, moved to a device: the moved object is the one passed
    ("\ndef main():\n    backbone = torch.nn.Linear(4, 4)\n    return Plain(optimizer=None, online=backbone.cuda())\n",
     ["torch.nn.Linear(4, 4)"]),
    # an expression is passed: unknown
    ("\ndef main():\n    return Plain(torch.nn.Linear(4, 4), None)\n", ["online"]),
])
def test_a_parameter_holds_what_the_constructions_pass_not_another_functions_local(construction, held) -> None:
    assert _values_of(textwrap.dedent(TWO_TRAINERS) + construction, "self.online") == held


def test_an_alias_made_in_a_function_reads_that_functions_own_bindings() -> None:
    source = """\
        import torch

        def build():
            scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
            return scheduler

        class Trainer:
            def setup(self, opt):
                scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=100)
                self.scheduler = scheduler
        """
    assert _values_of(source, "self.scheduler") == ["torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=100)"]


def test_an_alias_to_a_global_reads_the_module_level_bindings() -> None:
    source = """\
        import torch

        model = torch.nn.Linear(2, 2)

        def other():
            model = torch.nn.Conv2d(1, 1, 3)
            return model

        class Trainer:
            def __init__(self):
                self.model = model
        """
    assert _values_of(source, "self.model") == ["torch.nn.Linear(2, 2)"]


def test_a_name_passed_on_by_several_constructions_holds_each_value() -> None:
    source = """\
        import torch

        class Runner:
            def __init__(self, scheduler):
                self.scheduler = scheduler

        def main(opt):
            warm = torch.optim.lr_scheduler.LinearLR(opt)
            cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 10)
            return Runner(warm), Runner(scheduler=cosine)
        """
    assert _values_of(source, "self.scheduler") == ["torch.optim.lr_scheduler.CosineAnnealingLR(opt, 10)",
                                                    "torch.optim.lr_scheduler.LinearLR(opt)"]
