"""Real training code: a small transformer with AdamW, trainer classes
(`FILE::Class.method`), `args` namespaces, fixed arguments, DataLoaders,
functions without source, and emitted tests run from elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from accumlint.verify import Setup, check_equivalence  # noqa: E402
from accumlint.verify.command import verify_command  # noqa: E402


class TinyLM(nn.Module):
    """A two-layer causal transformer over a 32-token vocabulary."""

    def __init__(self, vocab: int = 32, dim: int = 32, length: int = 12) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(length, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        hidden = self.embed(tokens) + self.position[: tokens.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        return self.head(self.norm(self.blocks(hidden, mask=mask, is_causal=True)))


def token_loss(logits, targets):
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def language_model(accum_steps, windows, seed):
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(accum_steps * windows):
        tokens = torch.randint(0, 32, (4, 13), generator=generator)
        batches.append((tokens[:, :-1], tokens[:, 1:]))
    return Setup(TinyLM(), lambda params: torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1), batches, token_loss)


TRANSFORMER_LOOP = """
    import torch
    def train(model, optimizer, loader, accum_steps, loss_fn):
        model.train()
        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
"""


def write(tmp_path, text: str, name: str = "loop.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("accum_steps, seed", [(2, 0), (3, 1), (4, 2), (8, 0)])
def test_float32_adamw_transformer_passes_at_every_k_and_seed(tmp_path, accum_steps, seed):
    path = write(tmp_path, TRANSFORMER_LOOP)
    report = check_equivalence(f"{path}::train", setup=language_model, accum_steps=accum_steps, windows=4, seed=seed)
    assert report.passed, report.format_text()
    assert report.dtype == "float32" and report.steps_full == 5
    broken = write(tmp_path, TRANSFORMER_LOOP.replace(" / accum_steps", ""), "broken.py")
    bad = check_equivalence(f"{broken}::train", setup=language_model, accum_steps=accum_steps, windows=4, seed=seed)
    assert bad.verdict == "not equivalent"


TRAINER = """
    class Trainer:
        def __init__(self, model, optimizer, train_loader, gradient_accumulation_steps, criterion, log_every=10):
            self.model = model
            self.optimizer = optimizer
            self.train_loader = train_loader
            self.accum = gradient_accumulation_steps
            self.criterion = criterion

        def train(self, epochs=1):
            self.optimizer.zero_grad()
            for _ in range(epochs):
                for i, (x, y) in enumerate(self.train_loader):
                    loss = self.criterion(self.model(x), y) / self.accum
                    loss.backward()
                    if (i + 1) % self.accum == 0 or (i + 1) == len(self.train_loader):
                        self.optimizer.step()
                        self.optimizer.zero_grad()
"""


def test_a_trainer_method_with_its_init_bound_by_role(tmp_path):
    path = write(tmp_path, TRAINER)
    report = check_equivalence(f"{path}::Trainer.train")
    assert report.passed, report.format_text()
    assert report.steps_full == 4


def test_a_trainer_method_with_a_constructor_from_the_setup(tmp_path):
    path = write(tmp_path, TRAINER.replace(" or (i + 1) == len(self.train_loader)", ""))

    def setup(accum_steps, windows, seed):
        generator = torch.Generator().manual_seed(seed)
        data = [(torch.randn(4, 8, generator=generator), torch.randint(0, 4, (4,), generator=generator))
                for _ in range(accum_steps * windows)]
        return {"model": nn.Linear(8, 4), "optimizer": lambda p: torch.optim.SGD(p, lr=0.1), "batches": data,
                "loss_fn": nn.CrossEntropyLoss(),
                "construct": lambda model, optimizer, loader, accum_steps, loss_fn: sys.modules[
                    "_accumlint_verify_" + "".join(c if c.isalnum() else "_" for c in str(path))
                ].Trainer(model, optimizer, loader, accum_steps, loss_fn)}

    report = check_equivalence(f"{path}::Trainer.train", setup=setup)
    assert report.codes == ["GA107"], report.format_text()  # the gate never fires on the tail
    assert check_equivalence(f"{path}::Trainer.train", setup=setup, tail=0).passed


ARGS_LOOP = """
    def run(model, optimizer, loader, criterion, args):
        for epoch in range(args.epochs):
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / args.gradient_accumulation_steps
                loss.backward()
                if (step + 1) % args.gradient_accumulation_steps == 0 or step + 1 == len(loader):
                    optimizer.step()
                    optimizer.zero_grad()
