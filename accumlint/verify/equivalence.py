"""`check_equivalence`: the two runs, their comparison and the report.

Run A trains on N windows of K micro-batches plus a partial window of r
micro-batches, with accumulation K; run B on N + 1 batches, each the
concatenation of a window's micro-batches (the last one of r), with
accumulation 1. Both start from the same weights (each run deep-copies the
setup's model), get a fresh optimizer and the same seeds, and run in
lockstep so that every step is compared as it happens (see `lockstep`).
Both runs' first steps are also held against the textbook loop built from
the setup (see `reference`), which finds what both runs share; the report
says which comparisons were made.
Problems of the user's code or setup become a "could not run" report with
the reason, and so does any failure of the verifier itself: it never raises.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import sys
import textwrap
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Union

import torch

from accumlint.verify.batches import concatenate, windows_of
from accumlint.verify.binding import (
    ACCUM_STEPS,
    LOSS_FN,
    Binding,
    BindingError,
    Parameter,
    LoopShape,
    bind_parameters,
    loop_shape,
    named_object,
)
from accumlint.verify.construct import accepts_accum_steps, constructing, split_options
from accumlint.verify.compare import ALLREDUCE, Comparison, Mismatch, StepComparer, Tolerance
from accumlint.verify.diagnosis import (
    MATCH,
    RateProbe,
    StepOracle,
    clip_before_unscale,
    diagnose,
    diagnose_error,
    from_reference,
)
from accumlint.verify.explanations import data_sources, noise_sources
from accumlint.verify.contained import DEFAULT_TIMEOUT, check_contained, note_phase
from accumlint.verify.layers import dropout_layers, dropout_off
from accumlint.verify.loading import (
    LoadError,
    ScriptArgs,
    describe,
    function_source,
    load_function,
    owner_class,
    script_argv,
    split_target,
)
from accumlint.verify.lockstep import run_lockstep
from accumlint.verify.reference import Held, Reference, ReferenceUnavailable, build_reference, hold
from accumlint.verify.report import COULD_NOT_RUN, EQUIVALENT, NOT_EQUIVALENT, Explanation, StepReport, VerificationReport
from accumlint.verify.runs import (
    RunInputs,
    RunRecord,
    guarded,
    StepRecord,
    UserCodeError,
    VerifierFault,
    device_of,
    prepare_run,
    run_training,
    user_namespaces,
)
from accumlint.verify.setup import Setup, SetupError, as_setup, build_setup, load_factory, place, synthetic_setup

SetupSpec = Union[None, str, Setup, Callable[..., Any]]

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}

# Frameworks keeping process-wide state (accelerate's GradientState, ...)
# that two interleaved runs would share: with one of them imported the runs
# execute one after the other, run A's steps kept for the comparison.
_SHARED_STATE_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "transformers", "deepspeed")


class _CannotRun(Exception):
    """Internal: the reason a verification could not run."""


@dataclass(frozen=True)
class _Plan:
    """What will be fed: N full windows of K and a tail of r micro-batches."""

    accum_steps: int
    windows: int
    tail: int
    # One micro-batch fed after the windows (and one batch to run B), for a
    # loop that pulls one ahead (see binding.LoopShape); never trained on.
    lookahead: bool = False

    @property
    def fed(self) -> int:
        """The micro-batches the windows and the tail hold (the look-ahead aside)."""
        return self.windows * self.accum_steps + self.tail


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
    tail: Optional[int] = None,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
    args: Optional[dict[str, Any]] = None,
    script_args: ScriptArgs = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
) -> VerificationReport:
    """Verify that `function` with accumulation over `accum_steps` micro-batches
    takes the same optimizer steps as with one batch of `accum_steps` times the size.

    `function` is a callable or `"file.py::name"`; `setup` a factory, a
    `Setup`, `"module:factory"` or None for the synthetic setup (see
    `accumlint.verify.setup`); `bind` maps parameter names to roles (or to
    `"setup.NAME"`, an object the setup returns under that name).
    `dtype` defaults to float64 for the synthetic setup and to the model's own
    for a user setup. `tail` is the size r of the partial last window
    (default K // 2, at least 1; 0 under `nproc` > 1 and for loops that run a
    fixed number of updates). `rtol`/`atol` replace
    the dtype's tolerance. `nproc` > 1 runs the accumulated run on that many
    processes (gloo, DDP) against one process over the global batch. `args`
    are fixed keyword arguments (`"args.lr"` sets an attribute of a namespace
    parameter). For `"file.py::Class.method"` the instance is built by the
    setup's `construct` or by binding `Class.__init__` by role.
    `script_args` (a string split as a shell would, or a list) is `sys.argv[1:]`
    while the file is imported and the function runs. `timeout` (seconds,
    None for none) limits the whole verification.

    The user's code runs in a child process (see `contained`): its exits,
    crashes and exceptions become a "could not run" report, and what it
    prints is kept in the report's `stdout` and `stderr`.
    """
    return check_contained(
        function, verify_here, describe, timeout=timeout, setup=setup, accum_steps=accum_steps, windows=windows, micro_batch=micro_batch,
        seed=seed, device=device, dtype=dtype, bind=bind, eval_mode=eval_mode, nproc=nproc, tail=tail, rtol=rtol,
        atol=atol, args=args, script_args=script_args,
    )


def verify_here(function: Union[str, Callable[..., Any]], **options: Any) -> VerificationReport:
    """`check_equivalence` in this process (the contained child calls it), with
    its defaults for the options not given: problems of the user's code or
    setup become a "could not run" report."""
    return _verify(function, **{**_DEFAULTS, **options})


def _verify(
    function: Union[str, Callable[..., Any]], *, accum_steps: int, windows: int, eval_mode: bool,
    script_args: ScriptArgs, **options: Any,
) -> VerificationReport:
    target = function if isinstance(function, str) else describe(function)
    report = VerificationReport(target=target, verdict=COULD_NOT_RUN, accum_steps=accum_steps, windows=windows)
    try:
        with script_argv(function, script_args), dropout_off():
            _check(report, function, accum_steps=accum_steps, windows=windows, eval_mode=eval_mode, **options)
    except UserCodeError as error:
        report.verdict, report.explanations = COULD_NOT_RUN, []
        report.reason = _user_error_reason(error, report)
        explanation = diagnose_error(error)
        if explanation is not None:
            report.verdict, report.explanations = NOT_EQUIVALENT, [explanation]
    except LoadError as error:
        report.verdict, report.reason = COULD_NOT_RUN, _one_line(error)
        if error.exited and script_args is None:
            report.reason += (
                "; if it parses sys.argv when imported, pass its own arguments with --script-args \"...\" "
                "(API: script_args=...)"
            )
    except (BindingError, SetupError, _CannotRun) as error:
        report.verdict, report.reason = COULD_NOT_RUN, _one_line(error)
    except VerifierFault as fault:
        report.verdict = COULD_NOT_RUN
        report.reason = f"internal error of the verifier: {_one_line(fault.error, named=True)}"
    except Exception as error:  # noqa: BLE001 - the verifier never raises; it says why it could not run
        report.verdict = COULD_NOT_RUN
        report.reason = f"internal error of the verifier: {_one_line(error, named=True)}"
    return report


_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(check_equivalence).parameters.items()
    if parameter.default is not inspect.Parameter.empty and name != "timeout"  # the parent's to keep
}


def _user_error_reason(error: UserCodeError, report: VerificationReport) -> str:
    if isinstance(error.error, SystemExit):
        return f"the training function called sys.exit({error.error.code!r}) at {error.where}"
    if isinstance(error.error, StopIteration):
        partial = f" and a partial window of {report.tail}" if report.tail else ""
        return (
            f"the loop asked for more micro-batches than the {report.windows} windows of {report.accum_steps}"
            f"{partial} fed (StopIteration at {error.where}): if it runs a fixed number of updates, let it run "
            f"{report.windows} (bind its count with --arg NAME={report.windows}) or pass --windows with its count"
        )
    return f"the training function raised at {_one_line(error)}"


def _one_line(error: BaseException, named: bool = False) -> str:
    """The message on one line; of a traceback relayed from a worker process, its last line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if any(line.startswith("Traceback") for line in lines):
        lines = lines[-1:]
    text = " ".join(" ".join(lines).split())[:300]
    return f"{type(error).__name__}: {text}" if named else text


