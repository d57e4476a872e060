"""LR schedules built in the module, and where their lengths come from.

A scheduler's total or warmup length (`num_training_steps`, `T_max`,
`total_steps`...) is an expression, often through variables
(`max_train_steps = epochs * num_update_steps_per_epoch`). Following those
bindings tells whether the length counts micro-batches (`len(loader)` and
nothing divides it by K) or optimizer steps (a division by K on the way).
"""

from __future__ import annotations

import re
import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Optional, cast

import libcst as cst

from accumlint.model import scopes
from accumlint.model.facts import Binding, Function, ModuleFacts, constructed
from accumlint.model.loop import unwrap_iterable
from accumlint.model.names import (
    argument_for, call_name, dotted, keyword, last_part, looks_like_batch_size, minus_one, parameters, positional,
    string_value,
)
from accumlint.model.roles import Objects
from accumlint.model.tree import children, walk
from accumlint.source.patterns import LazyPattern

LENGTH_KEYWORDS = (
    "num_training_steps", "num_warmup_steps", "T_max", "total_steps", "total_iters", "max_steps",
    "steps_per_epoch", "warmup_steps", "T_0", "decay_steps", "max_iters", "warmup_iters",
)
# The other spellings of those lengths (`warmup_iter=`, `num_train_steps=`, `max_iterations=`)
_LENGTH_KEYWORD = re.compile(r"(?:num_)?(?:warmup|training|train|total|max|decay)_(?:steps?|iters?|iterations?)")


def is_length_keyword(word: str) -> bool:
    """A keyword that hands a scheduler a total or warmup length in steps."""
    return word in LENGTH_KEYWORDS or _LENGTH_KEYWORD.fullmatch(word) is not None


# A period counted in scheduler steps (`StepLR(opt, step_size=...)`): not a total or warmup length
# (GA305 reads those), but it says in which unit the schedule counts.
PERIOD_KEYWORDS = ("step_size",)
# Where torch's schedulers take their length when it is passed by position:
# `OneCycleLR(opt, max_lr, total_steps)`, `LinearLR(opt, start, end, total_iters)`, ...
_LENGTH_POSITIONS = {"CosineAnnealingLR": 1, "CosineAnnealingWarmRestarts": 1, "OneCycleLR": 2, "LinearLR": 3,
                     "ConstantLR": 2, "PolynomialLR": 1}
_LOADER_NAME = LazyPattern(r"loader|(^|_)dl($|_)|batches", re.IGNORECASE)

IsK = Callable[[cst.BaseExpression], bool]
# A count named for optimizer steps or updates (`num_update_steps_per_epoch`), not for batches.
_NAMES_STEPS = LazyPattern(r"step|update", re.IGNORECASE)


@dataclass(frozen=True, eq=False)
class MicroBatchLength:
    """A scheduler length computed from `len(loader)` with no division by K.

    argument: the scheduler's length argument; carrier: the statement that makes the
    length of `len(loader)` (the argument itself, or the assignment that computes it; an
    assignment of the loader's length alone, `steps_per_epoch = len(loader)`, is not one);
    length: the `len(loader)` call; steps: how many assignments lie between the argument
    and the call (a warmup computed from the total length, `warmup = total // 10`, lies
    further from it than the total does); counted: what the fix divides by K, in the
    carrier (the call, or the name of the loader's length; None when it cannot be told).
    """

    argument: cst.BaseExpression
    carrier: cst.CSTNode
    length: cst.Call
    steps: int
    counted: Optional[cst.BaseExpression]


def scheduler_constructors(facts: ModuleFacts, objects: Objects, name: Optional[str]) -> list[cst.Call]:
    """The calls that built the scheduler bound to `name` in this module; for Lightning's
    `self.lr_schedulers()`, those its `configure_optimizers` makes."""
    found = []
    for binding in facts.values_of(name):
        value = binding.value
        if type(value) is not cst.Call or facts.rebound_unread(binding):
            continue  # (a scheduler replaced before anything steps it is not the one stepped)
        if dotted(value.func) == "self.lr_schedulers":
            configures = [f for f in facts.class_of if f.name.value == "configure_optimizers"]
            found += [call for function in configures
                      for call in facts.calls_in(function.body) if objects.built_kind(call, None) == "scheduler"]
        elif objects.built_kind(value, binding.index) == "scheduler":
            element = facts.prepared_element(value, binding.index) if binding.index is not None else None
            # a scheduler built inside the prepare call: its constructor is the element prepared
            built = cast(cst.Call, constructed(element)) if type(element) is cst.Call else value
            if binding.made_by is not None and not length_arguments(built) and length_arguments(binding.made_by):
                built = binding.made_by  # a project factory's schedule, its length given at the call
            found.append(built)
    return found


