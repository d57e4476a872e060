"""Run every fixture under fixtures/ against the analysis and the fixer.

A fixture is any `fixtures/**/X.py` except `X.fixed.py`. Its sidecar `X.expect`
lists the findings it must produce, `LINE:COLUMN CODE MESSAGE` one a line
(empty: silent; the format is in tests/expectations.py). When `X.fixed.py`
exists, it is what `fix_text(..., unsafe=True)` must produce. With
`--update-expect` the sidecars are rewritten from the current output instead
of checked. See fixtures/README.md.
"""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path

import libcst
import pytest
from expectations import (
    Expected,
    MalformedExpect,
    expect_path,
    expected_of,
    format_expect,
    parse_expect,
)
from libcst.metadata import MetadataWrapper, PositionProvider
from silence import window_ks

from accumlint.check.analysis import AnalysisOptions, analyze
from accumlint.check.fixes import fix_text
from accumlint.rules.catalog import RULES

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
MIN_FIXTURES = 50

NO_FIX_CODES = frozenset(r.code for r in RULES if r.fix == "none")

# Silent fixtures in which the model rightly finds no training loop. Every other
# silent fixture must have one modelled: silence on a loop the model missed
# proves nothing (see tests/silence.py).
NO_TRAINING_LOOP = {
    # Tensor helpers a trainer of the project imports.
    "fixtures/projects/losses_detached_by_project_helper/core/tensors.py",
    "fixtures/projects/losses_detached_by_project_helper_ok/core/tensors.py",
    # A package root, a package that re-exports its modules' helpers, and those helpers.
    "fixtures/projects/zeroing_helper_reexported/src/__init__.py",
    "fixtures/projects/zeroing_helper_reexported/src/batteries/__init__.py",
    "fixtures/projects/zeroing_helper_reexported/src/batteries/checkpoint.py",
    "fixtures/projects/zeroing_helper_reexported_ok/src/__init__.py",
    "fixtures/projects/zeroing_helper_reexported_ok/src/batteries/__init__.py",
    "fixtures/projects/zeroing_helper_reexported_ok/src/batteries/checkpoint.py",
    "fixtures/projects/zeroing_helper_reexported_ok/src/batteries/optimizer.py",
    "fixtures/projects/grad_reset_reexported_from_utils/pkg/__init__.py",
    "fixtures/projects/grad_reset_reexported_from_utils/pkg/common/__init__.py",
    "fixtures/projects/grad_reset_reexported_from_utils_ok/pkg/__init__.py",
    "fixtures/projects/grad_reset_reexported_from_utils_ok/pkg/common/__init__.py",
    "fixtures/projects/grad_reset_reexported_from_utils_ok/pkg/common/utils.py",
    # A per-call update whose count past a warm-up is never reset keeps no window across calls.
    "fixtures/check/per_call_windows/step_method_count_threshold_without_reset.py",
    # A Trainer subclass's compute_loss is checked without a loop.
    "fixtures/check/hf_trainer/compute_loss_override_registered_own_model.py",
    "fixtures/check/hf_trainer/trainer_disables_loss_kwargs.py",
    "fixtures/check/hf_trainer/compute_loss_beside_own_training_step.py",
    "fixtures/check/hf_trainer/trainer_remote_code_automodel.py",
    "fixtures/check/hf_trainer/trainer_model_class_through_a_name_remote_code.py",
    "fixtures/check/hf_trainer/trainer_pre_446_signature_class_flag.py",
    "fixtures/check/hf_trainer/trainer_super_compute_loss.py",
    "fixtures/check/hf_trainer/trainer_uses_num_items_in_batch.py",
    "fixtures/check/hf_trainer/trainer_model_class_chosen_per_arm_no_task_class.py",
    "fixtures/verify/frameworks/correct_trainer_num_items.py",
    # The backward runs outside the loop, or inside a closure the step calls.
    "fixtures/check/micro_step_functions/eval_loop_then_update.py",
    "fixtures/check/per_call_windows/update_method_counter_paces_logging.py",
    "fixtures/check/plain/lbfgs_closure.py",
    "fixtures/check/regressions/closure_step.py",
    "fixtures/check/regressions/queued_losses.py",
    # The only visible backward runs at one iteration (a first-step probe); the window's is a library's.
    "fixtures/check/probes/grad_norm_probe_first_step.py",
    # Another framework's training loop: out of scope.
    "fixtures/check/other_frameworks/mxnet_gluon_trainer.py",
    # A project's modules beside its training script.
    "fixtures/projects/model_forward_never_zeroes/seq2seq_model.py",
    "fixtures/projects/model_forward_zeroes_elsewhere/seq2seq_model.py",
    "fixtures/projects/schedule_built_elsewhere_divided/utils/lr.py",
    "fixtures/projects/schedule_factory_given_length/optim/schedules.py",
    "fixtures/projects/schedule_factory_given_length_steps/optim/schedules.py",
    "fixtures/projects/criterion_class_elsewhere/losses.py",
    "fixtures/projects/ddp_forward_through_unwrap_helper/dist.py",
    "fixtures/projects/ddp_forward_through_unwrap_helper_bug/dist.py",
    "fixtures/projects/ddp_manager_method_returns_local/parallel.py",
    "fixtures/projects/ddp_manager_method_returns_local_no_sync/parallel.py",
    "fixtures/projects/step_function_chosen_elsewhere/steps.py",
    "fixtures/projects/step_function_chosen_elsewhere_ok/steps.py",
    "fixtures/projects/loop_names_schedule_length_backward_elsewhere/updates.py",
    "fixtures/projects/loop_names_schedule_length_backward_elsewhere_ok/updates.py",
    "fixtures/projects/metric_logger_walks_loader/misc.py",
    "fixtures/projects/metric_logger_skips_batches/misc.py",
    "fixtures/projects/accelerator_kept_by_base/base.py",
    "fixtures/projects/accelerator_kept_by_base_zero_after/base.py",
    "fixtures/projects/criterion_parameter_factory_elsewhere/losses.py",
    "fixtures/projects/loss_helper_wraps_foreign_helper/losses.py",
    "fixtures/projects/criterion_parameter_factory_elsewhere/run.py",
    "fixtures/projects/criterion_parameter_torch_loss_elsewhere/run.py",
    "fixtures/projects/iterable_dataset_elsewhere/episodes.py",
    "fixtures/projects/function_adapts_copy_elsewhere/inner_loop.py",
    "fixtures/projects/ddp_builder_returns_local/distributed.py",
    "fixtures/projects/ddp_builder_returns_local_no_sync/distributed.py",
    "fixtures/projects/fsdp_builder_returns_local/distributed.py",
    "fixtures/projects/kwargs_dict_call_without_k/run_settings.py",
    "fixtures/projects/kwargs_dict_call_with_k/run_settings.py",
    "fixtures/projects/backward_helper_two_deep/micro.py",
    "fixtures/projects/backward_helper_two_deep_divided/amp_backward.py",
    "fixtures/projects/backward_helper_two_deep_divided/micro.py",
    "fixtures/projects/object_backward_method_divided/learner.py",
    "fixtures/projects/circular_import/pkg/__init__.py",
    "fixtures/projects/circular_import/pkg/hooks.py",
    "fixtures/projects/ddp_wrap_builder_local/builder.py",
    "fixtures/projects/ddp_wrap_early_return/parallel.py",
    "fixtures/projects/ddp_wrap_elsewhere/dist_setup.py",
    "fixtures/projects/ddp_wrap_by_caller/main.py",
    "fixtures/projects/ddp_unwrapped_by_caller/main.py",
    "fixtures/projects/ddp_callers_disagree/main.py",
    "fixtures/projects/ddp_callers_disagree/linear_probe.py",
    "fixtures/projects/fsdp_wrap_by_caller/main.py",
    "fixtures/projects/deepspeed_or_ddp_by_caller/main.py",
    "fixtures/projects/ddp_caller_loop_no_sync/main.py",
    "fixtures/projects/ddp_loop_not_imported/main.py",
    "fixtures/projects/ddp_aliased_caller_once/launch.py",
    "fixtures/projects/ddp_aliased_callers_disagree/launch.py",
    "fixtures/projects/ddp_aliased_callers_disagree/single_gpu.py",
    "fixtures/projects/ddp_helper_compile_by_caller/main.py",
    "fixtures/projects/ddp_helper_compile_by_caller/speedups.py",
    "fixtures/projects/ddp_helper_wrap_by_caller/dist_utils.py",
    "fixtures/projects/ddp_helper_wrap_by_caller/main.py",
    "fixtures/projects/ddp_trainer_class_by_caller/main.py",
    "fixtures/projects/ddp_trainer_class_no_sync/main.py",
    "fixtures/projects/ddp_trainer_class_subclassed/distill.py",
    "fixtures/projects/ddp_trainer_class_subclassed/main.py",
    "fixtures/projects/deepspeed_engine_by_caller/run.py",
    "fixtures/projects/deepspeed_engine_by_caller_undivided/run.py",
    "fixtures/projects/ddp_wrap_after_tuple_builder/main.py",
    "fixtures/projects/ddp_wrap_after_tuple_builder/builders.py",
    "fixtures/projects/engine_tuple_builder_by_caller/main.py",
    "fixtures/projects/engine_tuple_builder_by_caller/builders.py",
    "fixtures/projects/ddp_wrap_helper_tuple/gpu.py",
    "fixtures/projects/fsdp_wrap_builder_local/builder.py",
    "fixtures/projects/fsdp_wrap_helper_tuple/gpu.py",
    "fixtures/projects/fsdp_wrap_elsewhere/dist_setup.py",
    "fixtures/projects/k_argparse_default_one/options.py",
    "fixtures/projects/k_in_config_dataclass/config.py",
    "fixtures/projects/k_in_config_dataclass_bug/config.py",
    "fixtures/projects/kwargs_dict_elsewhere/settings.py",
    "fixtures/projects/kwargs_dict_elsewhere_no_accumulation/settings.py",
    "fixtures/projects/loss_helper_elsewhere/losses.py",
    "fixtures/projects/loss_helper_scaled_elsewhere/losses.py",
    "fixtures/projects/loss_helper_two_deep/objectives.py",
    "fixtures/projects/own_package_import/examples/segmentation/engine/__init__.py",
    "fixtures/projects/own_package_import/examples/segmentation/engine/losses.py",
    "fixtures/projects/own_package_import_divided/examples/segmentation/engine/__init__.py",
    "fixtures/projects/own_package_import_divided/examples/segmentation/engine/losses.py",
    "fixtures/projects/loss_helper_two_deep/steps.py",
    "fixtures/projects/sync_helper_elsewhere/sync_utils.py",
    "fixtures/projects/sync_helper_never_skips/amp_utils.py",
    "fixtures/projects/backward_in_helper_elsewhere/steps.py",
    "fixtures/projects/backward_in_black_helper/steps.py",
    "fixtures/projects/freeze_head_helper_elsewhere/ssl_utils.py",
    "fixtures/projects/ddp_wrap_helper_arms/parallel_utils.py",
    "fixtures/projects/ddp_wrap_helper_arms_no_sync/parallel_utils.py",
    "fixtures/projects/backward_through_trainer_object/precision.py",
    "fixtures/projects/trainer_object_update_elsewhere/joint_trainer.py",
    "fixtures/projects/trainer_object_update_elsewhere_ok/joint_trainer.py",
    "fixtures/projects/trainer_object_returns_tensor_elsewhere/joint_trainer.py",
    "fixtures/projects/loss_object_method_elsewhere/seg_losses.py",
    "fixtures/projects/clip_through_star_import/utilities.py",
    "fixtures/projects/clip_through_star_import_ok/utilities.py",
    "fixtures/projects/backward_through_trainer_object_divides/accum_helper.py",
    "fixtures/projects/object_method_without_role_effects/checkpoint.py",
    "fixtures/projects/circular_import_helpers/trainer/__init__.py",
    "fixtures/projects/circular_import_helpers/trainer/callbacks.py",
    "fixtures/projects/deepspeed_json_in_options/pretrain/__init__.py",
    "fixtures/projects/deepspeed_json_in_options/pretrain/options.py",
    "fixtures/projects/third_party_helpers_unknown/utils/__init__.py",
    "fixtures/projects/third_party_helpers_unknown/utils/hooks.py",
    "fixtures/projects/third_party_helpers_unknown/vendor/trainlib/__init__.py",
    "fixtures/projects/third_party_helpers_unknown/vendor/trainlib/optim.py",
    "fixtures/projects/config_k_two_modules/src/lmtrain/__init__.py",
    "fixtures/projects/config_k_two_modules/src/lmtrain/config.py",
    "fixtures/projects/config_k_two_modules/src/lmtrain/options.py",
    "fixtures/projects/ddp_builder_two_deep/engine/__init__.py",
    "fixtures/projects/ddp_builder_two_deep/engine/builder.py",
    "fixtures/projects/ddp_builder_two_deep/engine/context.py",
    "fixtures/projects/engine_project_class/runner/__init__.py",
    "fixtures/projects/engine_project_class/runner/engine.py",
    "fixtures/projects/engine_project_class_divided/runner/__init__.py",
    "fixtures/projects/engine_project_class_divided/runner/engine.py",
    "fixtures/projects/foreign_criterion_own_module/objectives.py",
    "fixtures/projects/foreign_criterion_mean_module/objectives.py",
    "fixtures/projects/foreign_criterion_built_unknown/objectives.py",
    "fixtures/projects/imported_criterion_object/objectives.py",
    "fixtures/projects/imported_criterion_object_summed/objectives.py",
    "fixtures/projects/imported_criterion_object_divided/objectives.py",
    "fixtures/projects/imported_criterion_object_reexported/objectives.py",
    "fixtures/projects/engine_project_subclass/engines/__init__.py",
    "fixtures/projects/engine_project_subclass/engines/base.py",
    "fixtures/projects/engine_project_subclass/engines/sgd_engine.py",
    "fixtures/projects/star_import_helper/common.py",
    "fixtures/projects/loader_made_for_windows/depth/__init__.py",
    "fixtures/projects/loader_made_for_windows/depth/data.py",
    "fixtures/projects/loader_maker_ignores_k/depth/__init__.py",
    "fixtures/projects/loader_maker_ignores_k/depth/data.py",
    "fixtures/projects/precision_manager_elsewhere_no_sync/retriever/__init__.py",
    "fixtures/projects/precision_manager_elsewhere_no_sync/retriever/amp.py",
    "fixtures/projects/schedule_closure_factory_micro_budget/src/optimization/lr_scheduler.py",
    "fixtures/projects/settings_module_k_one/config/__init__.py",
    "fixtures/projects/settings_module_k_one/config/args.py",
    "fixtures/projects/settings_module_k_four/config/__init__.py",
    "fixtures/projects/settings_module_k_four/config/args.py",
    "fixtures/projects/star_import_helper_divided/common.py",
    "fixtures/projects/star_import_after_third_party/losses.py",
    "fixtures/projects/teacher_zeroed_elsewhere/distill_utils.py",
    "fixtures/projects/gan_critic_update_elsewhere/adversarial.py",
    "fixtures/projects/gan_critic_update_elsewhere_undivided/adversarial.py",
    "fixtures/projects/ddp_builder_two_deep/engine/dist.py",
    "fixtures/projects/ddp_builder_two_deep/engine/precision.py",
    "fixtures/projects/ddp_builder_two_deep/engine/sync.py",
    "fixtures/projects/relative_loss_division/trainer/__init__.py",
    "fixtures/projects/relative_loss_division/trainer/backprop.py",
    "fixtures/projects/relative_loss_division_ok/trainer/__init__.py",
    "fixtures/projects/relative_loss_division_ok/trainer/backprop.py",
    "fixtures/projects/relative_loss_division_ok/trainer/losses.py",
    "fixtures/projects/sibling_zeroing_helper/mylib/__init__.py",
    "fixtures/projects/sibling_zeroing_helper/mylib/steps.py",
    "fixtures/projects/sibling_zeroing_helper_ok/mylib/__init__.py",
    "fixtures/projects/sibling_zeroing_helper_ok/mylib/optim_utils.py",
    "fixtures/projects/sibling_zeroing_helper_ok/mylib/steps.py",
    "fixtures/projects/loss_scaler_object/utils.py",
    "fixtures/projects/optimizer_wrapper_object_divides/wrapper.py",
    # A loss scaler object whose `__call__` is not read (third-party) or does not backpropagate
    # the loss it is given (it divides it first): its call is no known backward.
    "fixtures/projects/loss_scaler_object/engine_third_party.py",
    "fixtures/projects/loss_scaler_object/engine_divides_inside.py",
}


