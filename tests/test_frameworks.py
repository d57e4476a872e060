"""The framework facts of the model: Accelerate, data-parallel wraps, sync controls, scopes.

Rules read these facts (GA101/GA301/GA302 inside `accumulate()`, GA401, GA403,
GA108); the fixtures show the findings, these tests pin the facts themselves.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from accumlint.check.analysis import AnalysisOptions
from accumlint.model import scopes
from accumlint.model.build import windows_of


def _windows(source: str):
    text = textwrap.dedent(source)
    return windows_of(cst.parse_module(text), text, AnalysisOptions())


def _only_window(source: str):
    (window,) = _windows(source)
    return window


_PREPARED = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=4)
    model = build()
    optimizer = torch.optim.AdamW(model.parameters())
    built = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    prepared = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    model, optimizer, prepared = accelerator.prepare(model, optimizer, prepared)
    for batch in loader:
        with accelerator.accumulate(model):
            accelerator.backward(model(batch).mean())
            optimizer.step()
            built.step()
            prepared.step()
            optimizer.zero_grad()
"""


def test_prepared_objects_and_accumulate_k() -> None:
    window = _only_window(_PREPARED)
    frameworks = window.objects.frameworks
    assert frameworks.prepared(cst.parse_expression("prepared")) is True
    assert frameworks.prepared(cst.parse_expression("built")) is False
    assert frameworks.prepared(cst.parse_expression("from_elsewhere")) is None
    assert window.accumulate_k is not None and window.steps_once_per_window
    managed = {e.role.receiver: window.framework_managed(e) for e in window.loop.of_kind("sched")}
    assert managed == {"built": False, "prepared": True}


@pytest.mark.parametrize(
    "constructor, k",
    [
        ("Accelerator(gradient_accumulation_steps=8)", "8"),
        ("Accelerator(gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=3))", "3"),
        ("Accelerator()", None),
        ("Accelerator(gradient_accumulation_steps=1)", None),
        ("Accelerator(**settings)", None),
        ('Accelerator(**{"gradient_accumulation_steps": 6})', "6"),
        ("Accelerator(**dict(gradient_accumulation_steps=5, cpu=True))", "5"),
    ],
)
def test_accumulate_k_comes_from_the_accelerator(constructor: str, k) -> None:
    window = _only_window(f"""
        accelerator = {constructor}
        for batch in loader:
            with accelerator.accumulate(model):
                accelerator.backward(model(batch).mean())
                optimizer.step()
                optimizer.zero_grad()
    """)
    found = window.accumulate_k
    assert (found.value if found is not None else None) == k


@pytest.mark.parametrize(
    "setup, kind",
    [
        ("from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(net)", "ddp"),
        ("from apex.parallel import DistributedDataParallel\nmodel = DistributedDataParallel(net)", "apex"),
        ("from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nmodel = FSDP(net)", "sharded"),
        ("from torch.distributed.fsdp import fully_shard\nfully_shard(net)\nmodel = net", "sharded"),
        ("accelerator = Accelerator()\nmodel, opt = accelerator.prepare(net, opt)", "accelerate"),
        ("accelerator = Accelerator(fsdp_plugin=plugin)\nmodel, opt = accelerator.prepare(net, opt)", "sharded"),
        ("accelerator = Accelerator(deepspeed_plugin=ds)\nmodel, opt = accelerator.prepare(net, opt)", "sharded"),
        ("fabric = L.Fabric(strategy='ddp')\nmodel, opt = fabric.setup(net, opt)", "fabric"),
        ("fabric = L.Fabric()\nmodel, opt = fabric.setup(net, opt)", "fabric"),
        ("fabric = L.Fabric(strategy='fsdp')\nmodel, opt = fabric.setup(net, opt)", "sharded"),
        ("fabric = L.Fabric(strategy=args.strategy)\nmodel, opt = fabric.setup(net, opt)", "sharded"),
        ("model = net", None),
    ],
)
def test_parallel_kind_of_the_wrapped_model(setup: str, kind) -> None:
    window = _only_window(setup + """
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / 4).backward()
    if (i + 1) % 4 == 0:
        opt.step()
        opt.zero_grad()
""")
    assert window.objects.frameworks.parallel_kind("model") == kind


def test_sync_controls_with_what_they_govern() -> None:
    window = _only_window("""
        for i, (x, y) in enumerate(loader):
            boundary = (i + 1) % 4 == 0
            model.require_backward_grad_sync = boundary
            with nullcontext() if boundary else model.no_sync():
                loss = loss_fn(model(x), y)
                (loss / 4).backward()
            model.set_requires_gradient_sync(boundary)
            if boundary:
                opt.step()
                opt.zero_grad()
    """)
    controls = window.sync_controls
    assert [c.kind for c in controls] == ["flag", "context", "call"]
    flag, context, call = controls
    assert [cst.Module([]).code_for_node(c.condition) for c in controls] == ["boundary", "boundary", "boundary"]
    assert len(context.statements) == 2
    assert cst.Module([]).code_for_node(context.model) == "model"
    assert flag.statements[0].order == 1 and call.model is not None