_SCHEDULE_LIBRARIES = frozenset({
    "torch", "transformers", "diffusers", "timm", "accelerate", "deepspeed", "lightning", "pytorch_lightning",
    "torch_optimizer", "fairseq", "mmengine", "pl_bolts", "composer",
})


def known_schedule(facts: ModuleFacts, call: cst.Call) -> bool:
    """A scheduler built in sight: a library's scheduler (torch, transformers, timm...) or a
    scheduler class (`InverseLR(...)`: its arguments are all there is). A project's factory
    function (`get_scheduler(cfg, optimizer, total_steps)` from its own utils) hides the
    schedule's length, and so does a function a star import may have brought in."""
    name = facts.qualified(call_name(call)) or ""
    tail = last_part(name)
    return name.split(".")[0] in _SCHEDULE_LIBRARIES or tail[:1].isupper() or "." not in name and (
        name not in facts.imports and name not in facts.functions and not facts.star_imports)


def told_position(step: cst.CSTNode) -> bool:
    """A scheduler step handed where the schedule stands (`scheduler.step(iteration)`,
    `step(epoch=e)`): its pace follows that index, not how often the call runs, so neither
    the call's cadence nor its length's unit can be judged against the window."""
    return type(step) is cst.Call and bool(step.args)


def holds_rate(call: cst.Call) -> bool:
    """A schedule that never changes the rate (`get_scheduler("constant", ...)`,
    `get_constant_schedule(optimizer)`): however often it steps, the run sees the same rate."""
    tail = last_part(call_name(call) or "")
    return tail == "get_constant_schedule" or _ignored_lengths(call, tail) == _CONSTANT


_CONSTANT = frozenset({"num_warmup_steps", "num_training_steps"})


def _ignored_lengths(call: cst.Call, tail: str) -> frozenset[str]:
    """The length arguments that Hugging Face's constant schedules take and never read:
    `get_scheduler("constant", optimizer, num_warmup_steps=w, num_training_steps=n)` holds
    the rate whatever `n` and `w` are, `"constant_with_warmup"` reads `w` only. Their values
    say nothing of the unit a budget is counted in."""
    if tail != "get_scheduler":
        return frozenset()
    name = keyword(call, "name")
    kind = string_value(name.value if name is not None else positional(call, 0))
    if kind == "constant":
        return _CONSTANT
    if kind == "constant_with_warmup":
        return frozenset({"num_training_steps"})
    return frozenset()


def length_arguments(call: cst.Call, facts: Optional[ModuleFacts] = None, periods: bool = False) -> list[cst.BaseExpression]:
    """The arguments of a scheduler constructor that carry a length in steps (with `facts`,
    those of the schedulers a composed one names: `SequentialLR(opt, [warmup, decay], ...)`,
    or a warmup wrapper's `after_scheduler=`); with `periods`, its periods too (`step_size`)."""
    tail = last_part(call_name(call) or "")
    ignored = _ignored_lengths(call, tail)
    def carries_length(argument: cst.Arg) -> bool:
        word = argument.keyword.value if argument.keyword is not None else None
        return word is not None and word not in ignored and (
            is_length_keyword(word) or periods and word in PERIOD_KEYWORDS)

    found = [arg.value for arg in call.args if carries_length(arg)]
    if tail in _FUNCTION_SCHEDULERS:
        # `LambdaLR(opt, lambda step: cosine(step, total_steps=n))`, `lr_lambda=partial(cosine, total_steps=n)`:
        # the schedule is a function of the step, and the call it makes names its length
        written = keyword(call, "lr_lambda")
        schedule = written.value if written is not None else positional(call, 1)
        if type(schedule) is cst.Lambda:
            schedule = schedule.body
        if type(schedule) is cst.Call:
            found += [arg.value for arg in schedule.args if carries_length(arg)]
    positions: tuple[int, ...] = ()
    if tail == "get_scheduler":
        positions = tuple(index for index, word in ((2, "num_warmup_steps"), (3, "num_training_steps"))
                          if word not in ignored)
    elif tail.startswith("get_") and "with_warmup" in tail:
        positions = (1, 2)
    elif tail in _LENGTH_POSITIONS:
        positions = (_LENGTH_POSITIONS[tail],)
    elif tail == "StepLR" and periods:
        positions = (1,)  # `step_size`
    for index in positions:
        value = positional(call, index)
        if value is not None:
            found.append(value)
    after = keyword(call, "after_scheduler")  # a warmup wrapper handing over to another scheduler
    if after is not None and facts is not None and type(after.value) is cst.Name:
        for binding in facts.values_of(after.value.value):
            if type(binding.value) is cst.Call and binding.index is None:
                found.extend(length_arguments(binding.value, periods=periods))
    if tail in _COMPOSED_SCHEDULERS:
        # `SequentialLR(opt, [LinearLR(..., total_iters=warmup), LinearLR(..., total_iters=decay)])`
        parts = [node for node in _expression_nodes(call) if node is not call and type(node) is cst.Call]
        if facts is not None:
            parts += _named_parts(facts, call, 0 if tail == "ChainedScheduler" else 1)
        for part in parts:
            found.extend(arg.value for arg in part.args if carries_length(arg))
    return found