def _all_fixtures() -> list[Path]:
    return sorted(
        p for p in FIXTURES.rglob("*.py") if not p.name.endswith(".fixed.py")
    )


def _fixed_fixtures() -> list[Path]:
    return [p for p in _all_fixtures() if _fixed_path(p).exists()]


def _fixed_path(fixture: Path) -> Path:
    return fixture.with_name(fixture.name[: -len(".py")] + ".fixed.py")


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _read(path: Path) -> str:
    # newline="" keeps the file's own line endings: the analysis sees the bytes
    # a user's file would hold.
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def read_expect(fixture: Path) -> list[Expected]:
    """The entries of a fixture's sidecar; a missing or malformed sidecar fails the test."""
    expect = expect_path(fixture)
    if not expect.exists():
        pytest.fail(f"{_rel(fixture)} has no sidecar {_rel(expect)} (an empty file means silent)")
    try:
        return parse_expect(_read(expect), _rel(expect))
    except MalformedExpect as error:
        pytest.fail(str(error))


def _found(text: str, path: Path) -> list[Expected]:
    return expected_of(analyze(text, _rel(path), AnalysisOptions()))


def _describe(entries: "set[Expected] | list[Expected]", lines: list[str]) -> list[str]:
    out = []
    for entry in sorted(entries):
        line = entry.line
        source = lines[line - 1].strip() if 0 < line <= len(lines) else "<no such line>"
        out.append(f"    {entry.format()}\n        | {source}")
    return out