def _backward_control_and_forward(source: str):
    """The window, the sync context that holds its backward, and the forwards of `model`."""
    from accumlint.model.forwards import forwards_of

    window = _only_window(source)
    (control,) = [c for c in window.sync_controls
                  if c.kind == "context" and any(e.kind == "backward" for s in c.statements for e in s.events)]
    return window, control, forwards_of(window.loop.statements, control.model)


def test_a_forward_in_its_own_no_sync_block_is_under_a_sync_context() -> None:
    window, control, (boundary, inside) = _backward_control_and_forward("""
        for i, (x, y) in enumerate(loader):
            if (i + 1) % 4 == 0:
                out = model(x)
            else:
                with model.no_sync():
                    out = model(x)
            loss = loss_fn(out, y) / 4
            if (i + 1) % 4 == 0:
                loss.backward()
                opt.step()
                opt.zero_grad()
            else:
                with model.no_sync():
                    loss.backward()
    """)
    assert window.forward_in_own_sync_context(inside, control)
    assert not window.forward_in_own_sync_context(boundary, control)  # the boundary's forward syncs


@pytest.mark.parametrize("forward", [
    "out = model(x)",  # no context at all
    "with other.no_sync():\n        out = model(x)",  # another model's context
    "with torch.autocast('cuda'):\n        out = model(x)",  # not a sync context
])
def test_a_forward_outside_any_no_sync_block_of_its_model_is_not(forward: str) -> None:
    window, control, (found,) = _backward_control_and_forward(f"""
for i, (x, y) in enumerate(loader):
    {forward}
    loss = loss_fn(out, y) / 4
    if (i + 1) % 4 != 0:
        with model.no_sync():
            loss.backward()
    else:
        loss.backward()
        opt.step()
        opt.zero_grad()
""")
    assert not window.forward_in_own_sync_context(found, control)


def test_fabric_sync_context_reads_enabled() -> None:
    window = _only_window("""
        for i, (x, y) in enumerate(loader):
            is_accumulating = (i + 1) % 4 != 0
            with fabric.no_backward_sync(model, enabled=is_accumulating):
                fabric.backward(loss_fn(model(x), y) / 4)
            if not is_accumulating:
                opt.step()
                opt.zero_grad()
    """)
    (control,) = window.sync_controls
    assert control.kind == "context"
    assert cst.Module([]).code_for_node(control.condition) == "is_accumulating"


def test_k_in_scope_of_a_helper() -> None:
    source = """
        ACCUM = 4

        def through_parameter(model, batch, steps):
            model(batch).mean().backward()

        def through_module(model, batch):
            model(batch).mean().backward()

        def train(model, opt, loader, k):
            for i, batch in enumerate(loader):
                through_parameter(model, batch, k)
                if (i + 1) % k == 0:
                    opt.step()
                    opt.zero_grad()

        def train_module_k(model, opt, loader):
            for i, batch in enumerate(loader):
                through_module(model, batch)
                if (i + 1) % ACCUM == 0:
                    opt.step()
                    opt.zero_grad()
    """
    first, second = _windows(source)
    helper_statement = next(s for s in first.loop.statements if s.helper is not None)
    assert cst.Module([]).code_for_node(first.k_in_scope(helper_statement)) == "steps"
    helper_statement = next(s for s in second.loop.statements if s.helper is not None)
    assert cst.Module([]).code_for_node(second.k_in_scope(helper_statement)) == "ACCUM"


def test_module_names_include_main_block_but_not_function_locals() -> None:
    module = cst.parse_module(textwrap.dedent("""
        import os
        K = 2
        if __name__ == "__main__":
            args = parse()
        def f(a):
            local = 1
    """))
    assert scopes.module_names(module) == {"os", "K", "args", "f"}
    assert scopes.local_names(module.body[-1]) == {"a", "local"}


def test_kwargs_dict_built_in_steps_counts_as_keywords() -> None:
    window = _only_window("""
        options = {"mixed_precision": "bf16"}
        options["gradient_accumulation_steps"] = 4
        accelerator = Accelerator(**options)
        for batch in loader:
            with accelerator.accumulate(model):
                accelerator.backward(model(batch).mean())
                optimizer.step()
                optimizer.zero_grad()
    """)
    assert window.accumulate_k is not None and window.accumulate_k.value == "4"
