"""The verifier on loops that let a real framework accumulate.

Each fixture under fixtures/verify/frameworks/ is a training function in the
shape the framework's users write; these tests run it with the installed
framework (the `frameworks` extra: accelerate, transformers, lightning) at K
micro-batches against K-times batches and check the verdict and the rule the
numbers name. A test is skipped when its framework is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from accumlint.verify import check_equivalence  # noqa: E402

FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "verify" / "frameworks"


def _target(name: str) -> str:
    return f"{FRAMEWORKS / name}.py::train"


def classifier_setup(accum_steps: int, windows: int, micro_batch: int, seed: int) -> dict:
    """A float64 classifier over a DataLoader of N*K + K//2 micro-batches: the
    frameworks prepare or wrap the loader, and the tail is a partial window."""
    generator = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).double()
    count = (accum_steps * windows + max(1, accum_steps // 2)) * micro_batch
    data = TensorDataset(
        torch.randn(count, 8, generator=generator, dtype=torch.float64),
        torch.randint(0, 4, (count,), generator=generator),
    )
    return {
        "model": model,
        "optimizer": lambda parameters: torch.optim.SGD(parameters, lr=0.1),
        "batches": DataLoader(data, batch_size=micro_batch),
    }


def causal_lm_setup(accum_steps: int, windows: int, micro_batch: int, seed: int) -> dict:
    """A tiny randomly initialised causal LM built from a config (no download)
    and padded micro-batches whose labels are -100 on the padding, so token
    counts differ between micro-batches."""
    from transformers import AutoModelForCausalLM, GPT2Config

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    config = GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = AutoModelForCausalLM.from_config(config)
    batches = []
    for _ in range(accum_steps * windows + max(1, accum_steps // 2)):
        ids = torch.randint(0, config.vocab_size, (micro_batch, 12), generator=generator)
        labels = ids.clone()
        for row, length in enumerate(torch.randint(3, 12, (micro_batch,), generator=generator)):
            labels[row, length:] = -100
        batches.append({"input_ids": ids, "attention_mask": (labels != -100).long(), "labels": labels})
    return {"model": model, "optimizer": lambda parameters: torch.optim.AdamW(parameters), "batches": batches}


def _verify(name: str, setup, accum_steps: int, seed: int = 0):
    report = check_equivalence(_target(name), setup=setup, accum_steps=accum_steps, windows=3, seed=seed)
    assert report.verdict != "could not run", report.reason
    return report


@pytest.mark.parametrize("accum_steps, seed", [(2, 0), (4, 1), (3, 2)])
def test_accelerate_accumulate_is_equivalent(accum_steps: int, seed: int) -> None:
    pytest.importorskip("accelerate")
    report = _verify("correct_accelerate_accumulate", classifier_setup, accum_steps, seed)
    assert report.passed, report.format_text()
    assert report.used == report.fed  # the prepared loader is counted where it fetches


def test_accelerate_division_on_top_of_its_own_is_ga204() -> None:
    pytest.importorskip("accelerate")
    report = _verify("bug_accelerate_double_scaling", classifier_setup, 4)
    assert not report.passed
    assert "GA204" in report.codes, report.format_text()


def test_accelerate_without_gradient_accumulation_steps_is_ga108() -> None:
    pytest.importorskip("accelerate")
    report = _verify("bug_accelerate_without_steps", classifier_setup, 4)
    assert not report.passed
    assert "GA108" in report.codes, report.format_text()


@pytest.mark.parametrize("accum_steps", [2, 4])
def test_transformers_trainer_with_padded_labels_is_equivalent(accum_steps: int) -> None:
    pytest.importorskip("transformers")
    report = _verify("correct_trainer_num_items", causal_lm_setup, accum_steps)
    assert report.passed, report.format_text()


def test_trainer_compute_loss_ignoring_num_items_is_not_equivalent() -> None:
    pytest.importorskip("transformers")
    report = _verify("bug_trainer_compute_loss_ignores_items", causal_lm_setup, 4)
    assert not report.passed, report.format_text()
    assert not report.steps[0].ok  # the first window already differs (no 1/K, token-mean bias)


@pytest.mark.parametrize("name", ["correct_lightning_automatic", "correct_lightning_manual"])
@pytest.mark.parametrize("accum_steps", [2, 4])
def test_lightning_accumulation_is_equivalent(name: str, accum_steps: int) -> None:
    pytest.importorskip("lightning")
    report = _verify(name, classifier_setup, accum_steps)
    assert report.passed, report.format_text()


@pytest.mark.parametrize("name, code", [
    ("bug_lightning_automatic_scaled_twice", "GA204"),
    ("bug_lightning_manual_unscaled", "GA201"),
])
def test_lightning_scaling_mistakes_are_named(name: str, code: str) -> None:
    pytest.importorskip("lightning")
    report = _verify(name, classifier_setup, 4)
    assert not report.passed
    assert code in report.codes, report.format_text()


def test_closure_steps_are_recorded_after_the_closure_ran() -> None:
    """`optimizer.step(closure)`: the gradients reaching the update are the ones
    the closure's backward produced (Lightning's automatic optimization)."""
    from accumlint.verify import instruments

    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []

    class Recorder:
        def event(self, kind):
            pass

        def clip_norm(self, norm):
            pass

        def compute_dtype(self, dtype):
            pass

        def before_step(self, optimizer):
            seen.append(model.weight.grad.clone() if model.weight.grad is not None else None)

        def after_step(self, optimizer):
            pass

    def closure():
        optimizer.zero_grad()
        loss = model(torch.ones(1, 2)).sum()
        loss.backward()
        return loss

    with instruments.instrumented(), instruments.recording_into(Recorder()):
        optimizer.step(closure)
    assert len(seen) == 1 and seen[0] is not None and torch.equal(seen[0], torch.ones(1, 2))