def _diff_message(fixture: Path, expected: list[Expected], found: list[Expected], text: str) -> str:
    lines = text.splitlines()
    missing = set(expected) - set(found)
    unexpected = set(found) - set(expected)
    parts = [
        f"findings differ from {_rel(expect_path(fixture))} "
        "(after checking the new output, `python -m pytest tests/test_fixtures.py --update-expect` rewrites it)"
    ]
    if missing:
        parts.append("  expected but not reported:")
        parts.extend(_describe(missing, lines))
    if unexpected:
        parts.append("  reported but not expected:")
        parts.extend(_describe(unexpected, lines))
    return "\n".join(parts)


@pytest.mark.parametrize("fixture", _all_fixtures(), ids=_rel)
def test_fixture_findings(fixture: Path, request: pytest.FixtureRequest) -> None:
    text = _read(fixture)
    found = _found(text, fixture)
    if request.config.getoption("update_expect"):
        _write_expect(fixture, found)
        return
    expected = read_expect(fixture)
    assert found == expected, _diff_message(fixture, expected, found, text)
    if not expected:
        _assert_loop_modelled(fixture, text)


def _assert_loop_modelled(fixture: Path, text: str) -> None:
    """A silent fixture's silence counts only when the model saw its training loop."""
    modelled = bool(window_ks(text, _rel(fixture)))
    if _rel(fixture) in NO_TRAINING_LOOP:
        assert not modelled, f"{_rel(fixture)} has a modelled training loop: take it out of NO_TRAINING_LOOP"
    else:
        assert modelled, (
            f"{_rel(fixture)} is silent because the model found no training loop in it; "
            "if it holds none, add it to NO_TRAINING_LOOP"
        )