def _named_parts(facts: ModuleFacts, call: cst.Call, position: int) -> list[cst.Call]:
    """The constructor calls bound to the names a composed scheduler's list holds."""
    listed = keyword(call, "schedulers")
    schedulers = listed.value if listed is not None else positional(call, position)
    if type(schedulers) not in (cst.List, cst.Tuple):
        return []
    parts = []
    for element in cast("cst.List | cst.Tuple", schedulers).elements:
        if type(element.value) is cst.Name:
            parts += [b.value for b in facts.values_of(element.value.value)
                      if type(b.value) is cst.Call and b.index is None]
    return parts


_COMPOSED_SCHEDULERS = frozenset({"SequentialLR", "ChainedScheduler"})
# Schedulers that take the schedule as a function of the step (`lr_lambda`).
_FUNCTION_SCHEDULERS = frozenset({"LambdaLR", "MultiplicativeLR"})


def micro_batch_length(facts: ModuleFacts, objects: Objects, argument: cst.BaseExpression,
                       is_k: IsK) -> Optional[MicroBatchLength]:
    """Where `argument` counts micro-batches, or None (divided by K somewhere, or not from a loader)."""
    found: list[MicroBatchLength] = []
    if _trace(facts, objects, argument, argument, is_k, found, set(), 0, None) == "divided" or not found:
        return None
    return dataclasses.replace(found[0], argument=argument)


def sized_in_micro_batches(facts: ModuleFacts, objects: Objects, name: Optional[str], is_k: IsK) -> bool:
    """The scheduler's length counts micro-batches, so stepping it on every micro-batch
    keeps the schedule's pace: a length argument multiplied by K
    (`num_training_steps=max_train_steps * gradient_accumulation_steps`), or lengths
    computed from `len(loader)` (times epochs) that nothing on the way divides by K."""
    from_loader = False
    for argument in schedule_lengths(facts, objects, name, periods=True):
        for node in _expression_nodes(argument):
            if type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply:
                if is_k(node.left) or is_k(node.right):
                    return True
        if optimizer_step_value(facts, argument, is_k):
            return False
        if micro_batch_length(facts, objects, argument, is_k) is not None or _batches_of_samples(facts, argument, is_k) \
                or _epoch_lengths(facts, argument):
            from_loader = True
    return from_loader


def _epoch_lengths(facts: ModuleFacts, expr: cst.BaseExpression) -> bool:
    """The value reads (here or through its bindings) a name that a loop's last-batch test
    compares with its index (`i == args.steps_per_epoch - 1`, `step + 1 == n_batches`): that
    name counts the micro-batches of an epoch, as `len(loader)` does."""
    names = facts.once(_last_batch_names, facts.module)
    if not names:
        return False
    return _through_bindings(facts, expr, lambda value: any(dotted(node) in names for node in _expression_nodes(value)
                                                            if type(node) in (cst.Name, cst.Attribute)))


