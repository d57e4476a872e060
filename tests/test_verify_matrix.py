"""Loop shapes x seeded mistakes: every correct loop passes, every buggy one
fails and names its rule first (the verifier's attribution, clipping,
dropout under --eval-mode, two optimizers, a GradScaler, and the mistakes
both runs share, which only the textbook reference sees)."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from accumlint.verify import Setup, check_equivalence  # noqa: E402

K = 4

PLAIN = """
import torch

def train(model, optimizer, loader, accum_steps, loss_fn):
    {setup}
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        {pre_backward}
        loss = loss_fn(model(x), y) {scale}
        {backward}
        {post_backward}
        if {gate}:
            {clip}
            {step}
            {after_step}
            optimizer.zero_grad()
"""

MICRO_STEPS = """
import torch

def train(model, optimizer, loader, accum_steps, loss_fn):
    {setup}
    it = iter(loader)
    for update in range(len(loader) // accum_steps):
        for micro in range(accum_steps):
            x, y = next(it)
            {pre_backward}
            loss = loss_fn(model(x), y) {scale}
            {backward}
            {post_backward}
        {clip}
        {step}
        {after_step}
        optimizer.zero_grad(set_to_none=True)
"""

DEFAULTS = dict(
    setup="pass",
    pre_backward="pass",
    scale="/ accum_steps",
    backward="loss.backward()",
    post_backward="pass",
    gate="(i + 1) % accum_steps == 0 or (i + 1) == len(loader)",
    clip="pass",
    step="optimizer.step()",
    after_step="pass",
)
CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)"
SCALER = dict(
    setup='scaler = torch.amp.GradScaler("cpu")',
    backward="scaler.scale(loss).backward()",
    clip=f"scaler.unscale_(optimizer); {CLIP}",
    step="scaler.step(optimizer); scaler.update()",
)

# Each mistake: (rule it must be named by, the slots it changes).
MISTAKES = {
    "missing 1/K": ("GA201", dict(scale="")),
    "constant factor": ("GA205", dict(scale="/ (accum_steps / 2)")),
    "zero every micro-batch": ("GA101", dict(pre_backward="optimizer.zero_grad()")),
    "step every micro-batch": ("GA102", dict(gate="True")),
    "off-by-one gate": ("GA106", dict(gate="i % accum_steps == 0 or (i + 1) == len(loader)")),
    "scheduler every micro-batch": ("GA301", dict(
        setup="sched = torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)", post_backward="sched.step()")),
}
# What the correct loop does where a mistake adds a line (a scheduler steps once per window).
CORRECT_FOR = {
    "scheduler every micro-batch": dict(setup="sched = torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)",
                                        after_step="sched.step()"),
}
GATED = ("step every micro-batch", "off-by-one gate")


def dropout_setup() -> Setup:
    generator = torch.Generator().manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Dropout(0.3), nn.Linear(16, 4)).double()
    batches = [(torch.randn(4, 8, generator=generator, dtype=torch.float64), torch.randint(0, 4, (4,), generator=generator))
               for _ in range(4 * K)]
    return Setup(model, lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9), batches, nn.CrossEntropyLoss())


def float32_setup() -> Setup:
    generator = torch.Generator().manual_seed(2)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    batches = [(torch.randn(4, 8, generator=generator), torch.randint(0, 4, (4,), generator=generator))
               for _ in range(4 * K)]
    return Setup(model, lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9), batches, nn.CrossEntropyLoss())


BF16 = PLAIN.replace("        loss = loss_fn(model(x), y) {scale}",
                     "        with torch.autocast('cpu', dtype=torch.bfloat16):\n            loss = loss_fn(model(x), y) {scale}")

# shape: (template, fixed slots, check_equivalence options, mistakes that apply)
SHAPES = {
    "plain": (PLAIN, {}, {}, list(MISTAKES)),
    "micro-steps": (MICRO_STEPS, {}, dict(tail=0), [m for m in MISTAKES if m not in GATED]),
    "clipped": (PLAIN, dict(clip=CLIP), {}, list(MISTAKES)),
    "clipped micro-steps": (MICRO_STEPS, dict(clip=CLIP), dict(tail=0), [m for m in MISTAKES if m not in GATED]),
    "dropout, eval mode": (PLAIN, {}, dict(eval_mode=True, setup=dropout_setup), list(MISTAKES)),
    "bf16 autocast, clipped": (BF16, dict(clip=CLIP), dict(setup=float32_setup), list(MISTAKES)),
    "GradScaler, clipped": (PLAIN, SCALER, dict(setup=float32_setup), ["missing 1/K", "constant factor",
                                                                         "zero every micro-batch"]),
}


def _verify(tmp_path, source: str, options: dict):
    path = tmp_path / "loop.py"
    path.write_text(textwrap.dedent(source))
    # A factory, so that the model's initial weights come from the verification's seed.
    return check_equivalence(f"{path}::train", **{"accum_steps": K, "windows": 3, **options})


def _source(template: str, *changes: dict) -> str:
    slots = dict(DEFAULTS)
    for change in changes:
        slots.update(change)
    return template.format(**slots)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_correct_loop_passes(tmp_path, shape):
    template, fixed, options, _ = SHAPES[shape]
    for mistake in ("", *(m for m in CORRECT_FOR if m in SHAPES[shape][3])):
        report = _verify(tmp_path, _source(template, fixed, CORRECT_FOR.get(mistake, {})), options)
        assert report.passed, (mistake, report.format_text())


CASES = [(shape, mistake) for shape in sorted(SHAPES) for mistake in SHAPES[shape][3]]


@pytest.mark.parametrize("shape, mistake", CASES)
def test_buggy_loop_fails_and_names_its_rule_first(tmp_path, shape, mistake):
    template, fixed, options, _ = SHAPES[shape]
    code, change = MISTAKES[mistake]
    report = _verify(tmp_path, _source(template, fixed, change), options)
    assert not report.passed and report.codes[:1] == [code], report.format_text()


def test_clip_before_unscale_is_named_from_the_pre_clip_norm(tmp_path):
    source = _source(PLAIN, SCALER, dict(clip=f"{CLIP}; scaler.unscale_(optimizer)"))
    report = _verify(tmp_path, source, dict(setup=float32_setup))
    assert not report.passed and report.codes[:1] == ["GA304"], report.format_text()
    assert any("textbook" in line for line in report.comparisons)


def test_comparisons_say_when_no_reference_could_be_built(tmp_path):
    """A setup without a loss function whose model returns no loss: the runs are compared with each other only."""
    setup = float32_setup()
    setup.loss_fn = None
    source = """
    def train(model, optimizer, loader, accum_steps):
        for i, (x, y) in enumerate(loader):
            loss = ((model(x) - 0.5) ** 2).mean() / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                optimizer.step()
                optimizer.zero_grad()
    """
    report = _verify(tmp_path, source, dict(setup=lambda: setup))
    assert report.passed, report.format_text()
    assert any("compared with each other only" in line for line in report.comparisons)


def test_a_loop_computing_its_own_loss_is_not_held_to_the_reference(tmp_path):
    """A regulariser makes the textbook gradient no multiple of the loop's: not comparable, never a failure."""
    source = _source(PLAIN, dict(scale="/ accum_steps + 0.01 * sum((p ** 2).sum() for p in model.parameters()) / accum_steps"))
    report = _verify(tmp_path, source, {})
    assert report.passed, report.format_text()
    assert any("not comparable" in line for line in report.comparisons)


TWO_OPTIMIZERS = """
import torch

def train(model, optimizer, loader, accum_steps, loss_fn):
    head = torch.optim.SGD(model[2].parameters(), lr=0.05)
    for i, (x, y) in enumerate(loader):
        boundary = (i + 1) % accum_steps == 0 or (i + 1) == len(loader)
        features = model[1](model[0](x))
        (loss_fn(model[2](features.detach()), y) / accum_steps).backward()
        if boundary:
            head.step()
            head.zero_grad()
        ((features - 0.5).pow(2).mean() {scale}).backward()
        if {gate}:
            optimizer.step()
            optimizer.zero_grad()
"""


def two_optimizer_setup() -> Setup:
    """The setup's optimizer trains the body (the first layer) on one loss, the
    loop's own trains the head on another, on the body's detached features (a GAN's shape)."""
    setup = dropout_setup()
    setup.model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).double()
    setup.optimizer_factory = lambda params: torch.optim.SGD(list(params)[:2], lr=0.1, momentum=0.9)
    return setup


