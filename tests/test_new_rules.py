"""Edge cases of the catalog-v2 rules that fixtures do not pin down one by one:
what the model must not mistake for an EMA or a logging call, fixes that must
leave keywords and scopes alone, and precision near-misses written inline."""

from __future__ import annotations

import textwrap

from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.check.fixes import fix_text

from silence import assert_silent


def _codes(source: str) -> list[tuple[int, str]]:
    return [(d.line, d.code) for d in analyze(textwrap.dedent(source), "case.py")]


def _fixed(source: str) -> str:
    return fix_text(textwrap.dedent(source), "case.py", AnalysisOptions(), unsafe=True).text


GATED = """\
import torch
from torch import nn

def train(model, loader, {extra}accum_steps=4):
    optimizer = torch.optim.AdamW(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss = loss / accum_steps
        loss.backward()
        {line}
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


def test_an_update_on_a_name_that_merely_contains_ema_is_not_an_ema() -> None:
    source = GATED.format(extra="schema=None, ", line="schema.update(model)")
    assert_silent(source, k="accum_steps", code="GA306")


def test_an_ema_named_receiver_updating_every_micro_batch_is_reported() -> None:
    source = GATED.format(extra="model_ema=None, ", line="model_ema.update(model)")
    assert (11, "GA306") in _codes(source)


def test_the_logged_loss_fix_keeps_a_keyword_named_loss() -> None:
    source = GATED.format(extra="bar=None, ", line="bar.set_postfix(loss=loss.item())")
    assert (11, "GA601") in _codes(source)
    assert "bar.set_postfix(loss=loss.item() * accum_steps)" in _fixed(source)


def test_a_loss_logged_before_it_is_divided_is_not_reported() -> None:
    source = GATED.format(extra="", line="pass").replace(
        "        loss = loss / accum_steps\n", "        print(loss.item())\n        loss = loss / accum_steps\n"
    )
    assert_silent(source, k="accum_steps")


def test_accelerator_built_with_star_kwargs_is_unknown_so_silent() -> None:
    source = """\
    from accelerate import Accelerator

    def main(args, model, opt, loader, config):
        accelerator = Accelerator(**config)
        model, opt, loader = accelerator.prepare(model, opt, loader)
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss / args.gradient_accumulation_steps
                accelerator.backward(loss)
                opt.step()
                opt.zero_grad()
    """
    assert_silent(source, k="args.gradient_accumulation_steps", code="GA108")


def test_no_accelerator_fix_when_k_is_set_after_the_constructor() -> None:
    source = """\
    import torch.nn.functional as F
    from accelerate import Accelerator

    class Trainer:
        def __init__(self, model, opt, loader, steps):
            self.accelerator = Accelerator()
            self.grad_accum_steps = steps
            self.model, self.opt, self.loader = self.accelerator.prepare(model, opt, loader)

        def fit(self):
            for x, y in self.loader:
                with self.accelerator.accumulate(self.model):
                    loss = F.mse_loss(self.model(x), y) / self.grad_accum_steps
                    self.accelerator.backward(loss)
                    self.opt.step()
                    self.opt.zero_grad()
    """
    assert (12, "GA108") in _codes(source)
    assert "Accelerator()" in _fixed(source)


def test_the_schedule_fix_imports_math_once_after_future_imports() -> None:
    source = """\
    from __future__ import annotations
    import torch
    from torch.utils.data import DataLoader

    def train(model, dataset, accum_steps=4):
        loader = DataLoader(dataset, batch_size=8)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(loader))
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
    """
    assert _codes(source) == [(8, "GA305")]
    fixed = _fixed(source)
    assert fixed.startswith("from __future__ import annotations\nimport math\nimport torch\n")
    assert "T_max=math.ceil(len(loader) / accum_steps)" in fixed
    assert_silent(fixed, k="accum_steps")


def test_a_step_counter_compared_only_with_a_literal_is_silent() -> None:
    source = GATED.format(extra="", line="pass").replace(
        "        loss.backward()\n", "        loss.backward()\n        global_step += 1\n        if global_step >= 1000:\n            break\n"
    )
    assert_silent(source, k="accum_steps", code="GA109")


def test_the_prefilter_lets_a_compute_loss_override_through() -> None:
    from accumlint.source.gate import might_hold_training_code

    assert might_hold_training_code("class T(Trainer):\n    def compute_loss(self, model, inputs):\n        pass\n")
    assert not might_hold_training_code("def compute_losses(items):\n    return sum(items)\n")
    assert not might_hold_training_code("loss = compute_loss(batch)\n")


def test_a_trainer_file_without_any_backward_is_checked_from_the_command_line(tmp_path) -> None:
    from click.testing import CliRunner

    from accumlint.cli import cli

    (tmp_path / "trainer.py").write_text(textwrap.dedent("""\
        from transformers import AutoModelForCausalLM, Trainer

        class KLTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                outputs = model(**inputs)
                return outputs.loss

        model = AutoModelForCausalLM.from_pretrained("gpt2")
    """))
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "trainer.py"), "--no-cache"])
    assert "GA207" in result.output and result.exit_code == 1