def _last_batch_names(module: cst.CSTNode) -> frozenset[str]:
    """Names compared with an enumerated loop index as its last value: `i == n - 1`, `i + 1 == n`."""
    index_names = set()
    for node in walk(module):
        if type(node) is cst.For and type(node.target) is cst.Tuple and node.target.elements \
                and type(node.iter) is cst.Call and call_name(node.iter) == "enumerate":
            index = node.target.elements[0].value
            if type(index) is cst.Name:
                index_names.add(index.value)
    found = set()
    for node in walk(module):
        if type(node) is not cst.Comparison or len(node.comparisons) != 1 or type(node.comparisons[0].operator) is not cst.Equal:
            continue
        left, right = node.left, node.comparisons[0].comparator
        for index, other in ((left, right), (right, left)):
            if type(index) is cst.Name and index.value in index_names and minus_one(other) is not None:
                name = dotted(minus_one(other))
            elif _plus_one(index) in index_names:
                name = dotted(other)
            else:
                continue
            if name is not None:
                found.add(name)
    return frozenset(found)


def _plus_one(node: cst.BaseExpression) -> Optional[str]:
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add and type(node.right) is cst.Integer \
            and node.right.value == "1" and type(node.left) is cst.Name:
        return node.left.value
    return None


def _batches_of_samples(facts: ModuleFacts, expr: cst.BaseExpression, is_k: IsK) -> bool:
    """The value counts micro-batches of samples: a division by a batch size (`num_images //
    total_batch_size * epochs`) that holds no K, here or in a binding it reads
    (`optimizer_step_value` has already ruled out a division by K)."""
    def here(value: cst.CSTNode) -> bool:
        for node in _expression_nodes(value):
            if type(node) is cst.BinaryOperation and type(node.operator) in (cst.Divide, cst.FloorDivide):
                size = dotted(node.right)
                if size is not None and looks_like_batch_size(size):
                    return not any(_multiplies_by_k(b.value, is_k) for b in facts.bindings.get(size, ()))
        return False

    return _through_bindings(facts, expr, here)


def _multiplies_by_k(expr: cst.CSTNode, is_k: IsK) -> bool:
    """`micro_batch_size * world_size * accumulation_steps`: a batch size of whole windows."""
    return any(type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply
               and (is_k(node.left) or is_k(node.right)) for node in _expression_nodes(expr))


def length_is_loop_budget(facts: ModuleFacts, loop: cst.CSTNode, function: Optional[Function], receiver: Optional[str],
                          constructors: list[cst.Call]) -> bool:
    """The schedule's length is the loop's own count of micro-batches, passed through
    parameters: a call of the loop's function passes it the scheduler and, with it, the
    schedule's length as a parameter that the function divides by `len(loader)` (epochs
    from a budget in loader batches) or that the loop runs `range(...)` over. Stepping the
    scheduler on every micro-batch then keeps the schedule's pace."""
    if function is None or receiver is None or receiver not in parameters(function):
        return False
    budgets: set[str] = set()
    for site in scopes.call_sites(facts, function):
        if not scopes.passes(function, site, receiver):
            continue
        for call in constructors:
            for argument in length_arguments(call, facts):
                parameter = scopes.parameter_receiving(function, site, argument)
                if parameter is not None:
                    budgets.add(parameter)
    return any(_counts_loader_batches(function, loop, budget) for budget in budgets)


def loop_count_length(facts: ModuleFacts, objects: Objects, loop: cst.CSTNode, function: Optional[Function],
                      argument: cst.BaseExpression) -> Optional[cst.CSTNode]:
    """Where the schedule's length is the count the loop itself runs up to (`for step in
    range(start, total_iterations + 1)` and `total_steps=total_iterations`: one schedule step
    per iteration of the loop), the statement to report: the assignment that computes the
    count from `len(loader)` when one does, else the argument. Read as one value only where
    the loop's function and the scheduler's builder see the same binding: the same function,
    or a module name (or an attribute chain such as `config.num_iterations`) that the loop's
    function neither binds nor receives. None otherwise."""
    name = dotted(argument)
    counted = unwrap_iterable(loop.iter) if type(loop) is cst.For else None  # `tqdm(range(...))` too
    if name is None or type(counted) is not cst.Call or last_part(call_name(counted) or "") not in ("range", "trange"):
        return None
    count = len(counted.args)
    if count not in (1, 2, 3) or any(arg.keyword is not None or arg.star for arg in counted.args):
        return None
    stop = counted.args[0 if count == 1 else 1].value
    if type(stop) is cst.BinaryOperation and type(stop.operator) in (cst.Add, cst.Subtract) \
            and type(stop.right) is cst.Integer:
        stop = stop.left  # `range(start, total + 1)`: the same count, counted from 1
    if dotted(stop) != name:
        return None
    builder = facts.enclosing_function(argument)  # a lambda's body is its function's
    if builder is not function:
        head = name.split(".", 1)[0]
        if head == "self" or builder is not None or facts.binds_locally(head, function) \
                or (function is not None and head in scopes.all_parameters(function)):
            return None
    if "." not in name:
        for binding in _visible_bindings(facts, name, argument):
            if binding.index is None and _loader_length(objects, binding.value) is not None:
                return binding.statement
    return argument


