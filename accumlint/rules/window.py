"""GA1xx: the structure of the accumulation window (zeroing, step, backward, gate)."""

from __future__ import annotations

from typing import Iterable, Iterator, Optional, cast

import libcst as cst

from accumlint.fix.edits import Edit, filled_expression, insert_after, insert_before, move_after, parenthesized, remove, replace
from accumlint.fix.guard import guard_for
from accumlint.model.tree import walk
from accumlint.model.gates import PLUS_ONE, Gate
from accumlint.model.loop import Event, Statement
from accumlint.model.micro import lost_micro_losses
from accumlint.model.names import code, dotted, looks_like_optimizer, normalized
from accumlint.model.scopes import same_before_loop
from accumlint.model.window import Window
from accumlint.rules.base import Finding, after_every_world, k_text, leaves_world, movable, movable_to, same_block, sync_gated
from accumlint.rules.catalog import Rule



def _position(event: Event) -> tuple[int, int]:
    return (event.statement.order, event.statement.events.index(event))


def steps_every_micro_batch(window: Window) -> list[Event]:
    """GA102's steps: the loop accumulates (1/K or gated zeroing) but steps ungated.
    A backward after a micro-step loop that only sees its last loss is GA110 alone:
    gating that step would break the code further."""
    if window.has_micro_loop or window.uses_accumulate_context:
        return []
    if window.gated_step:
        if _extra_gated_update(window):  # a plain loop with an update of its own under a test
            return [e for e in window.optimizer_steps if e.gate is None and not e.statement.conditional]
        return steps_beside_gated_step(window)
    if lost_micro_losses(window):
        return []
    if not (window.divides_by_accumulation or window.gated_zeroing):
        return []
    steps = [e for e in window.optimizer_steps
             if not e.statement.conditional and not e.role.closure_step and not window.framework_managed(e)]
    if window.gated_zeroing or len({normalized(e.role.target) for e in steps if e.role.target is not None}) < 2:
        return steps
    # several optimizers (a GAN's discriminator and generator), the evidence a division of the
    # loss: a step accumulates only when the backward it applies runs a divided loss
    return [e for e in steps if _applies_divided_loss(window, e)]


def _applies_divided_loss(window: Window, step: Event) -> bool:
    """The last backward before `step` in the iteration runs a loss divided by accumulation steps."""
    before = [e for e in sorted(window.loop.backwards, key=_position) if _position(e) < _position(step) and e.precedes(step)]
    if not before:
        return True  # unknown: as before the question was asked
    flow = next((f for f in window.flows if f.backward is before[-1]), None)
    return flow is None or window.divided_by_accumulation(flow)


def steps_beside_gated_step(window: Window) -> list[Event]:
    """GA102's steps in a loop that also steps under its gate: a step of the same optimizer
    that runs on every micro-batch of the same world (an AMP arm's `scaler.step(optimizer)`
    beside the gated `optimizer.step()` below it) applies each micro-batch's partial sum,
    and the gated step applies the window's gradients again."""
    gated = _window_closing_steps(window)
    return [
        e for e in window.optimizer_steps
        if e.gate is None and not e.role.closure_step and not window.framework_managed(e)
        and (window.runs_every_micro_batch(e.statement) or window.runs_with_backward(e.statement))
        and any(window.same_object(e, g) and not e.statement.exclusive_with(g.statement) for g in gated)
    ]


def _window_closing_steps(window: Window) -> list[Event]:
    """The gated steps that may close a window: no backward runs under their gate. A gated
    block with a backward of its own (`if batch_idx % beta == 0: (alpha * loss).backward();
    optimizer.step(); ...`) is an extra update beside a loop that steps every batch, not the
    boundary of a window of micro-batches; so is a periodic update (`Window.periodic_update`)."""
    return [e for e in window.optimizer_steps if e.gate is not None and not any(
        b.gate is not None and b.gate.test is e.gate.test for b in window.loop.backwards)
        and not window.periodic_update(e)]


def _extra_gated_update(window: Window) -> bool:
    """The loop steps on every micro-batch, and what it does under its gate is an update of
    its own (`_window_closing_steps` finds none): no window of micro-batches to erase."""
    return window.gated_step and not _window_closing_steps(window) and any(
        e.gate is None and not e.statement.conditional for e in window.optimizer_steps)


