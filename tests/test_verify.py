"""The runtime verifier's API: verdicts, diagnoses and explanations on the fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from accumlint.verify import Setup, check_equivalence  # noqa: E402
from accumlint.verify.batches import concatenate  # noqa: E402
from accumlint.verify.report import COULD_NOT_RUN, EQUIVALENT, NOT_EQUIVALENT  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verify"
CORRECT = sorted(p.stem for p in FIXTURES.glob("correct_*.py") if p.stem != "correct_no_sync")
BUGS = {
    "bug_missing_scaling": "GA201",
    "bug_double_scaling": "GA204",
    "bug_zero_every_micro_batch": "GA101",
    "bug_step_every_micro_batch": "GA102",
    "bug_off_by_one": "GA106",
    "bug_zero_before_step": "GA104",
    "bug_backward_after_step": "GA103",
}


def target(name: str) -> str:
    return f"{FIXTURES / name}.py::train"


def make_setup(model: nn.Module, loss_fn=None, batches=None, count: int = 12, size: int = 4):
    """A factory over `model` with (x, y) batches for an 8-feature, 4-class problem."""

    def factory():
        generator = torch.Generator().manual_seed(3)
        data = batches or [
            (torch.randn(size, 8, generator=generator, dtype=torch.float64),
             torch.randint(0, 4, (size,), generator=generator))
            for _ in range(count)
        ]
        return Setup(model.double(), lambda params: torch.optim.SGD(params, lr=0.1), data,
                     loss_fn or nn.CrossEntropyLoss())

    return factory


# Loops that step a fixed number of whole windows (nanoGPT style) drop a
# partial last window by design: they are verified without one.
DROP_TAIL = {"correct_inner_micro_steps"}


@pytest.mark.parametrize("name", CORRECT)
def test_correct_fixtures_are_equivalent(name):
    tail = 0 if name in DROP_TAIL else None
    report = check_equivalence(target(name), tail=tail)
    assert report.verdict == EQUIVALENT, report.format_text()
    assert report.exit_code == 0
    # 3 windows of 4, plus a partial window of 2 unless dropped by design.
    assert report.steps_accumulated == report.steps_full == (3 if tail == 0 else 4)
    assert report.fed == report.used == (12 if tail == 0 else 14)
    assert all(step.ok for step in report.steps)
    assert report.max_abs_error < 1e-12


@pytest.mark.parametrize("name, code", sorted(BUGS.items()))
def test_each_bug_fails_with_its_diagnosis(name, code):
    report = check_equivalence(target(name))
    assert report.verdict == NOT_EQUIVALENT, report.format_text()
    assert report.exit_code == 1
    assert report.codes == [code], report.format_text()


def test_report_names_the_worst_parameter_and_its_errors():
    report = check_equivalence(target("bug_missing_scaling"))
    assert report.worst_parameter in {"0.weight", "0.bias", "2.weight", "2.bias"}
    # 4x the gradient: the absolute error is 3x the full-batch gradient.
    assert report.max_rel_error == pytest.approx(3.0, rel=1e-6)
    assert "4 x the full-batch gradient" in report.format_text()
    assert report.to_dict()["worst_parameter"] == report.worst_parameter


def test_step_every_micro_batch_reports_the_step_counts():
    report = check_equivalence(target("bug_step_every_micro_batch"), windows=2)
    # 2 windows of 4 and a partial window of 2: 10 micro-batches, 3 full batches.
    assert (report.steps_accumulated, report.steps_full) == (10, 3)
    assert "different numbers of optimizer steps" in report.reason


def test_step_count_diagnosis_is_not_hidden_by_known_sources():
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.3), nn.Linear(16, 4))
    report = check_equivalence(target("bug_step_every_micro_batch"), setup=make_setup(model))
    assert report.codes == ["GA102"]


def test_zero_before_step_says_no_gradient_reached_a_step():
    report = check_equivalence(target("bug_zero_before_step"))
    assert report.reason == "no gradient reached any optimizer step"


def test_off_by_one_is_diagnosed_from_the_first_window_alone():
    report = check_equivalence(target("bug_off_by_one"), windows=1)
    assert report.codes == ["GA106"]


def test_backward_after_step_without_autograd_error_is_diagnosed_from_the_steps():
    # A single linear layer saves no weight for backward, so the late backward
    # runs without error and the signature is in the numbers.
    report = check_equivalence(target("bug_backward_after_step"), setup=make_setup(nn.Linear(8, 4)))
    assert report.verdict == NOT_EQUIVALENT and report.steps_accumulated == 3
    assert report.codes == ["GA103"]


def test_user_error_says_where():
    report = check_equivalence(target("correct_no_sync"))
    assert report.verdict == COULD_NOT_RUN and report.exit_code == 2
    assert "correct_no_sync.py:11" in report.reason and "no_sync" in report.reason


def test_function_without_steps_fails_plainly(tmp_path):
    source = tmp_path / "nostep.py"
    source.write_text(
        "def train(model, loader, accum_steps, loss_fn):\n"
        "    for x, y in loader:\n"
        "        (loss_fn(model(x), y) / accum_steps).backward()\n"
    )
    report = check_equivalence(f"{source}::train")
    assert report.verdict == NOT_EQUIVALENT
    assert report.reason == "the function never stepped an optimizer over the model's parameters"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_sets_the_tolerance(dtype):
    report = check_equivalence(target("correct_gated"), dtype=dtype)
    assert report.passed and report.dtype == dtype
    assert report.tolerance["rtol"] == (1e-4 if dtype == "float32" else 1e-7)


def test_seeds_fix_the_runs_and_the_global_rng_is_restored():
    setup = make_setup(nn.Sequential(nn.Linear(8, 4), nn.Dropout(0.2)))
    torch.manual_seed(123)
    before = torch.get_rng_state()
    report = check_equivalence(target("correct_gated"), setup=setup, eval_mode=True)
    assert report.passed
    assert torch.equal(torch.get_rng_state(), before)


def test_optimizer_hooks_are_removed_afterwards():
    from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

    counts = len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks)
    check_equivalence(target("correct_gated"))
    check_equivalence(target("bug_backward_after_step"))
    assert (len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks)) == counts


def test_user_optimizer_subclass_is_recorded():
    class Halving(torch.optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    setup = make_setup(nn.Linear(8, 4))

    def factory():
        made = setup()
        made.optimizer_factory = lambda params: Halving(params, lr=0.05)
        return made

    report = check_equivalence(target("correct_gated"), setup=factory)
    assert report.passed and report.steps_accumulated == 3


def test_setup_as_dict_tuple_and_module_string(tmp_path, monkeypatch):
    model = nn.Linear(8, 4).double()
    batches = make_setup(model)().batches
    opt = lambda params: torch.optim.Adam(params, lr=0.01)  # noqa: E731
    as_dict = {"model": model, "optimizer": opt, "batches": batches, "loss_fn": nn.CrossEntropyLoss()}
    assert check_equivalence(target("correct_gated"), setup=lambda: as_dict).passed
    as_tuple = (model, opt, batches, nn.CrossEntropyLoss())
    assert check_equivalence(target("correct_gated"), setup=lambda: as_tuple).passed
    (tmp_path / "mysetup.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "def make(accum_steps, windows, seed):\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    n = accum_steps * windows\n"
        "    data = [(torch.randn(2, 8, generator=g), torch.randint(0, 4, (2,), generator=g)) for _ in range(n)]\n"
        "    return nn.Linear(8, 4), lambda p: torch.optim.SGD(p, lr=0.1), data, nn.CrossEntropyLoss()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    report = check_equivalence(target("correct_gated"), setup="mysetup:make", accum_steps=2, windows=5)
    assert report.passed and report.steps_full == 6 and report.dtype == "float32"


def test_dict_batches_are_concatenated(tmp_path):
    source = tmp_path / "dicts.py"
    source.write_text(
        "def train(model, optimizer, loader, accum_steps, loss_fn):\n"
        "    for i, batch in enumerate(loader):\n"
        "        out = model(batch['inputs']['x'])\n"
        "        (loss_fn(out, batch['labels']) / accum_steps).backward()\n"
        "        if (i + 1) % accum_steps == 0:\n"
        "            optimizer.step()\n"
        "            optimizer.zero_grad()\n"
    )
    plain = make_setup(nn.Linear(8, 4))()
    nested = [{"inputs": {"x": x}, "labels": y} for x, y in plain.batches]
    report = check_equivalence(f"{source}::train", setup=make_setup(nn.Linear(8, 4), batches=nested))
    assert report.passed, report.format_text()


def test_concatenate_keeps_nested_structure():
    a = {"x": (torch.ones(2, 3), [torch.zeros(2)]), "n": 7}
    b = {"x": (torch.ones(1, 3), [torch.ones(1)]), "n": 7}
    joined = concatenate([a, b])
    assert joined["x"][0].shape == (3, 3) and joined["x"][1][0].tolist() == [0, 0, 1] and joined["n"] == 7


# --- explanations instead of bare failures ---------------------------------


def test_batch_norm_is_explained_and_eval_mode_isolates_the_loop():
    layer = nn.BatchNorm1d(16)
    model = nn.Sequential(nn.Linear(8, 16), layer, nn.Tanh(), nn.Linear(16, 16), layer, nn.Linear(16, 4))
    report = check_equivalence(target("correct_gated"), setup=make_setup(model))
    assert report.verdict == NOT_EQUIVALENT
    assert "batch-norm" in report.explanations[0].summary and "--eval-mode" in report.explanations[0].detail
    assert report.codes == []
    pinned = check_equivalence(target("correct_gated"), setup=make_setup(model), eval_mode=True)
    assert pinned.passed, pinned.format_text()


def test_dropout_is_off_in_both_runs_without_eval_mode():
    # Two dropout layers: with one, CPU masks drawn in sequence would happen to
    # concatenate into the full batch's mask, and the runs would match anyway.
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Tanh(), nn.Linear(16, 16), nn.Dropout(0.5),
                          nn.Linear(16, 4))
    report = check_equivalence(target("correct_gated"), setup=make_setup(model))
    assert report.passed, report.format_text()
    assert any("dropout was off in both runs (1, 4)" in note for note in report.notes), report.notes


def test_sum_reduced_loss_is_explained():
    report = check_equivalence(
        target("correct_gated"), setup=make_setup(nn.Linear(8, 4), loss_fn=nn.CrossEntropyLoss(reduction="sum"))
    )
    assert report.verdict == NOT_EQUIVALENT
    assert 'reduction="sum"' in report.explanations[0].summary and report.codes == []


def test_unequal_micro_batch_sizes_are_explained():
    generator = torch.Generator().manual_seed(0)
    batches = [
        (torch.randn(n, 8, generator=generator, dtype=torch.float64), torch.randint(0, 4, (n,), generator=generator))
        for n in [4, 4, 4, 1] * 2
    ]
    report = check_equivalence(target("correct_gated"), setup=make_setup(nn.Linear(8, 4), batches=batches))
    assert report.verdict == NOT_EQUIVALENT
    assert "micro-batch sizes differ within window 1: [4, 4, 4, 1]" in report.explanations[0].summary


def test_token_count_normalisation_is_explained():
    generator = torch.Generator().manual_seed(0)
    batches = []
    for ignored in [0, 3, 1, 2] * 2:
        y = torch.randint(0, 4, (4,), generator=generator)
        y[:ignored] = -100
        batches.append((torch.randn(4, 8, generator=generator, dtype=torch.float64), y))
    report = check_equivalence(target("correct_gated"), setup=make_setup(nn.Linear(8, 4), batches=batches))
    assert report.verdict == NOT_EQUIVALENT
    assert report.codes == ["GA206"] and "window 1: [4, 1, 3, 2]" in report.explanations[0].summary


# --- could not run -----------------------------------------------------------


def test_cuda_absent_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    report = check_equivalence(target("correct_gated"), device="cuda")
    assert report.verdict == COULD_NOT_RUN and "CUDA is not available" in report.reason


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_cuda():
    good = check_equivalence(target("correct_gated"), device="cuda")
    assert good.passed and good.device == "cuda", good.format_text()
    bad = check_equivalence(target("bug_missing_scaling"), device="cuda", dtype="float32")
    assert bad.codes == ["GA201"]


def test_missing_accumulation_parameter_is_explained(tmp_path):
    source = tmp_path / "fixed_k.py"
    source.write_text(
        "def train(model, optimizer, loader, loss_fn):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        (loss_fn(model(x), y) / 4).backward()\n"
        "        if (i + 1) % 4 == 0:\n"
        "            optimizer.step()\n"
    )
    report = check_equivalence(f"{source}::train")
    assert report.verdict == COULD_NOT_RUN and "--bind NAME=accum_steps" in report.reason


def test_too_few_micro_batches_in_the_setup():
    report = check_equivalence(target("correct_gated"), setup=make_setup(nn.Linear(8, 4), count=3))
    assert report.verdict == COULD_NOT_RUN and "fewer than one window (4)" in report.reason


def test_bad_setup_and_bad_target_are_reasons():
    assert "module:factory" in check_equivalence(target("correct_gated"), setup="nocolon").reason
    assert "no such file" in check_equivalence("missing.py::train").reason
    assert "FILE::FUNCTION" in check_equivalence("missing.py").reason
    assert "no function 'nope'" in check_equivalence(f"{FIXTURES / 'correct_gated.py'}::nope").reason
    raising = check_equivalence(target("correct_gated"), setup=lambda: 1 / 0)
    assert "ZeroDivisionError" in raising.reason


def test_importing_the_package_does_not_import_torch():
    code = (
        "import sys, accumlint.verify, accumlint.verify.command, accumlint.verify.pytest_plugin\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
