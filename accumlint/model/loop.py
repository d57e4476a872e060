"""The training loop model: one iteration's statements, in order, with their roles.

A loop is walked once. Every simple statement of its body (nested `if`, `with`,
`try` and loops included, and the bodies of the project's helpers it calls, two
calls deep) becomes a `Statement` that knows its position in the iteration, the
window gate it runs under, the `with` contexts around it, and the role-bearing
calls (`Event`s) it makes. Rules ask questions of this data; they never walk
the tree themselves.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Optional, Sequence, Union, cast

import re

import libcst as cst

from accumlint.model import scopes
from accumlint.model.facts import Function, Loop, LoopSite, ModuleFacts, ancestors
from accumlint.model.gates import Gate, parse_countdown, parse_gate, single_micro_batch_arm
from accumlint.model.names import (
    adds_one, argument_for, call_name, code as _code, dict_entry, dotted, entered, int_value, key_of, keyword,
    last_part, looks_like_accumulation, parameters, positional,
)
from accumlint.model.roles import Objects, Role, RoleKind
from accumlint.model.tree import children, walk

Block = Union[cst.BaseSuite, cst.Module]  # an indented block, a one-line suite, or a module


@dataclass(eq=False)
class Statement:
    """One simple statement of an iteration and where it runs."""

    node: cst.SimpleStatementLine
    order: int
    gate: Optional[Gate]
    gate_if: Optional[cst.If]
    conditional: bool
    loops: tuple[Loop, ...]
    withs: tuple[cst.WithItem, ...]
    block: tuple[cst.CSTNode, ...]
    call_site: Optional[cst.Call] = None
    helper: Optional[Function] = None
    # every helper on the way from the loop to the statement, outermost first (`helper` is the last)
    callers: tuple[Function, ...] = ()
    arms: tuple[tuple[int, int], ...] = ()
    # the arms of run-constant tests (`if args.fp16:`) the statement sits in: each arm is a world
    worlds: tuple[tuple[int, int], ...] = ()
    # those tests themselves (in this walk), outermost first
    world_tests: tuple[cst.If, ...] = ()
    single_micro_batch: bool = False
    # the `% K` test of a whole update it sits in (its own backward and step under the test: an
    # update every K iterations, not a window's boundary), which no longer gates it (`gate` is None)
    update_gate: Optional[Gate] = None
    # blocks that end in a jump (`continue`, `break`, `return`) after this statement, each with
    # what the jump leaves: an inner loop, a helper's call, or (None) the whole iteration
    jumps: tuple[tuple[cst.CSTNode, Optional[cst.CSTNode]], ...] = ()
    events: list["Event"] = field(default_factory=list)

    @property
    def small(self) -> cst.BaseSmallStatement:
        return self.node.body[0]

    @property
    def alone(self) -> bool:
        """Alone on its line, so the statement can be moved or wrapped as a whole."""
        return len(self.node.body) == 1

    @property
    def before_exit(self) -> bool:
        """Its block ends the run (`raise ...`, `sys.exit(1)`): an error path, such as the
        report of a non-finite loss before stopping, not the iteration's own work."""
        block = self.block[-1] if self.block else None
        body = block.body if type(block) is cst.IndentedBlock else ()
        if not body or type(body[-1]) is not cst.SimpleStatementLine:
            return False
        last = body[-1].body[-1]
        if type(last) is cst.Raise:
            return True
        return type(last) is cst.Expr and type(last.value) is cst.Call and \
            (dotted(last.value.func) or "") in ("sys.exit", "exit", "quit", "os._exit")

    def exclusive_with(self, other: "Statement") -> bool:
        """In different arms of one `if`/`elif`/`else`, `match` or `try`/`except`:
        at most one of the two runs in an iteration."""
        if not self.arms or not other.arms:
            return False
        mine = dict(self.arms)
        return any(mine.get(branch, arm) != arm for branch, arm in other.arms)

    def precedes(self, other: "Statement") -> bool:
        """Runs before `other` in the same iteration (never across exclusive arms, nor past a
        jump: after `optimizer.zero_grad(); continue` under a non-finite check, the step
        below that block does not run)."""
        return self.order < other.order and not self.exclusive_with(other) and not self._jumps_past(other)

    def _jumps_past(self, other: "Statement") -> bool:
        """A block of this statement ends in a jump whose reach holds `other` outside that block."""
        for block, reach in self.jumps:
            if any(node is block for node in other.block):
                continue
            if reach is None or other.call_site is reach or any(node is reach for node in other.block):
                return True
        return False


def release(statements: list[Statement]) -> None:
    """Break the cycle of each statement and its events (an Event names its Statement),
    once the analysis is done with them: reference counting then frees the module's
    trees at once, instead of the cyclic collector tracing them all again later (on
    the fixtures, nine in ten of the objects it would trace)."""
    for statement in statements:
        statement.events = []


@dataclass(eq=False)
class Event:
    """A role-bearing call and the statement that makes it."""

    role: Role
    statement: Statement

    @property
    def kind(self) -> RoleKind:
        return self.role.kind

    @property
    def order(self) -> int:
        return self.statement.order

    @property
    def gate(self) -> Optional[Gate]:
        return self.statement.gate

    def precedes(self, other: "Event") -> bool:
        """Runs before `other` in the same iteration; on one line (`loss.backward();
        optimizer.step()`), in the order the line writes them."""
        if self.statement is other.statement:
            mine = next((i for i, e in enumerate(self.statement.events) if e is self), None)
            theirs = next((i for i, e in enumerate(self.statement.events) if e is other), None)
            return mine is not None and theirs is not None and mine < theirs
        return self.statement.precedes(other.statement)


@dataclass(eq=False)
class TrainingLoop:
    """A loop whose iterations run a backward, with everything rules ask about."""

    site: LoopSite
    statements: list[Statement]
    micro_loop: Optional[Loop] = None
    counter: Optional[str] = None
    counter_base: Optional[int] = None
    derived_counters: frozenset[str] = frozenset()  # `ni = i + nb * epoch`: over all epochs, the index's base
    index_aliases: dict[str, int] = field(default_factory=dict)  # `step = i + 1`: the index plus 1
    iterable: Optional[cst.BaseExpression] = None

    @property
    def node(self) -> Union[Loop, Function]:
        """The loop; for a per-step function (`training_step`, `update_policy`), the function."""
        return self.site.node

    @property
    def per_step_function(self) -> bool:
        """The window is a function's body: the loop over steps is in a caller or a framework."""
        return type(self.site.node) is cst.FunctionDef

    @property
    def function(self) -> Optional[Function]:
        return self.site.function

    @property
    def events(self) -> list[Event]:
        return [event for statement in self.statements for event in statement.events]

    def of_kind(self, *kinds: RoleKind) -> list[Event]:
        return [event for event in self.events if event.kind in kinds]

    @property
    def backwards(self) -> list[Event]:
        return self.of_kind("backward")

    @property
    def steps(self) -> list[Event]:
        return self.of_kind("step")

    @property
    def gates(self) -> list[Gate]:
        seen: dict[int, Gate] = {}
        for statement in self.statements:
            if statement.gate is not None:
                seen.setdefault(id(statement.gate), statement.gate)
        return list(seen.values())

    def reaches(self, source: Event, target: Event) -> bool:
        """Whether what `source` leaves behind (the gradients of a backward) may be there when
        `target` runs: it runs before it in the iteration, or after it, for the next one (a clip
        written above the backward reads the micro-batches before), never across exclusive arms,
        nor across a zeroing that every iteration runs between the two (`zero_grad()` at the
        top of the iteration, then the clip: it reads zeros)."""
        if source.precedes(target):
            return True
        if not (target.order < source.order and not target.statement.exclusive_with(source.statement)):
            return False
        return not any(
            zeroing.statement.gate is None and not zeroing.statement.conditional
            and (zeroing.order > source.order or zeroing.order < target.order)
            and not zeroing.statement.exclusive_with(source.statement)
            and not zeroing.statement.exclusive_with(target.statement)
            for zeroing in self.of_kind("zero"))

    def in_micro_loop(self, statement: Statement) -> bool:
        return self.micro_loop is not None and self.micro_loop in statement.loops

    def in_inner_loop(self, statement: Statement) -> bool:
        """Inside a loop of its own within the iteration (`for p in params: p.grad = None`),
        other than the micro-step loop: moving the statement alone would break that loop."""
        return bool(statement.loops) and statement.loops[-1] is not self.micro_loop

    def backward_per_loss(self, event: "Event") -> bool:
        """A backward in an inner loop over several losses of one forward
        (`for name, loss in losses: backward(loss, retain_graph=True)`): its loss
        comes from that loop's target, and each backward needs the graph again; or a
        backward whose forward is fed the state an earlier one made (`_fed_its_own_outputs`)."""
        inner = event.statement.loops[-1] if self.in_inner_loop(event.statement) else self.site.node
        used = {node.value for node in walk(event.role.call) if type(node) is cst.Name}
        if self._fed_its_own_outputs(event, used):
            return True
        if type(inner) is not cst.For:
            return False
        return (bool(_target_names(inner) & used) or self._loss_of_shared_forward(event, used)
                or self._reads_value_made_before(event, used))

    def _fed_its_own_outputs(self, event: "Event", used: set[str]) -> bool:
        """The call that makes the backward's loss is given, in the next iteration, a value
        made of its own outputs (a recurrent state carried across segments: `loss, h =
        step(x, state)`, then `state = State(h)`, with no `.detach()` on the way): the next
        iteration's backward goes through this one's graph again, so `retain_graph=True`
        may be needed."""
        loop = event.statement.loops[-1] if event.statement.loops else self.site.node
        inside = [s for s in self.statements if loop is self.site.node or loop in s.loops]
        order = event.statement.order
        reads = set(used)
        producers: list[tuple[Statement, set[str], cst.Call]] = []
        for statement in reversed([s for s in inside if s.order <= order]):
            for small in statement.node.body:
                bound, value = _assignment(small)
                if value is None or not bound & reads:
                    continue
                if type(value) is cst.Call and type(small) is cst.Assign and not _detaching(value):
                    producers.append((statement, bound, value))
                reads |= {node.value for node in walk(value) if type(node) is cst.Name}
        for producer, outputs, call in producers:
            derived = set(outputs)
            for statement in inside:
                if statement.order <= producer.order:
                    continue
                for small in statement.node.body:
                    bound, value = _assignment(small)
                    if value is None or type(small) is not cst.Assign:
                        continue
                    if {node.value for node in walk(value) if type(node) is cst.Name} & derived \
                            and not (type(value) is cst.Call and _detaching(value)):
                        derived |= bound
            # what the call reads, through the iteration's bindings before it; a name that
            # only detaching bindings give (`hidden = hidden.detach()`) cuts the way back
            fed = {node.value for node in walk(call) if type(node) is cst.Name}
            cut: set[str] = set()
            kept: set[str] = set()
            # made earlier in this iteration, not carried from the last: the loop's own targets too
            # (`for batch in loader:` binds `batch` afresh before `batch = tuple(t.to(d) for t in batch)`)
            bound_before: set[str] = set().union(*(_target_names(node) for node in (loop, self.site.node)
                                                   if type(node) is cst.For))
            for statement in reversed([s for s in inside if s.order < producer.order]):
                for small in statement.node.body:
                    bound, value = _assignment(small)
                    if not statement.conditional:
                        bound_before |= bound
                    if value is None or not bound & fed:
                        continue
                    if type(value) is cst.Call and _detaching(value):
                        cut |= bound & fed
                    else:
                        kept |= bound & fed
                        fed |= {node.value for node in walk(value) if type(node) is cst.Name}
            if (fed - (cut - kept) - bound_before) & derived:
                return True
        return False

    def _reads_value_made_before(self, event: "Event", used: set[str]) -> bool:
        """The backward's loss reads, through its loop's assignments, a value the iteration
        made by a call before that loop and never rebinds inside it (`t_rep = teacher(x)`,
        then `for arch in sampled: loss = kd(student(x, arch), t_rep)`): every backward of
        the loop may go through that value's graph again, so `retain_graph=True` may be
        needed (unless the value holds no graph, which is not known here)."""
        loop = event.statement.loops[-1] if event.statement.loops else None
        if type(loop) is not cst.For:
            return False
        inside = [s for s in self.statements if loop in s.loops]
        reads = set(used)
        changed = True
        while changed:
            changed = False
            for statement in inside:
                if statement.order > event.statement.order:
                    continue
                bindings = [_assignment(small) for small in statement.node.body]
                bindings += [({item.asname.name.value}, item.item) for item in statement.withs
                             if item.asname is not None and type(item.asname.name) is cst.Name]
                for bound, value in bindings:
                    if value is not None and bound & reads:
                        new = {node.value for node in walk(value) if type(node) is cst.Name} - reads
                        if new:
                            reads |= new
                            changed = True
        rebound = {name for statement in inside for small in statement.node.body for name in _assignment(small)[0]}
        latest: dict[str, tuple[Statement, cst.BaseExpression]] = {}
        for statement in self.statements:
            if loop not in statement.loops and statement.order < event.statement.order:
                for small in statement.node.body:
                    bound, value = _assignment(small)
                    if type(small) is cst.Assign and value is not None:
                        latest.update((name, (statement, value)) for name in bound)
        made_before = {name for name, (statement, value) in latest.items()
                       if type(value) is cst.Call and not _detaching(value) and not _without_grad(statement)}
        return bool(reads & (made_before - rebound))

    def _loss_of_shared_forward(self, event: "Event", used: set[str]) -> bool:
        """The backward's loss is its own loop's item (an inner or micro-step `for loss in
        losses:` over the losses of one forward, as gradient surgery does), or that loop
        computes it from its target and from a value the iteration made before the loop
        (`feats = backbone(x)`, then `for head, t in zip(heads, targets): loss =
        crit(head(feats), t)`): every backward of that loop goes through the same graph."""
        loop = event.statement.loops[-1] if event.statement.loops else self._nested_site()
        if type(loop) is not cst.For:
            return False
        target = event.role.target
        if target is not None and _loss_name(target) in _target_names(loop):
            return True
        order = event.statement.order
        nested = bool(event.statement.loops)
        reads = {node.value for s in self.statements if (loop in s.loops if nested else not s.loops) and s.order <= order
                 for small in s.node.body if type(small) is cst.Assign and _binds_any(small, used)
                 for node in walk(small.value) if type(node) is cst.Name}
        if nested:
            made_before = {name for s in self.statements if loop not in s.loops and s.order < order
                           for small in s.node.body if type(small) is cst.Assign
                           for name in _bound_names(small)}
        else:  # the enclosing loop's iteration made them, before this loop ran
            made_before = self._bound_around_site()
        return bool(reads & _target_names(loop)) and bool(reads & made_before)

    def _nested_site(self) -> Optional[cst.CSTNode]:
        """The loop itself, when it runs inside another loop's iteration (a loop over the
        per-layer losses of the enclosing iteration's forward, with a backward each)."""
        if any(type(node) in (cst.For, cst.While) for node in self.site.ancestors):
            return self.site.node
        return None

    def _bound_around_site(self) -> set[str]:
        """The plain names the nearest enclosing loop's body binds outside this loop."""
        enclosing = next((node for node in reversed(self.site.ancestors) if type(node) in (cst.For, cst.While)), None)
        if enclosing is None:
            return set()
        inside = {id(node) for node in walk(self.site.node)}
        return {name for node in walk(cast("cst.For | cst.While", enclosing).body)
                if type(node) is cst.Assign and id(node) not in inside for name in _bound_names(node)}


