"""`check_equivalence`: the two runs, their comparison and the report.

Run A trains on N windows of K micro-batches with accumulation K; run B on N
batches, each the concatenation of a window's micro-batches, with accumulation
1. Both start from the same weights (each run deep-copies the setup's model),
get a fresh optimizer and the same seed. Problems of the user's code or setup
become a "could not run" report with the reason; they never raise.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional, Union

import torch

from accumlint.verify.batches import concatenate, windows_of
from accumlint.verify.binding import ACCUM_STEPS, LOSS_FN, Binding, BindingError, bind_parameters
from accumlint.verify.compare import FINAL_LOOSENING, Comparison, compare_runs, tolerance_for
from accumlint.verify.diagnosis import GradientOracle, diagnose, diagnose_error
from accumlint.verify.explanations import known_sources
from accumlint.verify.loading import LoadError, describe, function_source, load_function
from accumlint.verify.report import COULD_NOT_RUN, EQUIVALENT, NOT_EQUIVALENT, StepReport, VerificationReport
from accumlint.verify.runs import RunInputs, RunRecord, UserCodeError, run_training
from accumlint.verify.setup import Setup, SetupError, as_setup, build_setup, load_factory, place, synthetic_setup

SetupSpec = Union[None, str, Setup, Callable[..., Any]]

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


class _CannotRun(Exception):
    """Internal: the reason a verification could not run."""


def check_equivalence(
    function: Union[str, Callable[..., Any]],
    *,
    setup: SetupSpec = None,
    accum_steps: int = 4,
    windows: int = 3,
    micro_batch: int = 4,
    seed: int = 0,
    device: str = "cpu",
    dtype: Union[None, str, torch.dtype] = None,
    bind: Optional[dict[str, str]] = None,
    eval_mode: bool = False,
    nproc: int = 1,
) -> VerificationReport:
    """Verify that `function` with accumulation over `accum_steps` micro-batches
    takes the same optimizer steps as with one batch of `accum_steps` times the size.

    `function` is a callable or `"file.py::name"`; `setup` a factory, a
    `Setup`, `"module:factory"` or None for the synthetic setup (see
    `accumlint.verify.setup`); `bind` maps parameter names to roles.
    `dtype` defaults to float64 for the synthetic setup and to the model's own
    for a user setup. `nproc` > 1 runs both runs under torch.distributed (gloo,
    DDP) with that many processes.
    """
    target = function if isinstance(function, str) else describe(function)
    report = VerificationReport(target=target, verdict=COULD_NOT_RUN, accum_steps=accum_steps, windows=windows)
    try:
        if accum_steps < 1 or windows < 1 or micro_batch < 1:
            raise _CannotRun("accum_steps, windows and micro_batch must all be at least 1")
        callable_ = load_function(function) if isinstance(function, str) else function
        binding = bind_parameters(function_source(callable_), callable_.__name__, bind)
        report.binding = dict(binding.roles)
        report.binding_evidence = {name: list(reasons) for name, reasons in binding.evidence.items()}
        if binding.parameter_for(ACCUM_STEPS) is None:
            raise _CannotRun(
                f"no parameter of {callable_.__name__}() receives the accumulation steps, so they cannot "
                "be varied; bind one with --bind NAME=accum_steps"
            )
        torch_dtype = _DTYPES[dtype] if isinstance(dtype, str) else dtype
        the_setup = _resolve_setup(setup, accum_steps, windows * nproc, micro_batch, seed, device, torch_dtype)
        _check_setup(the_setup, binding, accum_steps * nproc)
        windows = report.windows = min(windows, len(the_setup.batches) // (accum_steps * nproc))
        if nproc > 1:
            from accumlint.verify.distributed import run_distributed

            accumulated, full = run_distributed(
                callable_, binding, the_setup, accum_steps=accum_steps, windows=windows,
                seed=seed, eval_mode=eval_mode, nproc=nproc,
            )
            oracle = None
        else:
            accumulated, full, oracle = _run_pair(callable_, binding, the_setup, accum_steps, windows, seed, eval_mode)
    except UserCodeError as error:
        report.reason = f"the training function raised at {error}"
        explanation = diagnose_error(error)
        if explanation is not None:
            report.verdict, report.explanations = NOT_EQUIVALENT, [explanation]
        return report
    except (LoadError, BindingError, SetupError, _CannotRun) as error:
        report.reason = str(error)
        return report
    param_dtype = next(the_setup.model.parameters()).dtype
    report.dtype, report.device = str(param_dtype).replace("torch.", ""), device
    tolerance = tolerance_for(param_dtype)
    report.tolerance = {"rtol": tolerance.rtol, "atol": tolerance.atol, "final_loosening": FINAL_LOOSENING}
    _fill(report, accumulated, full, compare_runs(accumulated, full), the_setup, eval_mode, oracle)
    return report


def _resolve_setup(
    setup: SetupSpec,
    accum_steps: int,
    windows: int,
    micro_batch: int,
    seed: int,
    device: str,
    dtype: Optional[torch.dtype],
) -> Setup:
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise _CannotRun("--device cuda was asked but CUDA is not available on this machine")
    context = dict(accum_steps=accum_steps, windows=windows, micro_batch=micro_batch, seed=seed, device=device)
    if setup is None:
        return synthetic_setup(dtype=dtype or torch.float64, **context)
    if isinstance(setup, Setup):
        the_setup = as_setup(copy.copy(setup))
        the_setup.model = copy.deepcopy(setup.model)
    else:
        factory = load_factory(setup) if isinstance(setup, str) else setup
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            the_setup = build_setup(factory, dtype=dtype, **context)
    return place(the_setup, device=device, dtype=dtype)


def _check_setup(setup: Setup, binding: Binding, window: int) -> None:
    if binding.parameter_for(LOSS_FN) is not None and setup.loss_fn is None:
        raise _CannotRun(
            f"parameter {binding.parameter_for(LOSS_FN)!r} takes a loss function but the setup provides none"
        )
    if len(setup.batches) < window:
        raise _CannotRun(f"the setup has {len(setup.batches)} micro-batches, fewer than one window ({window})")


def _run_pair(
    function: Callable[..., Any],
    binding: Binding,
    setup: Setup,
    accum_steps: int,
    windows: int,
    seed: int,
    eval_mode: bool,
) -> tuple[RunRecord, RunRecord, GradientOracle]:
    groups = windows_of(setup.batches, accum_steps)[:windows]
    micro_batches = [mb for group in groups for mb in group]

    def run(batches: list, k: int, model: torch.nn.Module = setup.model) -> RunRecord:
        inputs = RunInputs(model, setup.optimizer_factory, batches, k, setup.loss_fn)
        return run_training(function, binding, inputs, seed=seed, eval_mode=eval_mode)

    accumulated = run(micro_batches, accum_steps)
    full = run([concatenate(group) for group in groups], 1)

    def oracle(parameters: dict[str, torch.Tensor], indices: list[int]) -> Optional[dict[str, torch.Tensor]]:
        if max(indices) >= len(micro_batches):
            return None
        model = copy.deepcopy(setup.model)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                parameter.copy_(parameters[name])
        try:
            record = run([concatenate([micro_batches[i] for i in indices])], 1, model)
        except UserCodeError:
            return None
        if not record.steps or not record.steps[0].has_gradient():
            return None
        return {name: g for name, g in record.steps[0].gradients.items() if g is not None}

    return accumulated, full, oracle


def _fill(
    report: VerificationReport,
    accumulated: RunRecord,
    full: RunRecord,
    comparison: Comparison,
    setup: Setup,
    eval_mode: bool,
    oracle: Optional[GradientOracle],
) -> None:
    report.steps_accumulated, report.steps_full = comparison.steps_accumulated, comparison.steps_full
    report.steps = [
        StepReport(s.step + 1, s.difference.parameter, s.difference.max_abs_error,
                   s.difference.max_rel_error, s.difference.within_tolerance)
        for s in comparison.steps
    ]
    if comparison.final is not None:
        f = comparison.final
        report.final = StepReport(None, f.parameter, f.max_abs_error, f.max_rel_error, f.within_tolerance)
    no_gradient = not any(step.has_gradient() for step in accumulated.steps)
    if comparison.equivalent and not no_gradient:
        report.verdict = EQUIVALENT
        return
    report.verdict = NOT_EQUIVALENT
    report.reason = _reason(comparison, no_gradient)
    if no_gradient or not comparison.same_step_count:
        # No property of the model or data explains these: straight to the numbers.
        report.explanations = diagnose(accumulated, full, comparison, report.accum_steps)
        return
    used = setup.batches[: report.windows * report.accum_steps]
    known = known_sources(setup.model, setup.loss_fn, used, report.accum_steps, eval_mode=eval_mode)
    report.explanations = known or diagnose(accumulated, full, comparison, report.accum_steps, oracle)


def _reason(comparison: Comparison, no_gradient: bool) -> str:
    if comparison.steps_accumulated == 0:
        return "the function never stepped an optimizer over the model's parameters"
    if no_gradient:
        return "no gradient reached any optimizer step"
    if not comparison.same_step_count:
        return (
            f"the runs took different numbers of optimizer steps: {comparison.steps_accumulated} with "
            f"accumulation, {comparison.steps_full} with the full batch"
        )
    divergent = comparison.first_divergent_step
    worst = comparison.worst
    where = f"gradients differ from step {divergent.step + 1}" if divergent else "final parameters differ"
    return (
        f"{where}: worst parameter {worst.parameter} "
        f"(max abs error {worst.max_abs_error:.3g}, max rel error {worst.max_rel_error:.3g})"
    )