def zeroing_before_step(window: Window) -> list[tuple[Event, Event]]:
    """GA104's (zeroing, step) pairs: zeroing between a backward and the step it feeds."""
    events = sorted(window.loop.events, key=_position)
    optimizers = {normalized(e.role.target) for e in window.optimizer_steps if e.role.target is not None}
    pairs = []
    for index, step in enumerate(events):
        if step.kind != "step" or window.framework_managed(step) or step.role.target is None:
            continue
        if step.role.closure_step:
            continue  # the closure recomputes the gradients inside the step
        earlier = [e for e in events[:index] if e.precedes(step)]
        backwards = [i for i, e in enumerate(earlier) if e.kind == "backward"]
        if not backwards:
            continue
        last_backward = earlier[backwards[-1]]
        for zero in earlier[backwards[-1] + 1:]:
            if zero.kind != "zero" or window.framework_managed(zero) or not last_backward.precedes(zero):
                continue
            if window.under_non_finite_test(zero.statement):
                continue  # `if math.isnan(grad_norm): optimizer.zero_grad()`: bad gradients discarded on purpose
            if any(zero.statement.order < s.order < step.statement.order and window.writes_gradients(s)
                   for s in window.loop.statements):
                continue  # gradients harvested after the backward, cleared, then written back for the step
            target = zero.role.target
            same = window.same_object(zero, step)
            # a model's zeroing (`model.zero_grad()`), not another optimizer's of unknown origin
            model_zeroing = target is not None and window.objects.kind_of(target) != "optimizer" \
                and not looks_like_optimizer(dotted(target) or "")
            if same or (model_zeroing and len(optimizers) == 1 and len(window.loop.backwards) == 1):
                pairs.append((zero, step))
    return pairs


def zero_grad_every_micro_batch(window: Window) -> Iterable[Finding]:
    # a loop that steps on every micro-batch does not accumulate (GA102 says so), unless it also
    # steps under its gate: that step closes a window, which a zeroing on every micro-batch erases
    if not window.steps_once_per_window or (steps_every_micro_batch(window) and not window.gated_step) \
            or _extra_gated_update(window) or not window.backward_per_micro_batch:
        return
    if window.sets_gradients:
        return
    reported = {id(zero) for zero, _ in zeroing_before_step(window)}
    for zero in window.zeroings:
        if id(zero) in reported or window.discards_window(zero):
            continue
        if window.zeroes_on_window_entry(zero):
            yield _zero_on_entry(window, zero)
            continue
        restep = window.zeroes_before_restep(zero)
        if restep is not None:
            yield Finding(
                zero.role.call,
                f"`{code(zero.role.call)}` runs inside `accelerator.accumulate()` before a backward that "
                f"`{code(restep.role.call)}` then applies",
                help="`accumulate()` lets it run on the window's closing micro-batch: it clears the window's "
                "gradients, and the step ({related}) applies that micro-batch's later backward alone; zero "
                "each optimizer once, after its last step in the block",
                related=restep.role.call,
            )
            continue
        closing = window.zeroes_before_closing_backward(zero)
        if closing is not None:
            yield Finding(
                zero.role.call,
                f"`{code(zero.role.call)}` runs on the window's last micro-batch before its backward, "
                "erasing the window's gradients",
                fix_description="Move the zeroing after the optimizer step",
                help="under the step's own gate but before the backward, it fires on the micro-batch that "
                "closes the window: the step then applies that micro-batch's gradient alone; zero after "
                "the optimizer step ({related})",
                related=closing.role.call,
            )
            continue
        if window.framework_managed(zero) or not (
                window.runs_every_micro_batch(zero.statement) or _beside_every_backward(window, zero)):
            continue
        anchor = window_step(window, zero)
        where = " inside `accelerator.accumulate()` (never held back)" if window.accumulate_context(zero.statement) else ""
        yield Finding(
            zero.role.call,
            f"`{code(zero.role.call)}` runs on every micro-batch{where}, erasing the window's gradients",
            _zeroing_after_step(window, zero, anchor),
            "Move the zeroing after the optimizer step, inside the window",
            help="zero once per window, after the optimizer step ({related})",
            related=anchor.role.call if anchor is not None else None,
        )