def _loss_name(expr: cst.BaseExpression) -> Optional[str]:
    """The name a backward's loss expression scales: `loss` in `loss`, `loss / K`,
    `scaler.scale(loss)`."""
    while True:
        if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Divide, cst.Multiply):
            expr = expr.left
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "scale" \
                and expr.args:
            expr = expr.args[0].value
        else:
            return dotted(expr)


def _target_names(loop: cst.For) -> set[str]:
    return {node.value for node in walk(loop.target) if type(node) is cst.Name}


def _bound_names(assign: cst.Assign) -> set[str]:
    return {t.target.value for t in assign.targets if type(t.target) is cst.Name}


def _returned_flag(helper: Function, call: cst.Call, position: Optional[int]) -> Optional[cst.BaseExpression]:
    """The test a helper's returned flag stands for (`did_step = False`, then `did_step = True`
    as the last statement of `if (batch_index + 1) % K == 0:` at the top of its body, and
    `return loss, did_step`): that test, with the helper's parameters replaced by what the
    call passes (`(i + 1) % K == 0`). None for any other return, a flag bound otherwise, or
    a parameter the call passes nothing for or through a starred argument."""
    body = helper.body.body if type(helper.body) is cst.IndentedBlock else ()
    returns = [n for n in walk(helper.body) if type(n) is cst.Return]
    if len(returns) != 1 or returns[0].value is None or any(a.star for a in call.args):
        return None
    returned = returns[0].value
    if position is not None:
        if type(returned) is not cst.Tuple or position >= len(returned.elements):
            return None
        returned = returned.elements[position].value
    if type(returned) is not cst.Name:
        return None
    flag = returned.value
    tests = [statement for statement in body if type(statement) is cst.If and statement.orelse is None
             and type(statement.body) is cst.IndentedBlock and statement.body.body
             and _sets_flag(statement.body.body[-1], flag, "True")]
    stores = [n for n in walk(helper.body) if type(n) is cst.AssignTarget and dotted(n.target) == flag]
    starts = [statement for statement in body if _sets_flag(statement, flag, "False")]
    if len(tests) != 1 or len(starts) != 1 or len(stores) != 2:
        return None
    test: cst.BaseExpression = tests[0].test
    replaced: dict[cst.CSTNode, cst.BaseExpression] = {}
    for node in walk(test):
        if type(node) is cst.Name and node.value in parameters(helper):
            argument = argument_for(helper, call, node.value)
            if argument is None:
                return None
            replaced[node] = argument
    for node, argument in replaced.items():
        test = argument if node is test else cast(cst.BaseExpression, test.deep_replace(node, argument))
    return test


