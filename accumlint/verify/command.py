"""`accumlint verify FILE::FUNCTION`: the click command (registered on the
`accumlint` group by the CLI). Importing this module does not import torch;
running the command does.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Optional

import click
from click.core import ParameterSource

from accumlint.check.config import ConfigError
from accumlint.verify.binding import ROLES, BindingError, parse_arg_options, parse_bind_options
from accumlint.verify.contained import DEFAULT_TIMEOUT, check_contained
from accumlint.verify.loading import describe

_HELP = f"""Prove that FILE::FUNCTION's gradient accumulation matches the full batch.

This command IMPORTS AND RUNS the given file and function (and the setup
module), with torch. It trains twice from the same initial weights: once on
N windows of K micro-batches with accumulation K, once on N batches of K
times the size with accumulation 1, and compares the gradients at every
optimizer step and the final parameters.

The function's parameters are bound by role ({", ".join(ROLES)}) from how the
function uses them; override with --bind NAME=ROLE, bind attributes of a
namespace argument with --bind args.gradient_accumulation_steps=accum_steps,
and pass fixed values with --arg NAME=VALUE. FILE::Class.method builds the
class from the setup's constructor (or binds its __init__ by role). Defaults
come from [tool.accumlint.verify] in the nearest pyproject.toml. Run A feeds
N windows of K micro-batches and a partial window of r; the report says how
many were fed and used. Without --setup, a
built-in synthetic setup (a small float64 classifier, (x, y) batches,
CrossEntropyLoss, SGD with momentum) serves loops of the shape
train(model, optimizer, loader, accum_steps, loss_fn).

The file, the setup and the function run in a child process with its own
process group: an exit, a crash or an exception there, or a run past
--timeout, is "could not run" with the reason, and the group is killed at
the end. sys.argv is the file's own (--script-args). What the code prints is
captured and shown apart, on stderr (in JSON, as the "stdout" and "stderr"
fields).

Exit status: 0 equivalent, 1 not equivalent, 2 could not run (the reason is
printed in one line).
"""


def _report_error(message: str) -> "click.exceptions.Exit":
    click.echo(f"accumlint: error: {message}", err=True)
    return click.exceptions.Exit(2)


@click.command("verify", help=_HELP)
@click.argument("target", metavar="FILE::FUNCTION")
@click.option("--accum-steps", "-k", type=click.IntRange(min=1), default=4, show_default=True,
              help="Micro-batches per optimizer step (K, at least 2: K=1 proves nothing).")
@click.option("--setup", "setup", metavar="MODULE:FACTORY",
              help="Factory returning (model, optimizer_factory, batches[, loss_fn]).")
@click.option("--bind", "bind", multiple=True, metavar="NAME=ROLE",
              help="Bind a parameter (or NAME.ATTRIBUTE of a namespace parameter) to a role (repeatable).")
@click.option("--arg", "arg", multiple=True, metavar="NAME=VALUE",
              help="Pass a fixed keyword argument (a Python literal, else a string; repeatable).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default=None,
              help="Parameter dtype [default: float64 for the synthetic setup, the model's own otherwise].")
@click.option("--windows", "--steps", "windows", type=click.IntRange(min=1), default=3, show_default=True,
              help="Full accumulation windows per run (N).")
@click.option("--tail", type=click.IntRange(min=0), default=None,
              help="Micro-batches in a partial last window (r < K) [default: K // 2, at least 1; 0 with --nproc].")
@click.option("--micro-batch", type=click.IntRange(min=1), default=4, show_default=True,
              help="Micro-batch size of the synthetic setup (B).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rtol", type=click.FloatRange(min=0), default=None,
              help="Relative tolerance [default: from the compute dtype].")
@click.option("--atol", type=click.FloatRange(min=0), default=None,
              help="Absolute tolerance [default: from the compute dtype].")
@click.option("--eval-mode", is_flag=True, default=None, help="Pin batch-norm layers in eval mode too (dropout is always off in both runs).")
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run the accumulated run on this many processes (gloo, DDP) against one over the global batch.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds the whole verification may take before it is stopped.")
@click.option("--script-args", "script_args", metavar="ARGS", default=None,
              help="The file's own command-line arguments (sys.argv[1:] while it is imported and runs), "
                   "split as a shell would.")
@click.option("--emit-test", "emit_test", type=click.Path(dir_okay=False),
              help="When equivalent, write a pytest test that keeps it so.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def verify_command(ctx: click.Context, target: str, emit_test: Optional[str], output_format: str, **given: Any) -> None:
    try:
        options = _options(ctx, target, given)
    except (BindingError, ConfigError) as error:
        raise _report_error(str(error)) from None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # --setup modules resolve as with `python -m`
    if not _torch_installed():
        raise _report_error("`accumlint verify` needs torch: pip install 'accumlint[verify]'")
    # Forked before torch is imported here: the child starts torch fresh (see `contained`).
    report = check_contained(target, _verify_here, describe, **options)
    if output_format == "json":
        click.echo(report.to_json())
    else:
        output = report.format_output()
        if output:
            click.echo(output, err=True)
        click.echo(report.format_text())
    if emit_test and report.passed:
        _write_test(emit_test, target, options)
    sys.exit(report.exit_code)


def _torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


# Options whose value, when left at its default, comes from [tool.accumlint.verify].
_CONFIGURABLE = ("accum_steps", "setup", "device", "dtype", "windows", "micro_batch", "seed", "tail", "rtol",
                 "atol", "eval_mode", "nproc", "bind", "arg", "timeout", "script_args")


def _options(ctx: click.Context, target: str, given: dict[str, Any]) -> dict[str, Any]:
    """check_equivalence's keyword arguments: the command line, then the
    configuration of the target's file, then the defaults."""
    from accumlint.check.config import Resolver
    from accumlint.verify.loading import split_target

    try:
        path = split_target(target)[0]
    except Exception:  # noqa: BLE001 - a bad target is reported by the run itself
        path = "."
    settings = Resolver().settings_for(path).config.verify
    values = dict(given)
    for name in _CONFIGURABLE:
        source = ctx.get_parameter_source(name)
        configured = getattr(settings, name, None)
        if source in (ParameterSource.DEFAULT, None) and configured not in (None, ()):
            values[name] = configured
    options: dict[str, Any] = {
        key: values[key]
        for key in ("accum_steps", "windows", "micro_batch", "seed", "device", "dtype", "tail", "rtol", "atol",
                    "nproc", "timeout", "script_args")
    }
    options["eval_mode"] = bool(values.get("eval_mode"))
    if values.get("setup"):
        options["setup"] = values["setup"]
    bind = parse_bind_options(tuple(values.get("bind") or ()))
    if bind:
        options["bind"] = bind
    fixed = parse_arg_options(tuple(values.get("arg") or ()))
    if fixed:
        options["args"] = fixed
    return options


def _write_test(path: str, target: str, options: dict) -> None:
    from accumlint.verify.emit import render_test
    from accumlint.verify.loading import split_target

    file, function = split_target(target)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_test(path, file, function, options))
    click.echo(f"wrote {path}", err=True)


def _verify_here(target: Any, **options: Any) -> Any:
    """The verification, run inside the contained child: torch is imported there, not here."""
    from accumlint.verify.equivalence import verify_here

    return verify_here(target, **options)