def _beside_every_backward(window: Window, zero: Event) -> bool:
    """The zeroing runs beside the backward under a test that holds both, and holds every
    backward of the window (`if seen > resume_from: zero_grad(); ...; loss.backward()`): it
    runs on every micro-batch whose gradients the window keeps. A block with a backward of
    its own beside the window's (a probe's fake backward, then a zeroing that cancels it) is
    not the window's."""
    if not window.runs_with_backward(zero.statement):
        return False
    held = zero.statement.block
    return all(len(b.statement.block) >= len(held) and all(x is y for x, y in zip(held, b.statement.block))
               for b in window.loop.backwards)


def _zero_on_entry(window: Window, zero: Event) -> Finding:
    """A prepared optimizer's zeroing before the backward inside `accumulate()` (accelerate #616)."""
    anchor = window.managed_step(zero.statement)
    return Finding(
        zero.role.call,
        f"`{code(zero.role.call)}` runs before the backward inside `accelerator.accumulate()`",
        _move_zeroing_after(window, zero, anchor),
        "Move the zeroing after the optimizer step",
        help="`accumulate()` sets `sync_gradients` on entry, so on each window's last micro-batch this erases "
        "the gradients of the whole window; zero after the optimizer step ({related})",
        related=anchor.role.call if anchor is not None else None,
    )


def _zeroing_after_step(window: Window, zero: Event, anchor: Optional[Event]) -> tuple[Edit, ...]:
    """GA101's fix: move the zeroing after the window's step, and zero once before
    the loop where nothing does yet (before the loop over epochs when the gate's counter
    runs on across them), every name the zeroing uses is bound there and
    names there what it names in the loop (not before a Lightning `training_step`,
    not before the loop that creates the optimizer or sets `self.opt`)."""
    moved = _move_zeroing_after(window, zero, anchor)
    gated = sync_gated(window, zero, anchor) if len(moved) == 2 and anchor is not None else None
    if gated is not None and anchor is not None:  # inside `accumulate()`, where accelerate does not hold a model's zeroing back
        moved = (remove(zero.statement.node), insert_after(anchor.statement.node, gated))
    if not moved or window.zeroes_before_loop() or type(window.loop.node) not in (cst.For, cst.While):
        return moved
    before: cst.CSTNode = window.loop.node
    if window.epoch_loop is not None and any(_counts_across_epochs(window, gate, statement)
                                             for gate, statement in _gates_with_steps(window)):
        before = window.epoch_loop  # windows straddle epochs: zeroing as each epoch starts would erase their tails
    if not same_before_loop(window.facts, zero.statement.node, before, window.loop.function):
        return moved
    once = moved + (insert_before(before, zero.statement.node.with_changes(leading_lines=())),)
    return once if guard_for(window.facts.module, window.facts.parents).allows(once) else moved


def _move_zeroing_after(window: Window, zero: Event, step: Optional[Event]) -> tuple[Edit, ...]:
    """Move a zeroing after `step`; only remove it when a zeroing of the same gradients
    already follows the step."""
    if step is None or not movable_to(zero.statement, step.statement) or window.loop.in_inner_loop(zero.statement) \
            or leaves_world(zero.statement, step.statement):
        return ()
    block = step.statement.block[-1]
    if any(
        other.role.call is not zero.role.call and other.statement.block[-1] is block and other.order > step.order
        and not other.statement.exclusive_with(step.statement) and _same_gradients(window, zero, other)
        for other in window.loop.of_kind("zero")
    ):
        return (remove(zero.statement.node),)
    # `if amp: scaler.step(opt) else: opt.step()` (each arm a world of its own, each with its window):
    # after the whole test, whichever arm runs
    return move_after(zero.statement.node, after_every_world(step.statement))


def _same_gradients(window: Window, zero: Event, other: Event) -> bool:
    """Whether two zeroings clear the same gradients: they zero the same object, or one
    zeroes the model and the other the optimizer of a loop with one optimizer and one
    backward (`model.zero_grad()` beside `optimizer.zero_grad()`)."""
    if zero.role.target is None or other.role.target is None:
        return False
    if normalized(zero.role.target) == normalized(other.role.target):
        return True
    optimizers = {normalized(e.role.target) for e in window.optimizer_steps if e.role.target is not None}
    if len(optimizers) != 1 or len(window.loop.backwards) != 1:
        return False
    models = [e for e in (zero, other) if window.zeroes_model(e)]
    stepped = [e for e in (zero, other) if e.role.target is not None and normalized(e.role.target) in optimizers]
    return len(models) == 1 and len(stepped) == 1 and models[0] is not stepped[0]