@pytest.mark.parametrize("mistake, code, change", [
    ("", None, {}),
    ("unscaled second loss", "GA201", dict(scale="")),
    ("second optimizer every micro-batch", "GA102", dict(gate="True")),
])
def test_two_optimizers(tmp_path, mistake, code, change):
    slots = {"scale": "/ accum_steps", "gate": "boundary", **change}
    report = _verify(tmp_path, TWO_OPTIMIZERS.format(**slots), dict(setup=two_optimizer_setup))
    if code is None:
        assert report.passed, report.format_text()
    else:
        assert not report.passed and report.codes[:1] == [code], report.format_text()


SCHEDULE = "sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / {length}))"


@pytest.mark.parametrize("shape", ["plain", "clipped"])
def test_schedule_length_in_micro_batches_is_ga305_and_in_windows_passes(tmp_path, shape):
    template, fixed, options, _ = SHAPES[shape]
    windows = _source(template, fixed, dict(setup=SCHEDULE.format(length="-(-len(loader) // accum_steps)"),
                                            after_step="sched.step()"))
    assert _verify(tmp_path, windows, options).passed
    micro = _source(template, fixed, dict(setup=SCHEDULE.format(length="len(loader)"), after_step="sched.step()"))
    report = _verify(tmp_path, micro, options)
    assert not report.passed and report.codes[:1] == ["GA305"], report.format_text()