def _counts_loader_batches(function: Function, loop: cst.CSTNode, name: str) -> bool:
    """`name / len(loader)` in the function, or the loop is `for ... in range(name)`."""
    if type(loop) is cst.For and type(loop.iter) is cst.Call and call_name(loop.iter) == "range":
        if len(loop.iter.args) == 1 and dotted(positional(loop.iter, 0)) == name:
            return True
    return any(
        type(node) is cst.BinaryOperation and type(node.operator) in (cst.Divide, cst.FloorDivide)
        and dotted(node.left) == name and type(node.right) is cst.Call and call_name(node.right) == "len"
        for node in _expression_nodes(function.body)
    )


def divides_by_k(expr: cst.CSTNode, is_k: IsK) -> bool:
    """A division in the expression whose divisor has K as a factor (`total // K`, a warmup
    of `total // (20 * K)`)."""
    return any(
        type(node) is cst.BinaryOperation and type(node.operator) in (cst.Divide, cst.FloorDivide)
        and has_k_factor(node.right, is_k)
        for node in _expression_nodes(expr)
    )


def has_k_factor(expr: cst.BaseExpression, is_k: IsK) -> bool:
    """K itself, or a product one of whose factors is K (`20 * K`, `K * world_size`)."""
    if is_k(expr):
        return True
    return type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply \
        and (has_k_factor(expr.left, is_k) or has_k_factor(expr.right, is_k))


def optimizer_step_value(facts: ModuleFacts, expr: cst.BaseExpression, is_k: IsK) -> bool:
    """The value is computed in optimizer steps: divided by K here or in a binding it reads. A
    length taken of an object (`len(train_dataloader)`) is a number of its items: the bindings
    of the object (`loader, scheduler = prepare(...)`) compute no part of it."""
    return _through_bindings(facts, expr, lambda value: divides_by_k(value, is_k), plain_only=False, lengths=False)


def _through_bindings(facts: ModuleFacts, expr: cst.BaseExpression, test: Callable[[cst.CSTNode], bool],
                      depth: int = 0, seen: Optional[set[str]] = None, plain_only: bool = True,
                      lengths: bool = True) -> bool:
    """`test` holds for the expression or for a binding of a name it reads, four bindings
    deep (each name followed once; `plain_only`: not through `x[i] = ...` bindings; not
    `lengths`: not through the object a `len(...)` is taken of)."""
    seen = set() if seen is None else seen
    if test(expr):
        return True
    if depth > 4:
        return False
    for name in referenced_names(expr, lengths=lengths):
        if name in seen:
            continue
        seen.add(name)
        for binding in facts.bindings.get(name, ()):
            if plain_only and binding.index is not None:
                continue
            if _through_bindings(facts, binding.value, test, depth + 1, seen, plain_only, lengths):
                return True
    return False