def window_step(window: Window, near: Optional[Event] = None) -> Optional[Event]:
    """The step that closes the window: gated, after the micro-step loop, (for a call
    inside `accumulate()`) the managed step of the same block, or a DeepSpeed engine's
    step under the loop's gate."""
    for event in window.optimizer_steps:
        if event.gate is not None or (window.has_micro_loop and not window.loop.in_micro_loop(event.statement)):
            return event
    if near is not None and window.accumulate_k is not None:
        return window.managed_step(near.statement)
    return window.gated_engine_step


def step_every_micro_batch(window: Window) -> Iterable[Finding]:
    if _extra_gated_update(window):
        return  # it steps on every batch, and so it should: no window to close
    steps = steps_every_micro_batch(window)
    k = window.k
    for step in steps:
        gated = window_step(window, step)
        if window.gated_step and gated is not None:  # a second step, not a missing gate: no edit known to be right
            yield Finding(
                step.role.call,
                f"`{code(step.role.call)}` runs on every micro-batch, and the optimizer steps again under "
                f"the gate on `{k_text(window)}`",
                help="each micro-batch's partial sum is applied, then the window's gradients again at "
                "the boundary ({related}); step once per window",
                related=gated.role.call,
            )
            continue
        edits = _gate_step_edits(window, step) if k is not None else ()
        yield Finding(
            step.role.call,
            f"`{code(step.role.call)}` runs on every micro-batch although the loss accumulates over "
            f"`{k_text(window)}`",
            edits,
            f"Run the step (with its zeroing and scheduler) under `% {k_text(window)}` gate",
            help=f"step once per window of `{k_text(window)}` micro-batches",
        )


def _gate_step_edits(window: Window, step: Event) -> tuple[Edit, ...]:
    loop = window.loop.node
    if type(loop) is not cst.For or not movable(step.statement):
        return ()
    iterable = window.loop.iterable
    if iterable is not None and type(iterable) not in (cst.Name, cst.Attribute) and window.sized(iterable):
        return ()  # a sized loader built in place: the gate would drop its tail, and no `len()` can name it
    block = step.statement.block[-1]
    last_backward = max((e.order for e in window.loop.backwards), default=-1)
    related: list[tuple[cst.CSTNode, bool]] = []  # (node to move, whether it only zeroes)
    for statement in window.loop.statements:
        if statement.block[-1] is not block or statement.helper is not None:
            continue
        # a call of a helper that does window work (a clip in `check_gradients(...)`) moves along
        kinds = {e.kind for e in statement.events} or window.helper_event_kinds(statement)
        if not kinds or not kinds <= {"step", "zero", "sched", "update", "unscale", "clip"} or not movable(statement):
            continue
        if statement is step.statement or "zero" in kinds or statement.order > last_backward:
            related.append((statement.node, kinds == {"zero"}))
    related += [(node, False) for node in _guarded_window_work(window, block, last_backward)]
    gated = _gated_zeroings(window, block)
    related += [(node, True) for node, _ in gated.values()]
    related += [(loop_node, True) for loop_node in _zeroing_loops(window, block)]
    position = {id(node): index for index, node in enumerate(getattr(block, "body", ()))}
    work = sorted((node for node, zeroes in related if not zeroes), key=lambda node: position.get(id(node), -1))
    moved = work + [node for node, zeroes in related if zeroes]
    counter, base = window.loop.counter, window.loop.counter_base
    edits: list[Edit] = []
    if counter is None:
        counter, base = _fresh_name(loop), 0
        inner = loop.target
        if type(inner) is cst.Tuple and not inner.lpar:
            inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        new_target = cst.Tuple([cst.Element(cst.Name(counter)), cst.Element(inner)], lpar=[], rpar=[])
        edits.append(replace(loop.target, new_target))
        edits.append(replace(loop.iter, cst.Call(cst.Name("enumerate"), args=[cst.Arg(loop.iter)])))
    elif base not in (0, 1):
        return ()
    if not moved:
        return ()
    k = window.k
    if k is None:  # the caller asks only with K known
        return ()
    numerator = f"({counter} + 1)" if base == 0 else counter
    test = filled_expression(f"{numerator} % __k__ == 0", __k__=parenthesized(k))
    statements = cast("list[cst.SimpleStatementLine | cst.BaseCompoundStatement]", moved)  # a block's statements
    first = statements[0]
    body = [first.with_changes(leading_lines=())] + statements[1:]
    gate = cst.If(test=test, body=cst.IndentedBlock(body=body), leading_lines=first.leading_lines)
    edits.append(replace(first, gate))
    holders = {id(node): holder for node, holder in gated.values()}
    edits.extend(remove(holders.get(id(node), node)) for node in moved[1:])
    return tuple(edits)


