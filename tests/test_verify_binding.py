"""Binding a training function's parameters to roles from its source (no torch)."""

from __future__ import annotations

import pytest

from accumlint.verify.binding import BindingError, bind_parameters, parse_bind_options

CANONICAL = '''
def train(model, optimizer, loader, accum_steps, loss_fn):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
'''

# Names that say nothing: every role must come from how the body uses them.
OPAQUE = '''
def fit(a, b, c, d, e, epochs=1):
    for _ in range(epochs):
        it = iter(c)
        for _outer in range(len(c) // d):
            for _micro in range(d):
                x, y = next(it)
                loss = e(a(x), y)
                loss.div(d).backward()
            b.step()
            b.zero_grad()
'''


def roles(source: str, name: str, **overrides: str) -> dict[str, str]:
    return bind_parameters(source, name, overrides).roles


def test_canonical_signature():
    assert roles(CANONICAL, "train") == {
        "model": "model", "optimizer": "optimizer", "loader": "loader",
        "accum_steps": "accum_steps", "loss_fn": "loss_fn",
    }


def test_roles_come_from_usage_not_names():
    bound = roles(OPAQUE, "fit")
    assert bound == {"a": "model", "b": "optimizer", "c": "loader", "d": "accum_steps", "e": "loss_fn"}


def test_optional_parameters_may_stay_unbound():
    assert "epochs" not in roles(OPAQUE, "fit")


def test_model_from_parameters_and_train_calls():
    source = '''
def run(m, o, batches, k, crit):
    m.train()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    for step, batch in enumerate(batches):
        crit(m(batch[0]), batch[1]).backward()
    if step % k == 0:
        scaler.step(o)
'''
    assert roles(source, "run") == {
        "m": "model", "o": "optimizer", "batches": "loader", "k": "accum_steps", "crit": "loss_fn",
    }


@pytest.mark.parametrize(
    "name, role",
    [
        ("net", "model"), ("opt", "optimizer"), ("train_loader", "loader"), ("data", "loader"),
        ("gradient_accumulation_steps", "accum_steps"), ("grad_accum_every", "accum_steps"),
        ("criterion", "loss_fn"), ("loss_func", "loss_fn"),
    ],
)
def test_names_are_the_fallback(name, role):
    source = f"def f({name}):\n    pass\n"
    assert roles(source, "f") == {name: role}


def test_bind_overrides_usage():
    bound = roles(CANONICAL, "train", loss_fn="model", model="loss_fn")
    assert (bound["loss_fn"], bound["model"], bound["loader"]) == ("model", "loss_fn", "loader")


def test_each_role_goes_to_the_strongest_claim_only():
    source = '''
def f(model, loader, k, n_epochs):
    for _ in range(n_epochs):
        for i, b in enumerate(loader):
            (model(b) / k).backward()
            if i % k == 0:
                pass
'''
    with pytest.raises(BindingError, match="'n_epochs'"):
        bind_parameters(source, "f")


def test_unbindable_parameter_says_how_to_bind_it():
    with pytest.raises(BindingError, match=r"'mystery'.*--bind mystery=ROLE"):
        bind_parameters("def f(model, mystery):\n    pass\n", "f")


def test_bind_of_an_unknown_parameter_is_an_error():
    with pytest.raises(BindingError, match="does not take"):
        bind_parameters(CANONICAL, "train", {"nope": "model"})


def test_missing_function():
    with pytest.raises(BindingError, match="no function named 'other'"):
        bind_parameters(CANONICAL, "other")


def test_parse_bind_options_accepts_aliases_and_rejects_nonsense():
    assert parse_bind_options(["net=model", "k = criterion", "n=K"]) == {
        "net": "model", "k": "loss_fn", "n": "accum_steps",
    }
    with pytest.raises(BindingError, match="unknown role"):
        parse_bind_options(["x=banana"])
    with pytest.raises(BindingError, match="NAME=ROLE"):
        parse_bind_options(["x"])


def test_arguments_follow_the_declaration():
    binding = bind_parameters("def f(model, /, loader, *, k=2):\n    for b in loader: model(b)\n", "f")
    args, kwargs = binding.arguments({"model": "M", "loader": "L"})
    assert args == ["M"] and kwargs == {"loader": "L"}


ROLE_NAMES_THROUGH_THE_MODEL = '''
def train(model, optimizer, loader, accum_steps, loss_fn):
    model.zero_grad()
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            update(optimizer)
            model.zero_grad()
'''


def test_parameters_named_as_roles_bind_by_their_names():
    # `model.zero_grad()` is optimizer-like evidence on `model`; the names decide.
    binding = bind_parameters(ROLE_NAMES_THROUGH_THE_MODEL, "train")
    assert binding.roles == {
        "model": "model", "optimizer": "optimizer", "loader": "loader",
        "accum_steps": "accum_steps", "loss_fn": "loss_fn",
    }
    assert binding.evidence["optimizer"] == ("its name is the role",)
    assert "passed to enumerate()" in binding.evidence["loader"]


def test_a_parameter_named_as_a_setup_object_receives_it():
    source = CANONICAL.replace("loss_fn):", "loss_fn, scaler, tokenizer=None):")
    binding = bind_parameters(source, "train", named=("scaler", "tokenizer"))
    assert binding.roles["scaler"] == "setup.scaler" and binding.roles["tokenizer"] == "setup.tokenizer"
    assert binding.evidence["scaler"] == ("the setup returns 'scaler'",)
    explicit = bind_parameters(source, "train", parse_bind_options(["scaler=setup.grad_scaler"]), named=("grad_scaler",))
    assert explicit.roles["scaler"] == "setup.grad_scaler"
    with pytest.raises(BindingError, match="setup.NAME"):
        parse_bind_options(["scaler=nothing"])