def _trace(facts: ModuleFacts, objects: Objects, expr: cst.BaseExpression, carrier: cst.CSTNode, is_k: IsK,
           found: list[MicroBatchLength], seen: set[str], depth: int,
           reader: Optional[tuple[cst.CSTNode, cst.BaseExpression, str]]) -> Optional[Literal["divided"]]:
    """Whether `expr` (bound at `carrier`) is divided by K on its way from a loader's length;
    each `len(loader)` met goes into `found` (its `argument` is filled in by the caller).
    `reader`: the statement that reads the name bound to `expr`, the expression it reads it
    in, and the name (None for the scheduler's argument itself)."""
    if divides_by_k(expr, is_k):
        return "divided"
    length = _loader_length(objects, expr)
    if length is not None:
        counted: Optional[cst.BaseExpression] = length
        if expr is length and reader is not None and not _NAMES_STEPS.search(last_part(reader[2])):
            # a name for the loader's batches alone (`batches_per_epoch = len(loader)`, read by
            # logging and tail tests too) is not the schedule's length: the statement that
            # makes the length of it is, and that is where the count is divided; a name for
            # steps (`num_update_steps_per_epoch = len(loader)`) is wrong where it is bound
            carrier = reader[0]
            counted = next((cast("cst.Name | cst.Attribute", node) for node in _expression_nodes(reader[1])
                            if type(node) in (cst.Name, cst.Attribute) and dotted(node) == reader[2]), None)
        found.append(MicroBatchLength(expr, carrier, length, depth, counted))
        # The loader's own binding sizes its batches, not their count: a
        # `DataLoader(..., batch_size=total // K)` yields K times more micro-batches.
        seen.add(dotted(positional(length, 0)) or "")
    if depth > 4:
        return None
    for name in referenced_names(expr):
        if name in seen:
            continue
        seen.add(name)
        for binding in _visible_bindings(facts, name, carrier):
            if binding.index is not None:
                continue
            if _trace(facts, objects, binding.value, binding.statement, is_k, found, seen, depth + 1,
                      (carrier, expr, name)) == "divided":
                return "divided"
    return None


def _visible_bindings(facts: ModuleFacts, name: str, reader: cst.CSTNode) -> list[Binding]:
    """The bindings of `name` that the code at `reader` may read: a function that binds the
    plain name reads its own (`ModuleFacts.binds_locally`: a local of `__init__` is not the
    local of the same name in `train_epoch`); otherwise every binding of the module."""
    function = facts.enclosing_function(reader)
    bindings = facts.bindings.get(name, [])
    if not facts.binds_locally(name, function):
        return bindings
    return [b for b in bindings if facts.enclosing_function(b.statement) is function]


def _loader_length(objects: Objects, expr: cst.CSTNode) -> Optional[cst.Call]:
    for node in _expression_nodes(expr):
        if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "len":
            argument = positional(node, 0)
            name = dotted(argument)
            if name is not None and (objects.kind_of(argument) == "dataloader" or _LOADER_NAME.search(last_part(name))):
                return node
    return None


def referenced_names(expr: cst.CSTNode, *, keyed: bool = False, lengths: bool = True) -> list[str]:
    """Dotted names an expression reads (`args.max_train_steps`), not the functions it calls.
    With `keyed`, an entry read by a literal key is one name (`config['max_steps']`): the
    entry, not the whole container, is the value (a `config` handed to a scheduler factory
    says nothing about `config['save_center']`). Without `lengths`, not the names only
    `len(...)` is taken of."""
    names: list[str] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if type(node) in (cst.Name, cst.Attribute):
            name = dotted(node)
            if name is not None:
                names.append(name)
                continue
        if keyed and type(node) is cst.Subscript and dotted(node.value) is not None and len(node.slice) == 1:
            index = node.slice[0].slice
            if type(index) is cst.Index and type(index.value) is cst.SimpleString:
                names.append(f"{dotted(node.value)}[{index.value.value}]")
                continue
        if type(node) is cst.Call:
            if not lengths and dotted(node.func) == "len":
                continue
            stack.extend(arg.value for arg in node.args)
            if type(node.func) is cst.Attribute:
                stack.append(node.func.value)
            continue
        if type(node) in (cst.Lambda, cst.SimpleString, cst.FormattedString):
            continue
        stack.extend(children(node))
    return names