def _gated_zeroings(window: Window, block: cst.CSTNode) -> dict[int, tuple[cst.CSTNode, cst.If]]:
    """Zeroings of `block` alone under their own `if` on the window's K (`if (i + 1) % K == 0:
    optimizer.zero_grad()`), by statement, with that `if`: the zeroing joins the step in its
    new gate and the old `if` goes (left where it was, before the backward, it would erase
    each window on its closing micro-batch)."""
    found: dict[int, tuple[cst.CSTNode, cst.If]] = {}
    k = window.k
    for statement in window.loop.statements:
        gate, test = statement.gate, statement.gate_if
        if gate is None or test is None or k is None or gate.k is None or code(gate.k) != code(k):
            continue
        if {e.kind for e in statement.events} != {"zero"} or statement.helper is not None or not movable(statement):
            continue
        path = statement.block
        if len(path) < 3 or path[-2] is not test or path[-3] is not block or test.orelse is not None:
            continue
        if type(test.body) is cst.IndentedBlock and len(test.body.body) == 1:
            found[id(statement.node)] = (statement.node, test)
    return found


_WINDOW_WORK = frozenset({"clip", "sched", "update", "unscale"})


def _guarded_window_work(window: Window, block: cst.CSTNode, last_backward: int) -> list[cst.CSTNode]:
    """`if` statements of `block`, after the last backward and under no gate, that hold only
    window work (`if max_norm > 0: clip_grad_norm_(...)`): they move with the step as a whole."""
    inside: dict[int, list[Statement]] = {}
    nodes: dict[int, cst.CSTNode] = {}
    for statement in window.loop.statements:
        if statement.helper is not None or block not in statement.block:
            continue
        index = statement.block.index(block)
        if index + 1 >= len(statement.block) or type(statement.block[index + 1]) is not cst.If:
            continue
        node = statement.block[index + 1]
        nodes[id(node)] = node
        inside.setdefault(id(node), []).append(statement)
    found = []
    for key, statements in inside.items():
        kinds = {e.kind for s in statements for e in s.events}
        if (kinds and kinds <= _WINDOW_WORK and all(s.gate is None and not s.loops and s.order > last_backward
                                                  for s in statements)):
            found.append(nodes[key])
    return found


def _zeroing_loops(window: Window, block: cst.CSTNode) -> list[cst.CSTNode]:
    """Loops of `block` that only zero gradients (`for group in optimizer.param_groups:
    for p in group["params"]: p.grad = None`): they move with the step as a whole."""
    found: list[cst.CSTNode] = []
    inner = [s for s in window.loop.statements if s.loops and s.helper is None]
    for loop_node in {id(s.loops[0]): s.loops[0] for s in inner}.values():
        if type(block) is not cst.IndentedBlock or not any(child is loop_node for child in block.body):
            continue
        within = [s for s in inner if s.loops[0] is loop_node]
        kinds = {e.kind for s in within for e in s.events}
        if kinds == {"zero"} and all(len(s.node.body) == 1 for s in within):
            found.append(loop_node)
    return found


def _fresh_name(loop: cst.For) -> str:
    used = {n.value for n in walk(loop) if type(n) is cst.Name}
    for candidate in ("micro_step", "micro_index", "micro_i"):
        if candidate not in used:
            return candidate
    return "accumlint_micro_step"