def _sets_flag(statement: cst.CSTNode, flag: str, value: str) -> bool:
    """`flag = True` (or `False`: `value`) alone on its line."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return False
    small = statement.body[0]
    return type(small) is cst.Assign and len(small.targets) == 1 and dotted(small.targets[0].target) == flag \
        and type(small.value) is cst.Name and small.value.value == value


def _assignment(small: cst.BaseSmallStatement) -> tuple[set[str], Optional[cst.BaseExpression]]:
    """The plain names an assignment binds (tuple targets included) and the value it reads."""
    if type(small) is cst.AugAssign:
        target = dotted(small.target)
        return ({target} if target is not None and "." not in target else set()), small.value
    if type(small) is not cst.Assign:
        return set(), None
    names: set[str] = set()
    for assigned in small.targets:
        destination = assigned.target
        elements = [e.value for e in destination.elements] if isinstance(destination, (cst.Tuple, cst.List)) \
            else [destination]
        names |= {e.value for e in elements if isinstance(e, cst.Name)}
    return names, small.value


def _detaching(call: cst.Call) -> bool:
    """`t.detach()`, `t.item()`: a value with no graph."""
    return type(call.func) is cst.Attribute and call.func.attr.value in ("detach", "item", "tolist", "numpy")


def _without_grad(statement: Statement) -> bool:
    """Under `with torch.no_grad():` / `torch.inference_mode()`."""
    return any(isinstance(called := entered(item), cst.Call) and last_part(call_name(called) or "")
               in ("no_grad", "inference_mode") for item in statement.withs)


def _binds_any(assign: cst.Assign, names: set[str]) -> bool:
    return bool(_bound_names(assign) & names)


class _Walker:
    """Walks one loop body into Statements (iteration order, gates, contexts)."""

    def __init__(self, facts: ModuleFacts, objects: Objects, function: Optional[Function],
                 accumulation_names: tuple[str, ...] = (), *, own_level: bool = False, probe: bool = False,
                 made: Optional[list[Statement]] = None) -> None:
        self.made = made  # where every walk puts the statements it made (for `release`)
        # `probe`: only the events matter (does the loop run a backward?), not where they run:
        # an `if` is entered without reading its test (`_if`)
        self.probe = probe
        self.facts = facts
        self.accumulation_names = accumulation_names
        self.objects = objects
        self.function = function
        self.statements: list[Statement] = []
        self.assigned: dict[str, cst.BaseExpression] = {}
        self.own_level = own_level  # inner loops are left out
        self.root: Optional[cst.CSTNode] = None
        self._escaped: Optional[tuple[Gate, cst.If]] = None  # a `continue` gate leaving its block
        self._world_tests: dict[tuple[str, int], int] = {}  # a run-constant test (code, function): its worlds' key
        # id of an `if` -> id of the earlier sibling `if` whose test it negates (`_complementary_ifs`)
        self._complement_of: dict[int, int] = {}
        self._paired: set[int] = set()  # ids of both `if`s of each such pair

    def walk(self, body: cst.BaseSuite, root: Optional[cst.CSTNode] = None) -> list[Statement]:
        self.root = root if root is not None else body
        self._block(body, gate=None, gate_if=None, conditional=False, loops=(), withs=(), path=(), helper=None,
                    arms=(), worlds=(), world_tests=(), single_micro_batch=False, escapes=True, jumps=(), frames=(), backward_at_call=False,
                    once=False, every_arm=None)
        if self.made is not None:
            self.made.extend(self.statements)
        return self.statements

    def _block(self, suite: Block, **context: Any) -> None:
        statements: Sequence[cst.BaseStatement]
        if type(suite) is cst.SimpleStatementSuite:
            # `if gate: optimizer.step()` on one line: a synthetic line, never moved by fixes
            statements = [cst.SimpleStatementLine(body=suite.body)]
        else:
            statements = cast("cst.IndentedBlock | cst.Module", suite).body
        context = dict(context)
        context["path"] = context["path"] + (suite,)
        reach = self._jump_reach(statements[-1] if statements else None, context)
        if reach is not False:
            context["jumps"] = context["jumps"] + ((suite, reach),)
        escaped: Optional[tuple[Gate, cst.If]] = None
        if not self.probe:
            pairs = _complementary_ifs(statements)
            self._complement_of.update(pairs)
            self._paired.update(pairs, pairs.values())
        for index, statement in enumerate(statements):
            continued = self._continue_gate(statement, statements[index + 1:], context["helper"] is not None)
            if continued is not None:
                if not self._bookkeeping_only(cast(cst.If, statement)):  # a `continue` gate is an `if`
                    # its body is the non-boundary arm; the rest of the block, the boundary's
                    self._statement(statement, context)
                    context.update(arms=context["arms"] + ((id(statement), 1),))
                context.update(gate=continued, gate_if=statement, conditional=True)
                escaped = (continued, cast(cst.If, statement))  # a `continue` gate is an `if`
                continue
            if type(statement) is cst.If and statement.orelse is None and _value_at_call(statement.test, context["frames"]) \
                    and self._jump_reach(statement.body.body[-1]
                                         if type(statement.body) is cst.IndentedBlock else None, context) is not False:
                # `if validation: return ...` in a helper this call gives `validation=True`: the
                # arm always runs, and what follows it in the block never does
                self._block(statement.body, **context)
                break
            self._statement(statement, context)
            if not context["single_micro_batch"] and self._asserts_k_is_one(statement):
                # `assert config.accumulation_steps == 1` before an arm's own zeroing and step:
                # the rest of the block runs only where K is 1, a plain loop
                context["single_micro_batch"] = True
            if self._escaped is not None:
                # a `continue` gate in a block that always runs here (the K > 1 arm, a `with`)
                # skips the rest of the iteration, this block's rest included
                gate, gate_if = escaped = self._escaped
                self._escaped = None
                context.update(gate=gate, gate_if=gate_if, conditional=True)
        if escaped is not None and context["escapes"] and len(context["path"]) > 1:
            self._escaped = escaped

    @staticmethod
    def _jump_reach(last: Optional[cst.BaseStatement], context: dict[str, Any]) -> Union[None, cst.CSTNode, bool]:
        """What a block's closing jump leaves, so that what follows there never runs after the
        block: the innermost inner loop for `continue`/`break` (the whole iteration at the
        walked level), the helper's call for a `return` in a helper walked in place (the whole
        iteration otherwise); False when the block does not end in a jump."""
        if type(last) is not cst.SimpleStatementLine:
            return False
        kind = type(last.body[-1])
        if kind is cst.Continue or kind is cst.Break:
            return next((node for node in reversed(context["path"]) if type(node) in (cst.For, cst.While)), None)
        if kind is cst.Return:
            call_site: Optional[cst.Call] = context.get("call_site")
            return call_site if context["helper"] is not None else None
        return False

    def _continue_gate(self, statement: cst.BaseStatement, rest: Sequence[cst.BaseStatement],
                       in_helper: bool = False) -> Optional[Gate]:
        """`if (i + 1) % K != 0: continue` gates the rest of its block (`rest`); so does
        `if micro < K: continue` when it counts micro-batches (`_counts_micro_batches`),
        not `if i < resume_from: continue`, which skips the batches a resumed run has seen.
        In a helper the loop calls, `if step % K != 0: return` gates the rest of the helper
        the same way (and no further: the caller's statements after the call still run).
        The lines before the `continue` may do the non-boundary micro-batch's work
        (`with model.no_sync(): loss.backward()`), never a step or a zeroing."""
        if type(statement) is not cst.If or statement.orelse is not None:
            return None
        body = statement.body
        if type(body) is not cst.IndentedBlock or not body.body:
            return None
        last = body.body[-1]
        if type(last) is not cst.SimpleStatementLine:
            return None
        jump = type(last.body[-1])
        if not (jump is cst.Continue or (in_helper and jump is cst.Return)):
            return None
        if not all(self._no_update(line) for line in [*body.body[:-1], last.with_changes(body=last.body[:-1])]):
            return None
        gate = parse_gate(statement.test, self.assigned.get)
        if gate is None or gate.positive:
            return None
        if gate.kind == "count" and not self._counts_micro_batches(gate, rest) \
                and not (self.root is not None and self._counts_micro_batches(gate, [self.root])):
            # (the reset may follow the `if` that holds the `continue`: `if fp16: ... continue`,
            # `else: ... continue`, then `counter = 0` once after both arms)
            return None
        return gate

    def _generator_gate(self, test: cst.BaseExpression) -> Optional[Gate]:
        """`if meta["grad_accum_index"] == K - 1:` (or `if meta["sync"]:`) where `meta` comes
        with each micro-batch from a generator of the module that puts `counter % K` there
        (`ModuleFacts.generator_field`): the gate that value makes, read with the
        generator's parameters as its call passes them. Its counter lives in the generator,
        so nothing is said of its base (GA106) and the loop's iterable is unsized (GA107)."""
        if type(test) is cst.Comparison:
            fields = [test.left] if type(test.left) is cst.Subscript else []
        else:
            fields = [test] if type(test) is cst.Subscript else []
        if not fields:
            return None
        found = self.facts.generator_field(fields[0])
        if found is None:
            return None
        value = _passed_into(found[1], found[2], found[0])
        if value is None:
            return None
        gate = parse_gate(value if test is fields[0] else test.deep_replace(fields[0], value), lambda name: None)
        if gate is None or gate.kind != "modulo":
            return None
        return replace(gate, test=test, whole_test=test, counter=None)

    def _bookkeeping_only(self, statement: cst.If) -> bool:
        """A continue gate's body that does nothing but bookkeeping before its jump."""
        body = cast(cst.IndentedBlock, statement.body)
        last = cast(cst.SimpleStatementLine, body.body[-1])
        return all(self._bookkeeping(line) for line in [*body.body[:-1], last.with_changes(body=last.body[:-1])])

    def _no_update(self, line: cst.BaseStatement) -> bool:
        """A line (at any depth) with no optimizer step and no zeroing of its own."""
        for node in walk(line):
            if type(node) is cst.SimpleStatementLine and any(
                    self.objects.assignment_role(small, ()) is not None for small in node.body):
                return False
            if type(node) is cst.Call:
                role = self.objects.role(node, ())
                if role is not None and role.kind in ("step", "zero"):
                    return False
        return True

    def _bookkeeping(self, line: cst.BaseStatement) -> bool:
        """A line before a gate's `continue` that plays no role in the window (`data_start =
        time.time()`): the gate still skips the rest of the iteration."""
        if type(line) is not cst.SimpleStatementLine:
            return False
        if any(self.objects.assignment_role(small, ()) is not None for small in line.body):
            return False
        return all(self.objects.role(call, ()) is None and self.facts.helper(call, self.function) is None
                   for call in self.facts.calls_in(line))

    def _statement(self, statement: cst.BaseStatement, context: dict[str, Any]) -> None:
        kind = type(statement)  # exact types: LibCST's concrete nodes have no subclasses
        if kind is cst.SimpleStatementLine:
            self._simple(cast(cst.SimpleStatementLine, statement), context)
        elif kind is cst.If:
            self._if(cast(cst.If, statement), context)
        elif kind is cst.With:
            statement = cast(cst.With, statement)
            withs = context["withs"] + tuple(statement.items)
            self._context_helpers(statement, context)
            self._block(statement.body, **{**context, "withs": withs, "path": context["path"] + (statement,)})
        elif (kind is cst.For or kind is cst.While) and retry_loop(statement):
            # a retry loop runs its body once when it succeeds: its statements run once here
            statement = cast(Loop, statement)
            self._block(statement.body, **{**context, "path": context["path"] + (statement,), "escapes": False})
        elif kind is cst.For or kind is cst.While:
            statement = cast(Loop, statement)
            if self.own_level:
                return
            inner = {**context, "loops": context["loops"] + (statement,), "path": context["path"] + (statement,),
                     "escapes": False}  # a `continue` there continues that loop
            self._block(statement.body, **inner)
            if statement.orelse is not None:
                self._block(statement.orelse.body, **inner)
        elif kind is cst.Try or kind is cst.TryStar:
            statement = cast("cst.Try | cst.TryStar", statement)
            inner = {**context, "path": context["path"] + (statement,), "escapes": False}
            attempt = {**inner, "arms": context["arms"] + ((id(statement), 0),)}
            self._block(statement.body, **attempt)
            for index, handler in enumerate(statement.handlers, start=1):
                arms = context["arms"] + ((id(statement), index),)
                body = cast("cst.ExceptHandler | cst.ExceptStarHandler", handler).body
                self._block(body, **{**inner, "conditional": True, "arms": arms})
            if statement.orelse is not None:
                self._block(statement.orelse.body, **attempt)
            if statement.finalbody is not None:
                self._block(statement.finalbody.body, **inner)
        elif kind is cst.Match:
            inner = {**context, "conditional": True, "path": context["path"] + (statement,), "escapes": False}
            for index, case in enumerate(cast(cst.Match, statement).cases):
                self._block(case.body, **{**inner, "arms": context["arms"] + ((id(statement), index),)})

    def _context_helpers(self, statement: cst.With, context: dict[str, Any]) -> None:
        """`with sync_context(model, boundary):` where another project module defines the
        helper: its body runs here (it may enter `model.no_sync()`)."""
        if self.facts.project is None or context["helper"] is not None:
            return
        for item in statement.items:
            call = item.item
            if type(call) is cst.Call:
                helper = self.facts.helper(call, self.function)
                if helper is not None and self.facts.project.is_foreign(helper):
                    self._block(helper.body, **_entered(context, helper, call, backward_at_call=False))

    def _if(self, statement: cst.If, context: dict[str, Any], chained: bool = False) -> None:
        if self.probe:
            # whether a test is a window gate, a test on K or a run constant changes where its
            # arms' statements run, never which calls they make
            inside = {**context, "path": context["path"] + (statement,), "escapes": False}
            self._block(statement.body, **{**inside, "once": context["once"] or self._one_iteration(statement.test, context)})
            if type(statement.orelse) is cst.If:
                self._if(statement.orelse, inside)
            elif statement.orelse is not None:
                self._block(statement.orelse.body, **inside)
            return
        worlds_escape = False
        flag_set = None if chained else _flag_set(statement.body)
        # a chain that only sets a flag (`_flag_chain`) reads the flag's value before it
        flag_before = None if flag_set is None else (flag_set[0], self.assigned.get(flag_set[0]))
        test, frames = _through_parameters(statement.test, context["frames"])
        gate = self._generator_gate(test) if not frames else None
        if gate is None:
            gate = parse_gate(test, lambda name: _argument(name, frames) if _is_parameter(name, frames)
                              else self.assigned.get(name) or self._test_bound_before(name))
        if gate is not None and gate.kind == "count" and not self._counts_micro_batches(gate, [statement.body]):
            gate = None
        if gate is None and not frames:
            gate = self._countdown(test, statement)
        if gate is not None and id(statement) in self._paired:
            gate = replace(gate, paired=True)
        path = context["path"] + (statement,)
        # `if i % K != 0: ...` then `if i % K == 0: ...`: the second `if` is the first one's `else`
        earlier = self._complement_of.get(id(statement))
        branch, (true_arm, false_arm) = (id(statement), (0, 1)) if earlier is None else (earlier, (1, 0))
        on_true = {**context, "conditional": True, "path": path, "arms": context["arms"] + ((branch, true_arm),),
                   "escapes": False}
        on_false = {**on_true, "arms": context["arms"] + ((branch, false_arm),)}
        on_true["once"] = context["once"] or self._one_iteration(statement.test, context)
        if gate is not None:
            if gate.positive:
                on_true.update(gate=gate, gate_if=statement)
            else:
                on_false.update(gate=gate, gate_if=statement)
        else:
            k_is_one = single_micro_batch_arm(statement.test, self._is_accumulation_count)
            if k_is_one is not None:
                # K does not change during the run: the arm with K > 1 runs on every micro-batch
                (on_true if k_is_one else on_false)["single_micro_batch"] = True
                (on_false if k_is_one else on_true)["conditional"] = context["conditional"]
                (on_false if k_is_one else on_true)["escapes"] = context["escapes"]
            elif self._run_constant(statement.test, context["helper"]) or self._constant_at_call(statement.test,
                                                                                                 context["frames"]):
                # `if args.fp16: ... else: ...`: one arm runs on every micro-batch of a run
                on_true["conditional"] = on_false["conditional"] = context["conditional"]
                world = self._world_key(statement, context["helper"])
                on_true["worlds"] = context["worlds"] + ((world, 0),)
                on_false["worlds"] = context["worlds"] + ((world, 1),)
                on_true["world_tests"] = on_false["world_tests"] = context["world_tests"] + (statement,)
                if statement.orelse is not None and type(statement.orelse) is not cst.If:
                    # each world's arm runs on every micro-batch: a `continue` gate that ends both
                    # arms gates the rest of the iteration (below)
                    on_true["escapes"] = on_false["escapes"] = context["escapes"]
                    worlds_escape = True
        if gate is None and not chained:
            # `if last: self.end_of_iteration(a) else: self.end_of_iteration(b)`: a helper every arm
            # calls runs on every pass, as it would called before the `if`
            shared = _called_in_every_arm(statement)
            if shared:
                on_true["every_arm"] = on_false["every_arm"] = (shared, context)
        at_call = _value_at_call(statement.test, context["frames"])
        if at_call is not None:  # the arm this call always takes runs as unconditionally as the call
            (on_true if at_call else on_false)["conditional"] = context["conditional"]
        if not self._never_true(statement) and at_call is not False:
            self._block(statement.body, **on_true)
        escaped_true, self._escaped = self._escaped, None
        orelse = statement.orelse
        if orelse is not None and at_call is True:
            pass  # `if validation: return ... else: ...` walked with `validation=True`: no `else`
        elif type(orelse) is cst.If:
            self._if(orelse, on_false, chained=True)
        elif orelse is not None:
            self._block(orelse.body, **on_false)
        escaped_false, self._escaped = self._escaped, None
        if not worlds_escape:
            self._escaped = escaped_false or escaped_true
        elif escaped_true is not None and escaped_false is not None \
                and _code(escaped_true[0].test) == _code(escaped_false[0].test):
            # `if fp16: ...; if n < K: continue` / `else: ...; if n < K: continue`: in either
            # world the rest of the iteration runs only at the boundary
            self._escaped = escaped_true
        if flag_before is not None:
            flag = _flag_chain(statement, flag_before[1])
            if flag is not None:
                self.assigned[flag[0]] = flag[1]

    def _never_true(self, statement: cst.If) -> bool:
        """The test is false whenever it is reached: `if False:`, or a name its function only
        ever binds to `False`, `None` or `0` (`needs_update = False  # (it + 1) % K == 0`, a gate
        switched off by hand): the arm never runs, and nothing in it is the iteration's."""
        test = statement.test
        if _falsy_literal(test):
            return True
        if type(test) is not cst.Name:
            return False
        function = self.facts.enclosing_function(statement)
        bindings = [b for b in self.facts.bindings.get(test.value, ())
                    if self.facts.enclosing_function(b.statement) is function]
        return bool(bindings) and all(b.index is None and _falsy_literal(b.value) for b in bindings) \
            and test.value not in (_parameters(function) if function is not None else ())

    def _asserts_k_is_one(self, statement: cst.BaseStatement) -> bool:
        """`assert K == 1` (or `assert not K > 1`): what follows it in the block runs only
        where K is 1."""
        if type(statement) is not cst.SimpleStatementLine:
            return False
        return any(type(small) is cst.Assert
                   and single_micro_batch_arm(small.test, self._is_accumulation_count) is True
                   for small in statement.body)

    def _one_iteration(self, test: cst.BaseExpression, context: dict[str, Any]) -> bool:
        """`if step == 0:` (alone or in an `and`), with `step` a loop's counter: the arm runs at
        one iteration of that loop (a probe of the gradients before training, a setup), so a
        backward there is no micro-batch of a window."""
        counters: set[str] = set()
        for loop in (self.root, *context["loops"]):
            if type(loop) is cst.For:
                counters.update(n.value for n in walk(loop.target) if type(n) is cst.Name)
        pending, parts = [test], []
        while pending:
            part = pending.pop()
            if type(part) is cst.BooleanOperation and type(part.operator) is cst.And:
                pending += [part.left, part.right]
            else:
                parts.append(part)
        return any(_counter_equals_constant(part, counters) for part in parts)

    def _world_key(self, statement: cst.If, helper: Optional[Function]) -> int:
        """The key of the worlds a run-constant test splits: the `if` itself, or the first `if`
        of the walk with the same test in the same function, so that `if args.fp16:` around
        the backward and `if args.fp16:` around the clip later are the same run's arms."""
        return self._world_tests.setdefault((_code(statement.test), id(helper)), id(statement))

    def _run_constant(self, test: cst.BaseExpression, helper: Optional[Function], depth: int = 0) -> bool:
        """A test whose value cannot change between iterations (`args.fp16`, `scaler is not
        None`, `args.max_grad_norm > 0`, `rank == 0`): it reads only names and attributes
        that the loop (and the helper being walked) never binds, or binds only to such a
        value (`max_norm = cfg.max_grad_norm` in the body, `world_size = get_world_size()`),
        and calls nothing but the run's own shape (`_RUN_CONSTANT_CALLS`), nor reads a
        property of its class."""
        names: list[str] = []
        parts: set[int] = set()  # the pieces of a dotted name (`cfg`, `max_norm` in `cfg.max_norm`)
        for node in walk(test):
            kind = type(node)
            if kind is cst.Name or kind is cst.Attribute:
                name = dotted(node)
                if name is None:
                    return False
                if id(node) not in parts:
                    names.append(name)
                if kind is cst.Attribute:
                    attribute = cast(cst.Attribute, node)
                    parts.update((id(attribute.value), id(attribute.attr)))
            elif kind is cst.Subscript:
                if not _literal_key(cast(cst.Subscript, node)):
                    return False  # `conf["fp16"]` reads a run's setting; `flags[i]` may vary
            elif kind is cst.Call:
                call = cast(cst.Call, node)
                if not (_reads_setting(call) or not call.args
                        and last_part(dotted(call.func) or "") in _RUN_CONSTANT_CALLS):
                    return False  # `world_size = dist.get_world_size()` is the run's; other calls may vary
            elif kind not in _CONSTANT_TEST_NODES:
                return False
        varying = self._bound_in(self.root) | _parameters(self.root)  # a per-step function's arguments vary
        if helper is not None:
            varying = varying | self._bound_in(helper) | _parameters(helper)
        for name in names:
            pieces = name.split(".")
            if len(pieces) > 1 and pieces[0] == "self" and self.facts.method(helper or self.function, pieces[1]):
                return False  # `if self.at_boundary:`: a property of the class, computed on each read
            prefixes = [".".join(pieces[: index + 1]) for index in range(len(pieces))]
            if any(prefix in varying and not self._constant_alias(prefix, helper, depth) for prefix in prefixes):
                return False
            if any(chain.startswith(name + ".") for chain in varying):
                return False  # `cfg.fp16 = False` in the loop changes what `if cfg:` may see
        return True

    def _constant_at_call(self, test: cst.BaseExpression, frames: tuple[tuple[Function, cst.Call], ...]) -> bool:
        """`if mode == "train":` in a helper that the loop calls with `mode` bound outside the
        loop (`for mode, loader in ...:` around it): the test, each parameter replaced by what
        the call passes, is a run constant where the call is written (or a call further out)."""
        while frames:
            function, call = frames[-1]
            passed = _passed_into(function, call, test)
            if passed is None:
                return False
            frames = frames[:-1]
            if self._run_constant(passed, frames[-1][0] if frames else None):
                return True
            test = passed
        return False

    def _constant_alias(self, name: str, helper: Optional[Function], depth: int) -> bool:
        """Every binding of `name` in the loop (and the helper) is `name = <run constant>`, the
        same one each time."""
        if depth >= 2 or name in _parameters(self.root) or (helper is not None and name in _parameters(helper)):
            return False
        values = [*self._plain_values(self.root).get(name, ())]
        if helper is not None:
            values += self._plain_values(helper).get(name, ())
        if not values or any(value is None for value in values):
            return False
        if len({_code(value) for value in values if value is not None}) > 1:
            return False  # `flag = True` and `flag = False` in the loop: it changes between iterations
        return all(self._run_constant(value, helper, depth + 1) for value in values)

    def _plain_values(self, node: Optional[cst.CSTNode]) -> dict[str, list[Optional[cst.BaseExpression]]]:
        """What a loop or helper body binds each name to: the value of a one-target
        `name = value`, None for any other binding (a loop target, `+=`, `as`)."""
        if node is None:
            return {}
        return self.facts.once(_plain_values, node)

    def _bound_in(self, node: Optional[cst.CSTNode]) -> set[str]:
        """Names a loop or helper body binds (assignments, loop targets, `with ... as`)."""
        if node is None:
            return set()
        return self.facts.once(scopes.chains_in_targets, node)

    def _is_accumulation_count(self, node: cst.BaseExpression) -> bool:
        """A name for K: an accumulation count, or how many pieces the module splits a batch into."""
        name = dotted(node)
        return name is not None and (looks_like_accumulation(name, self.accumulation_names) or name in self.facts.piece_counts)

    def _countdown(self, test: cst.BaseExpression, statement: cst.If) -> Optional[Gate]:
        """`if not left:` where the loop counts `left` down on each micro-batch (`left -= 1`)
        and the arm where it has run out sets it back to K (`left = args.update_epochs`) and no
        other value: a gate that closes a window every K micro-batches, with that K."""
        gate = parse_countdown(test)
        if gate is None or gate.counter is None or self.root is None:
            return None
        arm = statement.body if gate.positive else statement.orelse.body if isinstance(statement.orelse, cst.Else) else None
        if arm is None:
            return None
        resets = [node.value for node in walk(arm) if type(node) is cst.Assign and len(node.targets) == 1
                  and dotted(node.targets[0].target) == gate.counter]
        if len(resets) != 1 or (int_value(resets[0]) is not None and (int_value(resets[0]) or 0) < 2):
            return None
        if not self._updates(gate.counter, [self.root], "-=", lambda value: int_value(value) == 1):
            return None
        return replace(gate, k=resets[0])

    def _counts_micro_batches(self, gate: Gate, body: Sequence[cst.CSTNode]) -> bool:
        """`micro == K` is a window gate when K is an accumulation count or the
        gated code (`body`) resets the counter (`micro = 0`), and `ni - last_step >= K`
        when it sets `last_step = ni`; `len(memory) >= batch_size` is not."""
        counter = gate.counter
        if counter is None or counter.endswith("()"):
            return False
        if gate.since is not None:
            # `ni - last_step >= K` is a window boundary when the gate remembers it: `last_step = ni`
            return self._updates(gate.since, body, "=", lambda value: dotted(value) == counter)
        if looks_like_accumulation(dotted(gate.k) or "", self.accumulation_names):
            return True
        return self._updates(counter, body, "=", lambda value: int_value(value) == 0)

    def _updates(self, name: str, nodes: Sequence[cst.CSTNode], operator: str,
                 value_is: Callable[[cst.BaseExpression], bool]) -> bool:
        """Whether code under `nodes` updates `name` (a name or attribute chain) with
        `operator` (`=`, `-=`, `+=`) to a value that `value_is` accepts."""
        return any(value_is(value) for node in nodes
                   for op, value in self.facts.once(_updates_by_target, node).get(name, ()) if op == operator)

    def _simple(self, line: cst.SimpleStatementLine, context: dict[str, Any]) -> None:
        record = Statement(
            node=line,
            order=len(self.statements),
            gate=context["gate"],
            gate_if=context["gate_if"],
            conditional=context["conditional"],
            loops=context["loops"],
            withs=context["withs"],
            block=context["path"],
            helper=context["helper"],
            callers=tuple(function for function, _ in context["frames"]),
            call_site=context.get("call_site"),
            arms=context["arms"],
            worlds=context["worlds"],
            world_tests=context["world_tests"],
            single_micro_batch=context["single_micro_batch"],
            jumps=context["jumps"],
        )
        self.statements.append(record)
        for small in line.body:
            self._remember(small)
            zeroing = self.objects.assignment_role(small, context["loops"], context["path"])
            if zeroing is not None:
                record.events.append(Event(zeroing, record))
        helpers: list[tuple[cst.Call, Function, bool, Optional[int]]] = []
        for call in self.facts.calls_in(line):
            role = self.objects.role(call, context["loops"])
            if role is not None:
                if role.kind == "backward" and context["backward_at_call"]:
                    continue  # the call of this method (`loss_scaler(loss, ...)`) is its backward
                if role.kind == "backward" and context["once"]:
                    continue  # run at one iteration of the loop, outside the windows
                record.events.append(Event(role, record))
                if role.flavor == "project" and len(context["frames"]) < _MAX_FRAMES:
                    # the rest of the object's method runs here too: its step, clip, scaler update
                    method = self.facts.called_method(call)
                    if method is not None:
                        helpers.append((call, method, True, None))
                continue
            within = context["helper"]
            if within is None:
                helper = self.facts.helper(call, self.function)
            else:
                local = len(context["frames"]) == 1 and not self.facts.foreign(within)
                helper = self.facts.nested_helper(call, within, local=local)
            if helper is None and within is None:
                # `ed_optimizer.step(loss, ...)` on a plain project object: its method runs here
                helper = self.facts.object_method(call) or self.facts.backward_method(call)
            if helper is not None:
                helpers.append((call, helper, False, None))
            elif len(context["frames"]) < _MAX_FRAMES:
                # `step_fn = step_mse if kind == "mse" else step_l1`: each runs in a world of its own
                alternatives = self.facts.aliased_functions(call)
                for index, alternative in enumerate(alternatives):
                    helpers.append((call, alternative, False, index if len(alternatives) > 1 else None))
        every_arm = context["every_arm"]
        for call, helper, backward_at_call, world in helpers:
            entering = context
            if every_arm is not None and _direct_call_statement(line, call) and dotted(call.func) in every_arm[0]:
                # as if called before the `if`, in the arm it is called from: each arm's call
                # is the same pass's, and the two are exclusive
                entering = {**every_arm[1], "path": context["path"], "arms": context["arms"]}
            if world is not None:
                arm = ((id(call), world),)
                entering = {**entering, "arms": entering["arms"] + arm, "worlds": entering["worlds"] + arm}
            self._block(helper.body, **_entered(entering, helper, call, backward_at_call=backward_at_call))
            self._escaped = None  # a helper's `return` gate ends with the helper
        if helpers:
            for small in line.body:  # the helper's own names, walked above, are not the caller's
                self._remember_returned_flags(small)

    def _test_bound_before(self, name: str) -> Optional[cst.BaseExpression]:
        """A comparison `name` is bound to once where the loop's function reads it, outside the
        loop (`use_accum = accum_steps > 0` before `for ...:`), read where the loop tests the
        name; None otherwise."""
        bindings = self.facts.values_in(name, self.function)
        if len(bindings) != 1 or type(bindings[0].value) is not cst.Comparison or bindings[0].index is not None \
                or name in self._bound_in(self.root):
            return None
        return bindings[0].value

    def _remember(self, small: cst.BaseSmallStatement) -> None:
        """Track assignments in iteration order (a gate on a variable reads its value)."""
        if type(small) is cst.Assign and len(small.targets) == 1:
            name = dotted(small.targets[0].target)
            if name is not None:
                self.assigned[name] = small.value

    def _remember_returned_flags(self, small: cst.BaseSmallStatement) -> None:
        """A name bound to a module helper's returned flag of whether it stepped holds the
        helper's test, read with the call's arguments (`_returned_flag`): `loss, did_step =
        train_step(..., batch_index=i)`, then `if did_step:` runs once per window."""
        if type(small) is cst.Assign and len(small.targets) == 1:
            target = small.targets[0].target
            if type(small.value) is cst.Call and (type(target) is cst.Tuple or type(target) is cst.Name):
                helper = self.facts.helper(small.value, self.function)
                elements = [e.value for e in target.elements] if type(target) is cst.Tuple else [target]
                for position, element in enumerate(elements):
                    test = _returned_flag(helper, small.value, position if type(target) is cst.Tuple else None) \
                        if helper is not None and type(element) is cst.Name else None
                    if test is not None:
                        self.assigned[cast(cst.Name, element).value] = test


def _flag_chain(statement: cst.If, before: Optional[cst.BaseExpression]) -> Optional[tuple[str, cst.BaseExpression]]:
    """`if i == 0: update = False` / `elif i % K == 0: update = True` / `else: update =
    False`: a chain whose every arm only sets one flag to `True` or `False` leaves the flag
    equal to a test built from the arms' tests (`not A and B`), so that `if update:` reads
    as the gate it holds. Without an `else` the flag keeps its earlier literal value when
    no arm runs. None for any other chain."""
    arms: list[tuple[Optional[cst.BaseExpression], bool]] = []  # (the arm's test, the value it sets)
    name: Optional[str] = None
    arm: Union[cst.If, cst.Else, None] = statement
    while arm is not None:
        value = _flag_set(arm.body)
        if value is None or (name is not None and value[0] != name):
            return None
        name = value[0]
        if type(arm) is cst.If:
            arms.append((arm.test, value[1]))
            arm = arm.orelse
        else:
            arms.append((None, value[1]))
            arm = None
    if name is None:
        return None
    if arms[-1][0] is not None:  # no `else`: the value before the chain when no arm runs
        literal = dotted(before) if before is not None else None
        if literal not in ("True", "False"):
            return None
        arms.append((None, literal == "True"))
    terms: list[cst.BaseExpression] = []
    passed: list[cst.BaseExpression] = []  # the tests of the arms above (false here)
    for test, sets_true in arms:
        if sets_true:
            parts: list[cst.BaseExpression] = [cst.UnaryOperation(cst.Not(), _parenthesized(t)) for t in passed]
            if test is not None:
                parts.append(test)
            if not parts:
                return None  # true whatever the tests: not a gate
            terms.append(_joined(parts, cst.And()))
        if test is not None:
            passed.append(test)
    return (name, _joined(terms, cst.Or())) if terms else None


def _counter_equals_constant(test: cst.BaseExpression, counters: set[str]) -> bool:
    """`step == 0` / `0 == step` for a counter among `counters`."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 \
            or type(test.comparisons[0].operator) is not cst.Equal:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(type(a) is cst.Name and a.value in counters and type(b) is cst.Integer for a, b in (sides, sides[::-1]))


def _joined(parts: list[cst.BaseExpression], operator: "cst.And | cst.Or") -> cst.BaseExpression:
    joined = parts[0]
    for part in parts[1:]:
        joined = cst.BooleanOperation(joined, operator, part)
    return joined


def _flag_set(body: cst.BaseSuite) -> Optional[tuple[str, bool]]:
    """`flag = True` / `flag = False` as an arm's only statement."""
    if type(body) is cst.IndentedBlock:
        lines = body.body
        line = lines[0] if len(lines) == 1 else None
        smalls: Sequence[cst.BaseSmallStatement] = line.body if type(line) is cst.SimpleStatementLine else ()
    else:
        smalls = cast(cst.SimpleStatementSuite, body).body
    assign = smalls[0] if len(smalls) == 1 else None
    if type(assign) is not cst.Assign or len(assign.targets) != 1:
        return None
    name = dotted(assign.targets[0].target)
    literal = dotted(assign.value)
    if name is None or literal not in ("True", "False"):
        return None
    return name, literal == "True"


def _parenthesized(test: cst.BaseExpression) -> cst.BaseExpression:
    return test if test.lpar else test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# How many calls deep from the loop an object's method is walked (see `_Walker._simple`).
_MAX_FRAMES = 2


def _entered(context: dict[str, Any], helper: Function, call: cst.Call, *, backward_at_call: bool) -> dict[str, Any]:
    """The walk's context inside a helper that `call` runs."""
    return {**context, "helper": helper, "call_site": call, "frames": context["frames"] + ((helper, call),),
            "backward_at_call": backward_at_call, "every_arm": None}


def _called_in_every_arm(statement: cst.If) -> frozenset[str]:
    """The callees (`self.end_of_iteration`) that every arm of an `if`/`elif`/`else` chain
    ending in `else` calls as a statement of its own, at the arm's top level."""
    arms: list[cst.BaseSuite] = []
    node: Optional[cst.BaseStatement] = statement
    while type(node) is cst.If:
        arms.append(node.body)
        orelse = node.orelse
        if orelse is None:
            return frozenset()
        node = orelse if type(orelse) is cst.If else None
        if type(orelse) is cst.Else:
            arms.append(orelse.body)
    shared: Optional[set[str]] = None
    for arm in arms:
        smalls = [small for line in arm.body if type(line) is cst.SimpleStatementLine for small in line.body] \
            if type(arm) is cst.IndentedBlock else list(cast(cst.SimpleStatementSuite, arm).body)
        called = {name for small in smalls if type(small) is cst.Expr and type(small.value) is cst.Call
                  and (name := dotted(small.value.func)) is not None}
        shared = called if shared is None else shared & called
    return frozenset(shared or ())


def _direct_call_statement(line: cst.SimpleStatementLine, call: cst.Call) -> bool:
    """The line is the call as a statement of its own (`self.end_of_iteration(data, i)`)."""
    return any(type(small) is cst.Expr and small.value is call for small in line.body)


def _is_parameter(name: str, frames: tuple[tuple[Function, cst.Call], ...]) -> bool:
    """`name` is a parameter of the innermost helper being walked (not a name of the loop)."""
    return bool(frames) and name in scopes.all_parameters(frames[-1][0])


def _argument(name: str, frames: tuple[tuple[Function, cst.Call], ...]) -> Optional[cst.BaseExpression]:
    """What a parameter of the innermost helper holds in this walk: the argument its call
    passes. None when `name` is not its parameter, or the call passes none (the default)."""
    if not _is_parameter(name, frames):
        return None
    helper, call = frames[-1]
    return argument_for(helper, call, name)


def _passed_into(function: Function, call: cst.Call, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`value`, written in `function`, with each of its parameters replaced by what `call`
    passes for it; None when the call passes one of them no value (its default applies)."""
    parameters = scopes.all_parameters(function)
    attributes = {id(n.attr) for n in walk(value) if type(n) is cst.Attribute}
    for node in [n for n in walk(value) if type(n) is cst.Name and n.value in parameters and id(n) not in attributes]:
        argument = argument_for(function, call, node.value)
        if argument is None:
            return None
        value = value.deep_replace(node, argument) if value is not node else argument
    return value


def _through_parameters(test: cst.BaseExpression, frames: tuple[tuple[Function, cst.Call], ...]
                        ) -> tuple[cst.BaseExpression, tuple[tuple[Function, cst.Call], ...]]:
    """`if update_grad:` in a helper whose call passes `update_grad=(i + 1) % K == 0`: the
    test is that argument, written at the call (where a fix of the gate applies), read in
    the caller's scope (the frames left)."""
    while type(test) is cst.Name:
        argument = _argument(test.value, frames)
        if argument is None:
            break
        test, frames = argument, frames[:-1]
    return test, frames


def _value_at_call(test: cst.BaseExpression, frames: tuple[tuple[Function, cst.Call], ...]) -> Optional[bool]:
    """The value of a helper's test on one of its parameters (`if validation:`, `if not train:`)
    in this walk, when the call passes that parameter a literal (`self._do_batch(batch, step,
    validation=True)`) or leaves it to a literal default; None otherwise."""
    negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
    name = cast(cst.UnaryOperation, test).expression if negated else test
    if type(name) is not cst.Name:
        return None
    argument = _argument(name.value, frames)
    if argument is None and _is_parameter(name.value, frames):
        argument = scopes.default_of(frames[-1][0], name.value)  # the call passes none: the default holds
    if type(argument) is cst.Name and argument.value in ("True", "False", "None"):
        truth = argument.value == "True"
    elif argument is not None and int_value(argument) is not None:
        truth = int_value(argument) != 0
    else:
        return None
    return truth != negated


def _falsy_literal(node: cst.BaseExpression) -> bool:
    """`False`, `None` or `0` as written."""
    return (type(node) is cst.Name and node.value in ("False", "None")) or int_value(node) == 0


# Calls, without arguments, that answer for the whole run: its processes and devices.
_RUN_CONSTANT_CALLS = frozenset({
    "get_world_size", "get_rank", "get_local_rank", "get_local_world_size", "device_count", "is_initialized",
    "is_available", "is_main_process", "is_local_main_process",
})


def _reads_setting(call: cst.Call) -> bool:
    """`config.get("max_grad_norm")`, `cfg.get("clip", 0)`, `getattr(args, "clip", None)`: a
    read of a setting by a literal key, as constant as the object it reads (whose name the
    run-constant test then checks like any other)."""
    if not call.args or any(arg.star or arg.keyword is not None for arg in call.args):
        return False
    values = [arg.value for arg in call.args]
    func = call.func
    if type(func) is cst.Attribute and func.attr.value == "get":
        return len(values) <= 2 and dotted(func.value) is not None and all(_is_literal(v) for v in values)
    return type(func) is cst.Name and func.value == "getattr" and 2 <= len(values) <= 3 \
        and dotted(values[0]) is not None and type(values[1]) is cst.SimpleString and all(_is_literal(v) for v in values[1:])


def _is_literal(value: cst.BaseExpression) -> bool:
    """A string, a number, `None`, `True` or `False`."""
    return type(value) in (cst.SimpleString, cst.Integer, cst.Float) or (
        type(value) is cst.Name and value.value in ("None", "True", "False"))


_CONSTANT_TEST_NODES = frozenset({
    cst.Arg,
    cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation, cst.UnaryOperation, cst.Integer, cst.Float,
    cst.SimpleString, cst.Is, cst.IsNot, cst.Equal, cst.NotEqual, cst.GreaterThan, cst.GreaterThanEqual,
    cst.LessThan, cst.LessThanEqual, cst.In, cst.NotIn, cst.And, cst.Or, cst.Not, cst.Minus, cst.LeftParen,
    cst.RightParen, cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.TrailingWhitespace,
    cst.EmptyLine, cst.Comment, cst.Dot, cst.ConcatenatedString, cst.Tuple, cst.List, cst.Element, cst.Comma,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.SubscriptElement, cst.Index,
})


def _literal_key(subscript: cst.Subscript) -> bool:
    """`conf["max_grad_norm"]`, `cfg[0]`: one literal key on a plain or dotted name."""
    if dotted(subscript.value) is None or len(subscript.slice) != 1:
        return False
    index = subscript.slice[0].slice
    return type(index) is cst.Index and type(index.value) in (cst.SimpleString, cst.Integer)


def _plain_values(node: cst.CSTNode) -> dict[str, list[Optional[cst.BaseExpression]]]:
    """Names bound under `node`, each with its assigned values (None for a binding that
    is not a one-target `name = value`: a loop target, `+=`, `as`, unpacking)."""
    found: dict[str, list[Optional[cst.BaseExpression]]] = {}
    for child in walk(node):
        kind = type(child)
        if type(child) is cst.Assign and len(child.targets) == 1 and type(child.targets[0].target) is cst.Name:
            found.setdefault(child.targets[0].target.value, []).append(child.value)
            continue
        if kind is cst.Assign:
            targets: list[cst.BaseExpression] = [t.target for t in cast(cst.Assign, child).targets]
        elif kind in (cst.AugAssign, cst.AnnAssign, cst.For):
            targets = [cast("cst.AugAssign | cst.AnnAssign | cst.For", child).target]
        elif kind is cst.AsName or kind is cst.NamedExpr:
            targets = [cast(cst.AsName, child).name if kind is cst.AsName else cast(cst.NamedExpr, child).target]
        else:
            continue
        for target in targets:
            for part in walk(target):
                if type(part) is cst.Name:
                    found.setdefault(part.value, []).append(None)
    return found


_UPDATE_OPERATORS: dict[type, str] = {cst.AddAssign: "+=", cst.SubtractAssign: "-="}


def _updates_by_target(node: cst.CSTNode) -> dict[str, list[tuple[str, cst.BaseExpression]]]:
    """Each name or attribute chain that code under `node` assigns (`counter = 0`,
    `a = b = 0`, `self.left -= 1`), with the operator (`=`, `+=`, `-=`) and the value."""
    found: dict[str, list[tuple[str, cst.BaseExpression]]] = {}
    for child in walk(node):
        if type(child) is cst.Assign:
            for target in child.targets:
                name = dotted(target.target)
                if name is not None:
                    found.setdefault(name, []).append(("=", child.value))
        elif type(child) is cst.AugAssign and type(child.operator) in _UPDATE_OPERATORS:
            name = dotted(child.target)
            if name is not None:
                found.setdefault(name, []).append((_UPDATE_OPERATORS[type(child.operator)], child.value))
    return found


def _parameters(function: Optional[cst.CSTNode]) -> frozenset[str]:
    """A function's parameters but its receiver (`self`, `cls`); none for a loop."""
    if type(function) is not cst.FunctionDef:
        return frozenset()
    return scopes.all_parameters(function) - _RECEIVERS


_RECEIVERS = frozenset({"self", "cls"})


# -- building the loops of a module ----------------------------------------------


def build_loops(
    facts: ModuleFacts, objects: Objects, accumulation_names: tuple[str, ...] = (), made: Optional[list[Statement]] = None
) -> list[TrainingLoop]:
    """Every training loop of the module, once each, with inner micro-step loops merged.

    A micro-step loop whose step follows it in an enclosing loop (that runs no backward
    of its own) makes that loop the window; in a function with no enclosing loop (`training_step`, `update_policy(self,
    batch)`: the loop over steps is in a caller or a framework), the function's body
    is the window. `made`, when given, receives every Statement the walks make,
    kept or not, for `release`."""
    sites = {cast(Loop, site.node): site for site in facts.loops}  # the module's loops (`facts._record_loop`)
    walks: dict[cst.CSTNode, tuple[LoopSite, list[Statement]]] = {}

    def walked(site: LoopSite) -> list[Statement]:
        """The whole body of a loop (or of a function) walked, inner loops included, once."""
        if site.node not in walks:
            walker = _Walker(facts, objects, site.function, accumulation_names, made=made)
            walks[site.node] = (site, walker.walk(site.node.body, site.node))
        return walks[site.node][1]

    def runs_backward(site: LoopSite) -> bool:
        """Whether the loop itself (its inner loops left out) runs a backward. An outer loop
        (over epochs) often runs none of its own, and its inner loops need not be walked
        for it; most loops of a module (evaluation, data preparation) run none at all, and
        for them the walk reads no test (`_Walker.probe`): the few that do are walked in full."""
        walker = _Walker(facts, objects, site.function, accumulation_names, own_level=True, probe=True, made=made)
        return bool(direct(walker.walk(site.node.body, site.node), "backward"))

    def direct(statements: list[Statement], kind: RoleKind) -> list[Event]:
        return [e for s in statements if not s.loops for e in s.events if e.kind == kind]

    def steps_after(statements: list[Statement], inner: Loop) -> bool:
        inner_orders = [s.order for s in statements if inner in s.loops]
        return bool(inner_orders) and any(e.order > max(inner_orders) for e in direct(statements, "step"))

    def micro_batches(inner: Loop, around: list[Statement], per_call: bool = False) -> bool:
        """An inner loop that visibly walks one step's micro-batches, beside which the enclosing
        loop or function runs backwards of its own in the same iteration (a loss over the whole
        batch, `contrastive.backward()` after the loop): they add to the same window. A backward
        in another arm than the inner loop (`if accum_freq == 1: loss.backward(); step` / `else:`
        the micro-step loop) is another world's update: the enclosing loop stays the window.
        A function (`per_call`) that steps after both arms (`if splits == 1: backward` / `else:`
        the loop over the batch's pieces, then one step) is the window of the loop's world."""
        if not _walks_micro_batches(inner, accumulation_names, facts):
            return False
        first = next((s for s in around if inner in s.loops), None)
        return first is not None and all(
            not s.single_micro_batch and not s.exclusive_with(first)
            for s in around if not s.loops and any(e.kind == "backward" for e in s.events)
            and not (per_call and s.exclusive_with(first)))

    chosen: dict[Union[Loop, Function], Optional[Loop]] = {}
    # a per-step function's micro-step loops after its first, each stepped after it (`chosen` holds the first)
    later_micro_loops: dict[Union[Loop, Function], list[Loop]] = {}
    node: Union[Loop, Function]
    for node, site in sites.items():
        if retry_loop(node) or not runs_backward(site):
            continue
        statements = walked(site)
        parent = _parent_loop(site)
        if not direct(statements, "step") and parent is not None and parent in sites:
            around = walked(sites[parent])
            grand = _parent_loop(sites[parent])
            if not direct(around, "step") and not direct(around, "backward") and grand is not None and grand in sites:
                # the step may be two loops up: a loop over depths around one over widths
                parent, around = grand, walked(sites[grand])
            if steps_after(around, node) and (not direct(around, "backward") or micro_batches(node, around)):
                if chosen.get(parent) is None:  # the parent, walked first for its own backward
                    # an inner loop beside a step gated on a count is one iteration's several
                    # backwards (sub-networks, heads), not the window's micro-batches
                    gated = any(e.statement.gate is not None and e.statement.gate.kind in ("modulo", "count")
                                for e in direct(around, "step"))
                    chosen[parent] = None if gated and not _walks_micro_batches(node, accumulation_names, facts) else node
                continue
        function = site.function
        if not direct(statements, "step") and parent is None and function is not None:
            around = walked(LoopSite(function, site.ancestors[: site.ancestors.index(function) + 1]))
            if steps_after(around, node) and (not direct(around, "backward") or micro_batches(node, around, per_call=True)):
                if chosen.get(function) not in (None, node):
                    later_micro_loops.setdefault(function, []).append(node)  # a GAN's generator after its critic
                chosen.setdefault(function, node)
                continue
            if (not direct(around, "step") and _walks_micro_batches(node, accumulation_names, facts)
                    and _caller_steps_after(facts, function, walked, direct)):
                chosen.setdefault(function, node)
                continue
        chosen.setdefault(node, None)

    loops = [*_lightning_steps(facts, objects, skip=chosen, made=made)]
    helpers = {id(s.helper) for node in chosen for s in walks[node][1] if s.helper is not None}
    loops += _per_call_windows(facts, objects, chosen, helpers, accumulation_names, made)
    for node, micro in chosen.items():
        site, statements = walks[node]
        nested_training = {other for other in chosen if other is not node}
        # the arm of a test on K that runs with K == 1 is a plain loop: no window there
        # a helper that is a window of its own (a per-step function with a micro-step loop) is
        # not part of the loop that calls it, as an inner training loop is not
        kept = [s for s in statements
                if not s.single_micro_batch and not any(loop in nested_training for loop in s.loops)
                and not any(caller in nested_training for caller in s.callers)]
        _drop_update_gates(kept)
        for part_micro, part in _split_by_micro_loops(kept, micro, later_micro_loops.get(node, [])):
            for world in _worlds(part):
                loop = TrainingLoop(site=site, statements=world, micro_loop=part_micro)
                _read_header(loop, facts)
                _read_derived_counters(loop)
                loops.append(loop)
    return loops


def _split_by_micro_loops(statements: list[Statement], first: Optional[Loop],
                          later: list[Loop]) -> list[tuple[Optional[Loop], list[Statement]]]:
    """A per-step function with several micro-step loops, each followed by its own step
    (a GAN's critic, then its generator, over K micro-batches each): one window per micro-step
    loop. The statements between two of them go with the first up to its last step (and
    what follows that step before a zeroing), the rest with the next. When no step stands
    between two of them, the function stays one window around the first."""
    if first is None or not later:
        return [(first, statements)]
    micros = sorted({first, *later}, key=lambda m: min((s.order for s in statements if m in s.loops), default=-1))
    spans = []
    for micro in micros:
        orders = [s.order for s in statements if micro in s.loops]
        if not orders:
            return [(first, statements)]
        spans.append((min(orders), max(orders)))
    bounds = []
    for (_, end), (start, _) in zip(spans, spans[1:]):
        between = sorted((s for s in statements if end < s.order < start and not s.loops), key=lambda s: s.order)
        steps = [s.order for s in between if any(e.kind == "step" for e in s.events)]
        if not steps:
            return [(first, statements)]
        bound = steps[-1]
        for s in between:
            if s.order <= bound:
                continue
            if any(e.kind == "zero" for e in s.events):
                break
            bound = s.order
        bounds.append(bound)
    parts: list[tuple[Optional[Loop], list[Statement]]] = []
    low = -1
    for micro, high in zip(micros, [*bounds, None]):
        parts.append((micro, [s for s in statements if s.order > low and (high is None or s.order <= high)]))
        low = high if high is not None else low
    return parts


_MICRO_ITERABLE = re.compile(r"micro|chunk|split|shard", re.IGNORECASE)


def _walks_micro_batches(loop: Loop, accumulation_names: tuple[str, ...], facts: ModuleFacts) -> bool:
    """A loop that visibly walks the micro-batches of one step: `range(K)` over an
    accumulation count, `range(0, n, size)` over slices of a batch, micro-batches, chunks
    or splits by name (not a loop over models, losses or tasks), or the pieces of a batch
    through the one name bound to them (`pieces = torch.split(data, size)`)."""
    if type(loop) is not cst.For:
        return False
    walked = facts.pieces_walked(loop.iter)
    if walked is not None and walked[0] is not None:
        return True
    iterable = loop.iter
    if type(iterable) is cst.Call and last_part(call_name(iterable) or "") == "range":
        if len(iterable.args) == 1:
            bound = iterable.args[0].value
            if type(bound) is cst.BinaryOperation and type(bound.operator) is cst.Subtract and int_value(bound.right) == 1:
                bound = bound.left  # `range(K - 1)`: all but the window's last micro-batch, which follows the loop
            return looks_like_accumulation(dotted(bound) or "", accumulation_names)
        return len(iterable.args) == 3 and int_value(iterable.args[0].value) == 0
    return bool(_MICRO_ITERABLE.search(_code(iterable)))


def _caller_steps_after(facts: ModuleFacts, function: Function, walked: Callable[[LoopSite], list[Statement]],
                        direct: Callable[[list[Statement], RoleKind], list[Event]]) -> bool:
    """A function whose inner loop runs the backward over micro-batches (`forward_backward`)
    and whose every caller in the module steps the optimizer after calling it (`run_step`:
    `self.forward_backward(batch); self.optimize()`): the function's body is a window whose
    step is one call up."""
    sites = scopes.call_sites(facts, function)
    if not sites:
        return False
    for call in sites:
        caller = facts.enclosing_function(call)
        if caller is None or caller is function:
            return False
        statements = walked(LoopSite(caller, ancestors(facts.parents, caller) + (caller,)))
        calling = next((s for s in statements if s.helper is None and any(n is call for n in walk(s.node))), None)
        if calling is None or calling.loops or direct(statements, "backward"):
            return False
        later = [s for s in statements if s.order > calling.order and not s.exclusive_with(calling) and not s.loops]
        if not any(e.kind == "step" for s in later for e in s.events) and not any(
                facts.steps_through_object(inner) for s in later for inner in facts.calls_in(s.node)):
            return False
    return True


_MAX_WORLD_SPLITS = 2


def _worlds(statements: list[Statement]) -> list[list[Statement]]:
    """The iteration as each run sees it: a run-constant test (`if args.fp16:` / `else:`)
    whose arms both hold a backward or a step splits the loop in two worlds, one per arm
    (a plain loop in one, an accumulating one in the other). Up to two such tests."""
    arms: dict[int, set[int]] = {}
    for statement in statements:
        if any(e.kind in ("backward", "step") for e in statement.events):
            for test, arm in statement.worlds:
                arms.setdefault(test, set()).add(arm)
    splits = [test for test, seen in arms.items() if len(seen) > 1][:_MAX_WORLD_SPLITS]
    worlds = [statements]
    for test in splits:
        worlds = [
            [s for s in world if all(t != test or a == arm for t, a in s.worlds)]
            for world in worlds for arm in sorted(arms[test])
        ]
    return worlds


def _complementary_ifs(statements: Sequence[cst.BaseStatement]) -> dict[int, int]:
    """Sibling `if`s (no `else`) of one block whose tests are one modulo gate and its negation
    (`if idx % K != 0:` around the non-boundary micro-batch's work, then `if idx % K == 0:`
    around the boundary's): id of the later `if` -> id of the earlier one. At most one of
    the two runs in an iteration, as the arms of one `if`/`else` would, unless the counter
    changes between the two tests (the earlier `if`'s body or a statement between them
    assigns it)."""
    found: dict[int, int] = {}
    opened: list[tuple[cst.If, Gate, int]] = []  # earlier gated `if`s, with their position in the block
    for index, statement in enumerate(statements):
        if type(statement) is not cst.If or statement.orelse is not None:
            continue
        gate = parse_gate(statement.test, lambda name: None)
        if gate is None or gate.kind != "modulo" or gate.has_clause or gate.has_condition or gate.counter is None:
            continue
        for earlier, other, position in opened:
            if other.positive == gate.positive or other.counter != gate.counter or other.form != gate.form \
                    or other.k is None or gate.k is None or _code(other.k) != _code(gate.k):
                continue
            between = [earlier.body, *statements[position + 1:index]]
            if not any(gate.counter in scopes.chains_in_targets(node) for node in between):
                found[id(statement)] = id(earlier)
                break
        opened.append((statement, gate, index))
    return found


def _drop_update_gates(statements: list[Statement]) -> None:
    """A `% K` test around a whole update (its own backward and step, as in TD3's
    delayed actor update) is a schedule, not a window boundary."""
    for gate in {id(s.gate): s.gate for s in statements if s.gate is not None}.values():
        gated = [s for s in statements if s.gate is gate]
        under = [e.kind for s in gated for e in s.events]
        # a backward in the other arm (`else: with model.no_sync(): loss.backward()`)
        # makes the `if` a window boundary, not a whole update; unless that arm is a whole
        # update of its own (`if i % 2 == 0: update A else: update B`, alternating optimizers)
        # the other arm of the gate's own test, not another world's (`if args.deepspeed: engine
        # update else: gated manual update` is two runs, each with its own update)
        others = [s for s in statements if s.gate is not gate and _exclusive_within_world(s, gated[0])]
        other_arm = any(
            any(e.kind == "backward" for e in s.events)
            and not any(o.order > s.order and not o.exclusive_with(s) and any(e.kind == "step" for e in o.events)
                        for o in others)
            for s in others
        )
        # a step under the gate before any backward of its own there steps what the
        # iterations accumulated (a GAN's discriminator, then the generator's whole update)
        closes_window = any(
            any(e.kind == "step" for e in s.events)
            and not any(o.order <= s.order and any(e.kind == "backward" for e in o.events) for o in gated)
            for s in gated)
        whole = "backward" in under and "step" in under and not other_arm and not closes_window
        if whole or _alternates_steps(gated, others):
            for statement in statements:
                if statement.gate is gate:
                    statement.gate = None
                    statement.update_gate = gate if whole else None


def _exclusive_within_world(statement: Statement, other: Statement) -> bool:
    """`Statement.exclusive_with`, through a test that is not a run-constant one splitting the
    loop into worlds (`_worlds`): the two statements may run in the same run."""
    worlds = {key for key, _ in statement.worlds} | {key for key, _ in other.worlds}
    mine = dict(other.arms)
    return any(branch not in worlds and mine.get(branch, arm) != arm for branch, arm in statement.arms)


def _alternates_steps(gated: list[Statement], others: list[Statement]) -> bool:
    """`if i % (n_critic + 1) == 0: opt_ae.step() else: opt_disc.step()`: the test's arms step
    different optimizers, so each iteration steps one of them; the test picks which update
    runs (an adversarial schedule), and no micro-batch waits for a window to close."""
    def stepped(arm: list[Statement]) -> set[str]:
        return {_code(e.role.target) for s in arm for e in s.events if e.kind == "step" and e.role.target is not None}

    mine, theirs = stepped(gated), stepped(others)
    return bool(mine) and bool(theirs) and not mine & theirs


def _parent_loop(site: LoopSite) -> Optional[Loop]:
    for node in reversed(site.ancestors):
        if type(node) is cst.FunctionDef:
            return None
        if type(node) in (cst.For, cst.While) and not retry_loop(node):
            return cast(Loop, node)
    return None


def _ends_in_break(suite: Optional[cst.CSTNode]) -> bool:
    """The block's last statement leaves the loop: a `break`, or a `return` (a function whose
    loop returns at the end of its first pass runs it once)."""
    body = getattr(suite, "body", None)
    if not isinstance(body, Sequence) or not body:
        return False
    last = body[-1]
    return type(last) is cst.SimpleStatementLine and type(last.body[-1]) in (cst.Break, cst.Return)


def _continues(node: cst.CSTNode) -> bool:
    """A `continue` of the loop whose body `node` is (not of a loop or function inside it)."""
    for child in children(node):
        kind = type(child)
        if kind is cst.Continue:
            return True
        if kind not in (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda) and _continues(child):
            return True
    return False


def retry_loop(loop: cst.CSTNode) -> bool:
    """A loop that leaves on its first pass that completes: its body ends in `break` (or
    `return`), or in a `try` whose body or `else` ends in one (`while chunk_size: try: ...; except OOM:
    chunk_size //= 2; else: break`), and nothing in it continues it. It repeats only to
    retry after a failure, so it is no loop over micro-batches: what it holds runs once per
    enclosing iteration."""
    if type(loop) not in (cst.For, cst.While):
        return False
    body = getattr(loop, "body")
    statements = getattr(body, "body", ())
    last = statements[-1] if isinstance(statements, Sequence) and statements else None
    leaves = _ends_in_break(body) or (type(last) is cst.Try and (
        _ends_in_break(last.body) or (last.orelse is not None and _ends_in_break(last.orelse.body))))
    # a `continue` of its own repeats it on purpose (`if not boundary: continue`): a loop of its own
    return leaves and not _continues(body)


def _read_header(loop: TrainingLoop, facts: ModuleFacts) -> None:
    """The loop's own counter (`enumerate`, `range`, tqdm's `trange`, through a progress bar)
    and the iterable it walks."""
    node = loop.node
    if type(node) is not cst.For:
        return
    target, iterable = node.target, _through_wrapper_lambda(node.iter, facts, loop.function)
    iterable = _enumerated(iterable, facts, loop.function) or iterable
    # a progress bar keeps what it wraps: `tqdm(enumerate(loader))`, `tqdm(range(n))`
    bare = unwrap_iterable(iterable)
    if type(bare) is cst.Call and last_part(call_name(bare) or "") in ("enumerate", "range", "trange"):
        iterable = bare
    if type(iterable) is cst.Call and last_part(call_name(iterable) or "") == "enumerate":
        if type(target) in (cst.Tuple, cst.List) and (elements := cast("cst.Tuple | cst.List", target).elements):
            loop.counter = dotted(elements[0].value)
            start = keyword(iterable, "start")
            start_value = start.value if start is not None else positional(iterable, 1)
            loop.counter_base = 0 if start_value is None else int_value(start_value)
            walked = _through_generator(unwrap_iterable(positional(iterable, 0)), facts, loop.function)
            loop.iterable = _through_progress_bar(walked, facts, loop.function)
        return
    if type(iterable) is cst.Call and last_part(call_name(iterable) or "") in ("range", "trange"):
        loop.counter = dotted(target)
        first = positional(iterable, 0)
        loop.counter_base = 0 if positional(iterable, 1) is None else int_value(first)
        return
    loop.iterable = _through_progress_bar(_through_generator(unwrap_iterable(iterable), facts, loop.function),
                                          facts, loop.function)


def _through_generator(iterable: Optional[cst.BaseExpression], facts: ModuleFacts,
                       function: Optional[Function]) -> Optional[cst.BaseExpression]:
    """`metric_logger.log_every(data_loader, print_freq, header)`, where the call runs a
    project function or method that is a generator yielding each item of one of its
    parameters once (`for obj in iterable: ...; yield obj; ...`, timing or logging around
    it): the loop walks what the call passes for that parameter. Anything else, or a callee
    that cannot be read, is walked as it is."""
    if type(iterable) is not cst.Call:
        return iterable
    func = iterable.func
    callee = facts.instance_method(dotted(func.value), func.attr.value) if type(func) is cst.Attribute else None
    if callee is None:
        callee = facts.helper(iterable, function)
    if callee is None:
        return iterable
    parameter = _yielded_parameter(callee)
    passed = argument_for(callee, iterable, parameter) if parameter is not None else None
    return passed if passed is not None else iterable


def _yielded_parameter(function: Function) -> Optional[str]:
    """The parameter whose every item the generator `function` yields once, in order: its one
    `yield` is `yield x` standing in the body of `for x in parameter:`, which no `break`,
    `continue` or `return` leaves."""
    yields = [n for n in walk(function.body) if type(n) in (cst.Yield, cst.Await)]
    if len(yields) != 1 or type(yields[0]) is not cst.Yield:
        return None
    for node in walk(function.body):
        if type(node) is not cst.For or type(node.iter) is not cst.Name or type(node.target) is not cst.Name \
                or type(node.body) is not cst.IndentedBlock or node.orelse is not None:
            continue
        yielded = [line for line in node.body.body if type(line) is cst.SimpleStatementLine and any(
            type(small) is cst.Expr and small.value is yields[0] for small in line.body)]
        if not yielded or type(yields[0].value) is not cst.Name or yields[0].value.value != node.target.value:
            continue
        if any(type(n) in (cst.Break, cst.Continue, cst.Return) for n in walk(node.body)):
            return None
        return node.iter.value
    return None


def _through_progress_bar(iterable: Optional[cst.BaseExpression], facts: ModuleFacts,
                          function: Optional[Function]) -> Optional[cst.BaseExpression]:
    """`bar = tqdm(train_dataloader, total=...)` then `for step, batch in enumerate(bar)`:
    the loop walks `train_dataloader` (a name bound once, as the loop's function reads it,
    to a progress bar over it: other methods may bind their own `bar`). A bar shown on one
    process only (`tqdm(loader) if rank == 0 else loader`) walks the same loader."""
    name = dotted(iterable) if type(iterable) in (cst.Name, cst.Attribute) else None
    if name is None:
        return iterable
    own = [b for b in facts.bindings.get(name, ()) if facts.enclosing_function(b.statement) is function]
    if len(own) > 1:
        # `active_dataloader = accelerator.skip_first_batches(train_dataloader, n)` when
        # resuming, else `active_dataloader = train_dataloader`: the same loader
        walked = [unwrap_iterable(_resumed(b.value)) if b.index is None else None for b in own]
        first = walked[0]
        if first is None or any(w is None or _code(w) != _code(first) for w in walked) or name in facts.len_arguments:
            return iterable
        return first
    bindings = [b for b in facts.values_in(name, function) if b.index is None]
    if len(bindings) != 1:
        return iterable
    value = bindings[0].value
    if type(value) is cst.IfExp:
        arms = [unwrap_iterable(arm) for arm in (value.body, value.orelse)]
        if arms[0] is None or arms[1] is None or _code(arms[0]) != _code(arms[1]) or name in facts.len_arguments:
            return iterable  # (`len(bar)` taken: the name itself is sized)
        return arms[0]
    inner = unwrap_iterable(value)
    return inner if inner is not value and inner is not None else iterable


def _through_wrapper_lambda(iterable: cst.BaseExpression, facts: ModuleFacts,
                            function: Optional[Function]) -> cst.BaseExpression:
    """`iter_wrapper(enumerate(loader))` where the loop's function binds `iter_wrapper` only
    to lambdas that hand back their argument, as it is or under a progress bar
    (`(lambda x: tqdm(x, total=len(loader))) if args.tqdm else (lambda x: x)`): the loop
    walks the argument."""
    if type(iterable) is not cst.Call or type(iterable.func) is not cst.Name or len(iterable.args) != 1 \
            or iterable.args[0].keyword is not None or iterable.args[0].star:
        return iterable
    bindings = [b for b in facts.values_in(iterable.func.value, function) if b.index is None]
    lambdas: list[cst.BaseExpression] = []
    for binding in bindings:
        value = binding.value
        lambdas.extend((value.body, value.orelse) if type(value) is cst.IfExp else (value,))
    if not lambdas or not all(_hands_back_argument(value) for value in lambdas):
        return iterable
    return iterable.args[0].value


def _hands_back_argument(value: cst.BaseExpression) -> bool:
    """`lambda x: x` or `lambda x: tqdm(x, ...)`: a one-parameter lambda whose body is its
    parameter, under progress bars at most."""
    if type(value) is not cst.Lambda or len(value.params.params) != 1 or value.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) \
            or value.params.kwonly_params or value.params.star_kwarg is not None or value.params.posonly_params:
        return False
    return dotted(unwrap_iterable(value.body)) == value.params.params[0].name.value


def _resumed(value: cst.BaseExpression) -> cst.BaseExpression:
    """`accelerator.skip_first_batches(loader, n)` -> `loader`: the loader a resumed epoch walks."""
    if type(value) is cst.Call and last_part(call_name(value) or "") == "skip_first_batches":
        return positional(value, 0) or value
    return value


def _enumerated(iterable: cst.BaseExpression, facts: ModuleFacts, function: Optional[Function]) -> Optional[cst.Call]:
    """The `enumerate(...)` behind a loop's iterable: under a progress bar
    (`tqdm(enumerate(loader), total=...)`) or through a name bound to one, as the loop's
    function binds it (`iterable = tqdm(enumerate(dl)) if rank0 else enumerate(dl)`; other
    functions may bind their own `pbar`); None unless every form agrees on the start."""
    name = dotted(iterable) if type(iterable) in (cst.Name, cst.Attribute) else None
    values = [b.value for b in facts.values_in(name, function) if b.index is None] if name is not None else [iterable]
    found: list[cst.Call] = []
    option: Optional[cst.BaseExpression]  # unwrapped: a progress bar with no argument leaves none
    for value in values:
        for option in (value.body, value.orelse) if type(value) is cst.IfExp else (value,):
            option = unwrap_iterable(option)
            if name is not None and dotted(option) == name:
                continue  # `pbar = tqdm(pbar, total=nb)`: a progress bar over the same enumeration
            if not (type(option) is cst.Call and last_part(call_name(option) or "") == "enumerate"):
                return None
            found.append(option)
    starts = {_code(option.args[1].value) if len(option.args) > 1 else "0" for option in found}
    return found[0] if found and len(starts) == 1 else None


def _read_derived_counters(loop: TrainingLoop) -> None:
    """`ni = i + nb * epoch` (a counter over all epochs that keeps the loop index's base) and
    `step = i + 1` (the index plus an integer): names bound once, on every iteration, in the
    loop's own code, and never updated otherwise."""
    if loop.counter is None:
        return
    outer = {dotted(node.target) for node in loop.site.ancestors if type(node) is cst.For}
    over_epochs: set[str] = set()
    aliases: dict[str, int] = {}
    bound: Counter[str] = Counter()
    for statement in loop.statements:
        bound.update(scopes.chains_in_targets(statement.node))
        small = statement.small
        if statement.helper is not None or statement.loops or type(small) is not cst.Assign:
            continue
        name = dotted(small.targets[0].target) if len(small.targets) == 1 else None
        value = small.value
        if name is None or not (type(value) is cst.BinaryOperation and type(value.operator) is cst.Add):
            continue
        for index, other in ((value.left, value.right), (value.right, value.left)):
            if dotted(index) == loop.counter:
                if epoch_multiple(other, outer):
                    over_epochs.add(name)
                elif (offset := int_value(other)) is not None and not statement.conditional and statement.gate is None:
                    aliases[name] = offset
    loop.derived_counters = frozenset(over_epochs)
    loop.index_aliases = {name: offset for name, offset in aliases.items() if bound[name] == 1}


def epoch_multiple(node: cst.BaseExpression, outer: set[Optional[str]]) -> bool:
    """`nb * epoch` (a product with an outer loop's target or an epoch counter)."""
    if not (type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply):
        return False
    for factor in (node.left, node.right):
        name = dotted(factor) or ""
        if name in outer or "epoch" in last_part(name).lower():
            return True
    return False


# Progress bars that yield every item of their first argument, in order. (A project's own logging
# generator, `metric_logger.log_every(loader, ...)`, may stop early or skip: its length is unknown.)
_PASS_THROUGH_WRAPPERS = ("tqdm", "track", "progress_bar")


def unwrap_iterable(node: Optional[cst.BaseExpression]) -> Optional[cst.BaseExpression]:
    """`tqdm(loader, desc=...)` -> `loader`: progress bars keep the length."""
    while type(node) is cst.Call and last_part(call_name(node) or "").lower() in _PASS_THROUGH_WRAPPERS:
        given = keyword(node, "iterable")  # `tqdm(iterable=loader, desc=...)`
        node = given.value if given is not None else positional(node, 0)
    return node


def _per_call_windows(facts: ModuleFacts, objects: Objects, skip: Collection[cst.CSTNode], helpers: set[int],
                      accumulation_names: tuple[str, ...], made: Optional[list[Statement]]) -> list[TrainingLoop]:
    """A function that runs one micro-batch per call and steps when a counter it keeps across
    calls reaches a window (`def update(self, batch): ...; loss.backward(); self.local_updates
    += 1; if self.local_updates % K == 0: self.optimizer.step()`, or `if self.acc >= K:` with
    `self.acc = 0` under it): the loop over batches is in
    a caller (often another module), and the function's body is the window. Only functions
    that no loop of the module walks (as its body or a helper) and that hold no loop running
    the backward themselves (`helpers`: the ids of functions the module's loops walk)."""
    candidates: dict[int, Function] = {}
    for call in facts.calls:
        if type(call.func) is cst.Attribute and call.func.attr.value == "backward":
            function = facts.enclosing_function(call)
            if function is not None and function not in skip:
                candidates.setdefault(id(function), function)
    found: list[TrainingLoop] = []
    for function in candidates.values():
        if any(type(node) in (cst.For, cst.While) for node in walk(function.body)):
            continue  # its loops were asked already (`build_loops`)
        if any(type(d.decorator) is not cst.Name or d.decorator.value not in ("staticmethod",)
               for d in function.decorators):
            continue  # a decorated function may be run by a framework with its own windows
        if id(function) in helpers:
            continue  # a loop of this module calls it: that loop's walk reads it
        statements = _Walker(facts, objects, function, accumulation_names, made=made).walk(function.body, function)
        own = [s for s in statements if s.helper is None]
        if not any(e.kind == "backward" for s in own for e in s.events):
            continue
        counters = {adds_one(small) for s in own if s.gate is None and not s.conditional
                    for small in s.node.body} - {None}
        # `% K == 0`, or `>= K` / `== K` on a counter the gated code resets (`self.acc = 0`)
        gated_steps = [e for s in own for e in s.events if e.kind == "step" and s.gate is not None
                       and s.gate.kind in ("modulo", "count") and s.gate.counter in counters
                       and (s.gate.counter or "").startswith("self.")]
        if not gated_steps:
            continue
        site = LoopSite(function, ancestors(facts.parents, function) + (function,))
        kept = [s for s in statements if not s.single_micro_batch]
        _drop_update_gates(kept)
        found += [TrainingLoop(site=site, statements=world) for world in _worlds(kept)]
    return found


def _lightning_steps(facts: ModuleFacts, objects: Objects, skip: Collection[cst.CSTNode] = (),
                     made: Optional[list[Statement]] = None) -> list[TrainingLoop]:
    """`training_step` of a LightningModule: the body of a loop the Trainer runs.

    Manual optimization (`self.manual_backward`) is an ordinary loop body whose
    counter is `batch_idx`; under automatic optimization the returned loss is
    what the Trainer backpropagates, so the `return` stands for the backward.
    """
    found = []
    for owner in facts.classes.values():
        if not any("LightningModule" in base for base in facts.class_bases(owner)):
            continue
        step = next((s for s in owner.body.body if type(s) is cst.FunctionDef
                     and s.name.value == "training_step"), None)
        if step is None or step in skip:
            continue  # a `training_step` with a micro-step loop is already a window
        statements = _Walker(facts, objects, step, made=made).walk(step.body, step)
        loop = TrainingLoop(site=LoopSite(step, (owner, step)), statements=statements)
        params = [p.name.value for p in step.params.params if p.name.value != "self"]
        if any(e.kind == "backward" for e in loop.events):
            loop.counter = params[1] if len(params) > 1 else None
            loop.counter_base = 0
            found.append(loop)
        elif facts.trainer_accumulation is not None:
            for statement in statements:
                small = statement.small
                if statement.helper is None and type(small) is cst.Return and small.value is not None:
                    loss = lightning_returned_loss(small.value, step)
                    role = Role("backward", loss, "trainer", loss, "lightning-auto")
                    statement.events.append(Event(role, statement))
            found.append(loop)
    return found


def lightning_returned_loss(value: cst.BaseExpression, function: Optional[cst.FunctionDef] = None) -> cst.BaseExpression:
    """What Lightning backpropagates of a `training_step`'s return: the value itself, or its
    `"loss"` entry when it returns a dict, written out (`{"loss": loss, "log": logs}`) or, in
    `function`, a name whose `"loss"` entry is stored (`out["loss"] = loss`, `out = {"loss": loss}`)."""
    entry = dict_entry(value, "loss")
    if entry is not None:
        return entry
    if type(value) is cst.Name and function is not None:
        stored = None
        for node in walk(function.body):
            if type(node) is not cst.Assign or len(node.targets) != 1:
                continue
            target = node.targets[0].target
            if type(target) is cst.Subscript and dotted(target.value) == value.value and key_of(target) == "loss":
                stored = node.value
            elif type(target) is cst.Name and target.value == value.value:
                stored = dict_entry(node.value, "loss")
        if stored is not None:
            return stored
    return value