HAND_SET_RATE = "for group in optimizer.param_groups: group['lr'] = 0.1 / (1 + {counter})"


@pytest.mark.parametrize("shape, k", [("plain", K), ("clipped", K), ("plain", 8)])
def test_rate_set_by_hand_every_micro_batch_is_ga301(tmp_path, shape, k):
    """At K=8 the full run's 4 steps do not reach micro-batch 7: a K=1 rerun over the micro-batches does."""
    template, fixed, options, _ = SHAPES[shape]
    options = dict(options, accum_steps=k)
    report = _verify(tmp_path, _source(template, fixed, dict(pre_backward=HAND_SET_RATE.format(counter="i"))), options)
    assert not report.passed and report.codes[:1] == ["GA301"], report.format_text()
    per_window = dict(pre_backward=HAND_SET_RATE.format(counter="i // accum_steps"))
    assert _verify(tmp_path, _source(template, fixed, per_window), options).passed


@pytest.mark.parametrize("mistake", ["zero every micro-batch", "off-by-one gate", "missing 1/K"])
def test_a_second_difference_never_hides_the_primary_rule(tmp_path, mistake):
    """The schedule counts micro-batches as well: the gradient's rule comes first, GA305 after it."""
    code, change = MISTAKES[mistake]
    schedule = dict(setup=SCHEDULE.format(length="len(loader)"), after_step="sched.step()")
    report = _verify(tmp_path, _source(PLAIN, schedule, change), {})
    assert not report.passed and report.codes[:1] == [code], report.format_text()
    assert "GA305" in report.codes, report.format_text()


def test_no_accumulation_at_all_has_its_own_explanation(tmp_path):
    """An update-driven loop that pulls one micro-batch per update whatever K is: not GA110."""
    source = """
    def train(model, optimizer, loader, accum_steps, loss_fn):
        it = iter(loader)
        for update in range(3):
            x, y = next(it)
            loss_fn(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
    """
    report = _verify(tmp_path, source, dict(tail=0))
    assert not report.passed, report.format_text()
    assert "GA110" not in report.codes and report.explanations, report.format_text()
    assert report.explanations[0].name == "no-accumulation", report.format_text()


def test_fingerprint_samples_stay_inside_a_tensor_past_float32_precision():
    """Sample positions of a tensor of more than 2**24 elements are exact integers (float positions overrun it)."""
    from accumlint.verify.reference import fingerprint

    gradient = torch.zeros(2**24 + 2, dtype=torch.float16)
    gradient[-1] = 7
    sampled = fingerprint({"w": gradient})
    assert float(sampled.samples["w"][-1]) == 7.0 and float(sampled.samples["w"][0]) == 0.0


def test_clip_before_unscale_is_named_without_a_reference(tmp_path):
    """No loss function in the setup and no loss from the model: the run's own numbers still show GA304."""
    setup = float32_setup()
    setup.loss_fn = None
    source = """
    import torch
    def train(model, optimizer, loader, accum_steps):
        scaler = torch.amp.GradScaler("cpu")
        for i, (x, y) in enumerate(loader):
            scaler.scale(((model(x) - 0.5) ** 2).mean() / accum_steps).backward()
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """
    report = _verify(tmp_path, source, dict(setup=lambda: setup))
    assert not report.passed and report.codes[:1] == ["GA304"], report.format_text()
    assert any("compared with each other only" in line for line in report.comparisons)



def test_fingerprint_leaves_out_sparse_gradients():
    from accumlint.verify.reference import fingerprint

    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    sampled = fingerprint({"embedding": sparse, "bias": torch.tensor([3.0, 4.0]), "frozen": None})
    assert set(sampled.norms) == {"bias"} and sampled.norm == 5.0