def backward_after_step(window: Window) -> Iterable[Finding]:
    for step in window.optimizer_steps:
        gate_if = step.statement.gate_if
        if step.gate is None or step.statement.helper is not None or type(gate_if) is not cst.If:
            continue
        if step.role.closure_step:
            continue  # its backward runs inside the step, in its own window
        if window.opens_next_window(step):
            continue
        before = [b for b in window.loop.backwards if b.precedes(step)]
        after = [b for b in window.loop.backwards if step.precedes(b) and not b.statement.loops]
        if before or not after:
            continue
        backward = after[0]
        edits: tuple[Edit, ...] = ()
        if movable(backward.statement) and same_block(backward.statement, gate_if):
            edits = move_after(gate_if, backward.statement.node)
        yield Finding(
            backward.role.call,
            "the backward runs after the gated optimizer step ({related})",
            edits,
            "Move the gated step after the backward",
            help="each window's last micro-batch lands in the next window and the run's last window is never "
            "stepped; backpropagate before the gate",
            related=step.role.call,
        )
        return


def zero_grad_before_step(window: Window) -> Iterable[Finding]:
    pairs = zeroing_before_step(window)
    reported = set()
    for zero, step in pairs:
        # (a helper entered from two exclusive arms gives one zeroing two events: one finding)
        if id(zero.role.call) in reported:
            continue
        reported.add(id(zero.role.call))
        # a zeroing before alternative steps (`if amp: scaler.step(...) else: optimizer.step()`)
        # cannot move into one arm
        alternatives = len({id(other_step.role.call) for other, other_step in pairs
                            if other.role.call is zero.role.call}) > 1
        edits = () if alternatives else _move_zeroing_after(window, zero, step)
        yield Finding(
            zero.role.call,
            f"`{code(zero.role.call)}` runs between the backward and the optimizer step ({{related}})",
            edits,
            "Move the zeroing after the optimizer step",
            help="the step applies zero gradients; zero after the step",
            related=step.role.call,
        )


def missing_zero_grad(window: Window) -> Iterable[Finding]:
    steps = [e for e in window.optimizer_steps if window.objects.kind_of(e.role.target) == "optimizer"]
    if not steps or window.loop.of_kind("zero") or window.deepspeed:
        return
    if any(window.built_each_iteration(e.role.target) for e in steps):
        return  # a fresh optimizer every iteration (a one-off probe step): no update carries over
    if any(window.objects.engine_owned(e.role.target, window.facts.enclosing_function(e.statement.node)) for e in steps):
        return  # DeepSpeed's optimizer: its engine zeroes the gradients
    optimizers = {normalized(e.role.target) for e in steps if e.role.target is not None}  # an optimizer's step names it
    if window.may_zero_otherwise(optimizers):
        return
    # the header of the loop whose iterations step (a micro-step loop inside it only backpropagates)
    yield Finding(
        window.loop.node,
        f"nothing zeroes the gradients that `{code(steps[0].role.call)}` applies",
        help="every update adds all earlier gradients again; call `zero_grad()` once per window, after the step",
    )


def off_by_one_boundary(window: Window) -> Iterable[Finding]:
    for gate, statement in _gates_with_steps(window):
        if gate.kind != "modulo" or not window.off_by_one(gate, statement):
            continue
        if not window.count_decides(gate):
            continue
        if not any(b.statement.precedes(statement) for b in window.loop.backwards):
            continue  # a gate before the backward is GA103's
        numerator = cast(cst.BinaryOperation, gate.test.left).left if type(gate.test) is cst.Comparison else None
        edits: tuple[Edit, ...] = ()
        # `(ni + 1) % K` over a counter that runs across epochs still loses each epoch's tail
        # to the zeroing when the next epoch starts (GA107): the fix alone would not make the
        # windows right, so it is not offered there.
        tail_erased = window.zeroes_on_epoch_start is not None and _counts_across_epochs(window, gate, statement)
        if numerator is not None and not tail_erased:
            plus_one = filled_expression("(__counter__ + 1)", __counter__=numerator)
            edits = (replace(numerator, plus_one),)
        yield Finding(
            gate.test,
            f"`{code(gate.test)}` fires after the first micro-batch: `{gate.counter}` counts from 0",
            edits,
            f"Test `({gate.counter} + 1) % {code(gate.k)} == 0`",
            help=f"every window is shifted by one; test `({gate.counter} + 1) % {code(gate.k)} == 0`"
            + (", and zero once before the epochs: the zeroing when each epoch starts erases the window "
               "the epoch ends with" if tail_erased else ""),
        )