def _check(
    report: VerificationReport,
    function: Union[str, Callable[..., Any]],
    *,
    setup: SetupSpec,
    accum_steps: int,
    windows: int,
    micro_batch: int,
    seed: int,
    device: str,
    dtype: Union[None, str, torch.dtype],
    bind: Optional[dict[str, str]],
    eval_mode: bool,
    nproc: int,
    tail: Optional[int],
    rtol: Optional[float],
    atol: Optional[float],
    args: Optional[dict[str, Any]],
) -> None:
    if accum_steps < 2:
        raise _CannotRun(
            f"accum_steps={accum_steps} compares the loop with itself and proves nothing; use K >= 2"
        )
    if windows < 1 or micro_batch < 1 or nproc < 1:
        raise _CannotRun("windows, micro_batch and nproc must all be at least 1")
    if tail is not None and (tail < 0 or tail >= accum_steps):
        raise _CannotRun(f"tail must be between 0 and K - 1 = {accum_steps - 1}, got {tail}")
    if nproc > 1 and tail:
        raise _CannotRun("a partial last window is not supported with nproc > 1; use tail=0")
    if nproc > 1 and not hasattr(os, "fork"):  # its processes get the setup's lambdas by forking
        raise _CannotRun("nproc > 1 needs os.fork, which this platform does not have")
    override = _override(rtol, atol)
    if isinstance(function, str):
        note_phase(f"importing {split_target(function)[0]}")
    callable_ = load_function(function) if isinstance(function, str) else function
    owner = owner_class(function) if isinstance(function, str) else None
    name = f"{owner.__name__}.{callable_.__name__}" if owner is not None else callable_.__name__
    signature = _signature(callable_)
    if owner is not None:
        signature = signature[1:]  # self
        (bind, init_bind), (args, init_args) = split_options(bind, signature), split_options(args, signature)
    torch_dtype = _DTYPES[dtype] if isinstance(dtype, str) else dtype
    wanted = windows + (0 if tail == 0 else 1)  # a window more: the tail, or a look-ahead
    note_phase("building the setup")
    the_setup = _resolve_setup(setup, accum_steps, wanted * nproc, micro_batch, seed, device, torch_dtype)
    named = tuple(the_setup.objects)
    binding = bind_parameters(_source(callable_, owner), name, bind, args, signature, named=named)
    report.binding = dict(binding.roles)
    report.binding_evidence = {n: list(reasons) for n, reasons in binding.evidence.items()}
    if owner is not None:
        binding = constructing(binding, owner, the_setup.construct, init_bind, init_args, named=named)
    _check_named(binding, the_setup)
    if binding.parameter_for(ACCUM_STEPS) is None and not accepts_accum_steps(binding):
        raise _CannotRun(
            f"no parameter of {name}() receives the accumulation steps, so they cannot "
            "be varied; bind one with --bind NAME=accum_steps (or NAME.ATTRIBUTE=accum_steps)"
        )
    source = _source(callable_, owner)
    shape = loop_shape(source, name, binding.parameter_for(ACCUM_STEPS)) if source is not None else LoopShape()
    if tail is None:
        tail = 0 if nproc > 1 or shape.update_driven else max(1, accum_steps // 2)
        if shape.update_driven:
            report.notes.append(
                "the loop runs a fixed number of updates, pulling K micro-batches with next() for each, so it "
                "was fed whole windows only (no partial window: it would never consume one)"
            )
    plan = _plan(the_setup, binding, accum_steps * nproc, windows, tail, lookahead=shape.prefetches and not tail)
    plan = _Plan(accum_steps, plan.windows, plan.tail, plan.lookahead)
    report.windows, report.tail = plan.windows, plan.tail
    if plan.lookahead:
        report.notes.append(
            "the loop pulls one micro-batch ahead of the one it trains on, so one more was fed after the last "
            "window (and one more batch to the full-batch run), pulled and not trained on"
        )
    dropped_out = dropout_layers(the_setup.model)
    if dropped_out:
        report.notes.append(
            f"dropout was off in both runs ({', '.join(dropped_out[:4])}{', ...' * (len(dropped_out) > 4)}): "
            "its masks differ between micro-batches and their concatenation by chance, so no comparison "
            "could hold with it on"
        )
    param_dtype = next(the_setup.model.parameters()).dtype
    report.dtype, report.device = str(param_dtype).replace("torch.", ""), device
    note_phase(f"running {name}()")
    if nproc > 1:
        from accumlint.verify.distributed import run_distributed

        accumulated, full, comparison = run_distributed(
            callable_, binding, the_setup, accum_steps=accum_steps, windows=plan.windows,
            seed=seed, eval_mode=eval_mode, nproc=nproc, override=override, lookahead=plan.lookahead,
        )
        probes, reference = None, f"not built under nproc={nproc}"
    else:
        accumulated, full, comparison, probes, reference = _run_pair(
            callable_, binding, the_setup, plan, seed, eval_mode, override
        )
    _refuse_foreign_batches(accumulated, full)
    _fill(report, accumulated, full, comparison, the_setup, plan, eval_mode, probes, nproc, reference)


def _refuse_foreign_batches(accumulated: RunRecord, full: RunRecord) -> None:
    """A loop that rebuilt its loader with a batch size of its own trained
    both runs on the same batches: nothing was compared."""
    asked = accumulated.foreign_batch_size or full.foreign_batch_size
    if asked is not None:
        raise _CannotRun(
            f"the loop fetched batches of {asked} from loader.dataset, not of the loader's batch_size (the "
            "micro-batch size with accumulation, K times it for the full batch), so both runs would train on "
            "the same batches; rebuild the loader with batch_size=loader.batch_size (and its collate_fn)"
        )


def _named_bindings(binding: Binding) -> list[tuple[str, str]]:
    """(parameter, NAME) for every parameter (or the constructor's) bound to `setup.NAME`."""
    bound = [*binding.bound_roles(), *((f"{binding.function}'s constructor", r) for r in binding.constructed_roles)]
    return [(parameter, name) for parameter, role in bound if (name := named_object(role)) is not None]


def _check_named(binding: Binding, setup: Setup) -> None:
    """Every `setup.NAME` a parameter is bound to names an object the setup returns."""
    for parameter, name in _named_bindings(binding):
        if name not in setup.objects:
            offered = ", ".join(sorted(setup.objects)) or "none"
            raise _CannotRun(
                f"{parameter} is bound to setup.{name}, but the setup returns no object named {name!r} "
                f"(it returns: {offered})"
            )


def _source(function: Callable[..., Any], owner: Optional[type]) -> Optional[str]:
    """The source the binding reads (the class's for a method), or None when
    it cannot be read (a builtin, a compiled or generated function)."""
    try:
        return textwrap.dedent(inspect.getsource(owner)) if owner is not None else function_source(function)
    except (LoadError, OSError, TypeError):
        return None


def _signature(function: Callable[..., Any]) -> tuple[Parameter, ...]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(
        Parameter(p.name, p.default is not inspect.Parameter.empty, p.kind is inspect.Parameter.POSITIONAL_ONLY)
        for p in parameters
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    )


def _override(rtol: Optional[float], atol: Optional[float]) -> Optional[Tolerance]:
    if rtol is None and atol is None:
        return None
    if (rtol is not None and rtol < 0) or (atol is not None and atol < 0):
        raise _CannotRun("rtol and atol must not be negative")
    return Tolerance(rtol=rtol if rtol is not None else 0.0, atol=atol if atol is not None else 0.0)


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
        if _moves(setup.model, device, dtype):
            # place() converts in place: the caller's model stays as it was.
            the_setup.model = copy.deepcopy(setup.model)
    else:
        factory = load_factory(setup) if isinstance(setup, str) else setup
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            the_setup = build_setup(factory, dtype=dtype, **context)
    return place(the_setup, device=device, dtype=dtype)


def _moves(model: torch.nn.Module, device: str, dtype: Optional[torch.dtype]) -> bool:
    """Whether placing the model on `device` in `dtype` changes any of its tensors."""
    return any(
        t.device != torch.device(device) or (dtype is not None and t.is_floating_point() and t.dtype != dtype)
        for t in (*model.parameters(), *model.buffers())
    )


def _plan(setup: Setup, binding: Binding, window: int, windows: int, tail: int, lookahead: bool = False) -> _Plan:
    if binding.parameter_for(LOSS_FN) is not None and setup.loss_fn is None:
        raise _CannotRun(
            f"parameter {binding.parameter_for(LOSS_FN)!r} takes a loss function but the setup provides none"
        )
    available = len(setup.batches)
    ahead = window if lookahead else 0
    if available < window + ahead:
        raise _CannotRun(f"the setup has {available} micro-batches, fewer than one window ({window})"
                         + (" and the one the loop pulls ahead" if lookahead else ""))
    windows = min(windows, (available - ahead) // window)
    tail = min(tail, available - windows * window)
    return _Plan(window, windows, tail, lookahead)


def _run_pair(
    function: Callable[..., Any],
    binding: Binding,
    setup: Setup,
    plan: _Plan,
    seed: int,
    eval_mode: bool,
    override: Optional[Tolerance],
) -> tuple[RunRecord, RunRecord, Comparison, "_Probes", Union[Reference, str]]:
    """The two runs in lockstep, the oracle that reruns the user's function on
    chosen micro-batches, and the textbook reference (or why there is none)."""
    k = plan.accum_steps
    micro_batches = setup.batches[: plan.fed]
    groups = windows_of(micro_batches, k)
    reference = _textbook(setup, binding, groups[0], seed, eval_mode)
    if plan.tail:
        groups.append(micro_batches[plan.windows * k:])
    full_batches = [concatenate(group) for group in groups]
    fed = plan.fed
    if plan.lookahead:
        ahead = setup.batches[plan.fed: plan.fed + k]
        micro_batches, full_batches, fed = [*micro_batches, ahead[0]], [*full_batches, concatenate(ahead)], fed + 1
    loader_type = setup.as_dataloader

    def inputs(batches: list, accum: int, model: torch.nn.Module = setup.model) -> RunInputs:
        return RunInputs(model, setup.optimizer_factory, batches, accum, setup.loss_fn, as_dataloader=loader_type,
                         named=setup.objects)

    def oracle_step(state: dict[str, torch.Tensor], indices: list[int], names: frozenset) -> Optional[StepRecord]:
        """The user's function at K=1 on the concatenation of `indices`, from
        `state`: its first step over the parameters `names` (gradients and clip)."""
        if not indices or max(indices) >= len(micro_batches):
            return None
        model = copy.deepcopy(setup.model)
        model.load_state_dict(state, strict=False)
        try:
            record = run_training(function, binding, inputs([concatenate([micro_batches[i] for i in indices])], 1, model),
                                  seed=seed, eval_mode=eval_mode, keep=sys.maxsize)
        except UserCodeError:
            return None
        for step in record.steps:
            if frozenset(n for n, g in step.gradients.items() if g is not None) == names:
                return replace(step, gradients={n: g for n, g in step.gradients.items() if g is not None})
        return None

    def oracle(state: dict[str, torch.Tensor], indices: list[int], names: frozenset) -> Optional[dict]:
        step = oracle_step(state, indices, names)
        return step.gradients if step is not None else None

    def rates(count: int) -> Optional[list[tuple[float, ...]]]:
        """The learning rates of the user's function at K=1 over the first `count` micro-batches."""
        try:
            record = run_training(function, binding, inputs(micro_batches[:count], 1), seed=seed, eval_mode=eval_mode)
        except UserCodeError:
            return None
        return [step.lrs for step in record.steps]

    records: dict[str, RunRecord] = {}
    comparer = StepComparer(
        k, plan.windows, plan.tail,
        compute_dtypes=lambda: _compute_dtypes(records, runs),
        override=override, oracle=oracle,
    )
    if _shares_process_state():
        runs = {}
        accumulated = run_training(function, binding, inputs(micro_batches, k), seed=seed, eval_mode=eval_mode,
                                   keep=sys.maxsize)
        records["a"] = accumulated
        steps = accumulated.steps

        def against_a(step: StepRecord) -> None:
            if step.index < len(steps):
                guarded(comparer, steps[step.index], step)

        full = run_training(function, binding, inputs(full_batches, 1), seed=seed, eval_mode=eval_mode,
                            on_step=against_a, keep=1)
    else:
        run_a = prepare_run(function, binding, inputs(micro_batches, k), eval_mode=eval_mode, keep=2)
        run_b = prepare_run(function, binding, inputs(full_batches, 1), eval_mode=eval_mode, keep=1)
        for run in (run_a, run_b):
            run.recorder.retain = lambda: comparer.failed
        runs = {"a": run_a.recorder.record, "b": run_b.recorder.record}
        accumulated, full = run_lockstep(run_a, run_b, comparer, seed=seed, device=device_of(setup.model),
                                         user_globals=user_namespaces(function))
    initial = {name: p.detach() for name, p in setup.model.named_parameters()}
    probes = _Probes(oracle_step, rates)
    return accumulated, full, comparer.result(accumulated, full, initial, fed), probes, reference


@dataclass(frozen=True)
class _Probes:
    """Reruns of the user's function the diagnosis may ask for (see `diagnosis`)."""

    step: StepOracle
    rates: RateProbe


def _textbook(setup: Setup, binding: Binding, window: list, seed: int, eval_mode: bool) -> Union[Reference, str]:
    """The textbook loop's gradients over the first window, or why it cannot be built.

    A loop that takes objects of the setup's by name (`setup.NAME`) may build
    its loss with them (a weighting, a loss helper), which the textbook loop,
    built from the model and the loss function alone, does not: a deliberate
    factor would read as a shared mistake, so there is no reference."""
    named = _named_bindings(binding)
    if named:
        taken = ", ".join(f"{parameter} = setup.{name}" for parameter, name in named)
        return f"the loop takes {taken} from the setup, which the textbook loop does not use"
    try:
        return build_reference(setup.model, setup.loss_fn, window, seed=seed, eval_mode=eval_mode)
    except ReferenceUnavailable as why:
        return str(why)


def _compute_dtypes(records: dict[str, RunRecord], runs: dict[str, RunRecord]) -> set:
    dtypes: set = set()
    for record in (*records.values(), *runs.values()):
        dtypes |= record.compute_dtypes
    return dtypes


def _shares_process_state() -> bool:
    return any(name in sys.modules for name in _SHARED_STATE_FRAMEWORKS)


def _fill(
    report: VerificationReport,
    accumulated: RunRecord,
    full: RunRecord,
    comparison: Comparison,
    setup: Setup,
    plan: _Plan,
    eval_mode: bool,
    probes: Optional["_Probes"],
    nproc: int,
    reference: Union[Reference, str] = "not built",
) -> None:
    report.steps_accumulated, report.steps_full = comparison.steps_accumulated, comparison.steps_full
    report.fed, report.used = comparison.fed, comparison.used
    tolerance = comparison.tolerance
    report.tolerance = {"rtol": tolerance.rtol, "atol": tolerance.atol}
    compute = sorted(str(d).replace("torch.", "") for d in accumulated.compute_dtypes | full.compute_dtypes)
    report.compute_dtypes = compute
    report.steps = [
        StepReport(s.step + 1, s.difference.parameter, s.difference.max_abs_error,
                   s.difference.max_rel_error, s.difference.within_tolerance, s.judged)
        for s in comparison.steps
    ]
    report.evidence = [f"step {m.step}: {_mismatch_text(m)}" for m in comparison.mismatches]
    if comparison.final is not None:
        f = comparison.final
        report.final = StepReport(None, f.parameter, f.max_abs_error, f.max_rel_error, f.within_tolerance,
                                  "relative to the full run's updates; not part of the verdict")
    if comparison.partial_window_scaled is not None:
        report.notes.append(
            f"the last, partial window of {plan.tail} micro-batch{'es' * (plan.tail != 1)} stepped with "
            f"{comparison.partial_window_scaled:.4g} x its full-batch gradient (the loss divided by K over "
            f"{plan.tail}, {plan.tail}/{plan.accum_steps} = {plan.tail / plan.accum_steps:.4g}): a smaller last "
            "step; divide by the window's size there for an exact mean"
        )
    no_gradient = not any(step.has_gradient for step in accumulated.steps)
    try:
        shared = _against_reference(report, comparison, accumulated, full, reference, plan.accum_steps)
    except Exception as error:  # noqa: BLE001 - the reference adds evidence; its failure must not end the verdict
        report.comparisons.append(f"no textbook reference: holding the runs against it failed ({_one_line(error, named=True)})")
        shared = []
    scaled_clip = clip_before_unscale([*full.steps[:1], *accumulated.steps[:1]])
    shared = ([scaled_clip] if scaled_clip is not None else []) + shared
    if comparison.equivalent and not no_gradient:
        if not shared:
            report.verdict = EQUIVALENT
            return
        report.verdict = NOT_EQUIVALENT
        report.reason = f"the runs match each other, not a correct loop: {shared[0].summary}"
        report.explanations = shared + noise_sources(setup.model, eval_mode=eval_mode)
        return
    report.verdict = NOT_EQUIVALENT
    report.reason = _reason(comparison, no_gradient)
    if comparison.used == 0:
        return
    found = diagnose(accumulated, full, comparison, plan.accum_steps, probes.step if probes else None,
                     tail=plan.tail, nproc=nproc, rates=probes.rates if probes else None)
    found += [e for e in shared if e.code not in {f.code for f in found}]
    if no_gradient or not comparison.same_step_count:
        # No property of the model or data explains these: straight to the numbers.
        report.explanations = found
        return
    explained = data_sources(setup.loss_fn, setup.batches[: plan.fed], plan.accum_steps)
    noise = noise_sources(setup.model, eval_mode=eval_mode)
    if explained:
        report.explanations = explained + noise
    elif found:
        report.explanations = found + [_as_caveat(e) for e in noise]
    else:
        report.explanations = noise


def _against_reference(
    report: VerificationReport,
    comparison: Comparison,
    accumulated: RunRecord,
    full: RunRecord,
    reference: Union[Reference, str],
    k: int,
) -> list[Explanation]:
    """Hold both runs' first steps against the textbook loop; note in the
    report which comparisons were made, and return the mistakes both runs
    share (named only where the numbers show them)."""
    report.comparisons = [f"run A (K={k}) against run B (K=1), step by step"]
    if isinstance(reference, str):
        report.comparisons.append(f"no textbook reference ({reference}): the runs were compared with each other only")
        return []
    if comparison.first_steps is None or not accumulated.steps or not full.steps:
        report.comparisons.append("no textbook reference: the runs took no step to hold against it")
        return []
    if not _first_window(accumulated.steps[0], k) or not _first_window(full.steps[0], 1):
        report.comparisons.append(
            "no textbook reference: a first step came after the first window (a skipped AMP step?)"
        )
        return []
    match = _reference_match(comparison)
    fingerprint_a, fingerprint_b = comparison.first_steps
    held_b = hold(full.steps[0], fingerprint_b, reference.full, match)
    report.comparisons.append(f"run B's first step against the textbook loop's (K=1): {_held(held_b)}")
    if held_b.factor is None or abs(held_b.factor - 1) <= match:
        # Run B is the textbook's (or no multiple of it): what both runs share
        # would show in run B, and run A's steps were held against run B's.
        how = ("not needed (run B's matches it, and run A is compared with run B)" if held_b.factor is not None
               else "not held (run B's is no multiple of it)")
        report.comparisons.append(f"run A's first step against the textbook loop's (K={k}): {how}")
        return []
    try:
        held_a = hold(accumulated.steps[0], fingerprint_a, reference.accumulated(), match)
    except ReferenceUnavailable as why:
        report.comparisons.append(f"run A's first step against the textbook loop's (K={k}): not built ({why})")
        return from_reference(Held(None), held_b, k, match)
    report.comparisons.append(f"run A's first step against the textbook loop's (K={k}, loss / K): {_held(held_a)}")
    return from_reference(held_a, held_b, k, match)


def _held(held: Held) -> str:
    if held.factor is None:
        return "not comparable: no multiple of it (the loop computes its loss otherwise)"
    return f"{held.factor:.4g} x it"


def _first_window(step: StepRecord, batches: int) -> bool:
    """Whether the step used the first window only, by the loader's count (one
    batch ahead for a prefetching loader; 0: a loop that does not count)."""
    return step.consumed <= batches + 1


def _reference_match(comparison: Comparison) -> float:
    """How close the user's gradient must be to a multiple of the reference:
    the diagnosis's bar, widened for the reference computing in the model's
    own dtype where the loop may autocast."""
    return max(MATCH, 3 * comparison.tolerance.rtol)


def _as_caveat(explanation: Explanation) -> Explanation:
    return replace(
        explanation,
        summary=f"caveat: {explanation.summary}",
        detail="The numbers match the mistake above exactly, so it is named; these layers may add noise on top.",
    )


def _reason(comparison: Comparison, no_gradient: bool) -> str:
    if comparison.used == 0:
        return (
            f"the loader was never iterated: {comparison.fed} micro-batches were fed and none was used, "
            "so nothing was verified"
        )
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
    if divergent is not None:
        worst = divergent.difference
        return (
            f"gradients differ from step {divergent.step + 1}: worst parameter {worst.parameter} "
            f"(max abs error {worst.max_abs_error:.3g}, max rel error {worst.max_rel_error:.3g})"
        )
    first = comparison.mismatches[0]
    return f"the gradients match, but at step {first.step}: {_mismatch_text(first)}"


def _mismatch_text(mismatch: Mismatch) -> str:
    """What differed at a step, in words (no value the other run did not have)."""
    if mismatch.kind == ALLREDUCE:
        count = mismatch.accumulated
        times = "never" if count == 0 else "once" if count == 1 else f"{count} times"
        due = "once" if mismatch.expected == 1 else f"{mismatch.expected} times"
        return f"DDP all-reduced the gradients {times} in the accumulated run, where {due} per optimizer step is due"
    text = f"{mismatch.kind} {_shown(mismatch.accumulated)} accumulated"
    if mismatch.full is not None:
        text += f", {_shown(mismatch.full)} full batch"
    if mismatch.expected is not None:
        text += f" (expected {_shown(mismatch.expected)})"
    return text


def _shown(value: object) -> str:
    """A recorded number as the report prints it (floats to 4 significant digits)."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)