"""


def test_an_args_namespace_is_bound_by_attribute_from_the_command_line(tmp_path):
    path = write(tmp_path, ARGS_LOOP)
    result = CliRunner().invoke(verify_command, [
        f"{path}::run", "--bind", "args.gradient_accumulation_steps=accum_steps", "--arg", "args.epochs=1",
        "--output-format", "json",
    ])
    data = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert data["binding"]["args"] == "namespace" and data["steps_full"] == 4


def test_fixed_keyword_arguments(tmp_path):
    path = write(tmp_path, ARGS_LOOP.replace("args.epochs", "epochs").replace("args):", "args, epochs):"))
    report = check_equivalence(f"{path}::run", bind={"args.gradient_accumulation_steps": "accum_steps"},
                               args={"epochs": 2})
    assert report.passed, report.format_text()
    assert report.used == 2 * report.fed and report.steps_full == 8


def test_a_dataloader_setup_gives_the_runs_dataloaders(tmp_path):
    path = write(tmp_path, """
        from torch.utils.data import DataLoader
        def train(model, optimizer, loader, accum_steps, loss_fn):
            assert isinstance(loader, DataLoader), type(loader)
            for i, (x, y) in enumerate(loader):
                (loss_fn(model(x), y) / accum_steps).backward()
                if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                    optimizer.step()
                    optimizer.zero_grad()
    """)

    report = check_equivalence(f"{path}::train", setup=sample_loader_setup)
    assert report.passed, report.format_text()
    assert report.fed == report.used == 14


def sample_loader_setup():
    generator = torch.Generator().manual_seed(0)
    samples = [(torch.randn(8, generator=generator), int(torch.randint(0, 4, (), generator=generator)))
               for _ in range(4 * 16)]
    return Setup(nn.Linear(8, 4), lambda p: torch.optim.SGD(p, lr=0.1), DataLoader(samples, batch_size=4),
                 nn.CrossEntropyLoss())


REBUILDING = """
    from torch.utils.data import DataLoader
    def train(model, optimizer, loader, accum_steps, loss_fn):
        loader = DataLoader(loader.dataset, {batching})
        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum_steps).backward()
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize("batching", ["batch_size=loader.batch_size, collate_fn=loader.collate_fn",
                                      "batch_size=loader.batch_size, shuffle=False"])
def test_a_loader_rebuilt_from_its_dataset_gets_the_same_batches(tmp_path, batching):
    path = write(tmp_path, REBUILDING.format(batching=batching))
    report = check_equivalence(f"{path}::train", setup=sample_loader_setup)
    assert report.passed, report.format_text()
    assert report.fed == report.used == 14


def test_a_loader_rebuilt_with_its_own_batch_size_is_refused_plainly(tmp_path):
    path = write(tmp_path, REBUILDING.format(batching="batch_size=8"))
    report = check_equivalence(f"{path}::train", setup=sample_loader_setup)
    assert report.verdict == "could not run"
    assert "batches of 8 from loader.dataset" in report.reason and "batch_size=loader.batch_size" in report.reason


def test_a_function_without_source_is_verified_when_every_parameter_is_bound():
    namespace: dict = {}
    exec(compile(textwrap.dedent(TRANSFORMER_LOOP), "<generated>", "exec"), namespace)
    train = namespace["train"]
    unbound = check_equivalence(train)
    assert unbound.verdict == "could not run" and "every parameter must be bound" in unbound.reason
    bound = check_equivalence(train, bind={"model": "model", "optimizer": "optimizer", "loader": "loader",
                                           "accum_steps": "accum_steps", "loss_fn": "loss_fn"})
    assert bound.passed, bound.format_text()


def test_an_emitted_test_passes_from_another_working_directory(tmp_path):
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    write(project, TRANSFORMER_LOOP, "train.py")
    (project / "setups").mkdir()
    write(project / "setups", """
        import torch
        def make(accum_steps, windows, seed):
            g = torch.Generator().manual_seed(seed)
            data = [(torch.randn(2, 8, generator=g), torch.randint(0, 4, (2,), generator=g))
                    for _ in range(accum_steps * windows)]
            return torch.nn.Linear(8, 4), lambda p: torch.optim.SGD(p, lr=0.1), data, torch.nn.CrossEntropyLoss()
    """, "mysetup.py")  # not next to train.py: the emitted test must put it on sys.path
    out = project / "tests" / "test_guard.py"
    cwd = os.getcwd()
    os.chdir(project / "setups")
    try:
        result = CliRunner().invoke(verify_command, ["../train.py::train", "--setup", "mysetup:make", "-k", "2",
                                                     "--emit-test", str(out)])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
                         cwd=elsewhere, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


SCALED_LOOP = """
    def train(model, optimizer, loader, accum_steps, loss_fn, weighting):
        for i, (x, y) in enumerate(loader):
            loss = weighting(loss_fn(model(x), y)) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                optimizer.step()
                optimizer.zero_grad()
"""