def _gates_with_steps(window: Window) -> Iterator[tuple[Gate, Statement]]:
    """The gates of the gated steps, once each, but a periodic update's (`Window.periodic_update`).
    A test that gates several steps (`do_update = i % K == 0`, then `if scaler is not None and
    do_update:` / `elif do_update:`) is given as the gate with no other condition where one has none."""
    chosen: dict[int, tuple[Gate, Statement]] = {}
    for step in window.optimizer_steps:
        if window.periodic_update(step) or step.gate is None:
            continue
        known = chosen.get(id(step.gate.test))
        if known is None or (known[0].has_condition and not step.gate.has_condition):
            chosen[id(step.gate.test)] = (step.gate, step.statement)
    yield from chosen.values()


def dropped_tail_window(window: Window) -> Iterable[Finding]:
    yield from _epoch_tail_erased(window)
    loop = window.loop
    if loop.iterable is None or not window.sized(loop.iterable):
        return
    if not window.backward_per_micro_batch:
        return  # GradCache-style: off the boundary only features are cached, so a tail has no gradients to lose
    for gate, statement in _gates_with_steps(window):
        if gate.kind not in ("modulo", "count") or gate.has_clause or not window.own_gate(gate, statement):
            continue
        # the loop's own index, or a micro-batch counter reset when each epoch starts
        # (`for batch in loader:` with `steps += 1` counts like an index)
        own_counter = loop.counter is not None and (gate.counter == loop.counter or gate.counter in loop.index_aliases)
        if not own_counter and not (gate.counter and window.reset_on_epoch_start(gate.counter)):
            continue
        if gate.kind == "count":
            # `n == K` over a count of micro-batches that starts again with each epoch
            if own_counter or gate.since is not None or not window.counts_before(gate, statement):
                continue
        elif not window.correct_boundary(gate, statement):
            continue
        if window.flushes_after_loop or window.length_divisible(gate) or window.stops_after_full_windows(gate):
            continue
        shown = _gate_statement_twin(window, gate)
        iterable = code(loop.iterable)
        edits: tuple[Edit, ...] = ()
        # (a loader built in place, `tqdm(DataLoader(...))`, has no name whose `len()` the gate could take)
        if type(gate.test) is cst.Comparison and (own_counter or window.numbers_pass(gate, statement)) \
                and gate.kind == "modulo" and not gate.paired and type(loop.iterable) in (cst.Name, cst.Attribute):
            positive = type(gate.test.comparisons[0].operator) is cst.Equal
            numerator = f"({gate.counter} + 1)" if window.counter_base(gate, statement) == 0 else gate.counter
            clause = f"{numerator} == len(__iterable__)" if positive else f"{numerator} != len(__iterable__)"
            joined = f"__test__ {'or' if positive else 'and'} {clause}"
            # the step's test, and its twin `if` when the gate is written twice (both fire on the tail)
            edits = tuple(
                replace(test, filled_expression(joined, __test__=test.with_changes(lpar=[], rpar=[]),
                                                __iterable__=loop.iterable).with_changes(lpar=test.lpar, rpar=test.rpar))
                for test in dict.fromkeys((gate.test, shown.test)) if type(test) is cst.Comparison)
        gate = shown
        yield Finding(
            gate.test,
            f"the last partial window of `{iterable}` never reaches an optimizer step",
            edits,
            f"Also step on the last batch: `or ... == len({iterable})`",
            help=f"when `len({iterable})` is not a multiple of `{code(gate.k)}`, the last micro-batches are "
            "dropped; add a last-batch clause to the gate",
        )


def _gate_statement_twin(window: Window, gate: Gate) -> Gate:
    """The `if` gate with the same test as a gate written as a call's argument
    (`loss_scaler(loss, optimizer, update_grad=(i + 1) % K == 0)` beside `if (i + 1) % K == 0:
    optimizer.zero_grad()`): one gate, reported on the statement that reads as the gate."""
    if type(window.facts.parents.get(id(gate.test))) is not cst.Arg:
        return gate
    written = code(gate.test)
    for other in window.loop.gates:
        if other.test is not gate.test and code(other.test) == written \
                and type(window.facts.parents.get(id(other.test))) is cst.If:
            return other
    return gate


