"""The verifier cannot be fooled: per-step evidence (learning rates, clipping,
scaler, scheduler and backward calls), partial windows, loaders that are never
used, seeds of every generator, and exact signatures under noise."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from accumlint.verify import Setup, check_equivalence  # noqa: E402
from accumlint.verify.report import COULD_NOT_RUN, EQUIVALENT, NOT_EQUIVALENT  # noqa: E402


def loop(tmp_path, body: str, name: str = "loop.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"{path}::train"


GATED = """
    import torch
    def train(model, optimizer, loader, accum_steps, loss_fn):
        {setup}
        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum_steps
            loss.backward()
            {per_micro_batch}
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                {before_step}
                optimizer.step()
                optimizer.zero_grad()
                {after_step}
"""


def gated(setup: str = "", per_micro_batch: str = "", before_step: str = "", after_step: str = "") -> str:
    return GATED.format(setup=setup or "pass", per_micro_batch=per_micro_batch or "pass",
                        before_step=before_step or "pass", after_step=after_step or "pass")


def test_accum_steps_one_is_refused(tmp_path):
    report = check_equivalence(loop(tmp_path, gated()), accum_steps=1)
    assert report.verdict == COULD_NOT_RUN and "proves nothing" in report.reason


def test_a_loader_that_is_never_iterated_fails(tmp_path):
    source = """
        import torch
        def train(model, optimizer, loader, accum_steps, loss_fn):
            x, y = torch.randn(4, 8, dtype=torch.float64), torch.zeros(4, dtype=torch.long)
            for _ in range(3):
                (loss_fn(model(x), y) / accum_steps).backward()
                optimizer.step()
                optimizer.zero_grad()
    """
    report = check_equivalence(loop(tmp_path, source))
    assert report.verdict == NOT_EQUIVALENT and report.used == 0
    assert "the loader was never iterated" in report.reason


def test_a_function_ignoring_k_fails_as_a_step_per_micro_batch(tmp_path):
    source = """
        def train(model, optimizer, loader, accum_steps, loss_fn):
            for x, y in loader:
                loss_fn(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
    """
    report = check_equivalence(loop(tmp_path, source))
    assert report.codes == ["GA102"], report.format_text()


def test_report_says_how_many_micro_batches_were_fed_and_used(tmp_path):
    report = check_equivalence(loop(tmp_path, gated()), accum_steps=4, windows=2)
    assert report.passed, report.format_text()
    assert (report.fed, report.used, report.tail) == (10, 10, 2)
    assert "micro-batches: 10 fed, 10 used" in report.format_text()
    # The last-batch clause steps the partial window with 2/4 of its mean: said, not failed.
    assert any("partial window" in note and "0.5 x" in note for note in report.notes)


def test_a_dropped_partial_window_is_ga107(tmp_path):
    source = gated().replace(" or (i + 1) == len(loader)", "")
    report = check_equivalence(loop(tmp_path, source), accum_steps=4, windows=2)
    assert report.codes == ["GA107"], report.format_text()
    assert (report.steps_accumulated, report.steps_full) == (2, 3)
    assert check_equivalence(loop(tmp_path, source), accum_steps=4, windows=2, tail=0).passed


def test_a_dropped_tail_and_missing_scaling_are_both_named_the_gradients_first(tmp_path):
    # The missing 1/K is wrong at every step, the dropped tail only at the last.
    source = gated().replace(" or (i + 1) == len(loader)", "").replace(" / accum_steps\n", "\n", 1)
    report = check_equivalence(loop(tmp_path, source))
    assert report.codes == ["GA201", "GA107"], report.format_text()


def test_scheduler_every_micro_batch_is_ga301(tmp_path):
    source = gated(setup="scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)",
                   per_micro_batch="scheduler.step()")
    report = check_equivalence(loop(tmp_path, source))
    assert report.codes == ["GA301"], report.format_text()
    # The first step's gradients agree: the evidence, not the gradients, fails it.
    assert report.steps[0].ok


def test_scheduler_that_does_not_change_the_rate_is_still_ga301(tmp_path):
    source = gated(setup="scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)",
                   per_micro_batch="scheduler.step()")
    report = check_equivalence(loop(tmp_path, source))
    assert all(step.ok for step in report.steps), report.format_text()
    assert report.verdict == NOT_EQUIVALENT and report.codes == ["GA301"]


def test_scheduler_under_the_gate_passes(tmp_path):
    source = gated(setup="scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)",
                   after_step="scheduler.step()")
    assert check_equivalence(loop(tmp_path, source)).passed


def test_schedule_length_in_micro_batches_is_ga305(tmp_path):
    source = gated(setup="scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=len(loader))",
                   after_step="scheduler.step()")
    report = check_equivalence(loop(tmp_path, source))
    assert report.codes == ["GA305"], report.format_text()
    assert "divide the length by K" in report.explanations[0].detail


def test_a_rate_set_by_the_loop_in_fractions_of_the_epoch_gets_no_advice_about_a_schedule_length(tmp_path):
    source = gated(before_step="for group in optimizer.param_groups: group['lr'] = 0.1 * (1 - i / len(loader))")
    report = check_equivalence(loop(tmp_path, source))
    assert report.codes == ["GA305"], report.format_text()
    explanation = report.explanations[0]
    assert "not by an LR scheduler" in explanation.summary and "divide the length by K" not in explanation.detail


def test_a_missing_all_reduce_is_said_in_words():
    from accumlint.verify.compare import ALLREDUCE, Mismatch
    from accumlint.verify.equivalence import _mismatch_text

    text = _mismatch_text(Mismatch(2, ALLREDUCE, 0, None, 1))
    assert text == "DDP all-reduced the gradients never in the accumulated run, where once per optimizer step is due"
    assert "None" not in _mismatch_text(Mismatch(2, ALLREDUCE, 4, None, 1))


@pytest.mark.parametrize("call", ["torch.nn.utils.clip_grad_norm_(model.parameters(), 1e6)",
                                  "clip_grad_norm_(model.parameters(), 1e6)",
                                  "torch.nn.utils.clip_grad_value_(model.parameters(), 1e6)"])
def test_clipping_every_micro_batch_is_ga302_even_when_it_clips_nothing(tmp_path, call):
    source = "from torch.nn.utils import clip_grad_norm_\n" + textwrap.dedent(gated(per_micro_batch=call))
    report = check_equivalence(loop(tmp_path, source))
    assert all(step.ok for step in report.steps), report.format_text()
    assert report.codes == ["GA302"], report.format_text()


def test_clipping_before_the_step_passes(tmp_path):
    source = gated(before_step="torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)")
    assert check_equivalence(loop(tmp_path, source)).passed


SCALED = """
    import torch
    def train(model, optimizer, loader, accum_steps, loss_fn):
        scaler = torch.amp.GradScaler("cpu")
        for i, (x, y) in enumerate(loader):
            scaler.scale(loss_fn(model(x), y) / accum_steps).backward()
            {update_every}
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                scaler.step(optimizer)
                {update_gated}
                optimizer.zero_grad()
"""


@pytest.mark.parametrize("enabled", [True, False])
def test_scaler_update_every_micro_batch_is_ga303(tmp_path, enabled):
    # Enabled, torch's scaler refuses the update (an error with a signature);
    # disabled (AMP off), the calls are counted.
    bad = SCALED.format(update_every="scaler.update()", update_gated="pass").replace('"cpu"', f'"cpu", enabled={enabled}')
    report = check_equivalence(loop(tmp_path, bad), dtype="float32")
    assert report.verdict == NOT_EQUIVALENT and report.codes == ["GA303"], report.format_text()
    good = SCALED.format(update_every="pass", update_gated="scaler.update()")
    assert check_equivalence(loop(tmp_path, good, "good.py"), dtype="float32").passed


def test_backward_after_the_micro_step_loop_is_ga110(tmp_path):
    source = """
        def train(model, optimizer, loader, accum_steps, loss_fn):
            batches = iter(loader)
            for _ in range(len(loader) // accum_steps):
                for _micro in range(accum_steps):
                    x, y = next(batches)
                    loss = loss_fn(model(x), y) / accum_steps
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """
    report = check_equivalence(loop(tmp_path, source), tail=0)
    assert report.codes == ["GA110"], report.format_text()


def test_python_random_and_numpy_are_seeded(tmp_path):
    source = """
        import random
        def train(model, optimizer, loader, accum_steps, loss_fn):
            weight = random.uniform(0.5, 1.5)
            for i, (x, y) in enumerate(loader):
                (weight * loss_fn(model(x), y) / accum_steps).backward()
                if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                    optimizer.step()
                    optimizer.zero_grad()
    """
    report = check_equivalence(loop(tmp_path, source))
    assert report.passed, report.format_text()


def dropout_setup(p: float = 0.3):
    def factory():
        generator = torch.Generator().manual_seed(3)
        # Two dropout layers, so that masks drawn in sequence do not happen to
        # concatenate into the full batch's masks.
        model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(p), nn.Tanh(), nn.Linear(16, 16), nn.Dropout(p),
                              nn.Linear(16, 4)).double()
        data = [(torch.randn(4, 8, generator=generator, dtype=torch.float64),
                 torch.randint(0, 4, (4,), generator=generator)) for _ in range(16)]
        return Setup(model, lambda params: torch.optim.SGD(params, lr=0.1), data, nn.CrossEntropyLoss())

    return factory


@pytest.mark.parametrize("mistake, code", [
    (lambda source: source.replace(" / accum_steps\n", "\n", 1), "GA201"),
    (lambda source: source.replace("(i + 1) % accum_steps == 0 or", "i % accum_steps == 0 or", 1), "GA106"),
    (lambda source: source.replace("loss.backward()", "optimizer.zero_grad()\n            loss.backward()", 1), "GA101"),
])
def test_mistakes_are_named_with_dropout_and_no_eval_mode(tmp_path, mistake, code):
    assert check_equivalence(loop(tmp_path, gated()), setup=dropout_setup()).passed
    report = check_equivalence(loop(tmp_path, mistake(gated()), name="bug.py"), setup=dropout_setup())
    assert report.codes[:1] == [code], report.format_text()
    assert any(note.startswith("dropout was off in both runs") for note in report.notes)


class TwoParts(nn.Module):
    """A frozen encoder under a trained head (the optimizer holds the head only)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)
        self.encoder.requires_grad_(False)

    def forward(self, x):
        return self.head(torch.tanh(self.encoder(x)))


def frozen_setup():
    generator = torch.Generator().manual_seed(1)
    data = [(torch.randn(4, 8, generator=generator, dtype=torch.float64),
             torch.randint(0, 4, (4,), generator=generator)) for _ in range(16)]
    model = TwoParts().double()
    return Setup(model, lambda params: torch.optim.AdamW([p for p in params if p.requires_grad], lr=0.01),
                 data, nn.CrossEntropyLoss())


def test_an_optimizer_over_some_parameters_is_diagnosed_without_crashing(tmp_path):
    source = """
        def train(model, optimizer, loader, accum_steps, loss_fn):
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                (loss_fn(model(x), y) / accum_steps).backward()
                if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                    optimizer.step()
    """
    report = check_equivalence(loop(tmp_path, source), setup=frozen_setup)
    assert report.codes == ["GA101"], report.format_text()
    assert check_equivalence(loop(tmp_path, gated(), "good.py"), setup=frozen_setup).passed


def test_a_failure_inside_the_verifier_is_a_one_line_reason(tmp_path, monkeypatch):
    import accumlint.verify.compare as compare

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(compare, "compare_tensors", broken)
    report = check_equivalence(loop(tmp_path, gated()))
    assert report.verdict == COULD_NOT_RUN and report.exit_code == 2
    assert report.reason.startswith("internal error of the verifier: RuntimeError: boom second line")
    assert "\n" not in report.reason


def test_rtol_and_atol_override_the_dtype_tolerance(tmp_path):
    report = check_equivalence(loop(tmp_path, gated()), dtype="float32", rtol=0.0, atol=0.0)
    assert report.tolerance == {"rtol": 0.0, "atol": 0.0}
    loose = check_equivalence(loop(tmp_path, gated().replace(" / accum_steps\n", " / (accum_steps - 0.0001)\n", 1)),
                              rtol=1e-3)
    assert loose.passed, loose.format_text()


def test_autocast_bfloat16_sets_the_tolerance_from_the_compute_dtype(tmp_path):
    source = """
        import torch
        def train(model, optimizer, loader, accum_steps, loss_fn):
            for i, (x, y) in enumerate(loader):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = loss_fn(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                    optimizer.step()
                    optimizer.zero_grad()
    """
    report = check_equivalence(loop(tmp_path, source), dtype="float32")
    assert report.passed, report.format_text()
    assert report.compute_dtypes == ["bfloat16"] and report.tolerance["rtol"] > 1e-3
    bad = check_equivalence(loop(tmp_path, source.replace(" / accum_steps", ""), "bad.py"), dtype="float32")
    assert bad.codes == ["GA201"], bad.format_text()


def test_a_passing_run_keeps_no_step_tensors_however_many_windows(tmp_path, monkeypatch):
    import accumlint.verify.equivalence as equivalence

    kept = []
    original = equivalence._fill

    def spy(report, accumulated, full, *args, **kwargs):
        kept.append(sum(bool(s.gradients or s.state) for s in [*accumulated.steps, *full.steps]))
        return original(report, accumulated, full, *args, **kwargs)

    monkeypatch.setattr(equivalence, "_fill", spy)
    # In this process (verify_here), where the spy sees the records: check_equivalence runs in a child.
    assert equivalence.verify_here(loop(tmp_path, gated()), windows=30).passed
    broken = equivalence.verify_here(loop(tmp_path, gated().replace(" / accum_steps\n", "\n", 1), "bad.py"),
                                     windows=30)
    assert broken.codes == ["GA201"]
    assert kept == [0, 3]  # failing: the first two accumulated steps and the first full one, for the diagnosis
