"""The accumulation window of a training loop: K, the gate, and who scales the loss.

`Window` interprets a `TrainingLoop`: is it accumulating at all (a gated step,
an inner micro-step loop, a loss divided by an accumulation count, gated
zeroing, a framework's accumulate context), what K is, which gate closes the
window and what a framework already does (Accelerate's and DeepSpeed's 1/K,
steps that only act on sync steps).
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Iterator, Optional, cast

import libcst as cst

from accumlint.model import scopes
from accumlint.model.facts import DETACHING_METHODS, UNCOUNTED, Binding, Function, ModuleFacts, ancestors, constructed, detached
from accumlint.model.frameworks import SyncControl, carries_k, mentions_sync_control
from accumlint.model.gates import PLUS_ONE, ZERO, Gate, boolean_operands, single_micro_batch_arm
from accumlint.model.loop import Event, Statement, TrainingLoop, epoch_multiple, unwrap_iterable
from accumlint.model.loss import TOKEN, LossFlow, LossReader
from accumlint.model.names import (
    adds_one, argument_for, call_name, code, dotted, entered, int_value, key_of, keyword, last_part,
    looks_like_accumulation, normalized, parameters, positional,
)
from accumlint.model.roles import Objects, RoleKind
from accumlint.model.tree import walk
from accumlint.source.literals import literals_of
from accumlint.source.patterns import LazyPattern

_ITERABLE_DATASET = LazyPattern(r"Iterable|Stream|streaming\s*=\s*True|IterDataPipe")
_MODEL_NAME = LazyPattern(r"model|net|module|policy|unet|transformer|encoder|decoder", re.IGNORECASE)
_TASK_COUNT = LazyPattern(r"task|domain|datasets|lang", re.IGNORECASE)  # not `len(train_dataset) // bs`

# Code that zeroes gradients, read as text (`opt.zero_grad()`, `p.grad = None`, `p.grad.zero_()`).
_ZEROING_TEXT = LazyPattern(r"zero_grad|\.grad\s*=\s*None|\.grad(\.data)?\.(zero_|detach_)|set_to_none|zero_gradients")

_RESCALE_CALLS = {"scale_grads", "scale_gradients", "multiply_grads", "rescale_gradients", "scale_grad", "_scale_grads"}


@dataclass(eq=False)
class Window:
    loop: TrainingLoop
    facts: ModuleFacts
    objects: Objects
    accumulation_names: tuple[str, ...] = ()
    flows: list[LossFlow] = field(default_factory=list)

    # -- the framework ------------------------------------------------------------
    def accumulate_call(self, statement: Statement) -> Optional[cst.Call]:
        """The `accelerator.accumulate(...)` call whose `with` holds the statement."""
        return self.objects.frameworks.accumulate_item(statement)

    def accumulate_context(self, statement: Statement) -> bool:
        """Inside `with accelerator.accumulate(model):` (prepared objects act only on sync steps)."""
        return self.accumulate_call(statement) is not None

    @cached_property
    def backwards_elsewhere_in_iteration(self) -> bool:
        """The loop's body, in its own code, runs a backward that is not one of this window's
        (a window split at an inner micro-step loop: `loss_a.backward(retain_graph=True)`, then
        a loop over per-layer losses of the same forward, each with its backward)."""
        own = {id(event.role.call) for event in self.loop.backwards}
        for node in walk(self.loop.site.node):
            if type(node) is cst.Call and id(node) not in own:
                role = self.objects.role(node)
                if role is not None and role.kind == "backward":
                    return True
        return False

    def graph_left_to_producer(self, backward: Event) -> bool:
        """After the backward, the iteration calls a method of an object that a project
        function made in the iteration and that the backward's loss was computed from
        (`result = compute_losses(...)`, `loss = result.kl + ...`, the backward, then
        `result.release_gradients()`; the loss reads the object's attributes, so it is a
        holder of results, not a tensor): what that method does with the graph the backward
        kept is not read here (a gradient buffer it sends back through the graph), so the
        graph may well be used again."""
        loss = backward.role.target
        if loss is None:
            return False
        helper = backward.statement.helper
        statements = [s for s in self.loop.statements if s.helper is helper]
        wanted = scopes.chains_read(loss)
        producers: set[str] = set()
        for statement in reversed([s for s in statements if s.order < backward.statement.order]):
            for small in statement.node.body:
                if type(small) is not cst.Assign:
                    continue
                bound = scopes.chains_bound(small)
                if not bound & wanted:
                    continue
                made = dotted(small.targets[0].target) if len(small.targets) == 1 else None
                if made is not None and "." not in made and type(small.value) is cst.Call \
                        and any(chain.startswith(made + ".") for chain in wanted) \
                        and self.facts.helper(small.value, helper or self.loop.function) is not None:
                    producers.add(made)  # an object whose attributes the loss reads (`result.kl`), not a tensor
                wanted |= scopes.chains_read(small.value)
        if not producers:
            return False
        return any(type(node) is cst.Call and type(node.func) is cst.Attribute and dotted(node.func.value) in producers
                   for s in statements if s.order > backward.statement.order for node in walk(s.node))

    @cached_property
    def gate_counters(self) -> frozenset[str]:
        """The counters that the gates of the loop's steps and zeroings test: the loop's own
        code makes each of them count micro-batches (`if (global_step + 1) % K == 0:`)."""
        return frozenset(event.gate.counter for event in self.loop.of_kind("step", "zero")
                         if event.gate is not None and event.gate.counter is not None)

    @cached_property
    def uses_accumulate_context(self) -> bool:
        return any(self.accumulate_context(s) for s in self.loop.statements)

    @cached_property
    def accumulate_k(self) -> Optional[cst.BaseExpression]:
        """K of the Accelerator whose `accumulate()` the loop enters: with it, the loop
        accumulates and `accelerator.sync_gradients` is its window boundary."""
        for statement in self.loop.statements:
            call = self.accumulate_call(statement)
            if call is not None:
                k = self.objects.frameworks.accumulate_k(call)
                if k is not None:
                    return k
        return None

    def accumulate_block(self, statement: Statement) -> list[Statement]:
        """The statements of the iteration inside the same `accumulate()` as `statement`."""
        call = self.accumulate_call(statement)
        return [s for s in self.loop.statements if call is not None and self.accumulate_call(s) is call]

    def unmanaged_in_accumulate(self, event: Event) -> bool:
        """A call inside `accumulate()` that accelerate does not hold back off the sync
        step, so it runs on every micro-batch: model or parameter zeroing
        (`model.zero_grad()`, `p.grad = None`), a scheduler that `accelerator.prepare`
        did not return, and clipping."""
        if event.kind == "clip":
            return True
        if event.kind == "sched":
            return self.objects.frameworks.prepared(event.role.target) is False
        if event.kind == "zero":
            return self.zeroes_model(event)
        return False

    def zeroes_model(self, event: Event) -> bool:
        """Zeroing of a model or of parameters' `.grad` (not an optimizer's `zero_grad`)."""
        target = event.role.target
        if target is None or self.objects.kind_of(target) == "optimizer":
            return False
        name = dotted(target) or ""
        if name.endswith(".grad") or name.endswith(".grad.data"):
            return True
        call = self.accumulate_call(event.statement)
        accumulated = {dotted(arg.value) for arg in call.args} if call is not None else set()
        return name in accumulated or bool(_MODEL_NAME.search(last_part(name)))

    def zeroes_on_window_entry(self, event: Event) -> bool:
        """An optimizer's zeroing inside `accumulate()` before the block's first backward
        (and before any step): accumulate sets `sync_gradients` on entry, so on the
        window's last micro-batch it erases the gradients of the whole window."""
        if event.kind != "zero" or self.accumulate_k is None or not self.framework_managed(event):
            return False
        if self.deepspeed_accelerator and not self.zeroes_model(event):
            return False  # a DeepSpeed plugin's prepared optimizer zeroes nothing: its engine does, after its step
        block = self.accumulate_block(event.statement)
        first_backward = min((e.order for s in block for e in s.events if e.kind == "backward"), default=None)
        first_step = min((e.order for s in block for e in s.events if e.kind == "step"), default=None)
        if first_backward is None or event.order >= first_backward:
            return False
        return first_step is None or event.order < first_step

    def zeroes_before_restep(self, event: Event) -> Optional[Event]:
        """The step of the same optimizer that applies a partial gradient because of this
        zeroing: inside `accumulate()`, a prepared optimizer's zeroing that comes before a
        later backward of the block, after which that optimizer steps (a GAN's generator
        stepped for its reconstruction loss, zeroed, then backpropagated and stepped again
        for its adversarial loss; a discriminator zeroed after the generator's step, before
        its own backward and step). `accumulate()` lets the zeroing run on the window's
        closing micro-batch, so the step applies that micro-batch's later backward alone.
        The zeroing at the block's entry, before any step or backward, is
        `zeroes_on_window_entry`'s; None for it."""
        if event.kind != "zero" or self.accumulate_k is None or not self.framework_managed(event):
            return None
        if event.role.target is None or self.zeroes_on_window_entry(event):
            return None
        if self.deepspeed_accelerator and not self.zeroes_model(event):
            return None  # see `zeroes_on_window_entry`
        block = self.accumulate_block(event.statement)
        mine = self.object_as_passed(event)
        backwards = [e for s in block for e in s.events if e.kind == "backward" and event.precedes(e)]
        return next((step for s in block for step in s.events
                     if step.kind == "step" and step.role.target is not None and self.object_as_passed(step) == mine
                     and any(b.precedes(step) for b in backwards)), None)

    def zeroes_before_closing_backward(self, event: Event) -> Optional[Event]:
        """The step whose window a zeroing erases when it sits under the step's own
        modulo gate but before the backward of the same iteration (`if (i + 1) % K == 0:
        zero_grad()`, then `loss.backward()`, then the gated step): on the window's
        closing micro-batch it drops the K-1 earlier gradients, so the step applies the
        last micro-batch's alone. A zeroing that opens the window (`i % K == 0` beside a
        step at `(i + 1) % K == 0`), or a counter that moves between the two tests, is not
        this; None then, and when the step's gate is off by one (GA106's 0-based `i % K == 0`,
        the zeroing's too), whose fix leaves the zeroing opening each window."""
        zero_gate = event.gate
        if event.kind != "zero" or zero_gate is None or zero_gate.kind != "modulo" or self.framework_managed(event):
            return None
        for step in self.optimizer_steps:
            step_gate = step.gate
            if step_gate is None or step_gate.kind != "modulo" or not event.precedes(step):
                continue
            if (zero_gate.form, zero_gate.positive, zero_gate.counter) != (step_gate.form, step_gate.positive,
                                                                           step_gate.counter):
                continue
            if zero_gate.k is None or step_gate.k is None or code(zero_gate.k) != code(step_gate.k):
                continue
            if self._assigned_between(zero_gate.counter, event.statement, step.statement):
                continue
            if self.zeroes_other_optimizer(event, step):
                continue
            if self.off_by_one(step_gate, step.statement):
                continue  # `i % K == 0` on a 0-based index (GA106): moved to `(i + 1)`, the step leaves the zeroing opening the window
            if any(event.precedes(b) and b.precedes(step) and b.gate is None for b in self.loop.backwards):
                return step
        return None

    def zeroes_other_optimizer(self, zero: Event, step: Event) -> bool:
        """The zeroing clears another optimizer's gradients than the step applies: both name
        optimizers the loop steps, and not the same one (a GAN's generator zeroed after its
        own gated step, before the discriminator's backward and gated step)."""
        if zero.role.target is None or step.role.target is None:
            return False
        stepped = {self.object_as_passed(e) for e in self.optimizer_steps if e.role.target is not None}
        mine = self.object_as_passed(zero)
        return mine in stepped and mine != self.object_as_passed(step)

    def object_as_passed(self, event: Event) -> Optional[str]:
        """The object an event acts on, as the loop names it: a helper's parameter is what the
        call that ran the helper passes for it (`update(model, step, loss, optimizer)` called
        once with `optD` and once with `optG` zeroes two optimizers, not one)."""
        target = event.role.target
        if target is None:
            return None
        if type(target) is cst.Name:
            passed = self._passed(event.statement, target.value)
            if passed is not None and dotted(passed) is not None:
                return normalized(passed)
        return normalized(target)

    @cached_property
    def separate_updates(self) -> frozenset[int]:
        """The events (by id) of complete updates of another optimizer inside the iteration:
        its zeroing, a backward and its step, under one and the same gate (none, or a gate of
        their own), while another optimizer steps under a gate (a GAN whose discriminator
        accumulates while the generator updates on each batch or every n batches, an
        actor-critic whose critic updates on each batch beside an accumulating actor). Those
        backwards and zeroings make their own update, not part of the window: no 1/K is owed
        and the zeroing erases nothing of it."""
        if self.loop.micro_loop is not None:
            return frozenset()
        found: set[int] = set()
        for step in self.optimizer_steps:
            found |= self._separate_update(step)
        window_steps = [e for e in self.optimizer_steps if id(e) not in found and e.gate is not None]
        window_backwards = [b for b in self.loop.backwards if id(b) not in found]
        return frozenset(found) if window_steps and window_backwards else frozenset()

    @cached_property
    def zeroings(self) -> list[Event]:
        """The zeroings of the window's gradients: every zeroing of the iteration but those of
        a separate update (`separate_updates`)."""
        return [z for z in self.loop.of_kind("zero") if id(z) not in self.separate_updates
                and not self._zeroes_untrained_model(z)]

    def cancelled(self, backward: Event) -> bool:
        """A backward whose gradients a zeroing later in its own block clears before any step
        (a probe's fake backward, then `optimizer.zero_grad()` "to cancel this fake step"):
        nothing of it reaches an update, so how its loss is scaled does not matter."""
        block = backward.statement.block
        for zero in self.loop.of_kind("zero"):
            held = zero.statement.block
            if zero.order <= backward.order or zero.statement.helper is not backward.statement.helper \
                    or len(held) < len(block) or not all(a is b for a, b in zip(held, block)):
                continue
            if len(held) > len(block) and not self._zeroes_in_every_arm(backward, zero):
                continue  # (`if fused: optimizer.zero_grad()` alone may not run)
            if not any(backward.order < step.order < zero.order for step in self.loop.of_kind("step")):
                return True
        return False

    def _zeroes_in_every_arm(self, backward: Event, zero: Event) -> bool:
        """The zeroing sits in a statement after the backward, in the backward's own block,
        that zeroes whichever arm runs (`if fused: opt.zero_grad()` / `else:
        opt.zero_grad(set_to_none=True)`)."""
        block = backward.statement.block[-1] if backward.statement.block else None
        body = block.body if type(block) is cst.IndentedBlock else ()
        for statement in body:
            if type(statement) is cst.If and any(node is zero.role.call for node in walk(statement)):
                return self._always_zeroes(statement)
        return False

    def _always_zeroes(self, node: cst.CSTNode) -> bool:
        """Every path through the statement runs a zeroing (one of its lines, or each arm of
        an `if` that has an `else`)."""
        if type(node) is cst.SimpleStatementLine:
            return any(type(call) is cst.Call and (role := self.objects.role(call)) is not None and role.kind == "zero"
                       for call in walk(node))
        if type(node) is cst.If:
            orelse = node.orelse
            if orelse is None:
                return False
            rest = orelse if type(orelse) is cst.If else cast(cst.Else, orelse).body
            return any(self._always_zeroes(line) for line in node.body.body) and (
                self._always_zeroes(rest) if type(rest) is cst.If
                else any(self._always_zeroes(line) for line in cast(cst.IndentedBlock, rest).body))
        return False

    def _zeroes_untrained_model(self, zero: Event) -> bool:
        """`teacher.zero_grad()` while every optimizer the window steps is built over another
        model's parameters (`AdamW(student.parameters())`): the zeroing clears gradients the
        window never applies (a frozen teacher, a target network). Only when neither model's
        bindings mention the other (`model = DDP(net)` shares `net`'s parameters)."""
        call = zero.role.call
        if not (type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "zero_grad"):
            return False  # `p.grad = None` over parameters
        target = dotted(zero.role.target) if zero.role.target is not None else None
        if target is None or "." in target or self.objects.kind_of(zero.role.target) is not None:
            return False  # an optimizer's zeroing, `self.model.zero_grad()`: not read here
        if zero.statement.helper is not None:
            # in a helper, the model its caller passes for the parameter (`teacher_targets(teacher, x)`)
            passed = self._passed(zero.statement, target)
            target = passed.value if type(passed) is cst.Name else None
            if target is None:
                return False
        steps = [e for e in self.optimizer_steps if id(e) not in self.separate_updates]
        trained = {self._trained_model(e.role.target) for e in steps if e.role.target is not None}
        if not steps or len(trained) != 1 or None in trained:
            return False
        model = trained.pop()
        assert model is not None
        return model != target and not self._related(model, target) and not self._related(target, model)

    def _related(self, name: str, other: str) -> bool:
        """Whether a binding of `name` reads `other` (`model = DDP(net)` reads `net`)."""
        return any(other in {n.value for n in walk(b.value) if type(n) is cst.Name}
                   for b in self.facts.values_of(name))

    def _separate_update(self, step: Event) -> set[int]:
        """The ids of `step`, its zeroings and the backwards that feed it when they make one
        update of an optimizer that steps nowhere else in the iteration, all in the same block:
        zeroing, backward, step; or backward, step, zeroing (the zeroing after the step readies
        the next iteration: an adversary's `loss_dis.backward(); opt_dis.step();
        opt_dis.zero_grad()` beside an accumulating model)."""
        target = step.role.target
        if target is None or self.objects.kind_of(target) != "optimizer":
            return set()
        mine = normalized(target)
        if any(e is not step and e.role.target is not None and normalized(e.role.target) == mine
               for e in self.optimizer_steps):
            return set()
        zeroed = {mine, self._trained_model(target)}
        zeros = [z for z in self.loop.of_kind("zero") if z.role.target is not None
                 and normalized(z.role.target) in zeroed and self._same_block(z, step)]
        before = [z for z in zeros if z.precedes(step)]
        others = [e for e in self.optimizer_steps if e is not step and e.precedes(step)]
        if before:
            zero = before[-1]
            if any(zero.precedes(e) for e in others):
                return set()  # another optimizer's step between them: the backwards may be its
            between = [b for b in self.loop.backwards if zero.precedes(b) and b.precedes(step)]
        elif any(step.precedes(z) for z in zeros):
            # the backwards since the last step of another optimizer
            between = [b for b in self.loop.backwards if b.precedes(step) and all(e.precedes(b) for e in others)]
        else:
            return set()
        if not between or not all(self._same_block(b, step) for b in between):
            return set()
        return {id(step), *(id(z) for z in zeros if z in before or step.precedes(z)), *(id(b) for b in between)}

    @staticmethod
    def _same_block(event: Event, other: Event) -> bool:
        """Both run under the same gate in the same block (both on every iteration, or both
        in the body of one `if`), in the loop itself or both in one walk of one helper (a
        helper that updates the discriminator of a GAN on its own: zeroing, backward, step)."""
        mine, theirs = event.statement, other.statement
        if mine.helper is not None or theirs.helper is not None:
            if mine.call_site is None or mine.call_site is not theirs.call_site or mine.callers != theirs.callers:
                return False
        if mine.gate_if is None and theirs.gate_if is None:
            return not (mine.conditional or theirs.conditional)
        if mine.gate_if is not theirs.gate_if or len(mine.block) != len(theirs.block):
            return False
        return all(a is b for a, b in zip(mine.block, theirs.block))

    def _trained_model(self, optimizer: cst.BaseExpression) -> Optional[str]:
        """The model whose parameters an optimizer built in the module updates
        (`optimizer_g = Adam(net_g.parameters(), ...)`: `net_g`), when it has one binding."""
        bindings = self.facts.values_of(dotted(optimizer))
        value = bindings[0].value if len(bindings) == 1 else None
        if type(value) is not cst.Call:
            return None
        first = positional(value, 0)
        if type(first) is cst.Call and type(first.func) is cst.Attribute and first.func.attr.value == "parameters":
            return normalized(first.func.value)
        return None

    def _assigned_between(self, name: Optional[str], first: Statement, last: Statement) -> bool:
        """Whether a statement between the two (in order) binds `name`."""
        if name is None:
            return True
        return any(first.order < statement.order < last.order and name in scopes.chains_bound(statement.small)
                   for statement in self.loop.statements)

    def value_copies(self, after: Statement, name: str) -> set[str]:
        """The names that hold `name`'s value after the statement `after`, in the same scope,
        until `name` is bound again: plain copies and detached reads of it (`train_loss =
        loss.item()`, `val = float(loss)`, `l = loss.detach().cpu()`), the numbers a
        log then shows. A copy that the iteration adds to (`logged += ...`) or binds to
        something else is one no longer."""
        return self.value_reads(after, name)[0]

    def value_reads(self, after: Statement, name: str) -> tuple[set[str], set[str]]:
        """`value_copies`, and the running totals of the value over the whole loop
        (`running_loss += loss.item()`, never reset in it), whose running mean
        (`running_mean`) is on the value's scale."""
        found: set[str] = set()
        sums: set[str] = set()  # running sums of the value (`running_loss += loss.item() * bs`)
        for statement in self.loop.statements:
            if statement.order <= after.order or statement.helper is not after.helper:
                continue
            for small in statement.node.body:
                bound = scopes.chains_bound(small)  # `loss, _, obs = model(...)` rebinds `loss` too
                if name in bound:
                    found.discard("")
                    return found, sums - {""}
                assign = small if type(small) is cst.Assign and len(small.targets) == 1 \
                    and type(small.targets[0].target) is not cst.Tuple else None
                if assign is not None and _read_of(assign.value) in found | {name}:
                    found.add(dotted(assign.targets[0].target) or "")
                elif type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign \
                        and self._summand(small.value) in found | {name} and self._running_total(statement, small.target):
                    sums.add(dotted(small.target) or "")
                elif assign is not None and self.running_mean(assign.value, sums):
                    found.add(dotted(assign.targets[0].target) or "")
                else:
                    found -= bound  # `logged += ...` (a sum), `x = other`: no longer a copy
        found.discard("")
        return found, sums - {""}

    def returned_to(self, after: Statement, names: set[str]) -> Optional[tuple[Statement, str]]:
        """Where a helper's result lands when every `return` of the helper's walk after `after`
        hands back one of `names` as it is, or detached (`return float(micro_loss.detach())`):
        the caller's statement that binds the call to one name (`loss =
        self._training_step(batch, k)`), and that name. None in the loop's own code, or
        when the helper returns anything else or its call is not bound to one name."""
        if after.helper is None or after.call_site is None:
            return None
        returned = [(s, s.small.value) for s in self.loop.statements if s.helper is after.helper
                    and s.call_site is after.call_site and type(s.small) is cst.Return]
        if not returned or any(s.order < after.order or value is None or _read_of(value) not in names
                               for s, value in returned):
            return None
        caller = after.callers[-2] if len(after.callers) > 1 else None
        for statement in self.loop.statements:
            small = statement.small
            if statement.helper is caller and statement.alone and type(small) is cst.Assign and len(small.targets) == 1 \
                    and small.value is after.call_site and type(small.targets[0].target) in (cst.Name, cst.Attribute):
                target = dotted(small.targets[0].target)
                return (statement, target) if target is not None else None
        return None

    def _summand(self, value: cst.BaseExpression) -> Optional[str]:
        """The name whose value a running sum's term reads as it is, or weighted by what is
        not K (`loss.item() * batch_size`)."""
        if type(value) is cst.BinaryOperation and type(value.operator) is cst.Multiply:
            for read, weight in ((value.left, value.right), (value.right, value.left)):
                if _read_of(read) is not None and not self.is_k(weight):
                    return _read_of(read)
            return None
        return _read_of(value)

    def _running_total(self, statement: Statement, target: cst.BaseExpression) -> bool:
        """`target` only grows in the loop, by ungated additions that run with every micro-batch
        (`running_loss += ...`, `dataset_size += batch_size`): a total over the whole loop,
        set before it, never one window's (a window's sum is reset at its boundary)."""
        total = dotted(target)
        if total is None or not self.runs_every_micro_batch(statement):
            return False
        for other in self.loop.statements:
            if other.helper is not statement.helper or total not in scopes.chains_bound(other.node):
                continue
            if not (other.alone and type(other.small) is cst.AugAssign and type(other.small.operator) is cst.AddAssign
                    and self.runs_every_micro_batch(other)):
                return False
        return True

    def running_mean(self, value: cst.BaseExpression, sums: set[str]) -> bool:
        """`epoch_loss = running_loss / dataset_size`: a running sum of the value over a count
        that grows with every micro-batch (samples or micro-batches seen), the mean of
        the values summed, on their scale. A count of optimizer steps (`tr_loss /
        global_step`) is not one: the mean per window of values divided by K is the loss's own."""
        if type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Divide or dotted(value.left) not in sums:
            return False
        count = value.right
        if self._iterations_so_far(count):
            return True
        counted = [s for s in self.loop.statements if dotted(count) is not None and dotted(count) in scopes.chains_bound(s.node)]
        return bool(counted) and all(self._running_total(s, count) for s in counted)

    def _iterations_so_far(self, count: cst.BaseExpression) -> bool:
        """`step + 1` with `step` the loop's own index from 0 (`enumerate(loader)`), or the
        index from 1 itself: how many micro-batches this pass of the loop has seen."""
        loop = self.loop
        if loop.counter is None:
            return False
        if type(count) is cst.Name:
            return count.value == loop.counter and loop.counter_base == 1
        return (type(count) is cst.BinaryOperation and type(count.operator) is cst.Add
                and type(count.left) is cst.Name and count.left.value == loop.counter and loop.counter_base == 0
                and type(count.right) is cst.Integer and count.right.value == "1")

    def same_object(self, one: Event, other: Event) -> bool:
        """The two events act on one object: they name it alike, and no inner loop around
        only one of them binds that name (`for opt in self.optimizers: opt.step();
        opt.zero_grad()` then `for opt in self.pose_optimizers: opt.step()`: each loop's
        `opt` is another optimizer; two loops over one collection name the same ones)."""
        if one.role.target is None or other.role.target is None:
            return False
        if normalized(one.role.target) != normalized(other.role.target):
            return False
        head = (dotted(one.role.target) or "").partition(".")[0]

        def ranges(statement: Statement, shared: set[int]) -> set[str]:
            # what the inner loops around the statement alone, that bind the name, iterate over
            return {code(loop.iter) for loop in statement.loops if type(loop) is cst.For and id(loop) not in shared
                    and head in {n.value for n in walk(loop.target) if type(n) is cst.Name}}

        shared = {id(loop) for loop in one.statement.loops} & {id(loop) for loop in other.statement.loops}
        mine, theirs = ranges(one.statement, shared), ranges(other.statement, shared)
        # two loops over the same collection (`for opt in optimizers:` twice) name the same objects
        return mine == theirs

    def helper_event_kinds(self, statement: Statement) -> set[RoleKind]:
        """The kinds of the events that the helpers a statement of the loop calls make there
        (`check_gradients(model)` that clips), logging left out: what the helpers log aside
        goes along with the rest."""
        calls = {id(call) for call in self.facts.calls_in(statement.node)}
        return {e.kind for s in self.loop.statements if s.helper is not None and id(s.call_site) in calls
                for e in s.events if e.kind != "log"}

    def managed_step(self, statement: Statement) -> Optional[Event]:
        """The last optimizer step in the same `accumulate()` block as `statement`."""
        steps = [e for s in self.accumulate_block(statement) for e in s.events if e.kind == "step"]
        return steps[-1] if steps else None

    @cached_property
    def controls_sync(self) -> bool:
        """The loop (or a helper it calls) decides somewhere when gradients all-reduce."""
        helpers = {id(s.helper): s.helper for s in self.loop.statements if s.helper is not None}
        model = self.wrapped_model

        def hands_model(call: cst.Call) -> bool:
            return model is not None and any(dotted(arg.value) == model for arg in call.args)

        # only a context around the forward or the backward can decide whether they sync
        # (`with FSDP.state_dict_type(model, ...):` in a checkpoint helper decides nothing)
        steering = [s for s in self.loop.statements
                    if any(e.kind == "backward" for e in s.events)
                    or (model is not None and s.helper is None and _names(s.node, model))]  # a helper's `model` is its own
        for item in {id(i): i for s in steering for i in s.withs}.values():
            # `with self.sync_context(boundary):`: a helper that returns the context
            for call in self.facts.calls_in(item):
                helper = self.facts.helper(call, self.loop.function)
                if helper is not None:
                    helpers.setdefault(id(helper), helper)
                elif hands_model(call):
                    # `with misc.ddp_sync(ddp, last):` from another module: it may be one; unknown
                    return True
            if self._bound_to_sync_control(item):
                return True
        # `for _ in accumulate_contexts(K, ddps):`: a generator that yields each micro-batch
        # inside `no_sync()` but the last one
        micro = self.loop.micro_loop
        if type(micro) is cst.For:
            for call in self.facts.calls_in(micro.iter):
                helper = self.facts.helper(call, self.loop.function)
                if helper is not None:
                    helpers.setdefault(id(helper), helper)
                elif hands_model(call):
                    # `for ctx in model_forward_contexts(accelerator, model, K):` from another
                    # package, each entered around a micro-batch: it may be one; unknown
                    return True
        return any(mentions_sync_control(node) for node in [self.loop.node, *helpers.values()])

    def may_hold_graph(self, at: Statement, name: str) -> bool:
        """Whether `name` may hold a tensor with its autograd graph at `at`: its latest binding
        before `at` is not a detached value (`.item()`, `float(...)`), nor, in `at`'s own
        scope, what a module function returns detached (`batch_loss = train_batch(...)` with
        `return batch_loss.item()`, or an element: `loss, logits = self.train_batch(batch)`
        with `return loss.item(), logits`), nor its element of a tuple written out (`loss, l1 =
        loss.item(), l1.item()`), nor a helper's parameter that its call fills with a
        detached value (`self.progress(loss.data)`). A plain name bound in `at`'s own scope is
        read there: the helper's local of the same name, walked in between, is another variable.
        An entry of a container (`losses[]`) holds none when the container holds none (`losses =
        detach(losses)`, a project helper returning `{k: v.detach() for k, v in data.items()}`)."""
        if name.endswith("[]") and not self.may_hold_graph(at, name[:-2]):
            return False
        latest: Optional[cst.BaseExpression] = None
        latest_own: Optional[cst.BaseExpression] = None
        earlier_own: list[cst.BaseExpression] = []  # the plain name's values in `at`'s scope, in order
        unpacked: Optional[tuple[cst.Call, int]] = None
        # the statement that last bound each plain name of `at`'s scope
        bound_at: dict[str, Statement] = {}
        for statement in self.loop.statements:
            if statement.order >= at.order:
                break
            own_scope = statement.helper is at.helper  # another function's name is another variable
            for small in statement.node.body:
                if type(small) is not cst.Assign:
                    continue
                for target in small.targets:
                    if own_scope and type(target.target) is cst.Name:
                        bound_at[target.target.value] = statement
                    if dotted(target.target) == name:
                        latest = small.value  # an attribute (`self.loss`) is one object in every scope
                        if own_scope:
                            latest_own, unpacked = small.value, None
                            earlier_own.append(small.value)
                    elif own_scope and type(target.target) in (cst.Tuple, cst.List) and type(small.value) is cst.Call:
                        elements = cast("cst.Tuple | cst.List", target.target).elements
                        for index, element in enumerate(elements):
                            if dotted(element.value) == name:
                                latest_own, unpacked = None, (small.value, index)
                                earlier_own.clear()
                    elif own_scope and type(target.target) in (cst.Tuple, cst.List) \
                            and type(small.value) in (cst.Tuple, cst.List):
                        # `loss, l1 = loss.item(), l1.item()`: each name takes its own element
                        names = cast("cst.Tuple | cst.List", target.target).elements
                        values = cast("cst.Tuple | cst.List", small.value).elements
                        starred = any(type(e) is cst.StarredElement for e in (*names, *values))
                        for element, value in zip(names, values) if len(names) == len(values) and not starred else ():
                            if dotted(element.value) == name:
                                latest_own, unpacked = value.value, None
                                earlier_own.append(value.value)
        if "." not in name:
            latest = latest_own  # a plain name is the variable of `at`'s own scope
            # `loss = torch.sum(accelerator.gather_for_metrics(loss))`: a value made of the name's
            # own earlier value alone (no other name the loop binds) holds a graph only if that did
            while latest is not None and len(earlier_own) > 1 and _made_of_itself(latest, name, bound_at) \
                    and not detached(latest) and not (type(latest) is cst.Call and self.facts.holds_no_graph(latest)):
                earlier_own.pop()
                latest = earlier_own[-1]
        if latest is not None and detached(latest):
            return False
        if latest is None and unpacked is None and "." not in name and at.helper is not None:
            passed = self._passed(at, name)  # a helper's parameter holds what its call passes
            if passed is not None and detached(passed):
                return False  # `self.progress(loss.data)`
        root = _root_name(latest) if latest is not None else None
        if latest_own is not None and name in bound_at and self.builds_no_graph(bound_at[name]):
            return False  # `loss = model(x)` under `torch.no_grad()`, then `losses.append(loss)` after the block
        if root is not None and root in bound_at and self.builds_no_graph(bound_at[root]):
            return False  # `outputs = model(**batch)` under `torch.no_grad()`, then `loss = outputs.loss`
        if unpacked is not None:
            return not self.facts.returns_hold_no_graph(*unpacked)
        entry = _keyed_entry(latest)
        if entry is not None and entry[0] in bound_at:
            # `loss = result["loss"]` after `result = self._train_step(batch)`, whose returned
            # dict holds `loss.item() * K` there
            made = next((small.value for small in bound_at[entry[0]].node.body if type(small) is cst.Assign
                         and any(dotted(t.target) == entry[0] for t in small.targets)), None)
            if type(made) is cst.Call and self.facts.returns_hold_no_graph(made, key=entry[1]):
                return False
        return not (type(latest) is cst.Call and self.facts.holds_no_graph(latest))

    def _bound_to_sync_control(self, item: cst.CSTNode) -> bool:
        """`with sync_ctx():` (or `with sync_ctx:`) on a name the loop's function binds to a
        sync control before the loop (`sync_ctx = model.no_sync if ddp else nullcontext`)."""
        expr = item.item if type(item) is cst.WithItem else item
        name = dotted(expr.func) if type(expr) is cst.Call and not expr.args else dotted(expr)
        if name is None or "." in name or name.endswith("()"):
            return False
        return any(mentions_sync_control(b.value) for b in self.facts.values_in(name, self.loop.function))

    def _outputsdetached(self, statement: Statement) -> bool:
        """A forward whose every result is detached before anything reads it (`reps, atts, _ =
        teacher(x)`, then `reps = [r.detach() for r in reps]`): no backward reaches the model
        it ran, as under `torch.no_grad()`."""
        small = statement.small
        if type(small) is not cst.Assign or type(small.value) is not cst.Call or len(small.targets) != 1:
            return False
        target = small.targets[0].target
        elements = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
        if not all(type(e) is cst.Name for e in elements):
            return False
        names = {cast(cst.Name, e).value for e in elements} - {"_"}
        if not names:
            return False
        later = [s for s in self.loop.statements if s.order > statement.order and s.helper is statement.helper]
        for name in names:
            for other in later:
                if not any(type(n) is cst.Name and n.value == name for n in walk(other.node)):
                    continue
                rebind = other.small
                if not (type(rebind) is cst.Assign and len(rebind.targets) == 1
                        and dotted(rebind.targets[0].target) == name and _detaches_each(rebind.value, name)):
                    return False
                break
            else:
                return False
        return True

    def earlier_in_scope(self, at: Statement) -> Iterator[Statement]:
        """The iteration's statements before `at` that run in its scope (the loop's own code,
        or the same helper), in order."""
        for statement in self.loop.statements:
            if statement.order >= at.order:
                return
            if statement.helper is at.helper:
                yield statement

    def unpacked_from_call(self, at: Statement, name: str, unseen: bool = False) -> bool:
        """The latest binding of the plain name `name` before `at`, in `at`'s scope, unpacks
        a call's returned tuple (`loss, loss_list, acc = loss_func(reward)`); with `unseen`, a
        call of no function the project's helpers resolve to (`facts.helper`: a model's
        forward, a third party's function), whose elements' graphs the model cannot see."""
        unpacked = False
        for statement in self.earlier_in_scope(at):
            for small in statement.node.body:
                if type(small) is not cst.Assign:
                    continue
                for target in small.targets:
                    if type(target.target) is cst.Name and target.target.value == name:
                        unpacked = False
                    elif type(target.target) in (cst.Tuple, cst.List) and any(
                            dotted(e.value) == name for e in cast("cst.Tuple | cst.List", target.target).elements):
                        unpacked = type(small.value) is cst.Call and not (
                            unseen and self.facts.helper(small.value, statement.helper or self.loop.function) is not None)
        return unpacked

    def scaler_steps_every_micro_batch(self, event: Event) -> bool:
        """The GradScaler an event acts on (`scaler_d.update()`) also steps its optimizer on every
        micro-batch (`scaler_d.step(optimizer_d)` ungated): it serves a whole update of its own
        each micro-batch (a GAN's discriminator beside an accumulating generator), not the window."""
        receiver = event.role.receiver
        if receiver is None:
            return False
        return any(step.role.flavor == "scaler" and step.role.receiver == receiver
                   and (self.runs_every_micro_batch(step.statement) or self.runs_with_backward(step.statement))
                   for step in self.loop.steps)

    def clip_reads_loss_scale(self, event: Event) -> bool:
        """The clip is given the GradScaler's current scale (`clip_grad_norm_(params, max_norm *
        scaler.get_scale())`, a project helper called with `scale=scaler.get_scale()`): its
        threshold is measured on the scaled gradients, as the scaled gradients need."""
        call = event.role.call
        if type(call) is not cst.Call:
            return False
        statement = event.statement
        passed: list[cst.BaseExpression] = [arg.value for arg in call.args]
        helper, site = statement.helper, statement.call_site
        if helper is not None and site is not None:
            # `max_norm * scale` in a helper: what its call passes for the parameter
            names = {n.value for value in passed for n in walk(value) if type(n) is cst.Name}
            passed += [a for name in names & set(parameters(helper))
                       if (a := argument_for(helper, site, name)) is not None]
        return any(type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "get_scale"
                   for value in passed for node in walk(value))

    def under_non_finite_test(self, statement: Statement) -> bool:
        """The statement sits in an arm of a test of non-finite values (`if math.isnan(grad_norm):
        optimizer.zero_grad()` before the step, `if not torch.isfinite(loss): ...`) that falls
        through to what follows: a deliberate discard of bad gradients, not the window's own work.
        An arm that jumps (`optimizer.zero_grad(); continue`) means to skip what follows; if the
        jump does not reach the step, the step applies zeroed gradients: not a discard."""
        arm = self._non_finite_arm(statement)
        return arm is not None and not _ends_in_jump(arm)

    def reports_non_finite(self, statement: Statement) -> bool:
        """The statement sits in an arm of a test of non-finite values, whatever follows it
        (`if not math.isfinite(loss): logger.info(f"Loss is {loss}, skipping"); continue`): what
        it reports is NaN or infinity, at any scale."""
        return self._non_finite_arm(statement) is not None

    @staticmethod
    def serves_other_worlds(statement: Statement, user: Statement) -> bool:
        """`statement` runs in more of the run's worlds than `user` (`loop._worlds`): a division
        written before a run-constant test (`if args.deepspeed: engine.backward(loss)`
        / `else: loss.backward()`) serves the other arm's backward too."""
        return set(statement.worlds) < set(user.worlds)

    def periodic_update(self, step: Event) -> bool:
        """A gated step of an optimizer zeroed on every micro-batch before the backward, beside
        another optimizer that steps on every micro-batch (PPO's actor and critic every
        minibatch, a temperature's optimizer every N): it applies the current micro-batch's
        gradient alone, an update of its own, not a window's close."""
        receiver = step.role.receiver
        if step.gate is None or receiver is None or not any(
                e.gate is None and not e.statement.conditional and e.role.receiver != receiver
                for e in self.optimizer_steps):
            return False
        first_backward = min((b.order for b in self.loop.backwards), default=None)
        return first_backward is not None and any(
            z.role.receiver == receiver and z.order < first_backward and self.runs_every_micro_batch(z.statement)
            for z in self.loop.of_kind("zero"))

    def discards_window(self, event: Event) -> bool:
        """The event runs in an arm of a test of non-finite values that then leaves the
        iteration (`if not torch.isfinite(loss): optimizer.zero_grad(); continue`): a
        recovery that drops what the window holds on purpose, not the window's own work."""
        statement = event.statement
        return self._non_finite_arm(statement) is not None and any(left is None for _, left in statement.jumps)

    def reports_out_of_range(self, statement: Statement, names: set[str]) -> bool:
        """The statement sits in the body of a test that compares one of `names` with a bound
        (`if loss > 10: print("strange loss", loss)`): what it reports is an anomaly of that
        value, not the run's training loss."""
        return any(arm is test.body and any(
            type(node) is cst.Comparison and all(type(c.operator) in _ORDERINGS for c in node.comparisons)
            and scopes.chains_read(node) & names for node in walk(test.test))
            for test, arm in self._enclosing_tests(statement))

    def _non_finite_arm(self, statement: Statement) -> Optional[cst.CSTNode]:
        """The arm (the `if`'s body or `else`) of the nearest enclosing test of non-finite values."""
        return next((arm for test, arm in self._enclosing_tests(statement) if _tests_non_finite(test.test)), None)

    def _enclosing_tests(self, statement: Statement) -> Iterator[tuple[cst.If, cst.CSTNode]]:
        """The `if` tests around the statement inside the loop, innermost first, each with the
        node under it that holds the statement (its body, its `else`, or the test itself)."""
        child: cst.CSTNode = statement.node
        parent = self.facts.parents.get(id(child))
        while parent is not None and parent is not self.loop.node:
            if type(parent) is cst.If:
                yield parent, child
            child, parent = parent, self.facts.parents.get(id(parent))

    def builds_no_graph(self, statement: Statement) -> bool:
        """The statement runs in a no-grad region: under `with torch.no_grad()`,
        `torch.inference_mode()` or `torch.set_grad_enabled(False)`, or in a function
        (the loop's, or the helper it was walked from) decorated with one."""
        if any(_disables_grad(entered(item)) for item in statement.withs):
            return True
        functions = [f for f in (statement.helper, self.loop.function) if f is not None]
        return any(_disables_grad(decorator.decorator) for f in functions for decorator in f.decorators)

    def built_each_iteration(self, target: Optional[cst.BaseExpression]) -> bool:
        """The object is (re)built by a statement of the iteration itself
        (`optimizer = optim.SGD(...)` inside the loop body)."""
        name = dotted(target) if target is not None else None
        if name is None:
            return False
        statements = {id(small) for s in self.loop.statements for small in s.node.body}
        return any(id(binding.statement) in statements for binding in self.facts.bindings.get(name, ()))

    def sized(self, iterable: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> bool:
        """Whether the loop's iterable has a known length (GA107's sized iterable): a list or
        tuple, a name whose `len()` the module takes, or a `DataLoader(...)` over a dataset
        that is not iterable-style, built in the module or returned by a module function
        (`train_loader = get_loader(...)` with `return DataLoader(...)`); also a copy of such a
        name (`self.train_loader = train_loader`), a progress bar over one (`pbar = tqdm(loader)`), or a
        choice between two (`loader = self.train_loader if is_train else self.val_loader`)."""
        if type(iterable) in (cst.List, cst.Tuple, cst.ListComp):
            return True
        if type(iterable) is cst.IfExp:  # `self.train_loader if is_train else self.val_loader`: both arms sized
            return self.sized(iterable.body, seen) and self.sized(iterable.orelse, seen)
        if type(iterable) is cst.Call and len(seen) <= 4:  # `tqdm(DataLoader(dataset, ...))` written in place
            return self._sized_call(iterable, seen) is True
        name = dotted(iterable)
        if name is None or name in seen or len(seen) > 4:
            return False
        if self._made_for_windows(name):
            return False
        if name in self.facts.len_arguments or self._length_of_progress_bar_taken(name):
            # a `len()` taken says it is sized, unless the name is a loader over an iterable-style
            # dataset (an RLDS stream, whose `len()` is an estimate and whose iteration never ends)
            return not any(type(b.value) is cst.Call and b.index is None and _is_dataloader(b.value, self.facts)
                           and self._iterable_dataset(b.value) for b in self.facts.values_of(name))
        passed = self._passed_to_parameter(name) if _IN_CALLERS not in seen else None
        seen = seen | {name}
        if passed is not None:
            # the callers' names are their own variables, even where one is spelled as the parameter
            callers = (seen - {name}) | {_IN_CALLERS}
            return bool(passed) and all(self.sized(value, callers) for value in passed)
        bindings = self.facts.values_of(name)
        if any(type(b.value) is cst.Call and last_part(call_name(b.value) or "") in _ITERATOR_MAKERS for b in bindings):
            return False  # `tl = islice(train_loader, n)` in one run: an iterator, whose length nothing takes
        for binding in bindings:
            value = binding.value
            if type(value) in (cst.List, cst.Tuple, cst.ListComp):
                return True
            if type(value) in (cst.Name, cst.Attribute, cst.IfExp) and binding.index is None:
                if self.sized(value, seen):
                    return True
                continue
            if type(value) is not cst.Call or binding.index is not None:
                continue
            sized = self._sized_call(value, seen)
            if sized is True or (sized is False and last_part(call_name(value) or "") != "tqdm"):
                return sized
        return False

    def _length_of_progress_bar_taken(self, name: str) -> bool:
        """The module takes the `len()` of a progress bar over `name` (`with tqdm(dataloader) as
        tepoch:`, then `len(tepoch)`): a bar's length is its iterable's."""
        for bar in self.facts.len_arguments:
            for binding in self.facts.bindings.get(bar, ()):
                value = binding.value
                if binding.index is None and type(value) is cst.Call and last_part(call_name(value) or "") == "tqdm" \
                        and dotted(unwrap_iterable(value)) == name:
                    return True
        return False

    def caller_name(self, name: Optional[str]) -> Optional[str]:
        """For a parameter of the loop's function that the function never rebinds, the one
        name every call of it in the module passes (`train_one_epoch(loader, model, optimizer,
        scheduler)` for its `lr_scheduler`): the callers' object, which the module built under
        that name. Otherwise `name` itself."""
        passed = self._passed_to_parameter(name) if name is not None else None
        names = {dotted(value) for value in passed or ()}
        if len(names) == 1 and None not in names:
            return names.pop()
        return name

    def passed_for_iterable(self) -> Optional[list[cst.BaseExpression]]:
        """What the module's calls of the loop's function pass for the parameter the loop walks
        (`self.train(train_loader, ...)` for `for batch in loader:`), each a name or attribute
        (`_passed_to_parameter`); None when the loop walks no such parameter."""
        iterable = self.loop.iterable  # already what a progress bar wraps (`bar = tqdm(loader)`)
        name = dotted(iterable) if iterable is not None else None
        return self._passed_to_parameter(name) if name is not None else None

    def _passed_to_parameter(self, name: str) -> Optional[list[cst.BaseExpression]]:
        """What the module's calls of the loop's function pass for its parameter `name`, which
        the function never rebinds (`train_one_epoch(model, train_loader, ...)` for `loader`),
        each a name or attribute (`ModuleFacts.passed_arguments`); an empty list when a call passes
        anything else or nothing, and None when `name` is no such parameter or the function's
        callers are unknown."""
        function = self.loop.function
        if function is None or "." in name or name not in parameters(function) \
                or name in scopes.rebound_names(function):
            return None
        passed = self.facts.passed_arguments(function, name)
        if not passed:
            return None  # no caller in the module, callers unknown, or one unpacks its arguments
        if any(type(argument) not in (cst.Name, cst.Attribute) for argument in passed):
            return []
        return [cast(cst.BaseExpression, argument) for argument in passed]

    def _sized_call(self, value: cst.Call, seen: frozenset[str]) -> Optional[bool]:
        """`sized` for a call the loop iterates: a progress bar over a sized iterable, a
        `DataLoader(...)` over a dataset that is not iterable-style (False over an
        iterable-style one), or a module function that may return only such a loader (not
        one that wraps it: `PrefetchLoader(dataloader)`). None when the call is none of these."""
        if last_part(call_name(value) or "") == "tqdm":
            wrapped = unwrap_iterable(value)
            return wrapped is not None and self.sized(wrapped, seen)  # a progress bar yields what it wraps
        returned = self.facts.returned(value)
        loaders = returned if returned and all(_is_dataloader(r, self.facts) for r in returned) else [value]
        for loader in loaders:
            if type(loader) is cst.Call and _is_dataloader(loader, self.facts):
                return not self._iterable_dataset(loader)
        return None

    def _made_for_windows(self, name: str) -> bool:
        """The loader is made by project code that multiplies by the loop's accumulation
        setting (`TrainLoader(args).data`, whose dataset keeps a multiple of `batch_size *
        args.accumulate_grad_batches` samples): its length may be arranged in whole windows,
        so whether a tail is left is unknown. The maker is a class or function of this
        module whose source multiplies by K's setting, or of another module whose text does
        (one that divides by it, `batch_size // gradient_accumulation_steps`, sizes each
        micro-batch, not the windows)."""
        word = last_part(dotted(self.k) or "") if self.k is not None else ""
        if len(word) < 4 or not self.is_accumulation_name(cast(cst.BaseExpression, self.k)):
            return False
        product = re.compile(rf"\*\s*(?:\w+\.)*{re.escape(word)}\b|(?<![\w.]){re.escape(word)}\s*\*(?!\*)|\.{re.escape(word)}\s*\*(?!\*)")
        for binding in self.facts.values_of(name):
            value = binding.value
            while type(value) is cst.Attribute:
                value = value.value
            if type(value) is not cst.Call or binding.index is not None:
                continue
            maker = dotted(value.func)
            if maker is None or last_part(maker) in ("DataLoader", "tqdm"):
                continue
            local = self.facts.classes.get(maker) or self.facts.functions.get(maker)
            if local is not None:
                if product.search(code(local)):
                    return True
            elif self.facts.project is not None and self.facts.project.maker_mentions(maker, product):
                return True
        return False

    def _iterable_dataset(self, loader: cst.Call) -> bool:
        """The loader's dataset may be iterable-style (no length), is not given, or is of a
        class chosen at run time."""
        dataset = keyword(loader, "dataset")
        dataset_expr = dataset.value if dataset is not None else positional(loader, 0)
        if dataset_expr is None:
            return True
        texts = [code(dataset_expr)]
        built: list[cst.BaseExpression] = [dataset_expr]
        for binding in self.facts.values_of(dotted(dataset_expr)):
            texts.append(code(binding.value))
            built.append(binding.value)
        for value in built:
            if type(value) is cst.Call:
                if type(value.func) in (cst.Call, cst.Subscript):
                    return True  # a class a registry picks at run time (`Registry.get(task)(...)`): unknown
                texts.append(" ".join(self.facts.bases_of(dotted(value.func))))
        return any(_ITERABLE_DATASET.search(t) for t in texts)

    def wraps_here(self, name: str) -> bool:
        """A `self.` attribute wrapped for data parallelism is this loop's when a binding that
        wraps it sits in the loop's own class or a class it derives from in this module (an
        unrelated trainer class of the module may use the same attribute name). A plain
        name is this loop's unless the loop's function builds its own object under that
        name (`model = nn.Linear(...)` in a probe beside a DDP pretraining function), or
        takes it as a parameter and wraps it nowhere itself: what its callers pass (`main()`
        wrapping `model` before `train_one_epoch(model, ...)`) is of unknown type there."""
        if not name.startswith("self."):
            if "." in name:
                return True
            function = self.loop.function
            if function is not None and name in scopes.all_parameters(function):
                # a parameter holds what the callers pass, of unknown type: wrapped only by the function's own wrap
                return any(self.objects.frameworks.binding_wrap(b) is not None
                           and self.facts.enclosing_function(b.statement) is function for b in self.facts.bindings.get(name, ()))
            return not self._builds_own(name)
        function = self.loop.function
        owner = self.facts.class_of.get(function) if function is not None else None
        if owner is None:
            return True
        # base classes defined in this module, a few levels up, each with its distance
        family = {owner.name.value: 0}
        for level in range(1, 5):
            for cls in [c for c, d in family.items() if d == level - 1 and c in self.facts.classes]:
                for base in self.facts.class_bases(self.facts.classes[cls]):
                    family.setdefault(base.split(".")[-1], level)
        for binding in self.facts.bindings.get(name, ()):
            if self.objects.frameworks.binding_wrap(binding) is None:
                continue  # `self.model = net`: not the wrap
            method: Optional[cst.FunctionDef] = None
            # a wrap inherited from another module's base class stands for the subclass itself
            statement = binding.statement
            parent = statement if type(statement) is cst.ClassDef else self.facts.parents.get(id(statement))
            while parent is not None and type(parent) is not cst.ClassDef:
                if method is None and type(parent) is cst.FunctionDef:
                    method = parent
                parent = self.facts.parents.get(id(parent))
            if parent is None:
                return True
            if parent.name.value in family and not self._overridden(method, family, family[parent.name.value]):
                return True
        return False

    def _builds_own(self, name: str) -> bool:
        """The loop's function binds `name` itself, none of its bindings there wraps it, and
        it is not one of the function's parameters (whose value may be a caller's wrap)."""
        function = self.loop.function
        if function is None or name in scopes.all_parameters(function):
            return False
        local = [b for b in self.facts.bindings.get(name, ()) if self.facts.enclosing_function(b.statement) is function]
        return bool(local) and all(self.objects.frameworks.binding_wrap(b) is None for b in local)

    def _overridden(self, method: Optional[cst.FunctionDef], family: dict[str, int], level: int) -> bool:
        """A base class's method that a class nearer the loop's redefines never runs for the
        loop's object (`prepare()` overridden by the subclass that wraps other parts); one
        that calls the base's (`super().__init__(...)`) still runs it."""
        if method is None:
            return False
        name = method.name.value
        for cls, distance in family.items():
            if distance < level and cls in self.facts.classes:
                for statement in self.facts.classes[cls].body.body:
                    if type(statement) is cst.FunctionDef and statement.name.value == name:
                        if not any(type(n) is cst.Attribute and n.attr.value == name for n in walk(statement.body)):
                            return True
        return False

    def mentions(self, name: str, graph_only: bool = False) -> bool:
        """The iteration (its own code or a helper it walks) reads `name`: the wrapped model
        a module builds is this loop's only when the loop uses it. With `graph_only`, only
        statements that build a graph count (not those in a no-grad region)."""
        # the module's own code: a helper of another module names its own locals `model` too
        local = [s for s in self.loop.statements if s.helper is None or id(s.helper) in self.facts.parents]
        if graph_only:
            local = [s for s in local if not self.builds_no_graph(s) and not self._outputsdetached(s)]
        nodes: list[cst.CSTNode] = [statement.node for statement in local]
        nodes += list({id(item): item for statement in local for item in statement.withs}.values())
        for top in nodes:
            attributes: set[int] = set()
            for node in walk(top):
                kind = type(node)
                if kind is cst.Attribute:
                    attributes.add(id(cast(cst.Attribute, node).attr))  # `x.model`'s `model` is not the name `model`
                # `models["gen"]` reads `models[]`, a model kept in a dict or list
                if kind in _NAMING and id(node) not in attributes and dotted(node) == name:
                    return True
        return False

    @cached_property
    def wrapped_model(self) -> Optional[str]:
        """The wrapped model this loop trains: of the module's wrapped models (but those it
        reads only in no-grad regions), the first whose forward the iteration runs outside a no-grad region (`self.student(x)`
        beside a teacher under `torch.no_grad()`, or `self.student.module(x)`), else the first it mentions, else the
        module's first."""
        # a wrapped model the iteration reads only in no-grad regions (a DDP-wrapped teacher
        # under `torch.no_grad()`) builds no graph there, so no backward of it all-reduces
        models = [m for m in self.objects.wrapped_models if self.mentions(m, graph_only=True) or not self.mentions(m)]
        if len(models) < 2:
            return models[0] if models else None
        called = {dotted(node.func) for statement in self.loop.statements if not self.builds_no_graph(statement)
                  for node in walk(statement.node) if type(node) is cst.Call}
        # `self.model_rec.module(...)`: the wrapped model's own module runs its forward (bypassing the wrap)
        called |= {name[: -len(".module")] for name in called if name is not None and name.endswith(".module")}
        trained = [name for name in models if name in called]
        mentioned = [name for name in models if self.mentions(name)]
        return (trained or mentioned or models)[0]

    def bypasses_wrap(self, name: str) -> bool:
        """The iteration runs its forward on the unwrapped module (`raw = model.module`,
        `raw(x)`) and hands the wrapped model itself to a call only on the window's last
        micro-batch, in an arm exclusive with the unwrapped forward, or after every backward
        of the iteration: DDP's forward, which prepares the all-reduce, runs only where the
        window needs it."""
        wrapped: list[Statement] = []
        unwrapped: list[Statement] = []
        last_backward = max((b.statement.order for b in self.loop.backwards), default=-1)
        # a helper the iteration walks is read statement by statement, under its own name for the model
        walked = {id(s.call_site) for s in self.loop.statements if s.call_site is not None}
        for statement in self.loop.statements:
            if statement.order > last_backward:
                continue  # after every backward (`save_checkpoint(model, ...)`): no backward of the iteration reads it
            local = self._name_in_helper(statement, name)
            if local is None:
                continue  # a helper that is not handed the model
            runs = {self._runs_forward(node, local) for node in walk(statement.node)
                    if type(node) is cst.Call and id(node) not in walked}
            if True in runs:
                wrapped.append(statement)
            elif False in runs:
                unwrapped.append(statement)
        # `if (i + 1) % K == 0: out = model(x)` / `else: out = model.module(x)`: only the
        # window's last micro-batch runs DDP's forward (and so all-reduces), as under `no_sync()`
        return bool(unwrapped) and all(
            w.gate is not None and self.correct_boundary(w.gate, w) and any(w.exclusive_with(u) for u in unwrapped)
            for w in wrapped)

    def further_micro_loops(self, first: Event, name: str) -> list[Event]:
        """The first backward, of `first`'s flavour, of each further micro-step loop of the
        iteration (a `for` loop that is neither `first`'s innermost loop nor the window's own)
        that calls `name` itself: a per-step function that runs a GAN's generator loop, then
        its discriminator loop, each `for _ in range(K):` forwarding the same wrapped model.
        A loop that forwards another model (a discriminator wrapped apart) is not one."""
        if not self.has_micro_loop:
            return []
        seen = {first.statement.loops[-1]} if first.statement.loops else set()
        found = []
        for event in self.loop.backwards[1:]:
            loops = event.statement.loops
            if not loops or loops[-1] in seen or event.role.flavor != first.role.flavor:
                continue
            if type(loops[-1]) is not cst.For or self.loop.node in loops[-1:]:
                continue
            if not self.forwards_in(loops[-1], name):
                continue
            seen.add(loops[-1])
            found.append(event)
        return found

    def backward_of(self, name: str) -> Optional[Event]:
        """The iteration's first backward that backpropagates a graph of the model `name`: the
        first after whose previous backward a forward of `name` runs (a teacher's loss
        backpropagated before the wrapped student's forward is not the student's), else,
        where no backward has that forward in sight (the forward in a helper), the first."""
        backwards = self.loop.backwards
        return next((b for b in backwards if self.forwards_before(b, name)), backwards[0] if backwards else None)

    def forwards_before(self, backward: Event, name: str) -> bool:
        """A forward of `name` (`model(batch, ...)`) runs between the iteration's previous
        backward and `backward`, in the same scope: `backward` backpropagates a graph of its
        own (a second loss's forward, then its backward), which all-reduces again."""
        statements = self.loop.statements
        earlier = [b.statement.order for b in self.loop.backwards if b.statement.order < backward.statement.order]
        start = max(earlier, default=-1)
        return any(start < s.order <= backward.statement.order and s.helper is backward.statement.helper
                   and any(dotted(call.func) == name for call in self.facts.calls_in(s.node))
                   for s in statements)

    def forwards_in(self, loop: cst.CSTNode, name: str) -> bool:
        """A statement of the iteration inside `loop` calls `name` (`model(x)`) itself, not
        only hands it to a helper."""
        return any(dotted(node.func) == name for statement in self.loop.statements if loop in statement.loops
                   for node in walk(statement.node) if type(node) is cst.Call)

    def _name_in_helper(self, statement: Statement, name: str) -> Optional[str]:
        """What the model `name` of the loop's code is called in the helper `statement` runs
        in: the parameter its call passes it as (`train_step(model, batch)` into `def
        train_step(net, batch)`), or `name` itself where the helper does not shadow it
        (`self.model` in a method, a module-level model). None when the helper's parameter
        of that name holds something else."""
        helper = statement.helper
        if helper is None or statement.call_site is None or name.partition(".")[0] == "self":
            return name
        for parameter in parameters(helper):
            passed = self._passed(statement, parameter)
            if passed is not None and dotted(passed) == name:
                return parameter
        return None if name.partition(".")[0] in scopes.all_parameters(helper) else name

    def _only_inspects(self, call: cst.Call, name: str, depth: int = 0) -> bool:
        """`call` hands the model `name` to a project function that never runs its forward:
        the function's code (and that of the project functions it hands the model on to, two
        calls deep) never calls it (`p(x)`, `p.forward(x)`) and gives it only to builtins
        that look at it, to an unwrap (`unwrap(p)`), or to its own methods (`p.parameters()`:
        a wrap has no other method that runs the forward). False when anything is unknown."""
        function = self.facts.helper(call, self.facts.enclosing_function(call))
        if function is None or depth > 1:
            return False
        passed_as = [p for p in parameters(function) if dotted(argument_for(function, call, p)) == name]
        if len(passed_as) != 1 or passed_as[0] in scopes.rebound_names(function):
            return False
        parameter = passed_as[0]
        for inner in walk(function.body):
            if type(inner) is not cst.Call:
                continue
            callee = dotted(inner.func)
            if callee in (parameter, f"{parameter}.forward", f"{parameter}.__call__"):
                return False
            if callee in _INSPECTING_BUILTINS or not any(dotted(arg.value) == parameter for arg in inner.args):
                continue
            unwrapped = self._unwrapped_by(inner)
            if unwrapped is not None and dotted(unwrapped) == parameter:
                continue
            if not self._only_inspects(inner, parameter, depth + 1):
                return False
        return True

    def _unwrapped_by(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """What a call of a project function hands back unwrapped: the argument it passes for
        the parameter `p` when every `return` of the function reads `p.module` (`def
        unwrap(model): return model.module if hasattr(model, "module") else model`, then
        `net = unwrap(model)`); None for any other call."""
        function = self.facts.helper(call, self.facts.enclosing_function(call))
        project = self.facts.project
        if function is None and project is not None:  # another module's, beyond the helpers the model parses
            unwraps = project.unwrapped_parameter(dotted(call.func), project.home_of_call(call))
            if unwraps is None:
                return None
            by_keyword = keyword(call, unwraps[1])
            return by_keyword.value if by_keyword is not None else positional(call, unwraps[0])
        parameter = self.facts.once(_unwrapped_parameter, function) if function is not None else None
        return argument_for(function, call, parameter) if function is not None and parameter is not None else None

    def _runs_forward(self, call: cst.Call, name: str) -> Optional[bool]:
        """True: the call may run the wrapped model's forward (`model(x)`, `step(model, b)`);
        False: it runs the unwrapped module's (`model.module(x)`, `raw(x)`, a method of it:
        `model.module.train_step(batch)`); None: neither."""
        callee = dotted(call.func)
        if callee == name or callee == f"{name}.forward":
            return True
        if callee in _INSPECTING_BUILTINS:
            return None  # `hasattr(model, "module")` looks at the object, runs nothing of it
        unwrapped = self._unwrapped_by(call) if call.args else None
        if unwrapped is not None and dotted(unwrapped) == name:
            return None  # `unwrap(model)` hands back the module, runs nothing of it
        if any(dotted(arg.value) == name for arg in call.args):
            # `loss = step(model, batch)`: it may run the wrapped forward, unless it is a project
            # function known to only look at the model (`compute_penalty(model)` reading its parameters)
            return None if self._only_inspects(call, name) else True
        if callee is not None and (callee == f"{name}.module" or callee.startswith(f"{name}.module.")
                                   or self._unwraps(callee, name)):
            return False  # `raw(x)`, `model.module.train_step(batch)`
        root, _, method = (callee or "").partition(".")
        if root != name and "." not in method and method not in _MODULE_UPKEEP and self._unwraps(root, name):
            return False  # a method of the unwrapped module: `policy.compute_loss(batch)`
        return None

    def _unwraps(self, alias: str, name: str) -> bool:
        """Every binding of `alias` reads `name.module` (also in an arm of `a if c else b`),
        or `alias` is the module that the wrap bound to `name` wraps: the wrap's argument
        (`ddp_model = DDP(model)`), or, where the wrap rebinds the name to itself, what the
        same function bound to the name before (`net = self.net`, `net = DDP(net)`: a
        method of the instance that calls `self.net(x)` runs the unwrapped module)."""
        bindings_of_name = self.facts.bindings.get(name, ())
        for binding in bindings_of_name:
            value = binding.value
            if type(value) is cst.Call and binding.index is None and self.objects.frameworks.wrap_of(value) is not None:
                wrapped = keyword(value, "module")
                wrapped_value = wrapped.value if wrapped is not None else positional(value, 0)
                if wrapped_value is not None and dotted(wrapped_value) == alias:
                    return True
                if wrapped_value is not None and dotted(wrapped_value) == name and alias != name \
                        and self._held_before_wrap(name, alias, binding) \
                        and self.objects.frameworks.parallel_kind(alias) is None:
                    return True
        bindings = self.facts.bindings.get(alias, ())
        inner = f"{name}.module"
        return bool(bindings) and all(
            b.index is None and (any(dotted(n) == inner for n in walk(b.value) if type(n) is cst.Attribute)
                                 or type(b.value) is cst.Call and dotted(self._unwrapped_by(b.value)) == name)
            for b in bindings)

    def _held_before_wrap(self, name: str, alias: str, wrap: Binding) -> bool:
        """`name = alias` (the object itself, no call) in the function of the wrap's binding,
        before it: the wrap `name = DDP(name)` wraps what `alias` holds."""
        home = self.facts.enclosing_function(wrap.statement)
        bindings = self.facts.bindings.get(name, [])  # in the order of the module's text
        earlier = bindings[:next((i for i, b in enumerate(bindings) if b is wrap), 0)]
        return any(b.index is None and type(b.value) in (cst.Name, cst.Attribute) and dotted(b.value) == alias
                   and self.facts.enclosing_function(b.statement) is home for b in earlier)

    @cached_property
    def sync_controls(self) -> list[SyncControl]:
        """The loop's sync controls, each with the statements it governs."""
        return self.objects.frameworks.sync_controls(self.loop.statements)

    def forward_in_own_sync_context(self, forward: Statement, control: SyncControl) -> bool:
        """The forward runs inside another sync context of `control`'s model (`with
        model.no_sync(): outputs = model(x)`, then `with model.no_sync(): loss.backward()`):
        DDP saw a no-sync forward, so `control` need not hold the forward too."""
        return any(forward is held for other in self.sync_controls
                   if other is not control and other.kind == "context" and code(other.model) == code(control.model)
                   for held in other.statements)

    @cached_property
    def deepspeed(self) -> bool:
        return any(e.role.flavor in ("deepspeed", "engine") for e in self.loop.events)

    @cached_property
    def deepspeed_accelerator(self) -> bool:
        """The window's backward is `accelerator.backward` on an Accelerator built with a
        DeepSpeed plugin whose K is above 1: the DeepSpeed engine owns the windows."""
        for backward in self.loop.backwards:
            if backward.role.flavor != "accelerate":
                continue
            info = self.objects.accelerator(cast(cst.Attribute, cast(cst.Call, backward.role.call).func).value)
            if info is not None and info.sharded == "deepspeed" and info.scales is True:
                return True
        return False

    def divided_on_the_way(self, flow: LossFlow) -> bool:
        """The loop binds the flow's name to a division by something other than K (`loss = ... /
        window_tokens` before an arm that gathers it again): a normalisation the flow's own
        scalings may no longer show."""
        if flow.name is None:
            return False
        return any(type(node) is cst.Assign and any(dotted(t.target) == flow.name for t in node.targets)
                   and any(type(part) is cst.BinaryOperation and type(part.operator) is cst.Divide
                           and not self.is_k(part.right) for part in walk(node.value))
                   for node in walk(self.loop.node))

    def framework_scales(self, flow: LossFlow) -> Optional[bool]:
        """Whether the backward that `flow` reaches divides by K itself (None: unknown)."""
        role = flow.backward.role
        if role.flavor == "deepspeed":
            # the engine divides by its own `gradient_accumulation_steps`: by nothing when it is 1
            return not self.engine_k_is_one
        if role.flavor == "lightning-auto":
            steps = self.facts.trainer_accumulation
            return steps is not None and int_value(steps) not in (0, 1)
        if role.flavor == "accelerate":
            info = self.objects.accelerator(cast(cst.Attribute, cast(cst.Call, role.call).func).value)
            return None if info is None else info.scales
        return False

    def token_mean_per_micro_batch(self, flow: LossFlow) -> bool:
        """Whether `flow` is a padded token-level mean taken per micro-batch: divided by K it
        still weighs micro-batches with fewer real tokens more (the window's token count is
        the right divisor, which K alone cannot give)."""
        facts = self.facts
        return (flow.reduction == TOKEN and facts.padding_evidence
                and not facts.window_token_normalization and not self.rescales_gradients)

    def framework_name(self, flow: LossFlow) -> str:
        """Who already divides the loss by K, for messages."""
        if flow.backward.role.flavor == "lightning-auto":
            return "Lightning's `accumulate_grad_batches`"
        if flow.backward.role.flavor == "deepspeed":
            return "DeepSpeed's `engine.backward`"
        return "`accelerator.backward` (with `gradient_accumulation_steps`)"

    @cached_property
    def epoch_loop(self) -> "Optional[cst.For | cst.While]":
        """The loop (over epochs) whose body holds this loop, unconditionally (no test, `try`
        or `with` in between), if any."""
        parent = self.facts.parents.get(id(self.loop.node))
        while parent is not None and type(parent) not in (cst.For, cst.While, cst.FunctionDef):
            if type(parent) in (cst.If, cst.Try, cst.With):
                return None
            parent = self.facts.parents.get(id(parent))
        if type(parent) not in (cst.For, cst.While) or type(cast("cst.For | cst.While", parent).body) is not cst.IndentedBlock:
            return None
        return cast("cst.For | cst.While", parent)

    @cached_property
    def epoch_start(self) -> list[cst.SimpleStatementLine]:
        """The simple statements the enclosing loop (over epochs) runs, unconditionally,
        before it enters this loop."""
        outer = self.epoch_loop
        return [] if outer is None else _simple_statements_before(cast(cst.IndentedBlock, outer.body), self.loop.node)

    @cached_property
    def _function_start(self) -> list[cst.SimpleStatementLine]:
        """The simple statements of the loop's function body before the loop, when the loop
        stands at the top level of that body or inside `with` blocks there (`with
        tqdm(loader) as bar:`): those before each `with`, outermost first, and those before
        the loop inside them."""
        function = self.loop.function
        node: cst.CSTNode = self.loop.node
        if function is None or node is function or type(function.body) is not cst.IndentedBlock:
            return []
        found: list[cst.SimpleStatementLine] = []
        while True:
            block = self.facts.parents.get(id(node))
            owner = self.facts.parents.get(id(block)) if block is not None else None
            if type(block) is not cst.IndentedBlock or owner is None:
                return []
            found = _simple_statements_before(block, node) + found
            if owner is function:
                return found
            if type(owner) is not cst.With:
                return []
            node = owner

    @cached_property
    def zeroes_on_epoch_start(self) -> Optional[cst.CSTNode]:
        """The zeroing call the enclosing loop makes before it enters this loop, if any."""
        for statement in self.epoch_start:
            for call in self.facts.calls_in(statement):
                role = self.objects.role(call)
                if role is not None and role.kind == "zero":
                    return call
        return None

    @cached_property
    def zeroes_on_entry(self) -> Optional[cst.CSTNode]:
        """The zeroing call the loop's function makes, unconditionally, before it enters the
        loop, when the loop is a statement of the function's own body
        (`def train_loop(...): optimizer.zero_grad(); for batch in loader: ...`)."""
        function = self.loop.function
        node = self.loop.node
        if function is None or self.loop.per_step_function or type(function.body) is not cst.IndentedBlock:
            return None
        for statement in function.body.body:
            if statement is node:
                return None
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for call in self.facts.calls_in(statement):
                role = self.objects.role(call)
                if role is not None and role.kind == "zero":
                    return call
        return None

    def carried_counter(self, name: str) -> bool:
        """A counter the loop's function receives and hands back (`def train_loop(...,
        iteration):` ... `return avg_loss, iteration`), or an attribute of the object whose
        method holds the loop (`self.batches_seen += 1`): its caller, or the object, keeps it
        across the function's calls (one an epoch), so it counts micro-batches across epochs."""
        function = self.loop.function
        if function is None or self.loop.per_step_function:
            return False
        if name.startswith("self.") and name.count(".") == 1 and function in self.facts.class_of:
            return True
        if name not in scopes.all_parameters(function):
            return False
        for node in walk(function.body):
            if type(node) is not cst.Return or node.value is None:
                continue
            values = [e.value for e in node.value.elements] if type(node.value) is cst.Tuple else [node.value]
            if any(type(v) is cst.Name and v.value == name for v in values):
                return True
        return False

    def tail_eraser(self, counter: Optional[str]) -> Optional[cst.CSTNode]:
        """The zeroing that erases the partial window an epoch ends with, for a gate on
        `counter` that runs on across epochs: the zeroing when each epoch starts, or, for a
        counter carried across the calls of the loop's function, the zeroing the function
        makes on entry (each call starts by erasing what the last one left)."""
        if self.zeroes_on_epoch_start is not None:
            return self.zeroes_on_epoch_start
        if counter is not None and self.carried_counter(counter):
            return self.zeroes_on_entry
        return None

    def reset_on_epoch_start(self, name: str) -> bool:
        """`nb_tr_steps = 0` (alone or in a tuple) before this loop in the loop over epochs, or,
        in a function whose loop no other loop encloses (`train_one_epoch`, called once per
        epoch), in the function's body before the loop: each run of the loop starts it again."""
        starts = {id(small) for line in self.epoch_start + self._function_start for small in line.body}
        return any(id(binding.statement) in starts and int_value(binding.value) == 0
                   for binding in self.facts.bindings.get(name, ()))

    @cached_property
    def manual_engine_boundary(self) -> bool:
        """The loop tells DeepSpeed's engine where windows end
        (`engine.set_gradient_accumulation_boundary(b)` before the backward): the engine's
        `step()` then runs under the loop's own test, which is the window's gate."""
        return any(
            last_part(call_name(call) or "") == "set_gradient_accumulation_boundary"
            for statement in self.loop.statements for call in self.facts.calls_in(statement.node)
        )

    @cached_property
    def gated_engine_step(self) -> Optional[Event]:
        """A DeepSpeed engine's `step()` under the loop's own gate (`if (step + 1) % K == 0:
        model_engine.step()`): the loop marks its windows itself, and what runs outside that
        gate runs on every micro-batch of them."""
        return next((e for e in self.loop.steps if e.role.flavor == "engine" and e.gate is not None), None)

    def framework_managed(self, event: Event) -> bool:
        """A step/zero/scheduler call the framework turns into a no-op off the boundary (under
        an Accelerator with a DeepSpeed plugin, the prepared optimizer's `step()` and
        `zero_grad()` are the engine's, which steps only at the boundary)."""
        if event.role.flavor == "engine":
            return not self.manual_engine_boundary
        if event.kind in ("step", "zero") and self.deepspeed_accelerator:
            return True
        if self.accumulate_context(event.statement):
            return not self.unmanaged_in_accumulate(event)
        return self.zeroes_after_accumulate(event)

    def zeroes_after_accumulate(self, event: Event) -> bool:
        """An optimizer's zeroing outside `accumulate()` in a loop that enters it: a
        prepared optimizer reads `sync_gradients` as the last `accumulate()` left it, so it
        still zeroes only after a window closed (unless the module built it unprepared)."""
        if event.kind != "zero" or self.accumulate_k is None or self.zeroes_model(event):
            return False
        target = event.role.target
        return self.objects.kind_of(target) == "optimizer" and self.objects.frameworks.prepared(target) is not False

    # -- evidence and K -------------------------------------------------------------
    @cached_property
    def unwindowed_framework_backward(self) -> Optional[Event]:
        """`accelerator.backward(...)` on an Accelerator built with K > 1 while no
        `accumulate()`, micro-step loop or gate holds the step back: accelerate divides
        every loss by K and the optimizer steps on every micro-batch. The loop is meant to
        accumulate over that K (what `accumulate()` would give it), yet nothing does."""
        if self.uses_accumulate_context or self.has_micro_loop or self.gated_step or self.deepspeed:
            return None
        if not self.optimizer_steps or self.loop.micro_loop is not None or self._inside_accumulate_block():
            return None
        for backward in self.loop.backwards:
            if backward.role.flavor != "accelerate" or backward.statement.conditional:
                continue
            owner = cast(cst.Attribute, cast(cst.Call, backward.role.call).func).value
            info = self.objects.accelerator(owner)
            if info is None or info.sharded == "deepspeed" or info.steps is None:
                continue
            if not self._k_given_in_scope(dotted(owner)):
                continue  # K was given to another function's Accelerator of the same name
            steps = int_value(info.steps)
            if steps is not None and steps <= 1:
                continue
            if steps is None and not (info.scales or self.is_accumulation_name(info.steps)):
                continue
            if self._asserted_one(info.steps):
                continue  # `assert args.gradient_accumulation_steps == 1, "not supported yet"`
            return backward
        return None

    def _inside_accumulate_block(self) -> bool:
        """The loop itself runs inside `with accelerator.accumulate(model):` (a loop over the
        kinds of data one iteration trains on, `for kind in ("video", "image"):`): accelerate
        holds its steps back as it does the block's own statements."""
        return any(type(node) is cst.With and any(
            type(value := entered(item)) is cst.Call and last_part(call_name(value) or "") == "accumulate"
            for item in node.items)
            for node in self.loop.site.ancestors)

    def _asserted_one(self, k: cst.BaseExpression) -> bool:
        """The module asserts that this K is 1 (`assert args.gradient_accumulation_steps == 1,
        "grad accumulation not supported yet"`): the run stops unless it is."""
        name = dotted(k)
        if name is None:
            return False
        tail = last_part(name)
        return _asserts_k_one([self.facts.module], lambda expr: (dotted(expr) or "").rpartition(".")[2] == tail)

    def _k_given_in_scope(self, name: Optional[str]) -> bool:
        """When the loop's function binds the Accelerator itself, K must be given there (to its
        constructor, or by `accelerator.gradient_accumulation_steps = K`): a module's other
        functions may build Accelerators of the same name with other settings (a test module)."""
        function = self.loop.function
        if name is None or function is None:
            return True

        def local(node: cst.CSTNode) -> bool:
            return self.facts.enclosing_function(node) is function

        built = [b for b in self.facts.bindings.get(name, ()) if local(b.statement)]
        if not built:
            return True
        later = [b for b in self.facts.bindings.get(f"{name}.gradient_accumulation_steps", ()) if local(b.statement)]
        given = [b for b in built if type(b.value) is cst.Call and carries_k(self.facts, b.value)]
        return bool(given or later)

    @cached_property
    def optimizer_steps(self) -> list[Event]:
        return [e for e in self.loop.steps if not self.framework_managed(e)]

    @cached_property
    def step_gate(self) -> Optional[Gate]:
        for event in self.optimizer_steps:
            if event.gate is not None:
                return event.gate
        return None

    @cached_property
    def micro_losses_span_window(self) -> bool:
        """In a `for j in ...` micro-step loop, something joins micro-batch j's live output to
        the other micro-batches' cached ones (`torch.cat(feats[:j] + [live] + feats[j + 1:])`,
        GradCache): each micro-step backpropagates the whole window's loss, whose parts add
        up to the window's gradient with no 1/K."""
        micro = self.loop.micro_loop
        if type(micro) is not cst.For or type(micro.target) is not cst.Name:
            return False
        index = micro.target.value
        before: set[str] = set()
        after: set[str] = set()
        for node in walk(micro.body):
            if type(node) is not cst.Subscript or len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Slice:
                continue
            cut = node.slice[0].slice
            container = dotted(node.value)
            if container is None:
                continue
            if cut.lower is None and dotted(cut.upper) == index:
                before.add(container)
            elif cut.upper is None and type(cut.lower) is cst.BinaryOperation and dotted(cut.lower.left) == index \
                    and int_value(cut.lower.right) == 1:
                after.add(container)
        return bool(before & after)

    @cached_property
    def micro_k(self) -> Optional[cst.BaseExpression]:
        """K of a `for _ in range(K)` micro-step loop (of `range(K - 1)` when the window's last
        micro-batch runs after the loop). None when the bound counts tasks
        (`range(n_tasks)`, `range(len(task_loaders))`): a loop that backpropagates one loss
        per task optimises the sum of the tasks' losses, a choice, not a window of K
        micro-batches owed a 1/K."""
        micro = self.loop.micro_loop
        if type(micro) is cst.For and type(micro.iter) is cst.Call:
            if last_part(call_name(micro.iter) or "") == "range" and positional(micro.iter, 1) is None:
                bound = positional(micro.iter, 0)
                if bound is not None and any(_TASK_COUNT.search(last_part(dotted(node) or ""))
                                             for node in walk(bound) if type(node) in (cst.Name, cst.Attribute)):
                    return None
                if type(bound) is cst.BinaryOperation and type(bound.operator) is cst.Subtract \
                        and int_value(bound.right) == 1 and any(not self.loop.in_micro_loop(b.statement)
                                                                 for b in self.loop.backwards):
                    return bound.left  # `range(K - 1)` under no_sync, then the window's last micro-batch after it
                return bound
        return None

    @cached_property
    def pieces_k(self) -> Optional[cst.BaseExpression]:
        """K of a micro-step loop over the pieces of one batch: `n` for `batch.chunk(n)`,
        `torch.chunk(x, n)` (also inside `zip`/`enumerate`, or through a name bound to one),
        `len(pieces)` for a name bound to `torch.split(...)` / `x.split(...)`."""
        micro = self.loop.micro_loop
        if type(micro) is not cst.For:
            return None
        walked = self.facts.pieces_walked(micro.iter)
        if walked is None:
            return None
        name, count = walked
        if count is not UNCOUNTED:
            return count
        return cst.parse_expression(f"len({name})") if name is not None else None

    @cached_property
    def slices_k(self) -> Optional[cst.BaseExpression]:
        """K of a micro-step loop over slices of one batch: `for i in range(0, n, size)` whose
        body takes `x[i : i + size]`. K is how many slices there are,
        `len(range(0, n, size))`."""
        micro = self.loop.micro_loop
        if type(micro) is not cst.For or type(micro.target) is not cst.Name or type(micro.iter) is not cst.Call:
            return None
        call = micro.iter
        start, stop, size = positional(call, 0), positional(call, 1), positional(call, 2)
        if last_part(call_name(call) or "") != "range" or size is None or int_value(start) != 0:
            return None
        if not any(_slice_of(node, micro.target.value, size) for node in walk(micro.body)):
            return None
        return cst.parse_expression(f"len(range(0, {code(stop)}, {code(size)}))")

    @cached_property
    def k(self) -> Optional[cst.BaseExpression]:
        gate = self.step_gate
        if gate is not None and gate.k is not None:
            return gate.k
        if self.micro_k is not None:
            return self.micro_k
        if self.pieces_k is not None:
            return self.pieces_k
        if self.slices_k is not None:
            return self.slices_k
        if self.accumulate_k is not None:
            return self.accumulate_k  # a `% n` test under `accelerator.sync_gradients` counts optimizer steps
        for gate in self.loop.gates:
            if gate.k is not None and self._gates_window_work(gate):
                return gate.k
        for flow in self.flows:
            for scaling in flow.scalings:
                if scaling.op == "div" and self.is_accumulation_name(scaling.factor) and not self._one_here(scaling.factor):
                    return scaling.factor
        trainer_k = self.facts.trainer_accumulation
        if trainer_k is not None and int_value(trainer_k) not in (0, 1):
            if any(e.role.flavor == "lightning-auto" for e in self.loop.backwards):
                return trainer_k  # the Trainer's `accumulate_grad_batches` (also through `**kwargs`)
        return None

    def _gates_window_work(self, gate: Gate) -> bool:
        """Something under the gate plays a role in the window (a zeroing, a backward, a clip...):
        a `% n` test that only logs or saves (`if step % args.log_interval == 0: print(...)`)
        counts optimizer steps or iterations, not the window's micro-batches."""
        return any(e.kind != "log" for s in self.loop.statements if s.gate is gate for e in s.events)

    def k_in_scope(self, statement: Statement) -> Optional[cst.BaseExpression]:
        """K as the code at `statement` can spell it (None: not in scope there).

        In the loop's own code, K itself. In a same-module helper, K when every name it
        reads is a module-level name the helper does not rebind and the helper has one
        caller; else the helper's parameter that every call passes K to."""
        k, helper = self.k, statement.helper
        if k is None or helper is None:
            return k
        sites = scopes.call_sites(self.facts, helper)
        reads = scopes.free_names(k)
        if len(sites) == 1 and reads <= scopes.module_names(self.facts.module) - scopes.local_names(helper):
            return k
        call = statement.call_site
        parameter = scopes.parameter_receiving(helper, call, k) if call is not None else None
        if parameter is None or not all(scopes.passes(helper, site, parameter) for site in sites):
            return None
        return cst.Name(parameter)

    def is_accumulation_name(self, node: cst.BaseExpression) -> bool:
        """A name (or a config entry: `conf["gradient_accumulation_steps"]`) that means
        accumulation steps."""
        if type(node) is cst.Subscript:
            key = key_of(node)
            return key is not None and looks_like_accumulation(key, self.accumulation_names)
        name = dotted(node)
        return name is not None and looks_like_accumulation(name, self.accumulation_names)

    def is_k(self, node: cst.BaseExpression) -> bool:
        """Whether an expression is this window's K (same text, same known value, or an
        accumulation name), or a helper's parameter that the call running it passes K to."""
        passed = self._passed_for_factors.get(id(node))
        if passed is not None and self._is_k_here(passed):
            return True
        while type(node) is cst.Call and type(node.func) in (cst.Name, cst.Attribute):
            callee = last_part(dotted(node.func) or "")
            if callee in _NUMBER_CASTS and len(node.args) == 1:
                node = node.args[0].value  # `float(acc_steps)`, `np.float32(acc_steps)`: K cast to a number is K
            elif callee == "max" and len(node.args) == 2 and not any(a.star or a.keyword for a in node.args) \
                    and [int_value(a.value) for a in node.args].count(1) == 1:
                # `max(1, acc_steps)`: K kept from zero is K
                node = next(a.value for a in node.args if int_value(a.value) != 1)
            else:
                break
        return self._is_k_here(node)

    @cached_property
    def _passed_for_factors(self) -> dict[int, cst.BaseExpression]:
        """A loss divided in a helper by one of its parameters (`return loss / steps`, in this
        module or another of the project): what the call that ran the helper passes for it,
        when the helper never rebinds that parameter."""
        found: dict[int, cst.BaseExpression] = {}
        for flow in self.flows:
            for scaling in flow.scalings:
                statement, factor = scaling.statement, scaling.factor
                if statement is None or statement.helper is None or statement.call_site is None or type(factor) is not cst.Name:
                    continue
                passed = self._passed(statement, factor.value)
                if passed is not None:
                    found[id(factor)] = passed
        return found

    def _passed(self, statement: Statement, name: str, depth: int = 0) -> Optional[cst.BaseExpression]:
        """What the call that ran `statement`'s helper passes for its parameter `name`, followed
        out through the parameters of the helpers above it (two calls deep at most)."""
        helper, call = statement.helper, statement.call_site
        if helper is None or call is None or name not in parameters(helper) or name in scopes.rebound_names(helper):
            return None
        passed = argument_for(helper, call, name)
        if type(passed) is cst.Name and depth < 1:
            outer = next((s for s in self.loop.statements if s.helper is not None and s.node is not statement.node
                          and any(c is call for c in self.facts.calls_in(s.node))), None)
            further = self._passed(outer, passed.value, depth + 1) if outer is not None else None
            if further is not None:
                return further
        return passed

    def _is_k_here(self, node: cst.BaseExpression) -> bool:
        k = self.k
        if k is not None and normalized(node) == normalized(k):
            return True
        if k is not None and type(node) is cst.Name:
            # `n_pieces = len(pieces)`, then `loss / n_pieces`: a name whose every binding is K's text
            bindings = self.facts.values_in(node.value, self.facts.enclosing_function(node))
            if bindings and all(b.index is None and b.value is not None and normalized(b.value) == normalized(k)
                                for b in bindings):
                return True
        value = self.known_int(node)
        if k is not None and value is not None and value == self.known_int(k):
            return True
        if value is not None and value > 1 and value == self.framework_k:
            return True
        return self.is_accumulation_name(node)

    @cached_property
    def framework_k(self) -> Optional[int]:
        """K as the framework that closes the windows was given it, when known: the
        `gradient_accumulation_steps` of the Accelerator whose `accumulate()` the loop enters,
        or of the DeepSpeed JSON the module names for a loop that backpropagates through a
        DeepSpeed engine (`loss / 4` is then a division by K)."""
        if self.accumulate_k is not None:
            return self.known_int(self.accumulate_k)
        if any(b.role.flavor == "deepspeed" for b in self.loop.backwards):
            return self.objects.frameworks.deepspeed_engine_steps()
        return None

    @cached_property
    def engine_accumulates(self) -> bool:
        """The loop backpropagates through a DeepSpeed engine that accumulates itself: its K,
        from the DeepSpeed JSON the module names or from what the module writes under
        `"gradient_accumulation_steps"` in a configuration it builds, is above 1 or an
        accumulation count (`args.gradient_accumulation_steps`). The engine then divides each
        micro-batch's loss by K and steps once per window, with no gate in the loop."""
        if not any(b.role.flavor == "deepspeed" for b in self.loop.backwards):
            return False
        readings = self._engine_steps
        return bool(readings) and all((k or 0) > 1 or (k is None and value is not None and self.is_accumulation_name(value))
                                      for k, value in readings)

    @cached_property
    def engine_k_is_one(self) -> bool:
        """The DeepSpeed engine the loop backpropagates through is known to be built with
        `gradient_accumulation_steps` 1 (its JSON, its dict literal, or every value the module
        writes under that key in a configuration it builds): a loop that accumulates by hand
        around such an engine divides the loss itself, and the engine divides by nothing."""
        readings = self._engine_steps
        return bool(readings) and all(k == 1 for k, _ in readings)

    @cached_property
    def _engine_steps(self) -> list[tuple[Optional[int], Optional[cst.BaseExpression]]]:
        """The `gradient_accumulation_steps` the module's DeepSpeed engines are built with, as
        the module says it: the one K of the DeepSpeed JSON or dict literal it names (no
        expression), else each value it writes under that key in a configuration it builds,
        with the integer it is known to be. Empty when nothing says."""
        steps = self.objects.frameworks.deepspeed_engine_steps()
        if steps is not None:
            return [(steps, None)]
        return [(self.known_int(value), value) for value in self.objects.frameworks.configured_accumulation_steps()]

    def known_int(self, node: cst.BaseExpression) -> Optional[int]:
        """An integer literal, or a name the module (or the project, for a name the module does
        not bind; never an argparse default, which the command line overrides) binds to one
        integer only; for a parameter of the loop's function, the one integer every call in the
        module passes for it (its default where a call passes nothing)."""
        value = int_value(node)
        if value is not None:
            return value
        name = dotted(node)
        if name is None:
            return None
        values = {int_value(b.value) for b in self.facts.bindings.get(name, ())}
        function = self.loop.function
        if not values and function is not None and name in parameters(function) \
                and name not in scopes.rebound_names(function):
            # a parameter of the loop's function: what every call passes, or its default where one passes nothing
            passed = self.facts.passed_arguments(function, name)
            default = scopes.default_of(function, name)
            given = {int_value(held) if (held := value if value is not None else default) is not None else None
                     for value in passed or ()}
            return given.pop() if len(given) == 1 else None
        if not values:  # what the project gives the name (a config field, an imported constant)
            return self.objects.frameworks.project_int(node)
        return values.pop() if len(values) == 1 else None

    @cached_property
    def single_micro_batch(self) -> bool:
        """K is 1 for the whole run: a module-level name, or a local of the loop's function,
        bound to the literal 1 and nothing else (`GRAD_ACCUM = 1`, `n_accumulate = 1` above
        the loop), in a module that does not rebind its globals from a config
        (`exec(...)`, `globals().update(...)`). Every window then holds one micro-batch: a
        plain loop, as the arm of `if K == 1:` is, where no accumulation rule applies. So is a
        settings class's attribute of 1 that nothing stores into (`_class_constant_one`), and
        a settings module's constant of 1 (`_module_constant_one`), and an attribute the loop's
        class binds to 1 alone (`_attribute_constant_one`), and a parameter that every call
        fills with such a 1 (`_callers_pass_one`). Another parameter, another attribute,
        config field or argparse default of 1 is not known to stay 1."""
        k = self.k
        if k is None:
            return False
        if int_value(k) is not None:
            return int_value(k) == 1
        if self._asserts_single_micro_batch:
            return True
        if type(k) is cst.Attribute:
            return self._class_constant_one(k) or self._constructed_with_one(k) or self._module_constant_one(k) \
                or self._attribute_constant_one(k)
        if type(k) is not cst.Name:
            return False
        function = self.loop.function
        if function is not None and k.value in parameters(function):
            return self._callers_pass_one(function, k.value)
        bindings = self.facts.bindings.get(k.value, ())
        return bool(bindings) and not self.facts.rebinds_globals and all(
            b.index is None and int_value(b.value) == 1
            and self.facts.enclosing_function(b.statement) in (None, function)
            and type(b.statement) is not cst.For for b in bindings)

    def _callers_pass_one(self, function: Function, parameter: str) -> bool:
        """Every call of the loop's function in the module passes 1 for K's parameter, written
        out or as an attribute its own class binds to 1 alone (`update_freq=self.update_freq`
        with `self.update_freq = 1` in `__init__` and no other store), and the function does
        not rebind it: each run's K is 1. A default of 1 that the calls leave is not: a
        setting with a default, which labellers read as the accumulation code it is."""
        if parameter in scopes.rebound_names(function):
            return False
        passed = self.facts.passed_arguments(function, parameter)
        if not passed:
            return False
        for value in passed:
            if value is not None and int_value(value) == 1:
                continue
            name = dotted(value) if value is not None else None
            caller = self.facts.enclosing_function(value) if value is not None else None
            cls = self.facts.class_of.get(caller) if caller is not None else None
            if name is None or cls is None or not name.startswith("self.") or name.count(".") != 1 \
                    or not self._stores_one(cls, name[5:]):
                return False
        return True

    @cached_property
    def _asserts_single_micro_batch(self) -> bool:
        """`assert args.gradient_accumulation_steps == 1`, on every micro-batch of this window
        (its world's helper asserts it) or before the loop in its function: a run with any
        other K stops there, so every run that trains holds one micro-batch per window."""
        lines = [s.node for s in self.loop.statements if s.gate is None and not s.conditional]
        return _asserts_k_one([*lines, *self._function_start], self.is_k)

    def _module_constant_one(self, k: cst.Attribute) -> bool:
        """K read from a project module used as a settings file (`import config.args as args`,
        whose top level binds `gradient_accumulation_steps = 1`), when this module stores
        nothing into it and does not rebind its globals: the run's value is that constant."""
        name = dotted(k)
        project = self.facts.project
        if name is None or project is None or self.facts.bindings.get(name) or self.facts.rebinds_globals:
            return False
        return int_value(cst.parse_expression(project.module_constant(name) or "None")) == 1

    def _attribute_constant_one(self, k: cst.Attribute) -> bool:
        """`self.gradient_accumulate_every` that the loop's class binds to 1 and nothing else
        (`_stores_one`)."""
        function = self.loop.function
        cls = self.facts.class_of.get(function) if function is not None else None
        name = dotted(k)
        if cls is None or name is None or not name.startswith("self.") or name.count(".") != 1:
            return False
        return self._stores_one(cls, k.attr.value)

    def _stores_one(self, cls: cst.ClassDef, attribute: str) -> bool:
        """Every store of `self.<attribute>` in the module is made in a method of `cls` and
        binds 1: written out, or a constant bound to 1 and nothing else (`known_int`:
        `self.grad_accum = grad_accum` under a notebook's `grad_accum = 1`); no `setattr`
        stores into it otherwise."""
        bindings = self.facts.bindings.get(f"self.{attribute}", ())
        if not bindings or "setattr(" in self.facts.text:
            return False
        for binding in bindings:
            method = self.facts.enclosing_function(binding.statement)
            if method is None or self.facts.class_of.get(method) is not cls or binding.index is not None \
                    or binding.value is None or self.known_int(binding.value) != 1:
                return False
        return True

    def _constructed_with_one(self, k: cst.Attribute) -> bool:
        """`self.gradient_accumulation_steps` that the class's `__init__` sets from its parameter
        alone, while every construction of the class in the module passes 1 for it (or leaves
        its default of 1): every object of the class runs with K = 1. (An object built in another
        module is not seen: silence errs on the quiet side.)"""
        function = self.loop.function
        cls = self.facts.class_of.get(function) if function is not None else None
        name = dotted(k)
        if cls is None or name is None or not name.startswith("self.") or name.count(".") != 1:
            return False
        init = next((f for f, owner in self.facts.class_of.items() if owner is cls and f.name.value == "__init__"), None)
        bindings = self.facts.bindings.get(name, ())
        if init is None or not bindings or any(
                self.facts.enclosing_function(b.statement) is not init or b.index is not None
                or type(b.value) is not cst.Name for b in bindings):
            return False
        parameter = cast(cst.Name, bindings[0].value).value
        if any(cast(cst.Name, b.value).value != parameter for b in bindings):
            return False
        if parameter not in scopes.all_parameters(init):
            return False
        constructions = [call for call in self.facts.calls if last_part(dotted(call.func) or "") == cls.name.value]
        return bool(constructions) and all(
            not any(arg.star for arg in call.args)
            and int_value(argument_for(init, call, parameter) or scopes.default_of(init, parameter)) == 1
            for call in constructions)

    def _class_constant_one(self, k: cst.Attribute) -> bool:
        """`CFG.gradient_accumulation_steps` read through a class of this module that works as a
        namespace of settings (a notebook's `class CFG:`), whose body binds the attribute to 1
        and nothing else (written out, or plain arithmetic of the class's own settings:
        `n_accumulate = max(1, 32 // train_bs)` with `train_bs = 24`), while the module stores into it nowhere (`CFG.x = ...`,
        `setattr(CFG, ...)`) and rebinds no globals from a config."""
        owner = dotted(k.value)
        cls = self.facts.classes.get(owner or "")
        if owner is None or self.facts.rebinds_globals or self.facts.bindings.get(dotted(k) or ""):
            return False
        # a store by name (`setattr(CFG, k, v)`) or through its namespace (`CFG.__dict__.update(d)`);
        # reading the namespace (`yaml.dump(CFG.__dict__, f)`) stores nothing
        owned = re.escape(owner)
        if re.search(rf"setattr\(\s*{owned}\b|(?:{owned}\.__dict__|vars\(\s*{owned}\s*\))\s*(?:\.\s*update\b|\[)",
                     self.facts.text):
            return False
        if cls is None:
            return self._settings_object_one(owner, k.attr.value)
        values = _class_body_values(cls, k.attr.value)
        return bool(values) and all(value is not None and _class_arithmetic(cls, value) == 1 for value in values)

    def _settings_object_one(self, owner: str, attribute: str) -> bool:
        """`CFG.gradient_accumulation_steps` read through the one object of a settings class of
        this module (`CFG = Config()` at module level, no arguments) whose methods bind
        `self.gradient_accumulation_steps` to 1 alone (`_stores_one`) and whose body does not."""
        bindings = list(self.facts.bindings.get(owner, []))
        made = bindings[0].value if len(bindings) == 1 and bindings[0].index is None else None
        if type(made) is not cst.Call or made.args or self.facts.enclosing_function(bindings[0].statement) is not None:
            return False
        cls = self.facts.classes.get(dotted(made.func) or "")
        return cls is not None and not _class_body_values(cls, attribute) and self._stores_one(cls, attribute)

    @cached_property
    def divides_by_accumulation(self) -> bool:
        """The loss is divided by a name that means accumulation steps, unless its value is
        known to be 1 there (`_one_here`: a plain loop)."""
        return any(self.divided_by_accumulation(flow) for flow in self.flows)

    def divided_by_accumulation(self, flow: LossFlow) -> bool:
        """One backward's loss is divided by accumulation steps (`divides_by_accumulation`),
        unless the loss sums the pieces an inner loop computed before the backward
        (`sums_pieces`): that division is the mean over the pieces, and the one backward
        runs as often as the step."""
        return any(
            s.op == "div" and self.is_accumulation_name(s.factor) and not self._one_here(s.factor)
            for s in flow.scalings
        ) and not self.sums_pieces(flow)

    def _one_here(self, factor: cst.BaseExpression) -> bool:
        """An accumulation name whose value is known to be 1 where the loss is divided by it:
        an Accelerator built with `gradient_accumulation_steps=1`, or a helper's parameter that
        the call running it fills with 1 (`self._forward(model, batch, accumulation_steps=1)`
        for a replay step, beside the epoch loop's call that passes K)."""
        if self.objects.frameworks.steps_attribute_value(factor) == 1:
            return True
        passed = self._passed_for_factors.get(id(factor))
        return passed is not None and int_value(passed) == 1

    def sums_pieces(self, flow: LossFlow) -> bool:
        """The backward's loss is a sum an inner loop of the iteration builds before it (`loss
        = 0.0`, `for _ in range(K): loss += model(x, y)`, then `(loss / K).backward()` after
        that loop): one backward over the whole batch's graph, not one per micro-batch."""
        backward = flow.backward.statement
        names = {name for helper, name in flow.aliases if helper is None} | ({flow.name} if flow.name else set())
        for statement in self.loop.statements:
            if statement.order >= backward.order or statement.helper is not None or not statement.loops \
                    or any(loop in backward.loops for loop in statement.loops):
                continue
            small = statement.small
            if type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign \
                    and dotted(small.target) in names:
                return True
        return False

    @cached_property
    def gated_step(self) -> bool:
        return any(e.gate is not None for e in self.optimizer_steps)

    def clip_serves_other_update(self, clip: Event) -> bool:
        """The first optimizer step after `clip` in the iteration is an ungated plain step
        while the window's own steps are gated: the clip belongs to that update (a GAN's
        discriminator clipped and stepped in fp32 each batch beside a generator that
        accumulates under a GradScaler), not to the window's partial sums."""
        if not self.gated_step:
            return False
        after = [step for step in self.loop.steps if clip.precedes(step)]
        first = min(after, key=lambda step: step.statement.order, default=None)
        return first is not None and first.gate is None and first.role.flavor != "scaler"

    @cached_property
    def gated_zeroing(self) -> bool:
        """A zeroing runs under a gate, and none runs on every micro-batch: gradients zeroed
        on each micro-batch anyway (`optimizer.zero_grad()` each iteration, and an evaluation
        every N steps that zeroes the model's too) never accumulate."""
        zeroings = self.loop.of_kind("zero")
        return any(e.gate is not None for e in zeroings) and not any(self.runs_every_micro_batch(e.statement)
                                                                    for e in zeroings)

    @property
    def has_micro_loop(self) -> bool:
        return self.loop.micro_loop is not None

    @cached_property
    def steps_once_per_window(self) -> bool:
        """The optimizer steps once per window: under a gate, after an inner micro-step
        loop, or inside `accumulate()` on an Accelerator with K."""
        return self.gated_step or self.has_micro_loop or self.accumulate_k is not None

    def event_once_per_window(self, event: Event) -> bool:
        """The event (a scheduler's step) runs once per window: under the gate, after a
        micro-step loop, or, for an object accelerate prepared, inside `accumulate()` on an
        Accelerator with K (which holds it back until the window syncs). A step repeated by
        a loop of its own under the gate (`for _ in range(K): scheduler.step()`) runs
        several times per window."""
        if self.has_micro_loop:
            return not self.loop.in_micro_loop(event.statement)
        if self.loop.in_inner_loop(event.statement):
            return False
        if event.gate is not None:
            return event.gate.kind != "sync" or self.accumulate_k is not None
        if self.accumulate_context(event.statement):
            return self.accumulate_k is not None and self.objects.frameworks.prepared(event.role.target) is True
        return False

    @cached_property
    def accumulates(self) -> bool:
        return (
            self.gated_step
            or self.has_micro_loop
            or (self.divides_by_accumulation and not self.updates_whole)
            or self.gated_zeroing
            or self.uses_accumulate_context
        )

    @cached_property
    def updates_whole(self) -> bool:
        """Every backward of the window sits in a whole update under a `% K` test, its step
        beside it (`if (i + 1) % K == 0: loss.backward(); opt.step(); opt.zero_grad()`): the
        backward runs no more often than the step, so no gradient waits for a window to
        close, whatever the loss is divided by. A plain loop (SPEC, "accumulation needs the
        backward to run more often than the step")."""
        return bool(self.loop.backwards) and all(b.statement.update_gate is not None for b in self.loop.backwards)

    @cached_property
    def backward_per_micro_batch(self) -> bool:
        """Some backward runs off the window's boundary. When every backward sits under the
        gate (GradCache-style: features cached without a graph, then re-forwarded and
        backpropagated at the boundary), nothing accumulates between boundaries."""
        return any(b.gate is None for b in self.loop.backwards)

    def runs_every_micro_batch(self, statement: Statement) -> bool:
        """The statement runs on each micro-batch: in the micro loop and not under a test
        inside it (`if micro == 0: zero_grad()` opens the window, `if micro == K - 1:
        clip(...)` closes it: what such a test selects is unknown, and unknown is silent),
        or ungated at all."""
        if self.loop.micro_loop is not None:
            return self.loop.in_micro_loop(statement) and not _tested_within(statement, self.loop.micro_loop)
        return statement.gate is None and not statement.conditional

    def runs_with_backward(self, statement: Statement) -> bool:
        """Ungated, in the same block as an ungated backward (or in loops inside that block),
        or before every backward of the window in a block that holds them all: whatever tests
        hold the block (`if loss_bw < 1e6: count += 1; loss.backward(); clip_grad_norm_(...)`),
        the statement runs whenever the backward does, on every micro-batch whose gradients
        the window keeps. Where the window is a micro-step loop, only
        its own statements run per micro-batch: a backward of the enclosing step beside it (a
        reward's backward before the loop) does not make a clip after the loop one."""
        if statement.gate is not None or not statement.block:
            return False
        if self.loop.micro_loop is not None and not self.loop.in_micro_loop(statement):
            return False  # after (or before) the micro-step loop: once per window, whatever backward runs beside it
        blocks = statement.block
        for backward in self.loop.backwards:
            held = backward.statement.block
            if backward.gate is not None or not held or backward.statement.helper is not statement.helper:
                continue
            if not (backward.statement.precedes(statement) or statement.precedes(backward.statement)) \
                    or len(held) > len(blocks):
                continue
            # the same block, or loops inside it (`for m in models: clip_grad_norm_(m.parameters(), c)`)
            if all(a is b for a, b in zip(held, blocks)) and all(
                    type(node) in (cst.For, cst.IndentedBlock) for node in blocks[len(held):]):
                return True
        # a block that holds every backward of the window, under the same tests (`if seen > resume:
        # zero_grad()`, then `if amp: scaler.scale(loss).backward() else: loss.backward()`): it runs
        # on each micro-batch any of them runs on
        enclosed = [b for b in self.loop.backwards if b.statement.helper is statement.helper]
        return bool(enclosed) and len(enclosed) == len(self.loop.backwards) and all(
            b.gate is None and len(b.statement.block) > len(blocks)
            and all(x is y for x, y in zip(blocks, b.statement.block)) and statement.precedes(b.statement)
            and not any(type(node) in (cst.For, cst.While) for node in b.statement.block[len(blocks):])
            for b in enclosed)

    # -- counters -------------------------------------------------------------------
    def counter_base(self, gate: Gate, statement: Statement) -> Optional[int]:
        """The counter's value on the first micro-batch, as the gate sees it (0 or 1). A gate
        in a helper reads the loop's counter when the helper's call passes it
        (`train_batch(..., step)` testing `step % K == 0`)."""
        counter = gate.counter
        if counter is None:
            return None
        own = self.own_gate(gate, statement)
        if not own and not self._shared_attribute(counter, statement):
            passed = self._passed(statement, counter)
            if type(passed) is not cst.Name:
                return None
            counter = passed.value
        if counter == self.loop.counter or counter in self.loop.derived_counters or counter in self.loop.index_aliases:
            base = self.loop.counter_base
            if base is not None and own and counter == self.loop.counter and self.counts_before(gate, statement):
                return base + 1  # `for step, batch in enumerate(loader): step += 1` counts from 1
            return base + self.loop.index_aliases.get(counter, 0) if base is not None else None  # `step = i + 1`
        increment_statement = self.increment_of(counter)
        if increment_statement is None or increment_statement.gate is gate:
            return None  # an optimizer-step counter: out of scope
        if not own and (increment_statement.helper is not None or increment_statement.conditional):
            return None  # counted somewhere else than the loop's own code
        increment = increment_statement.order
        initial = self._initial_value(counter)
        if initial is None:
            return None
        first_gated = min((s.order for s in self.loop.statements if s.gate is gate), default=None)
        if first_gated is None:
            return None
        if increment > first_gated and self._reset_under(gate, counter):
            first = next(s for s in self.loop.statements if s.order == first_gated)
            if increment_statement.exclusive_with(first):
                # `if (c + 1) % K == 0: ...; c = 0` / `else: c += 1`: the closing micro-batch
                # resets instead of counting, so every window sees the counter from 0 again
                return initial
            # reset under the gate, then incremented after it: every window but the first
            # sees the counter from 1 (`c = 0` at the step, `c += 1` at the iteration's end)
            return None
        return initial + (1 if increment < first_gated else 0)

    def _reset_under(self, gate: Gate, name: str) -> bool:
        """`name = 0` in a statement that runs under `gate`."""
        gated = {id(small) for s in self.loop.statements if s.gate is gate and type(s.node) is cst.SimpleStatementLine
                 for small in s.node.body}
        return any(id(binding.statement) in gated and int_value(binding.value) == 0
                   for binding in self.facts.bindings.get(name, ()))

    def _shared_attribute(self, counter: str, statement: Statement) -> bool:
        """`self.step` tested in a method that the loop, a method of the same class, calls on
        `self` (`self.train_one_step(x, y)`): both read the one object's attribute."""
        call = statement.call_site
        if not counter.startswith("self.") or counter.count(".") != 1 or statement.helper is None \
                or len(statement.callers) != 1 or call is None:
            return False
        home = self.loop.function
        owner = self.facts.class_of.get(home) if home is not None else None
        return owner is not None and self.facts.class_of.get(statement.helper) is owner \
            and type(call.func) is cst.Attribute and dotted(call.func.value) == "self"

    def own_gate(self, gate: Gate, statement: Statement) -> bool:
        """The gate's test is written in the loop's own code, though `statement` may run in a
        helper that the loop calls under it (`if ni - last >= K: self.optimizer_step()`) or
        that receives the test's value (`apply = i % K == 0`, then `train_batch(x, apply)`):
        the gate's names are the loop's; or the gate is a method's of the loop's own class over
        a counter the instance holds (`if (self.global_step + 1) % K == 0:` in the
        `self.training_step(batch)` the loop calls, which increments `self.global_step`): the
        instance carries it from one iteration to the next."""
        if statement.helper is None or any(s.helper is None and s.gate is gate for s in self.loop.statements):
            return True
        if any(node is self.loop.node for node in ancestors(self.facts.parents, gate.test)):
            return True
        owner = self.facts.class_of.get(self.loop.function) if self.loop.function is not None else None
        return owner is not None and (gate.counter or "").startswith("self.") \
            and self.facts.class_of.get(statement.helper) is owner

    def _initial_value(self, name: str) -> Optional[int]:
        """The one integer a counter starts from; a start at a multiple of the epoch
        (`step = epoch * batches_per_epoch`) keeps a 0 base, as `ni = i + nb * epoch` does."""
        outer = {dotted(node.target) for node in self.loop.site.ancestors if type(node) is cst.For}
        values = {0 if epoch_multiple(b.value, outer) else int_value(b.value) for b in self.facts.bindings.get(name, ())}
        values.discard(None)
        return values.pop() if len(values) == 1 else None

    def off_by_one(self, gate: Gate, statement: Statement) -> bool:
        return gate.form == ZERO and self.counter_base(gate, statement) == 0

    @cached_property
    def sets_gradients(self) -> bool:
        """The iteration writes the gradients the step applies itself (`p.grad = merged[i]`,
        `p.grad.copy_(noised)`), from what it harvested after each backward: per-sample
        clipping, gradient surgery across tasks. A zeroing between those backwards erases
        nothing the step uses."""
        return any(self.writes_gradients(statement) for statement in self.loop.statements)

    def writes_gradients(self, statement: Statement) -> bool:
        """The statement stores a gradient of its own making (`p.grad = merged[i]`,
        `p.grad.copy_(noised)`), not a zeroing and not an edit of the gradient there
        (`p.grad = p.grad.clamp(-1, 1)`)."""
        if any(e.kind == "zero" for e in statement.events):
            return False
        for node in walk(statement.node):
            if type(node) is cst.AssignTarget and type(node.target) is cst.Attribute \
                    and node.target.attr.value == "grad" and not _reads(statement.small, dotted(node.target)):
                return True
            if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "copy_" \
                    and last_part(dotted(node.func.value) or "") in ("grad", "data") \
                    and ".grad" in (dotted(node.func.value) or ""):
                return True
        return False

    @cached_property
    def flushes_after_loop(self) -> bool:
        """An optimizer step follows the loop in its function, itself or in a helper of the
        module it calls (`if pending: self._update()`): it applies the partial window the
        loop ends with."""
        function = self.loop.function
        for statement in self.loop.site.siblings(before=False):
            for node in walk(statement):
                if type(node) is cst.Call and (self._steps(node) or any(
                        self._steps(inner) for inner in self._helper_calls(node, function))):
                    return True
        return False

    def _steps(self, call: cst.Call) -> bool:
        role = self.objects.role(call)
        return role is not None and role.kind == "step"

    def _helper_calls(self, call: cst.Call, caller: Optional[Function]) -> list[cst.Call]:
        """The calls in the body of the module function or method a call runs (none when it runs none)."""
        helper = self.facts.helper(call, caller)
        return [] if helper is None else [node for node in walk(helper.body) if type(node) is cst.Call]

    @cached_property
    def steps_after_loop(self) -> bool:
        """The loop never steps itself, divides each loss by an accumulation count, keeps
        the gradients of a backward (`cancelled`: a warm-up loop that zeroes after each
        backward keeps none), and an optimizer step follows it in its function: the loop
        runs the micro-steps of one
        window (a GAN's generator re-forwarding the stored micro-batches once the
        discriminator's gate opens, one backward each). A loop that re-forwards cached
        pieces against each other without that division (GradCache) is not read so."""
        return not self.loop.steps and self.divides_by_accumulation and self.flushes_after_loop \
            and not all(self.cancelled(backward) for backward in self.loop.backwards)

    def opens_next_window(self, step: Event) -> bool:
        """A gated step that runs before the iteration's backward on each window's first
        micro-batch (`if i > 0 and i % K == 0:` over a 0-based index) applies the K
        micro-batches before it: it closes the previous window as the next one opens, and
        the step after the loop closes the last one. That order is correct."""
        gate = step.gate
        return gate is not None and self.off_by_one(gate, step.statement) and self.flushes_after_loop

    def increment_of(self, name: str) -> Optional[Statement]:
        """The first statement of this window's iteration that adds one to `name`
        (`steps += 1`, `j = j + 1`): in a world of `if args.fp16:` / `else:`, the one that
        world runs."""
        for statement in self.loop.statements:
            for small in statement.node.body if type(statement.node) is cst.SimpleStatementLine else ():
                if adds_one(small) == name:
                    return statement
        return None

    def numbers_pass(self, gate: Gate, statement: Statement) -> bool:
        """The gate's counter numbers the micro-batches of one pass over the iterable, so that
        `len(iterable)` is its value on the last one (with the counter's base): a counter set to
        0 when each epoch starts (the caller asks `reset_on_epoch_start`) and incremented once on
        every micro-batch in the loop's own code (`local_step = 0`, then `local_step += 1` at
        the end of each iteration)."""
        increment = self.increment_of(gate.counter or "")
        return increment is not None and increment.helper is None and increment.gate is None \
            and not increment.conditional and self.counter_base(gate, statement) is not None

    def counts_before(self, gate: Gate, statement: Statement) -> bool:
        """A count gate's counter (`n += 1`, then `if n == K:`) is incremented on every
        micro-batch (or with every backward, under the same tests), before the gated
        `statement`, in the loop's own code."""
        increment = self.increment_of(gate.counter or "")
        if increment is None:
            return False
        return (increment.helper is None and increment.gate is None
                and (not increment.conditional or self.runs_with_backward(increment))
                and increment.order < statement.order)

    def count_decides(self, gate: Gate) -> bool:
        """Whether the gate's count alone says which micro-batches close a window: the gate has
        no extra condition, or one that is false only at the count's start (`i > 0 and ...`), or
        one that only picks a world (`world_condition`) of an accumulating window whose every
        optimizer step is gated."""
        return not gate.has_condition or gate.condition_skips_only_the_start() or (
            self.accumulates and self.world_condition(gate)
            and all(step.statement.gate is not None for step in self.optimizer_steps))

    def world_condition(self, gate: Gate) -> bool:
        """The gate's extra condition only picks a world (`elif not is_deepspeed and batch_idx %
        accum_grad == 0:`): every operand of its `and` beside the count's test is a flag (a name
        or an attribute, maybe negated) that the loop never rebinds, so wherever it holds, the
        gate fires on the micro-batches the count says."""
        test = gate.whole_test
        if type(test) is not cst.BooleanOperation or type(test.operator) is not cst.And:
            return False
        operands = boolean_operands(test, cst.And)
        others = [part for part in operands if not any(node is gate.test for node in walk(part))]
        if len(others) == len(operands) or not others:
            return False
        varying = scopes.chains_in_targets(self.loop.node)
        for part in others:
            flag = part.expression if type(part) is cst.UnaryOperation and type(part.operator) is cst.Not else part
            name = dotted(flag) if type(flag) in (cst.Name, cst.Attribute) else None
            if name is None or name == gate.counter or any(name == v or name.startswith(v + ".") for v in varying):
                return False
        return True

    def correct_boundary(self, gate: Gate, statement: Statement) -> bool:
        base = self.counter_base(gate, statement)
        return (gate.form == PLUS_ONE and base == 0) or (gate.form == ZERO and base == 1)

    def zeroes_before_loop(self) -> bool:
        """A statement before the loop (in its block, or in an enclosing block up to its
        function) reads as zeroing gradients."""
        return any(_ZEROING_TEXT.search(code(statement)) for statement in self.loop.site.siblings(before=True))

    def may_zero_otherwise(self, optimizers: set[str]) -> bool:
        """Something other than a zeroing the model knows may zero the gradients that the
        `optimizers` (their names, normalized) apply: a call of the iteration with no role
        that names zeroing or resetting, or that is handed one of them (`reset(optimizer)`);
        distributed autograd, which keeps gradients in its own context; zeroing written
        anywhere in the loop's function, its class, a helper the iteration walks or the class
        of a project object whose methods it walks (`runner.step()`)."""
        function = self.loop.function
        texts = [code(function) if function is not None else self.facts.text]
        owner = self.facts.class_of.get(function) if function is not None else None
        if owner is not None:
            texts.append(code(owner))
        for statement in self.loop.statements:
            if statement.helper is not None:
                texts.append(code(statement.helper))
                helper_class = self.facts.class_of.get(statement.helper)
                if helper_class is not None and helper_class is not owner and id(helper_class) in self.facts.parents:
                    texts.append(code(helper_class))  # a project object's class (its other methods too)
            if any("dist_autograd" in code(item.item) for item in statement.withs):
                return True
            for node in walk(statement.node):
                if type(node) is cst.Call and self.objects.role(node) is None:
                    name = (dotted(node.func) or "").lower()
                    if "zero" in name or "reset" in name:
                        return True
                    if any(dotted(arg.value) and normalized(arg.value) in optimizers for arg in node.args):
                        return True
                    if self._made_by_zeroing_module(node):
                        return True
        return any(_in_code(_ZEROING_TEXT, text) for text in texts)

    def _made_by_zeroing_module(self, call: cst.Call) -> bool:
        """The call runs a function of another project module, or an object one of its
        classes built (`model(xc, y)` after `model = Seq2Seq(...)`), and that module's text
        zeroes gradients (a forward that begins with `self.zero_grad()`)."""
        project = self.facts.project
        callee = dotted(call.func)
        if project is None or callee is None:
            return False
        makers = {callee}
        for binding in self.facts.values_of(callee.split(".")[0]):
            built = constructed(binding.value) if binding.index is None else None
            maker = dotted(built.func) if type(built) is cst.Call else None
            if maker is not None:
                makers.add(maker)
        zeroing = cast("re.Pattern[str]", _ZEROING_TEXT)  # (compiled at its first use)
        return any(project.maker_mentions(maker, zeroing) for maker in makers)

    def length_divisible(self, gate: Gate) -> bool:
        """The code checks before the loop that the iterable's length is a multiple of the
        gate's K (`assert len(dl) % K == 0`, `if len(dl) % K != 0: raise ...`): the run
        stops where it would start a partial window, so no last window is left over."""
        iterable = self.loop.iterable
        if iterable is None or gate.k is None:
            return False
        wanted = (code(iterable), code(gate.k))
        for statement in self.loop.site.siblings(before=True):
            if type(statement) is cst.SimpleStatementLine:
                if any(type(s) is cst.Assert and _remainder_of(s.test, True) == wanted for s in statement.body):
                    return True
            elif type(statement) is cst.If and statement.orelse is None and _raises(statement.body):
                if _remainder_of(statement.test, False) == wanted:
                    return True
        return False

    def stops_after_full_windows(self, gate: Gate) -> bool:
        """The loop leaves once its whole windows are done: an `if ...: break` in its body
        compares with the count of whole windows of its iterable (`len(loader) // K`,
        through assignments), per epoch or times the enclosing loop's variable
        (`step > steps_per_epoch * epoch`), which drops the tail by design as
        `drop_last=True` would. A budget over the whole run (`len(dl) // K * num_epochs`,
        `args.max_steps`) still leaves every other epoch's tail: not this."""
        iterable = self.loop.iterable
        if iterable is None or gate.k is None:
            return False
        wanted = code(iterable)
        outer = self._enclosing_loop_target()
        for node in walk(self.loop.node.body):
            if type(node) is cst.If and _ends_in_break(node.body):
                if any(type(part) is cst.Comparison and any(
                        self._whole_windows(side, wanted, outer, 0)
                        for side in (part.left, *(c.comparator for c in part.comparisons)))
                       for part in walk(node.test)):
                    return True
        return False

    def _whole_windows(self, value: cst.BaseExpression, iterable: str, outer: Optional[str], depth: int) -> bool:
        """`value` counts the whole windows of `iterable` in one epoch (or up to the epoch
        the enclosing loop is in): `len(it) // K`, `int(len(it) / K)`, a name bound to one."""
        if depth > 4:
            return False
        kind = type(value)
        if kind is cst.BinaryOperation:
            operation = cast(cst.BinaryOperation, value)
            if type(operation.operator) in (cst.FloorDivide, cst.Divide):
                length = operation.left
                return (type(length) is cst.Call and call_name(length) == "len" and len(length.args) == 1
                        and code(length.args[0].value) == iterable and self.is_k(operation.right))
            if type(operation.operator) is cst.Multiply and outer is not None:
                sides = (operation.left, operation.right)
                return any(dotted(side) == outer for side in sides) and any(
                    self._whole_windows(side, iterable, outer, depth + 1) for side in sides)
            return False
        if kind is cst.Call and call_name(cast(cst.Call, value)) in ("int", "math.floor"):
            arguments = cast(cst.Call, value).args
            return len(arguments) == 1 and self._whole_windows(arguments[0].value, iterable, outer, depth + 1)
        name = dotted(value)
        if name is None or name == outer:
            return False
        return any(binding.index is None and self._whole_windows(binding.value, iterable, outer, depth + 1)
                   for binding in self.facts.bindings.get(name, ()))

    def _enclosing_loop_target(self) -> Optional[str]:
        """The target of the `for` loop (over epochs) that holds this loop, if any."""
        parent = self.facts.parents.get(id(self.loop.node))
        while parent is not None and type(parent) is not cst.FunctionDef:
            if type(parent) is cst.For:
                return dotted(parent.target)
            parent = self.facts.parents.get(id(parent))
        return None

    # -- boundary rescaling ------------------------------------------------------------
    @cached_property
    def rescales_gradients(self) -> bool:
        """Gradients divided or multiplied at the boundary (torchtune, fairseq shapes):
        `p.grad /= K`, `p.grad.div_(K)`, `p.grad.data = p.grad.data / K`,
        `torch._foreach_div_(grads, K)`, `amp_C.multi_tensor_scale(..., scale / K)`, a
        known rescaling method."""
        for statement in self.loop.statements:
            for small in statement.node.body:
                if type(small) is cst.AugAssign and (dotted(small.target) or "").endswith("grad"):
                    return True
                if type(small) is cst.Assign and _rescales_grad(small):
                    return True
            for event_call in self.facts.calls_in(statement.node):
                name = call_name(event_call) or ""
                tail = last_part(name)
                if tail in _RESCALE_CALLS:
                    return True
                if tail in ("div_", "mul_") and ".grad" in name:
                    return True
                if tail in ("_foreach_div_", "_foreach_mul_") and "grad" in code(event_call).lower():
                    return True
                fused = tail == "multi_tensor_scale" or (tail == "multi_tensor_applier" and event_call.args and last_part(
                    dotted(event_call.args[0].value) or "") == "multi_tensor_scale")
                if fused and any(self.is_k(node) for node in walk(event_call) if isinstance(node, cst.BaseExpression)):
                    return True  # apex's fused scale of the gradients by a factor over K (BERT pretraining's predivision)
        return False


_NO_GRAD_CALLS = frozenset({"no_grad", "inference_mode"})


def _rescales_grad(assign: cst.Assign) -> bool:
    """`p.grad = p.grad / K` or `p.grad.data = p.grad.data * s`: a gradient rebound to itself
    divided or multiplied."""
    if len(assign.targets) != 1:
        return False
    target = dotted(assign.targets[0].target) or ""
    value = assign.value
    if not (target.endswith(".grad") or target.endswith(".grad.data")):
        return False
    if type(value) is not cst.BinaryOperation or type(value.operator) not in (cst.Divide, cst.Multiply):
        return False
    return dotted(value.left) == target or dotted(value.right) == target


def _remainder_of(test: cst.BaseExpression, zero: bool) -> Optional[tuple[str, str]]:
    """`(X, K)` for a test of `len(X) % K == 0` (`zero`) or of `len(X) % K != 0` /
    `len(X) % K` (not `zero`)."""
    remainder = test
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        wanted = cst.Equal if zero else cst.NotEqual
        if type(target.operator) is not wanted or int_value(target.comparator) != 0:
            return None
        remainder = test.left
    elif zero:
        return None
    if type(remainder) is not cst.BinaryOperation or type(remainder.operator) is not cst.Modulo:
        return None
    length = remainder.left
    if type(length) is not cst.Call or call_name(length) != "len" or len(length.args) != 1:
        return None
    return code(length.args[0].value), code(remainder.right)


def _ends_in_break(body: cst.BaseSuite) -> bool:
    """Whether a block's last statement is a `break`."""
    if type(body) is cst.SimpleStatementSuite:
        return type(body.body[-1]) is cst.Break
    statements = getattr(body, "body", ())
    last = statements[-1] if statements else None
    return type(last) is cst.SimpleStatementLine and type(last.body[-1]) is cst.Break


def _raises(body: cst.BaseSuite) -> bool:
    """Whether a block ends in a `raise` statement."""
    if type(body) is cst.SimpleStatementSuite:
        return any(type(small) is cst.Raise for small in body.body)
    statements = getattr(body, "body", ())
    last = statements[-1] if statements else None
    return type(last) is cst.SimpleStatementLine and any(type(small) is cst.Raise for small in last.body)


# Methods of a module that run no forward (its parameters, mode, state, device).
_MODULE_UPKEEP = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules", "children",
    "train", "eval", "zero_grad", "state_dict", "load_state_dict", "to", "cuda", "cpu", "half", "float",
    "bfloat16", "requires_grad_", "apply", "register_forward_hook", "register_full_backward_hook",
})