def _write_expect(fixture: Path, found: list[Expected]) -> None:
    """Rewrite `fixture`'s sidecar when its text differs (`--update-expect`)."""
    expect = expect_path(fixture)
    text = format_expect(found)
    if not expect.exists() or _read(expect) != text:
        expect.write_text(text, encoding="utf-8", newline="\n")


def _comment_lines_outside_statements(text: str) -> Counter:
    """Stripped comment lines of `text` that are not inside a multi-line simple
    statement (those may legitimately change with the statement they sit in)."""
    module = libcst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    inside: set[int] = set()
    for node, where in positions.items():
        if isinstance(node, libcst.SimpleStatementLine) and where.end.line > where.start.line:
            inside.update(range(where.start.line + 1, where.end.line + 1))
    counter: Counter = Counter()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#") and number not in inside:
            counter[stripped] += 1
    return counter


def _all_comment_lines(text: str) -> Counter:
    return Counter(
        line.strip() for line in text.splitlines() if line.strip().startswith("#")
    )


@pytest.mark.parametrize("fixture", _fixed_fixtures(), ids=_rel)
def test_fixture_fix(fixture: Path) -> None:
    original = _read(fixture)
    wanted = _read(_fixed_path(fixture))
    options = AnalysisOptions()

    fixed = fix_text(original, _rel(fixture), options, unsafe=True).text
    assert fixed == wanted, (
        f"fix_text output differs from {_rel(_fixed_path(fixture))}\n"
        + "".join(
            difflib.unified_diff(
                wanted.splitlines(keepends=True),
                fixed.splitlines(keepends=True),
                "expected",
                "fix_text",
            )
        )
    )

    # The fixed text parses.
    libcst.parse_module(fixed)

    # Comments outside the changed statements survive.
    kept = _all_comment_lines(fixed)
    lost = _comment_lines_outside_statements(original) - kept
    assert not lost, "comment lines lost by the fix:\n" + "\n".join(
        f"    {line}" for line in sorted(lost.elements())
    )

    # Fixing is stable.
    again = fix_text(fixed, _rel(fixture), options, unsafe=True).text
    assert again == fixed, "a second fix_text on the fixed text changed it"

    # Only explain-only rules (and findings offered no fix) remain, on the loops the original's findings were on: a fix
    # that hid a training loop from the model would leave nothing to find just as well.
    remaining = _found(fixed, fixture)
    fixable = [entry for entry in remaining if entry.code not in NO_FIX_CODES]
    if fixable:  # a finding the original offered no fix for (its rule withholds the edit there) may remain
        unfixed = {(d.code, d.message) for d in analyze(original, _rel(fixture), AnalysisOptions()) if d.fix is None}
        fixable = [entry for entry in fixable if (entry.code, entry.message) not in unfixed]
    assert not fixable, "fixable findings remain after the fix:\n" + "\n".join(
        _describe(fixable, fixed.splitlines())
    )
    loops_before, loops_after = window_ks(original, _rel(fixture)), window_ks(fixed, _rel(fixture))
    assert len(loops_after) == len(loops_before), (
        f"the model finds {len(loops_before)} training loops in the original and {len(loops_after)} in the fixed text"
    )