def _expression_nodes(expr: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        yield node
        if type(node) is cst.Lambda:
            continue
        stack.extend(children(node))


@dataclass(frozen=True, eq=False)
class HelperLength:
    """A scheduler a project function builds and returns (`build_lr_scheduler(cfg, optimizer,
    train_loader)`), whose length argument in that function is `len(P)` (times anything,
    divided by nothing) for one of its parameters `P`.

    carrier: the length argument, where it stands in the function (a finding's place);
    length: the `len(P)` call; loader: what the call gives for `P` (the caller's loader)."""

    carrier: cst.BaseExpression
    length: cst.Call
    loader: cst.BaseExpression


def helper_built_lengths(facts: ModuleFacts, objects: Objects, name: Optional[str]) -> list[HelperLength]:
    """For a scheduler bound from a call of a project function (this module's or another's,
    as `ModuleFacts.helper` finds it), the micro-batch lengths the function gives it. Only
    lengths written in the function from its own parameter are read: a name the function
    binds or receives otherwise stays unknown, so a length computed elsewhere is never
    mistaken for one computed here."""
    found: list[HelperLength] = []
    for call, helper, argument in _helper_length_arguments(facts, objects, name, periods=False):
        if any(type(node) is cst.BinaryOperation and type(node.operator) in (cst.Divide, cst.FloorDivide)
               for node in _expression_nodes(argument)):
            continue
        for node in _expression_nodes(argument):
            if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "len":
                parameter = dotted(positional(node, 0))
                loader = argument_for(helper, call, parameter) if parameter is not None else None
                if loader is not None:
                    found.append(HelperLength(argument, node, loader))
                    break
    return found


def schedule_lengths(facts: ModuleFacts, objects: Objects, name: Optional[str],
                     periods: bool = False) -> list[cst.BaseExpression]:
    """The expressions of this module that give the scheduler bound to `name` its lengths
    (with `periods`, its periods too): the length arguments of the constructors that built
    it, and what a call of a project function that builds it passes for the parameter the
    function gives as a length (`def build_scheduler(optimizer, total): return
    get_linear_schedule_with_warmup(optimizer, 0, total)` called as
    `build_scheduler(optimizer, len(loader) * epochs)`). A parameter the function rebinds,
    or one the call leaves to its default, gives nothing."""
    found = [argument for constructor in scheduler_constructors(facts, objects, name)
             for argument in length_arguments(constructor, facts, periods)]
    for call, helper, argument in _helper_length_arguments(facts, objects, name, periods):
        parameter = argument.value if type(argument) is cst.Name else None
        if parameter is None or parameter in scopes.rebound_names(helper) or parameter not in parameters(helper):
            continue
        passed = argument_for(helper, call, parameter)
        if passed is not None:
            found.append(passed)
    return found


def _helper_length_arguments(facts: ModuleFacts, objects: Objects, name: Optional[str],
                             periods: bool) -> Iterator[tuple[cst.Call, Function, cst.BaseExpression]]:
    """For a scheduler bound from a call of a project function (this module's or another's,
    as `ModuleFacts.helper` finds it) that returns a scheduler it builds: the call written
    here, the function, and each length argument of the constructors it returns. A binding
    from another module's helper holds what the helper returns; its statement holds the call."""
    for binding in facts.values_of(name):
        statement = binding.statement
        call = cast("cst.Assign | cst.AnnAssign", statement).value if type(statement) in (cst.Assign, cst.AnnAssign) \
            else binding.value
        if type(call) is not cst.Call or binding.index is not None:
            continue
        helper = facts.helper(call, None)
        if helper is None:
            continue
        for constructor in _returned_schedulers(objects, helper):
            for argument in length_arguments(constructor, facts, periods):
                yield call, helper, argument


def _returned_schedulers(objects: Objects, function: Function) -> list[cst.Call]:
    """The scheduler constructors a function returns: a constructor call returned as it is,
    or a local name bound to constructors only (`lr_scheduler = get_cosine_...(...)` in
    each arm, then `return lr_scheduler`). Empty when any return gives something else."""
    def builds_schedule(value: cst.CSTNode) -> bool:
        # a library's scheduler, or a factory given a schedule's length by its keyword
        # (`get_cosine_decay_to_constant_with_warmup(..., num_training_steps=...)`)
        return type(value) is cst.Call and (
            objects.built_kind(value, None) == "scheduler"
            or any(arg.keyword is not None and is_length_keyword(arg.keyword.value) for arg in value.args)
        )

    returned: list[cst.Call] = []
    for node in _expression_nodes(function.body):
        if type(node) is not cst.Return or node.value is None or type(node.value) is cst.Name and node.value.value == "None":
            continue
        value = node.value
        if builds_schedule(value):
            assert type(value) is cst.Call
            returned.append(value)
            continue
        name = dotted(value)
        bound = [
            small.value for small in _expression_nodes(function.body)
            if type(small) is cst.Assign and len(small.targets) == 1 and dotted(small.targets[0].target) == name
        ]
        if not bound or name is None or not all(builds_schedule(v) for v in bound):
            return []
        returned.extend(v for v in bound if type(v) is cst.Call)
    return returned