# Builtins that look at an object without running it (`base = model.module if hasattr(model, "module") else model`).
_INSPECTING_BUILTINS = frozenset({"hasattr", "getattr", "isinstance", "type", "id", "len", "print", "repr", "str"})


def _is_dataloader(node: cst.BaseExpression, facts: ModuleFacts) -> bool:
    """`DataLoader(...)`, or a call of a `functools.partial` of it (`ModuleFacts.maker`)."""
    return type(node) is cst.Call and last_part(facts.maker(node) or "") == "DataLoader"


def _disables_grad(node: cst.BaseExpression) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()` (called or bare, as a decorator),
    `torch.set_grad_enabled(False)`."""
    call = node if type(node) is cst.Call else None
    tail = last_part((call_name(call) if call is not None else dotted(node)) or "")
    if tail in _NO_GRAD_CALLS:
        if tail == "inference_mode" and call is not None and call.args:
            mode = call.args[0].value  # `inference_mode(False)` turns it off
            return not (dotted(mode) == "False" or int_value(mode) == 0)
        return True
    if tail == "set_grad_enabled" and call is not None and call.args:
        return dotted(call.args[0].value) == "False"
    return False


def _slice_of(node: cst.CSTNode, start: str, size: cst.BaseExpression) -> bool:
    """`x[start : start + size]` (either order of the sum)."""
    if type(node) is not cst.Slice or dotted(node.lower) != start or type(node.upper) is not cst.BinaryOperation:
        return False
    upper = node.upper
    if type(upper.operator) is not cst.Add:
        return False
    sides = (normalized(upper.left), normalized(upper.right))
    return sides in ((start, normalized(size)), (normalized(size), start))


def build_window(loop: TrainingLoop, facts: ModuleFacts, objects: Objects, reader: LossReader,
                 accumulation_names: tuple[str, ...] = ()) -> Window:
    window = Window(loop, facts, objects, accumulation_names)
    window.flows = reader.flows(loop)
    separate = window.separate_updates
    if separate:
        window.flows = [flow for flow in window.flows if id(flow.backward) not in separate]
    micro = loop.micro_loop
    if micro is not None and any(loop.in_micro_loop(flow.backward.statement) for flow in window.flows) \
            and not _all_but_last(micro):
        # a backward beside the micro-step loop runs once per window (a loss over the whole
        # batch): it owes no 1/K, and the window's scaling is read from the micro-batches'
        # (but after `for _ in range(K - 1)` it is the window's last micro-batch)
        window.flows = [flow for flow in window.flows if loop.in_micro_loop(flow.backward.statement)]
    return window


def _all_but_last(micro: cst.CSTNode) -> bool:
    """`for _ in range(K - 1):`: the micro-step loop runs all of a window's micro-batches but the
    last, which follows it."""
    if type(micro) is not cst.For or type(micro.iter) is not cst.Call or last_part(call_name(micro.iter) or "") != "range":
        return False
    bound = positional(micro.iter, 0) if positional(micro.iter, 1) is None else None
    return type(bound) is cst.BinaryOperation and type(bound.operator) is cst.Subtract and int_value(bound.right) == 1


_NAMING = (cst.Name, cst.Attribute, cst.Subscript)


def _reads(small: cst.BaseSmallStatement, name: Optional[str]) -> bool:
    """The assignment's value reads `name` (`p.grad` in `p.grad = p.grad / n`)."""
    if type(small) is not cst.Assign or name is None:
        return False
    return any(dotted(node) == name for node in walk(small.value) if type(node) is cst.Attribute)


def _tested_within(statement: Statement, loop: cst.CSTNode) -> bool:
    """Between `loop` and the statement lies a test: an `if` or `match` arm, or an
    `except`, `else` or `finally` block of a `try` (its body runs unconditionally)."""
    path = list(statement.block)
    if loop not in path:
        return statement.gate is not None
    inside = path[path.index(loop) + 1:]
    for index, node in enumerate(inside):
        following = inside[index + 1] if index + 1 < len(inside) else None
        if type(node) in (cst.If, cst.Match):
            return True
        if type(node) in (cst.Try, cst.TryStar) and following is not cast("cst.Try | cst.TryStar", node).body:
            return True
    return False


def _names(node: cst.CSTNode, name: str) -> bool:
    """Whether `node` reads `name` (a plain name or a dotted attribute)."""
    return any(type(n) in (cst.Name, cst.Attribute) and dotted(n) == name for n in walk(node))


# The calls that test values for NaN or infinity (`math.isnan(x)`, `torch.isinf(x)`, `x.isfinite()`).
_NON_FINITE_CALLS = frozenset({"isnan", "isinf", "isfinite", "is_finite"})


# Casts of a number that keep its value (`float(k)`, `np.float32(k)`).
_NUMBER_CASTS = frozenset({"float", "int", "float32", "float64", "int32", "int64"})


def _tests_non_finite(test: cst.BaseExpression) -> bool:
    """The test reads whether values are finite: it calls one of `_NON_FINITE_CALLS`, or
    reads a flag named for it (`grad_is_finite`, a scaler's `found_inf`, `has_inf_or_nan`)."""
    for node in walk(test):
        if type(node) is cst.Call and last_part(dotted(node.func) or "") in _NON_FINITE_CALLS:
            return True
        if type(node) in (cst.Name, cst.Attribute):
            words = set(last_part(dotted(node) or "").lower().split("_"))
            if words & _NON_FINITE_WORDS:
                return True
    return False


# Words of a flag named for a test of finiteness (`grad_is_finite`, `found_inf`, `has_inf_or_nan`).
_NON_FINITE_WORDS = frozenset({"nan", "inf", "finite", "isnan", "isinf", "isfinite"})


def _ends_in_jump(arm: cst.CSTNode) -> bool:
    """The arm's block (`if` body or `else`) ends in `continue`, `break` or `return`."""
    body = arm.body if type(arm) is cst.Else else arm
    statements = body.body if type(body) is cst.IndentedBlock else ()
    last = statements[-1] if statements else None
    return type(last) is cst.SimpleStatementLine and type(last.body[-1]) in (cst.Continue, cst.Break, cst.Return)


def _made_of_itself(value: cst.BaseExpression, name: str, bound_in_loop: dict[str, "Statement"]) -> bool:
    """`value` reads the plain `name` and no other name the loop binds (`torch.sum(gather(loss))`,
    `loss / n_gpu` with `n_gpu` set before the loop): what it holds comes from `name`'s earlier value."""
    read = scopes.free_names(value)
    return name in read and all(other == name or other not in bound_in_loop for other in read)


def _root_name(expr: cst.BaseExpression) -> Optional[str]:
    """`outputs` in `outputs.loss`, `outputs["loss"]`, `outputs[0]` or `outputs` itself."""
    while type(expr) in (cst.Attribute, cst.Subscript):
        expr = cast("cst.Attribute | cst.Subscript", expr).value
    return expr.value if type(expr) is cst.Name else None


def _detaches_each(value: cst.BaseExpression, name: str) -> bool:
    """`name.detach()`, or `[t.detach() for t in name]`: `name` rebound to detached values."""
    if type(value) is cst.Call and type(value.func) is cst.Attribute:
        return last_part(dotted(value.func) or "") in DETACHING_METHODS and dotted(value.func.value) == name
    if type(value) in (cst.ListComp, cst.GeneratorExp) or (type(value) is cst.Call and call_name(value) in ("list", "tuple")):
        comp = value.args[0].value if type(value) is cst.Call and value.args else value
        if type(comp) not in (cst.ListComp, cst.GeneratorExp):
            return False
        comp = cast("cst.ListComp | cst.GeneratorExp", comp)
        loop_var = dotted(comp.for_in.target)
        return (comp.for_in.inner_for_in is None and dotted(comp.for_in.iter) == name and loop_var is not None
                and _detaches_each(comp.elt, loop_var))
    return False


def _simple_statements_before(block: cst.IndentedBlock, node: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """The simple statements of a block before `node`, one of its statements (none when it is not one)."""
    found: list[cst.SimpleStatementLine] = []
    for statement in block.body:
        if statement is node:
            return found
        if type(statement) is cst.SimpleStatementLine:
            found.append(statement)
    return []


# Calls that make an iterator of an iterable (`islice(loader, n)`, `iter(loader)`): no length.
_ITERATOR_MAKERS = frozenset({"islice", "iter", "cycle", "chain", "repeat", "map", "filter"})


def _asserts_k_one(nodes: Iterable[cst.CSTNode], is_k: Callable[[cst.BaseExpression], bool]) -> bool:
    """An `assert` under `nodes` that K (what `is_k` accepts) is 1 (`assert K == 1`)."""
    return any(type(node) is cst.Assert and single_micro_batch_arm(node.test, is_k) is True
               for root in nodes for node in walk(root))


# The comparisons that test a value against a bound (`loss > 10`).
_ORDERINGS = (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)

# In `Window.sized`'s `seen`: the names now read are the loop function's callers', not its parameters.
_IN_CALLERS = "<callers>"


def _read_of(value: cst.BaseExpression) -> Optional[str]:
    """The name whose value `value` reads as it is, or detached from its graph (`loss`,
    `loss.item()`, `float(loss)`, `loss.detach().cpu().item()`, `loss.data.cpu().numpy()`);
    None for anything else."""
    while True:
        if type(value) is cst.Call and type(value.func) is cst.Attribute and not value.args \
                and value.func.attr.value in DETACHING_METHODS:
            value = value.func.value
        elif type(value) is cst.Attribute and value.attr.value == "data":
            value = value.value
        elif type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "float" \
                and len(value.args) == 1:
            value = value.args[0].value
        else:
            return dotted(value)


def _unwrapped_parameter(function: cst.CSTNode) -> Optional[str]:
    """The parameter whose `.module` every `return` of a function reads (an unwrap helper:
    `return model.module if hasattr(model, "module") else model`), as the project summary
    records it for other modules' functions (`FunctionSummary.unwraps`)."""
    helper = cast(Function, function)
    returned = [n.value for n in walk(helper.body) if type(n) is cst.Return and n.value is not None]
    for parameter in parameters(helper) if returned else ():
        inner = f"{parameter}.module"
        if all(value is not None and any(type(n) is cst.Attribute and dotted(n) == inner for n in walk(value))
               for value in returned):
            return parameter
    return None


def _in_code(pattern: LazyPattern, text: str) -> bool:
    """`pattern` matches outside the text's comments and plain string literals: a zeroing
    switched off (`# optimizer.zero_grad()`) zeroes nothing. Where the scan of literals is
    unsure, every match counts."""
    matches = [match.start() for match in pattern.finditer(text)]
    if not matches:
        return False
    literals = literals_of(text)
    return literals is None or any(not literals.hold(start) for start in matches)


def _class_body_values(cls: cst.ClassDef, attribute: str) -> list[Optional[cst.BaseExpression]]:
    """The values a class body binds `attribute` to (`x = ...`, `x: int = ...`), in order."""
    values: list[Optional[cst.BaseExpression]] = []
    for line in cls.body.body:
        for small in line.body if type(line) is cst.SimpleStatementLine else ():
            if type(small) is cst.Assign and any(dotted(t.target) == attribute for t in small.targets):
                values.append(small.value)
            elif type(small) is cst.AnnAssign and dotted(small.target) == attribute:
                values.append(small.value)
    return values


# The calls plain arithmetic of settings may make, on whole numbers.
_INT_CALLS: dict[str, Callable[..., int]] = {"max": max, "min": min, "int": int, "abs": abs}


def _class_arithmetic(cls: cst.ClassDef, value: cst.BaseExpression, depth: int = 0) -> Optional[int]:
    """The whole number a class body's expression computes from literals and the class's own
    settings bound once (`max(1, 32 // train_bs)`, `2 * base`); None for anything else."""
    if depth > 8:
        return None
    known = int_value(value)
    if known is not None:
        return known
    if type(value) is cst.Name:
        bound = _class_body_values(cls, value.value)
        return _class_arithmetic(cls, bound[0], depth + 1) if len(bound) == 1 and bound[0] is not None else None
    if type(value) is cst.BinaryOperation:
        left = _class_arithmetic(cls, value.left, depth + 1)
        right = _class_arithmetic(cls, value.right, depth + 1)
        if left is None or right is None:
            return None
        operator = type(value.operator)
        if operator is cst.Add:
            return left + right
        if operator is cst.Subtract:
            return left - right
        if operator is cst.Multiply:
            return left * right
        if operator in (cst.FloorDivide, cst.Modulo) and right != 0:
            return left // right if operator is cst.FloorDivide else left % right
        return None
    if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in _INT_CALLS and value.args \
            and all(arg.keyword is None and not arg.star for arg in value.args):
        arguments = [_class_arithmetic(cls, arg.value, depth + 1) for arg in value.args]
        if any(argument is None for argument in arguments) or (value.func.value in ("int", "abs") and len(arguments) != 1):
            return None
        return _INT_CALLS[value.func.value](*arguments)
    return None


def _keyed_entry(value: Optional[cst.BaseExpression]) -> Optional[tuple[str, str]]:
    """(name, key) of `name["key"]`; None for anything else."""
    if type(value) is not cst.Subscript or type(value.value) is not cst.Name:
        return None
    key = key_of(value)
    return (value.value.value, key) if key is not None else None

