"""`accumlint verify FILE::FUNCTION`: the click command (registered on the
`accumlint` group by the CLI). Importing this module does not import torch;
running the command does.
"""

from __future__ import annotations

import os
import sys

import click

from accumlint.verify.binding import ROLES, BindingError, parse_bind_options

_HELP = f"""Prove that FILE::FUNCTION's gradient accumulation matches the full batch.

This command IMPORTS AND RUNS the given file and function (and the setup
module), with torch. It trains twice from the same initial weights: once on
N windows of K micro-batches with accumulation K, once on N batches of K
times the size with accumulation 1, and compares the gradients at every
optimizer step and the final parameters.

The function's parameters are bound by role ({", ".join(ROLES)}) from how the
function uses them; override with --bind NAME=ROLE. Without --setup, a
built-in synthetic setup (a small float64 classifier, (x, y) batches,
CrossEntropyLoss, SGD with momentum) serves loops of the shape
train(model, optimizer, loader, accum_steps, loss_fn).

Exit status: 0 equivalent, 1 not equivalent, 2 could not run (the reason is
printed).
"""


@click.command("verify", help=_HELP)
@click.argument("target", metavar="FILE::FUNCTION")
@click.option("--accum-steps", "-k", type=click.IntRange(min=1), default=4, show_default=True,
              help="Micro-batches per optimizer step (K).")
@click.option("--setup", "setup", metavar="MODULE:FACTORY",
              help="Factory returning (model, optimizer_factory, batches[, loss_fn]).")
@click.option("--bind", "bind", multiple=True, metavar="NAME=ROLE",
              help="Bind a parameter to a role explicitly (repeatable).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default=None,
              help="Parameter dtype [default: float64 for the synthetic setup, the model's own otherwise].")
@click.option("--windows", "--steps", "windows", type=click.IntRange(min=1), default=3, show_default=True,
              help="Accumulation windows, i.e. optimizer steps, per run (N).")
@click.option("--micro-batch", type=click.IntRange(min=1), default=4, show_default=True,
              help="Micro-batch size of the synthetic setup (B).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--eval-mode", is_flag=True, help="Pin dropout and batch-norm layers in eval mode.")
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run both runs under torch.distributed (gloo, DDP) with this many processes.")
@click.option("--emit-test", "emit_test", type=click.Path(dir_okay=False),
              help="When equivalent, write a pytest test that keeps it so.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify_command(
    target: str,
    accum_steps: int,
    setup: str | None,
    bind: tuple[str, ...],
    device: str,
    dtype: str | None,
    windows: int,
    micro_batch: int,
    seed: int,
    eval_mode: bool,
    nproc: int,
    emit_test: str | None,
    output_format: str,
) -> None:
    try:
        overrides = parse_bind_options(bind)
    except BindingError as error:
        raise click.BadParameter(str(error), param_hint="--bind") from None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # --setup modules resolve as with `python -m`

    from accumlint.verify.equivalence import check_equivalence

    options = dict(
        accum_steps=accum_steps, windows=windows, micro_batch=micro_batch, seed=seed,
        device=device, dtype=dtype, eval_mode=eval_mode,
    )
    if setup:
        options["setup"] = setup
    if overrides:
        options["bind"] = overrides
    report = check_equivalence(target, nproc=nproc, **options)
    click.echo(report.to_json() if output_format == "json" else report.format_text())
    if emit_test and report.passed:
        _write_test(emit_test, target, options)
    sys.exit(report.exit_code)


def _write_test(path: str, target: str, options: dict) -> None:
    from accumlint.verify.emit import render_test
    from accumlint.verify.loading import split_target

    file, function = split_target(target)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_test(path, file, function, options))
    click.echo(f"wrote {path}", err=True)