def _epoch_tail_erased(window: Window) -> Iterable[Finding]:
    """A count gate over a counter across epochs (`ni - last >= K`, `ni = i + nb * epoch`)
    lets windows straddle epochs, but gradients zeroed at the start of each epoch erase
    the partial window an epoch ends with before any step uses it."""
    for gate, statement in _gates_with_steps(window):
        zeroing = window.tail_eraser(gate.counter)
        if zeroing is None or window.flushes_after_loop or not _across_epochs(window, gate, statement):
            continue  # a step after the loop applies the partial window before the next epoch zeroes it
        yield Finding(
            gate.test,
            "the partial window each epoch ends with is erased by the zeroing at the start of the next "
            "epoch ({related})",
            (),
            "Zero once before training, or step at the end of each epoch",
            related=zeroing,
            help=f"`{code(gate.test)}` lets windows straddle epochs, but the gradients are zeroed when "
            "each epoch starts; zero once before the epochs (or flush the window at each epoch's end)",
        )


def _across_epochs(window: Window, gate: Gate, statement: Statement) -> bool:
    """A gate over a counter that runs on across epochs: `ni - last >= K` with
    `ni = i + nb * epoch`, or `% K` on that derived counter or on a step counter
    incremented every micro-batch and never reset when an epoch starts."""
    if gate.kind == "count":
        return gate.counter is not None and window.own_gate(gate, statement) and gate.since is not None and (
            gate.counter in window.loop.derived_counters)
    if not _counts_across_epochs(window, gate, statement):
        return False
    if window.zeroes_on_epoch_start is None:
        # a counter its caller carries across calls (its start is the caller's): the usual
        # `(n + 1) % K` form, a sized loader, and no step after the loop to flush the tail
        loop = window.loop
        return gate.form == PLUS_ONE and loop.iterable is not None and window.sized(loop.iterable) \
            and not window.flushes_after_loop
    return window.correct_boundary(gate, statement)


def _counts_across_epochs(window: Window, gate: Gate, statement: Statement) -> bool:
    """A `% K` gate over a counter that is not reset when an epoch starts: derived from
    the epoch (`ni = i + nb * epoch`), or incremented on every micro-batch."""
    counter = gate.counter
    if counter is None or not window.own_gate(gate, statement) or gate.kind != "modulo" or gate.has_clause:
        return False
    if counter in window.loop.derived_counters:
        return True
    incremented = window.increment_of(counter)
    if incremented is None or window.reset_on_epoch_start(counter):
        return False
    return incremented.gate is None and not incremented.conditional


ZERO_GRAD_EVERY_MICRO_BATCH = Rule(
    code="GA101",
    name="zero-grad-every-micro-batch",
    fix="safe",
    summary="Gradients are zeroed on every micro-batch of an accumulation loop.",
    check=zero_grad_every_micro_batch,
)

STEP_EVERY_MICRO_BATCH = Rule(
    code="GA102",
    name="step-every-micro-batch",
    fix="unsafe",
    summary="The optimizer steps on every micro-batch while the loop accumulates.",
    check=step_every_micro_batch,
)

BACKWARD_AFTER_STEP = Rule(
    code="GA103",
    name="backward-after-step",
    fix="unsafe",
    summary="The backward runs after the gated step, so windows are shifted by one micro-batch.",
    check=backward_after_step,
)

ZERO_GRAD_BEFORE_STEP = Rule(
    code="GA104",
    name="zero-grad-before-step",
    fix="safe",
    summary="Gradients are zeroed between the backward and the step, so the step applies zeros.",
    any_loop=True,
    check=zero_grad_before_step,
)

MISSING_ZERO_GRAD = Rule(
    code="GA105",
    name="missing-zero-grad",
    fix="none",
    summary="Nothing ever zeroes the gradients, so they grow across all updates.",
    any_loop=True,
    check=missing_zero_grad,
)

OFF_BY_ONE_BOUNDARY = Rule(
    code="GA106",
    name="off-by-one-boundary",
    fix="safe",
    summary="A 0-based counter is tested with `i % K == 0`, shifting every window.",
    check=off_by_one_boundary,
)

DROPPED_TAIL_WINDOW = Rule(
    code="GA107",
    name="dropped-tail-window",
    fix="unsafe",
    summary="The last partial window of a sized iterable never reaches an optimizer step.",
    check=dropped_tail_window,
)