def test_fixture_corpus_size_and_balance() -> None:
    fixtures = _all_fixtures()
    silent = [
        f for f in fixtures if expect_path(f).exists() and not _read(expect_path(f)).strip()
    ]
    assert len(fixtures) >= MIN_FIXTURES, f"only {len(fixtures)} fixtures under fixtures/"
    assert 2 * len(silent) >= len(fixtures), (
        f"only {len(silent)} of {len(fixtures)} fixtures are silent; at least half must be"
    )


def test_every_fixture_has_a_sidecar() -> None:
    missing = [_rel(f) for f in _all_fixtures() if not expect_path(f).exists()]
    assert not missing, "fixtures without a .expect sidecar:\n" + "\n".join(missing)


def test_every_fixed_sidecar_has_a_fixture() -> None:
    orphans = [
        _rel(p)
        for p in FIXTURES.rglob("*.fixed.py")
        if not p.with_name(p.name[: -len(".fixed.py")] + ".py").exists()
    ]
    assert not orphans, "fixed sidecars without a fixture:\n" + "\n".join(orphans)


def test_a_sidecar_without_column_and_message_is_refused() -> None:
    with pytest.raises(MalformedExpect, match="LINE:COLUMN CODE MESSAGE"):
        parse_expect("42 GA201\n", "x.expect")
    with pytest.raises(MalformedExpect, match="LINE:COLUMN CODE MESSAGE"):
        parse_expect("42:9 GA201\n", "x.expect")


def test_a_finding_on_the_same_line_but_another_column_or_message_differs() -> None:
    [entry] = parse_expect("3:9 GA201 the loss reaches backward undivided\n", "x.expect")
    assert entry == Expected(3, 9, "GA201", "the loss reaches backward undivided")
    assert entry != entry._replace(column=5)
    assert entry != entry._replace(message="the loss reaches backward")


def test_every_sidecar_is_in_the_form_update_expect_writes() -> None:
    """Sorted and formatted as `--update-expect` writes it, so an update's diff
    shows only changed findings."""
    odd = [
        _rel(expect_path(f))
        for f in _all_fixtures()
        if expect_path(f).exists() and format_expect(read_expect(f)) != _read(expect_path(f))
    ]
    assert not odd, "sidecars not in canonical form:\n" + "\n".join(odd)