class Weighting:
    """A stateful loss helper, as a loss scaler is: each run gets its own copy."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, loss):
        self.calls += 1
        return loss * 0.5


def weighted_setup(accum_steps, windows, seed):
    generator = torch.Generator().manual_seed(seed)
    batches = [(torch.randn(4, 6, generator=generator), torch.randn(4, 2, generator=generator))
               for _ in range(accum_steps * windows)]
    return {"model": nn.Linear(6, 2), "optimizer": lambda params: torch.optim.SGD(params, lr=0.1),
            "batches": batches, "loss_fn": nn.MSELoss(), "weighting": Weighting(), "other": Weighting()}


def test_a_parameter_binds_to_an_object_the_setup_returns_by_name(tmp_path):
    path = write(tmp_path, SCALED_LOOP)
    report = check_equivalence(f"{path}::train", setup=weighted_setup)
    assert report.passed, report.format_text()
    assert report.binding["weighting"] == "setup.weighting"
    # The weighting halves the loss on purpose; the textbook loop, built without it, must not call that GA205.
    assert any("weighting = setup.weighting" in line for line in report.comparisons), report.format_text()
    renamed = write(tmp_path, SCALED_LOOP.replace("weighting", "w"), "renamed.py")
    bound = check_equivalence(f"{renamed}::train", setup=weighted_setup, bind={"w": "setup.other"})
    assert bound.passed and bound.binding["w"] == "setup.other"
    missing = check_equivalence(f"{renamed}::train", setup=weighted_setup, bind={"w": "setup.scaler"})
    assert missing.verdict == "could not run"
    assert "returns no object named 'scaler' (it returns: other, weighting)" in missing.reason


class SelfAttention(nn.Module):
    """Dropout applied through `self.training`, as nanoGPT's attention does."""

    def __init__(self, functional_dropout: bool) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.head = nn.Linear(8, 4)
        self.dropout = 0.5
        self.functional_dropout = functional_dropout

    def forward(self, x):
        # Two heads in front of the batch, so that dropout masks follow the batch's size.
        q, k, v = self.qkv(x).view(x.shape[0], 2, 1, 12).transpose(0, 1).split(4, dim=-1)
        if self.functional_dropout:
            out = nn.functional.scaled_dot_product_attention(q, k, v).contiguous()
            out = nn.functional.dropout(out, self.dropout, self.training)
        else:
            out = nn.functional.scaled_dot_product_attention(
                q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        return self.head(out.transpose(0, 1).reshape(x.shape[0], 8))


@pytest.mark.parametrize("functional_dropout", [False, True])
def test_dropout_applied_through_self_training_is_off_in_both_runs(tmp_path, functional_dropout):
    path = write(tmp_path, TRANSFORMER_LOOP)

    def setup(accum_steps, windows, seed):
        generator = torch.Generator().manual_seed(seed)
        batches = [(torch.randn(4, 8, generator=generator), torch.randint(0, 4, (4,), generator=generator))
                   for _ in range(accum_steps * windows)]
        return Setup(SelfAttention(functional_dropout), lambda p: torch.optim.SGD(p, lr=0.1), batches,
                     nn.CrossEntropyLoss())

    for eval_mode in (False, True):
        report = check_equivalence(f"{path}::train", setup=setup, eval_mode=eval_mode)
        assert report.passed, report.format_text()


PREFETCHING = """
    import contextlib
    def train(model, optimizer, loader, accum_steps, loss_fn, max_updates):
        batches = iter(loader)
        x, y = next(batches)
        for _ in range(max_updates):
            for micro in range(accum_steps):
                boundary = micro == accum_steps - 1
                with contextlib.nullcontext() if boundary or not hasattr(model, "no_sync") else model.no_sync():
                    loss = loss_fn(model(x), y) / accum_steps
                    x, y = next(batches)
                    loss.backward()
            optimizer.step()
            optimizer.zero_grad()
"""


def test_an_update_driven_loop_is_fed_whole_windows_and_not_called_ga107():
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "verify" / "correct_inner_micro_steps.py"
    report = check_equivalence(f"{fixture}::train")
    assert report.passed and report.tail == 0, report.format_text()
    assert any("fixed number of updates" in note for note in report.notes)


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_loop_prefetching_one_batch_gets_it(tmp_path, nproc):
    path = write(tmp_path, PREFETCHING)
    report = check_equivalence(f"{path}::train", args={"max_updates": 3}, windows=3, nproc=nproc, accum_steps=2)
    assert report.passed, report.format_text()
    assert any("one micro-batch ahead" in note for note in report.notes)


def test_a_loop_asking_for_more_updates_than_fed_says_what_to_pass(tmp_path):
    path = write(tmp_path, PREFETCHING)
    report = check_equivalence(f"{path}::train", args={"max_updates": 5}, windows=3)
    assert report.verdict == "could not run"
    assert "more micro-batches than the 3 windows of 4 fed" in report.reason
    assert "--arg NAME=3" in report.reason
