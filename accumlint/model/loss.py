"""Loss flow: what reaches a backward, how it was scaled, and how it was reduced.

From a backward's argument the flow walks back through the iteration's
assignments (`loss = loss / K`, `loss /= K`, `loss = criterion(out, y)`, a
same-module helper's `return`) collecting every scaling on the way, until it
reaches the expression that computed the loss: its origin. The origin says
whether the loss is known to be mean-reduced ("mean"), a token-level mean
("token"), sum-reduced ("sum"), or unknown; unknown keeps the rules silent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Final, Iterator, Literal, Optional, cast

import libcst as cst

from accumlint.model.facts import Binding, Function, ModuleFacts, constructed
from accumlint.model.loop import Event, Statement, TrainingLoop
from accumlint.model.names import (
    argument_for, call_name, code, dotted, int_value, keyword, last_part, looks_like_accumulation,
    looks_like_batch_size, looks_like_token_count, names_token_count, normalized, positional, string_value,
)
from accumlint.model.roles import Objects, Role
from accumlint.model.scopes import all_parameters, free_names
from accumlint.model.trainers import hf_model_in_module
from accumlint.model.tree import children, walk
from accumlint.source.patterns import LazyPattern

# How the loss reaching a backward was reduced (see the module's docstring).
Reduction = Literal["mean", "token", "sum", "unknown"]
MEAN: Final = "mean"
TOKEN: Final = "token"
SUM: Final = "sum"
UNKNOWN: Final = "unknown"
# The reduction of a loss held in a plain name that a term of a sum reads (`loss + w * prior_loss`),
# given the name's expression and the depth reached: see `LossReader.reduction`.
TermReader = Callable[[cst.Name, int], Reduction]
# What a scaling does with its factor (see `Scaling`).
ScalingOp = Literal["div", "mul", "inverse", "const", "count", "amp"]
# Methods that keep a loss's scale (a mean over DataParallel's per-device copies, a cast).
VALUE_KEEPING_METHODS = frozenset({"mean", "float", "half", "bfloat16", "double", "squeeze", "contiguous"})
_AUGMENTED_SCALINGS: dict[type, ScalingOp] = {cst.DivideAssign: "div", cst.MultiplyAssign: "mul"}  # `loss /= K`

_LOSS_FUNCTIONS = LazyPattern(
    r"^(cross_entropy|nll_loss|mse_loss|l1_loss|smooth_l1_loss|huber_loss|binary_cross_entropy"
    r"|binary_cross_entropy_with_logits|kl_div|soft_margin_loss|multilabel_soft_margin_loss"
    r"|multi_margin_loss|hinge_embedding_loss|cosine_embedding_loss|margin_ranking_loss"
    r"|poisson_nll_loss|gaussian_nll_loss|triplet_margin_loss|ctc_loss|\w+_loss)$"
)
_LOSS_FUNCTION_NAME = LazyPattern(r"loss|criterion", re.IGNORECASE)
_CRITERION_NAME = LazyPattern(r"^(criterion|criteria|loss_fn|loss_func|loss_function|lossfn|loss_fct|loss_fcn|compute_loss|loss_module)$")


def criterion_named(name: str) -> bool:
    """A name given to a loss function or object (`criterion`, `loss_fn`, `compute_loss`)."""
    return _CRITERION_NAME.match(name) is not None


_LM_CLASS = LazyPattern(r"For(CausalLM|ConditionalGeneration|MaskedLM|Seq2SeqLM)\b|AutoModelForSeq2SeqLM|AutoModelWithLMHead\b"
                        r"|\b(?:GPT2|OpenAIGPT|CTRL|TransfoXL|XLNet|GPTNeo|GPTJ|CodeGen|Bloom|Reformer)LMHeadModel\b")
_AMP_LOSS_SCALE = LazyPattern(r"^(loss_scale|cur_scale|loss_scaling)$")
_FLATTEN = LazyPattern(r"\.(view|reshape)\(\s*-1|\.flatten\(|ignore_index")


@dataclass(frozen=True, eq=False)
class Scaling:
    """One scaling applied to the loss on its way to the backward.

    op: div (divided by factor), mul (multiplied by factor), inverse (divided by
    `1 / factor`), const (multiplied by a constant weight, never K), count (multiplied
    by a tensor's size along a dimension past the batch's, `targets.size(1)`: a whole
    number, never 1/K), amp (multiplied
    by a mixed-precision loss scale, `loss * loss_scale`, which the gradients lose again
    before the step: no scaling of the loss's meaning),
    after: the scaling statement runs after the backward.
    node: the expression (or augmented assignment) doing it.
    """

    op: ScalingOp
    factor: cst.BaseExpression
    node: cst.CSTNode
    statement: Optional[Statement]
    whole_statement: bool = False


@dataclass(eq=False)
class LossFlow:
    """What one backward runs on."""

    backward: Event
    scalings: list[Scaling] = field(default_factory=list)
    origin: Optional[cst.BaseExpression] = None
    origin_statement: Optional[Statement] = None
    reduction: Reduction = UNKNOWN
    name: Optional[str] = None
    after: list[Scaling] = field(default_factory=list)
    target: Optional[cst.BaseExpression] = None
    entry_statement: Optional[Statement] = None
    # the same backward's flow in the runs where a run-constant test's arm that rebinds the
    # loss does not run (`if args.sequence_parallel_size > 1: loss = ...`): its other worlds
    other_worlds: list["LossFlow"] = field(default_factory=list)
    # the statement that last binds the backward's loss earlier in the iteration, in the
    # backward's scope (the trace's first step), when there is one
    binding: Optional[Statement] = None
    # every name the trace read (`local_loss = lm_loss`, then `local_loss.backward()`: both),
    # each a tensor on the graph the backward runs, with the helper whose scope binds it
    # (None: the loop's own), since a helper's `loss` is another variable than the loop's
    aliases: set[tuple[Optional[Function], str]] = field(default_factory=set)
    # the names added to the backward's loss in place on the way (`loss += aux_loss`)
    added: set[str] = field(default_factory=set)

    @property
    def loss_terms(self) -> set[str]:
        """Loss-named tensors the origin combines (`(1 - r) * class_loss + r * kd_loss`), or
        that are added to the loss in place before the backward (`local_loss +=
        balancing_loss`): each carries the graph the backward runs on."""
        added = {name for name in self.added if "loss" in name.lower()}
        if self.origin is None:
            return added
        summed = _summands(self.origin) if type(self.origin) is cst.BinaryOperation else set()
        return added | {name for name in free_names(self.origin) if "loss" in name.lower()} | summed


def _summands(expr: cst.BaseExpression) -> set[str]:
    """The plain names a sum adds up as they are (`divergence + divergence_32x32`): each is
    a term of the loss, whatever its name; a weighted term (`w * kd`) is not read here."""
    if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Add, cst.Subtract):
        return _summands(expr.left) | _summands(expr.right)
    return {expr.value} if type(expr) is cst.Name else set()


def split_scaling(expr: cst.BaseExpression, statement: Optional[Statement]) -> tuple[cst.BaseExpression, list[Scaling]]:
    """`(loss / K) * w` -> (loss, [div K, mul w]); constants are not scalings."""
    scalings: list[Scaling] = []
    while True:
        if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Divide:
            if _masked_token_mean(expr):
                return expr, scalings  # the micro-batch's token mean: a loss, not a scaled one
            if _reduced_along_axis(expr.left) and _reduced_along_axis(_without_epsilon(expr.right)):
                # `(losses * mask).sum(1) / mask.sum(1)`: each row's mean over its own tokens
                # (a vector, reduced later), not a scaling of the loss
                return expr, scalings
            inverse = _reciprocal(expr.right)
            if inverse is not None:
                scalings.append(Scaling("inverse", inverse, expr, statement))
            elif code(expr.right) not in ("1", "1.0") and not _mean_of_terms(expr):
                scalings.append(Scaling("div", expr.right, expr, statement))
            expr = expr.left
        elif type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply:
            left_constant, right_constant = _is_constant(expr.left), _is_constant(expr.right)
            if left_constant != right_constant:
                # a weight like `0.5 * loss`: some scaling, never K itself
                factor, kept = (expr.left, expr.right) if left_constant else (expr.right, expr.left)
                scalings.append(Scaling("const", factor, expr, statement))
                expr = kept
                continue
            factor, kept = (expr.right, expr.left)
            if _reciprocal(expr.left) is not None or _is_loss_like(expr.right) and not _is_loss_like(expr.left):
                factor, kept = expr.left, expr.right
            reciprocal = _reciprocal(factor)
            if reciprocal is not None:
                scalings.append(Scaling("div", reciprocal, expr, statement))
            elif _AMP_LOSS_SCALE.search(last_part(dotted(factor) or "")):
                scalings.append(Scaling("amp", factor, expr, statement))
            else:
                scalings.append(Scaling(_multiplier(factor), factor, expr, statement))
            expr = kept
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in (
            "div", "div_", "mul", "mul_", "true_divide",
        ) and len(expr.args) == 1:
            op: ScalingOp = _multiplier(expr.args[0].value) if expr.func.attr.value.startswith("mul") else "div"
            scalings.append(Scaling(op, expr.args[0].value, expr, statement))
            expr = expr.func.value
        else:
            return expr, scalings


def _masked_token_mean(expr: cst.BaseExpression) -> bool:
    """`(ce * mask).sum() / mask.sum()`, `nll.sum() / n_tokens.clamp(min=1)`: a sum over the
    whole micro-batch divided by its count of real tokens (a mask's sum, the labels that are
    not ignored, a name for a token count): the micro-batch's token mean, not a scaling."""
    return (type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Divide
            and _whole_sum(expr.left) and _token_count(expr.right))


def _whole_sum(node: cst.BaseExpression) -> bool:
    """`x.sum()` or `torch.sum(x)`: a sum over every element (no dimension given)."""
    if type(node) is not cst.Call or keyword(node, "dim") is not None or keyword(node, "axis") is not None:
        return False
    if type(node.func) is cst.Attribute and node.func.attr.value in ("sum", "nansum"):
        method = dotted(node.func.value) not in ("torch", "np", "numpy")
        return len(node.args) == (0 if method else 1)
    return False


# Methods that keep a count a count (`mask.sum().clamp_min(1)`, `n.float()`).
_COUNT_KEEPING = frozenset({"clamp", "clamp_min", "float", "to", "type", "item", "detach", "long", "int"})


def _token_count(node: cst.BaseExpression) -> bool:
    """Whether a divisor counts real tokens: the sum of a mask (`mask.sum()`, `(labels !=
    -100).sum()`, `labels.ne(pad_id).sum()`) or a name for a token count, kept from zero or
    cast (`.clamp(min=1)`, `max(n, 1)`, `n + 1e-8`, `.float()`)."""
    for _ in range(4):
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _COUNT_KEEPING:
            node = node.func.value
        elif type(node) is cst.Call and dotted(node.func) == "max" and len(node.args) == 2:
            node = next((a.value for a in node.args if type(a.value) is not cst.Integer), node.args[0].value)
        elif _without_epsilon(node) is not node:
            node = _without_epsilon(node)  # `n_tokens + 1e-8`
        else:
            break
    if type(node) is cst.Name or type(node) is cst.Attribute:
        name = dotted(node)
        return name is not None and names_token_count(name)
    if not _whole_sum(node):
        return False
    assert type(node) is cst.Call and type(node.func) is cst.Attribute
    counted = node.func.value if not node.args else node.args[0].value
    for _ in range(3):  # `mask.float().sum()`, `(mask > 0).sum()`, `(~padding_mask).sum()`
        if type(counted) is cst.Call and type(counted.func) is cst.Attribute and counted.func.attr.value in (
                *_COUNT_KEEPING, "logical_not"):
            counted = counted.func.value
        elif type(counted) is cst.UnaryOperation and type(counted.operator) is cst.BitInvert:
            counted = counted.expression  # the complement of a padding mask counts the real tokens
        else:
            break
    if type(counted) is cst.Comparison:
        return True  # `(labels != -100)`, `(targets != pad_id)`
    if type(counted) is cst.Call and type(counted.func) is cst.Attribute and counted.func.attr.value in ("ne", "not_equal", "bool"):
        return True
    name = dotted(counted)
    return name is not None and "mask" in last_part(name).lower()


def _without_epsilon(node: cst.BaseExpression) -> cst.BaseExpression:
    """`count + 1e-8` -> `count`: a divisor kept from zero by a float added to it."""
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
        if type(node.right) is cst.Float:
            return node.left
        if type(node.left) is cst.Float:
            return node.right
    return node


def _reduced_along_axis(node: cst.BaseExpression) -> bool:
    """`x.sum(1)`, `x.sum(dim=-1)`, `torch.sum(x, axis=1)`: a sum or mean along a given
    dimension (one value per row), not over the whole tensor; negated too (`-x.sum(1)`)."""
    while type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    if type(node) is not cst.Call or last_part(call_name(node) or "") not in ("sum", "mean", "nansum"):
        if not (type(node) is cst.Call and type(node.func) is cst.Attribute
                and node.func.attr.value in ("sum", "mean", "nansum")):
            return False
    given = keyword(node, "dim") or keyword(node, "axis")
    if given is not None:
        return code(given.value) != "None"
    method = type(node.func) is cst.Attribute and dotted(node.func.value) not in ("torch", "np", "numpy")
    dimension = positional(node, 0 if method else 1)
    if type(dimension) is cst.UnaryOperation:
        dimension = dimension.expression
    return type(dimension) is cst.Integer


def operand_in(expr: cst.BaseExpression, names: set[str], other: str) -> Optional[str]:
    """The one name of `names` (other than `other`) that plain arithmetic over names and
    numbers combines: `loss` in `(loss - running) * (1 / step)`, where `running` is `other`
    and any further name is a count. A running mean built that way holds that loss's graph.
    None when the expression calls anything or combines two of `names`."""
    found: Optional[str] = None
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.BinaryOperation:
            operation = cast(cst.BinaryOperation, node)
            stack += [operation.left, operation.right]
        elif kind is cst.UnaryOperation:
            stack.append(cast(cst.UnaryOperation, node).expression)
        elif kind in (cst.Integer, cst.Float):
            continue
        elif kind in (cst.Name, cst.Attribute):
            name = dotted(node)
            if name in names and name != other:
                if found not in (None, name):
                    return None
                found = name
        else:
            return None
    return found


def _reciprocal(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`1 / K` or `1.0 / K` -> K."""
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
        if type(node.left) in (cst.Integer, cst.Float) and code(node.left) in ("1", "1.0", "1."):
            return node.right
    return None


def _multiplier(factor: cst.BaseExpression) -> ScalingOp:
    """What multiplying the loss by `factor` can be: a constant weight, a count along a
    tensor's later dimension, or anything (`mul`: perhaps 1/K under another name)."""
    if _is_constant(factor):
        return "const"
    return "count" if _dimension_size(factor) else "mul"


def _dimension_size(node: cst.BaseExpression) -> bool:
    """`x.size(d)` / `x.shape[d]` for a literal dimension past the first (`targets.size(1)`,
    `logits.shape[-1]`): how many answers, classes or positions, a whole number. The first
    dimension counts samples (`_sample_count`)."""
    if type(node) is cst.Call and last_part(call_name(node) or "") == "size" and len(node.args) == 1:
        dimension = node.args[0].value
    elif type(node) is cst.Subscript and last_part(dotted(node.value) or "") == "shape" and len(node.slice) == 1 \
            and type(node.slice[0].slice) is cst.Index:
        dimension = node.slice[0].slice.value
    else:
        return False
    value = int_value(dimension)
    if value is None and type(dimension) is cst.UnaryOperation and type(dimension.operator) is cst.Minus:
        value = int_value(dimension.expression)
        value = None if value is None else -value
    return value is not None and value != 0


def _is_constant(node: cst.BaseExpression) -> bool:
    return type(node) in (cst.Integer, cst.Float) or (
        type(node) is cst.UnaryOperation and type(node.expression) in (cst.Integer, cst.Float)
    )


def _seeds_gradient(role: Role) -> bool:
    """A tensor's backward given the gradient to start from (`loss.backward(gradient=g)`,
    `loss.backward(torch.ones_like(loss))`, `torch.autograd.backward(loss, grad_tensors=g)`)."""
    call = role.call
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute or call.func.attr.value != "backward":
        return False
    if role.flavor == "autograd":
        return positional(call, 1) is not None or keyword(call, "grad_tensors") is not None
    return role.flavor == "tensor" and role.target is call.func.value and (
        positional(call, 0) is not None or keyword(call, "gradient") is not None)


def _sample_count(factor: cst.BaseExpression) -> bool:
    """How many samples a micro-batch holds: a batch-size name (`micro_batch_size`, `bs`),
    `x.size(0)`, `x.shape[0]` or `len(x)`."""
    if type(factor) is cst.Name or type(factor) is cst.Attribute:
        name = dotted(factor) or ""
        return looks_like_batch_size(name) and not looks_like_token_count(name)
    if type(factor) is cst.Call:
        callee = call_name(factor) or ""
        if callee == "len" and len(factor.args) == 1:
            return True
        return last_part(callee) == "size" and len(factor.args) == 1 and int_value(factor.args[0].value) == 0
    if type(factor) is cst.Subscript and len(factor.slice) == 1 and type(factor.slice[0].slice) is cst.Index:
        return last_part(dotted(factor.value) or "") == "shape" and int_value(factor.slice[0].slice.value) == 0
    return False


def _is_loss_like(node: cst.BaseExpression) -> bool:
    name = dotted(node) or ""
    return "loss" in last_part(name).lower()


# How many names, terms and calls `LossReader` follows from a loss before it calls the
# reduction unknown (`loss, metrics = train_step(batch)`, whose `loss = 0.8 * ce + w * kl`, whose
# `kl = kl_divergence(...) * t ** 2` returns a masked token mean, is seven deep).
MAX_REDUCTION_DEPTH = 8


class LossReader:
    """Reads the loss flow of a loop's backwards against the module's facts."""

    def __init__(self, facts: ModuleFacts, objects: Objects) -> None:
        self.facts = facts
        self.objects = objects
        self.lm_module: Optional[bool] = None
        self.hf_module: Optional[bool] = None
        self._container_scaling: dict[int, bool] = {}  # id(function) -> `_scales_container_entries`

    def flows(self, loop: TrainingLoop) -> list[LossFlow]:
        return [self.flow(loop, event) for event in loop.backwards]

    def flow(self, loop: TrainingLoop, event: Event) -> LossFlow:
        flow = LossFlow(backward=event)
        target = event.role.target
        if target is None:
            return flow
        if type(target) is cst.Call:
            inner = self.objects.role(target)
            if inner is not None and inner.kind == "scale" and inner.target is not None:
                target = inner.target
        flow.target = target
        expr, scalings = split_scaling(target, event.statement)
        flow.scalings.extend(self._read_factor(scaling) for scaling in scalings)
        at_backward = list(flow.scalings)
        self._trace(loop, event.statement, expr, flow, depth=0)
        world_arm = flow.binding
        if world_arm is not None and world_arm.helper is None and set(world_arm.worlds) - set(event.statement.worlds):
            # the loss is bound in an arm of a run-constant test that the backward is not in
            # (`if args.sequence_parallel_size > 1:` rebinding `loss`): the runs where that
            # arm does not run see the loss bound before it
            other = LossFlow(backward=event, target=target, scalings=at_backward)
            self._trace(loop, world_arm, expr, other, depth=0)
            flow.other_worlds.append(other)
        if _seeds_gradient(event.role):
            flow.reduction = UNKNOWN  # `loss.backward(gradient=g)` weighs the loss by g: its scale is g's
        elif flow.reduction in (MEAN, UNKNOWN) and any(s.op == "mul" and _sample_count(s.factor) for s in flow.scalings):
            # `loss * x.size(0) / global_batch_size`: a per-sample mean times the micro-batch's
            # sample count is the sum over its samples, and what divides it is the window's count
            flow.reduction = SUM
        if flow.name is not None:
            flow.after = self._after(loop, event.statement, flow.name)
        return flow

    def _trace(self, loop: TrainingLoop, before: Statement, expr: cst.BaseExpression, flow: LossFlow, depth: int) -> None:
        name = dotted(expr)
        if name is not None and not name.endswith("()") and depth < MAX_REDUCTION_DEPTH:
            flow.name = flow.name or name
            flow.aliases.add((before.helper, name))
            definition = _last_definition(loop.statements, before, name)
            if depth == 0 and definition is not None:
                flow.binding = definition[0]
            if definition is not None:
                helper_result = self._through_helper(loop, definition, name, flow, depth)
                if helper_result:
                    return
            if definition is None and self._through_object_argument(loop, before, name, flow, depth):
                return
            if definition is None:
                scaled = _amp_scaled_loss(before, name)
                if scaled is not None:
                    # apex's `with amp.scale_loss(loss, optimizer) as scaled_loss:`
                    flow.scalings.append(Scaling("amp", scaled, scaled, before))
                    argument = positional(scaled, 0)
                    assert argument is not None  # `_amp_scaled_loss` finds only a call with one
                    self._trace(loop, before, argument, flow, depth + 1)
                    return
                flow.origin, flow.origin_statement = expr, flow.origin_statement or before
                flow.reduction = self.reduction(expr, self._reader(loop, before), flow)
                return
            statement, small = definition
            self_added = _self_added(small, name)
            if self_added is not None:
                # `disc_loss = disc_loss + aux_loss`: a term added to the loss on the way; the sum
                # is reduced as both sides agree (`loss + w * reg_loss` of unknown scale: unknown)
                flow.added |= free_names(self_added)
                self._trace(loop, statement, expr, flow, depth + 1)
                if _empty_sum(flow.origin):
                    self._add_term(loop, statement, self_added, name, flow)
                elif self.reduction(self_added, self._reader(loop, statement), flow, terms=lambda term, level: self._term(
                        loop, statement, term, flow, depth + level)) != flow.reduction:
                    flow.reduction = UNKNOWN
                return
            in_place = _in_place_scaling(small, name)
            if type(small) is cst.AugAssign or in_place is not None:
                op: Optional[ScalingOp]
                if in_place is not None:
                    op, factor = in_place
                else:
                    assert type(small) is cst.AugAssign
                    op, factor = _AUGMENTED_SCALINGS.get(type(small.operator)), small.value
                if op == "mul":
                    op = _multiplier(factor)
                if op is not None:
                    inverse = _reciprocal(factor) if op == "div" else None
                    flow.scalings.append(self._read_factor(
                        Scaling("inverse" if inverse is not None else op, inverse or factor, small, statement, True)
                    ))
                if type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign \
                        and type(small.value) is cst.Name:
                    flow.added.add(small.value.value)
                self._trace(loop, statement, expr, flow, depth + 1)
                if type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign and _empty_sum(flow.origin):
                    self._add_term(loop, statement, small.value, name, flow)
                return
            value = cast("cst.Assign | cst.AnnAssign", small).value  # `+=` and in-place scalings returned above
            assert value is not None  # `_last_definition` skips an annotation without a value
            if type(small) is cst.Assign and type(small.targets[0].target) in (cst.Tuple, cst.List):
                # `logits, loss = model(x, y)`: a model's own loss may be any reduction (a sum,
                # a loss scaled by its batch size as in `loss, items = self.model(batch)`),
                # unless the model is of a class of this module, whose `forward` says
                flow.origin, flow.origin_statement = value, statement
                forward = self.facts.forward_of(value) if type(value) is cst.Call else None
                position = _target_position(small.targets[0].target, name)
                if forward is None and position == 0 and type(value) is cst.Call and _given_labels(value):
                    # `loss, logits = model(**inputs, labels=y)`: the first output of a model
                    # called with `labels=`, as `outputs[0]` (a tuple-returning Hugging Face model)
                    flow.reduction = self.reduction(
                        cst.Subscript(value, [cst.SubscriptElement(cst.Index(cst.Integer("0")))]), self._reader(loop, statement), flow)
                    return
                flow.reduction = UNKNOWN if forward is None or position is None else \
                    self._forward_element(forward, position, depth)
                return
            if _mean_of_itself(value, name) and (statement.conditional or statement.worlds):
                # `if args.n_gpu > 1: loss = loss.mean()`: the replicas' losses averaged, each
                # reduced as the loss was before (in the other world the backward gets it as it
                # is): a mean of means is a mean, a mean of sums a sum, a mean of losses of
                # unknown reduction (another module's model) unknown
                earlier = replace(flow, scalings=list(flow.scalings), after=list(flow.after),
                                  other_worlds=list(flow.other_worlds), aliases=set(flow.aliases), added=set(flow.added))
                self._trace(loop, statement, cast(cst.Attribute, cast(cst.Call, value).func).value, earlier, depth + 1)
                if earlier.reduction in (SUM, UNKNOWN):
                    for item in fields(flow):
                        setattr(flow, item.name, getattr(earlier, item.name))
                    return
            inner, scalings = split_scaling(_division_unless_one(value), statement)
            for scaling in scalings:
                flow.scalings.append(self._read_factor(replace(scaling, statement=statement,
                                                               whole_statement=dotted(inner) == name)))
            inner_name = dotted(inner)
            if inner_name is not None and not inner_name.endswith("()"):
                self._trace(loop, statement, inner, flow, depth + 1)
                self._unless_rivals_differ(loop, before, statement, name, flow, depth)
                return
            if depth < MAX_REDUCTION_DEPTH and self._through_stacked_list(loop, statement, inner, flow, depth):
                return
            own = next((n for n in walk(inner) if type(n) is cst.Name and n.value == name), None) \
                if _masked_token_mean(inner) and depth < MAX_REDUCTION_DEPTH else None
            if own is not None:
                # `loss = (loss * mask).sum() / mask.sum()` over a loss already divided by K on
                # the line before: the earlier scalings of the loss count, the origin is this mean
                self._trace(loop, statement, own, flow, depth + 1)
            flow.origin, flow.origin_statement = inner, statement
            flow.reduction = self.reduction(inner, self._reader(loop, statement), flow,
                                            terms=lambda term, level: self._term(loop, statement, term, flow, depth + level))
            self._unless_rivals_differ(loop, before, statement, name, flow, depth)
            self._scaled_before_method(loop, statement, inner, flow, depth)
            return
        if type(expr) is cst.Call and before.helper is not None and depth < MAX_REDUCTION_DEPTH and self._through_call(loop, before, expr, flow, depth):
            return  # `accelerator.backward(scaled(loss, k))` in a helper: the flow goes on at `scaled`'s `return`
        flow.origin = expr
        flow.origin_statement = before
        flow.reduction = self.reduction(expr, self._reader(loop, before), flow,
                                        terms=lambda term, level: self._term(loop, before, term, flow, depth + level))
        if depth < MAX_REDUCTION_DEPTH:
            self._scaled_before_method(loop, before, expr, flow, depth)  # `loss.mean().backward()`

    def _unless_rivals_differ(self, loop: TrainingLoop, before: Statement, chosen: Statement, name: str,
                              flow: LossFlow, depth: int) -> None:
        """The flow's known reduction becomes unknown when a rival definition of `name`
        reaches `before` with another one (`_rival_reductions`); a mean when every one is a
        mean, of tokens or not (`F.cross_entropy(logits, y)` in one arm, the same over
        flattened tokens in the other): a mean-reduced loss, whose tokens are not known."""
        if flow.reduction == UNKNOWN:
            return
        kinds = set(self._rival_reductions(loop, before, chosen, name, flow, depth)) | {flow.reduction}
        if len(kinds) > 1:
            flow.reduction = MEAN if kinds <= {MEAN, TOKEN} else UNKNOWN

    def _rival_reductions(self, loop: TrainingLoop, before: Statement, chosen: Statement, name: str,
                          flow: LossFlow, depth: int) -> Iterator[Reduction]:
        """The reductions of the other assignments of `name` in arms exclusive with the one the
        flow took (`if epochs > 1: loss = pred_loss + gen_loss` / `else: loss = pred_loss`) that
        also reach `before`: the name holds either value, so it is reduced as they agree."""
        for statement in loop.statements:
            if statement.order >= before.order:
                break
            if statement is chosen or statement.helper is not before.helper or not statement.exclusive_with(chosen) \
                    or statement.exclusive_with(before) or statement.call_site is not chosen.call_site:
                continue
            for small in statement.node.body:
                if type(small) is not cst.Assign or len(small.targets) != 1 or dotted(small.targets[0].target) != name:
                    continue
                inner, _ = split_scaling(_division_unless_one(small.value), statement)
                if any(type(n) is cst.Name and n.value == name for n in walk(inner)):
                    continue  # `loss = loss / K` in one arm: a scaling of the same loss, which the flow reads
                yield self.reduction(inner, self._reader(loop, statement), None,
                                     terms=lambda term, level: self._term(loop, statement, term, flow, depth + level))

    def _through_stacked_list(self, loop: TrainingLoop, statement: Statement, value: cst.BaseExpression,
                              flow: LossFlow, depth: int) -> bool:
        """`loss_mb = torch.stack(losses).mean()` (or `.sum()`, `torch.mean(torch.stack(losses))`,
        `sum(losses)`) over a list the iteration fills at one place (`losses.append(loss)`, per
        example of the micro-batch): the entries are the appended value, and the flow goes on
        there with the scalings written on its way (`loss = loss / K` before the append). The
        mean of entries is reduced as they are; their sum is a sum when they are known."""
        stacked = _stacked_list(value)
        if stacked is None:
            return False
        listed, summed = stacked
        appended = _appended_once(loop.statements, statement, listed)
        if appended is None:
            return False
        at, entry = appended
        self._trace(loop, at, entry, flow, depth + 1)
        if summed and flow.reduction != UNKNOWN:
            flow.reduction = SUM
        return True

    def _add_term(self, loop: TrainingLoop, statement: Statement, term: cst.BaseExpression, name: str,
                  flow: LossFlow) -> None:
        """`loss = 0` then `loss += criterion(out, y)` per head: a loss summed term by term
        is reduced as its terms are. The first term after the `0` sets the reduction; a later
        one of another known kind makes it unknown, an unknown one leaves it (as a term
        added to a known loss does). The origin stays the `0`: the terms are not one
        expression whose names the backward's graph holds."""
        kind = self.reduction(term, loop.function, flow)
        previous = _last_definition(loop.statements, statement, name)
        first = previous is not None and type(previous[1]) is cst.Assign and _empty_sum(previous[1].value)
        if first:
            flow.reduction, flow.origin_statement = kind, statement
        elif kind != UNKNOWN and kind != flow.reduction:
            flow.reduction = UNKNOWN

    def _term(self, loop: TrainingLoop, statement: Statement, term: cst.Name, flow: LossFlow, depth: int) -> Reduction:
        """The reduction of a plain name that a sum of losses bound at `statement` reads
        (`loss = loss + prior_loss_weight * prior_loss`): the name's own flow, traced from
        its binding earlier in the iteration. A term that was divided on its way (by K
        already, or by anything else) makes the sum's scale unknown; a weight it was
        multiplied by (`kl_divergence(...) * temperature ** 2`, `alpha * aux_loss`) keeps a
        mean a mean, unless it may be K's reciprocal or an accumulation count."""
        if depth >= MAX_REDUCTION_DEPTH:
            return UNKNOWN
        own = LossFlow(flow.backward)
        self._trace(loop, statement, term, own, depth + 1)
        if own.origin is None or not all(self._weight_only(s) for s in own.scalings):
            return UNKNOWN
        return own.reduction

    def _weight_only(self, scaling: Scaling) -> bool:
        """A constant, or a multiplication by a weight that is neither bound to a reciprocal
        (`self.loss_scale = 1.0 / accum`) nor named as an accumulation count."""
        if scaling.op == "const":
            return True
        return scaling.op == "mul" and self._bound_reciprocal(scaling)[0] == "mul" and not any(
            looks_like_accumulation(dotted(node) or "") for node in walk(scaling.factor)
            if type(node) in (cst.Name, cst.Attribute))

    def _read_factor(self, scaling: Scaling) -> Scaling:
        """`loss * self.loss_scale` where every binding of the factor is `1 / K`
        (`self.loss_scale = 1.0 / self.accum` in `__init__`, `loss_scale = 1.0 / accum` before
        the loop), or 1 beside such a binding (`fact = 1.0`, then `if K > 1: fact = 1.0 / K`):
        a division by K, whatever the factor's name says (`loss_scale` also names
        AMP's scale), wherever the product is written (the backward's own argument, an
        assignment, `loss *= loss_scale`)."""
        op, factor = self._bound_reciprocal(scaling)
        return scaling if op == scaling.op and factor is scaling.factor else replace(scaling, op=op, factor=factor)

    def _bound_reciprocal(self, scaling: Scaling) -> tuple[ScalingOp, cst.BaseExpression]:
        if scaling.op not in ("mul", "amp"):
            return scaling.op, scaling.factor
        bindings = self.facts.values_of(dotted(scaling.factor))
        # `fact = 1.0`, then `if K > 1: fact = 1.0 / K`: one, where it stays, is 1 / K with K at 1
        bindings = [b for b in bindings if not (b.index is None and code(b.value) in ("1", "1.0", "1."))] \
            if len(bindings) > 1 else bindings
        divisors = [_reciprocal(b.value) for b in bindings if b.index is None]
        if bindings and len(divisors) == len(bindings) and all(d is not None for d in divisors):
            first = divisors[0]
            assert first is not None
            if all(normalized(d) == normalized(first) for d in divisors if d is not None):
                return "div", first
        return scaling.op, scaling.factor

    def _through_object_argument(self, loop: TrainingLoop, before: Statement, name: str, flow: LossFlow,
                                 depth: int) -> bool:
        """`def step(self, loss, ...): self.scaler.scale(loss).backward()` of a project object
        the loop calls (`ed_optimizer.step(loss / K, i)`, `Objects._step`): the loss is the
        argument its call passes, and the flow goes on there, with the scalings written in it."""
        helper, call = before.helper, before.call_site
        if helper is None or call is None or helper not in (
                self.facts.object_method(call), self.facts.backward_method(call),
                self.facts.helper(call, self.facts.enclosing_function(call))):
            return False
        if name not in all_parameters(helper):
            return False
        argument = argument_for(helper, call, name)
        site = next((s for s in loop.statements if s.order < before.order and s.helper is not helper
                     and any(node is call for node in walk(s.node))), None)
        if argument is None or site is None:
            return False
        inner, scalings = split_scaling(argument, site)
        flow.scalings.extend(scalings)
        self._trace(loop, site, inner, flow, depth + 1)
        return True

    def _scaled_before_method(self, loop: TrainingLoop, statement: Statement, inner: cst.BaseExpression,
                              flow: LossFlow, depth: int) -> None:
        """`loss = loss / K` and then `if n_gpu > 1: loss = loss.mean()` (or `loss.mean().backward()`):
        the method keeps the division made before it. When the value the method is called on was scaled earlier in
        the iteration, the flow takes those scalings (its origin stays this call: its
        reduction is what the backward sees)."""
        if type(inner) is not cst.Call or type(inner.func) is not cst.Attribute or inner.args:
            return
        if inner.func.attr.value not in VALUE_KEEPING_METHODS:
            return
        receiver = dotted(inner.func.value)
        if receiver is None or receiver.endswith("()"):
            return
        earlier = LossFlow(flow.backward)
        self._trace(loop, statement, inner.func.value, earlier, depth + 1)
        flow.scalings.extend(earlier.scalings)
        if earlier.reduction == TOKEN:
            # `loss = outputs.loss.mean()` (DataParallel's per-replica means): still a token mean
            flow.reduction = TOKEN
            flow.entry_statement = flow.entry_statement or earlier.entry_statement or earlier.origin_statement

    def _through_helper(self, loop: TrainingLoop, definition: tuple[Statement, cst.BaseSmallStatement], name: str,
                        flow: LossFlow, depth: int) -> bool:
        """`loss = self.compute_loss(batch)`: continue the flow at the helper's `return`.
        `raw, scaled = self.forward_pass(batch)`: at the element of the returned tuple in
        the position of `name` among the targets (a helper may return the loss before and
        after its division by K)."""
        statement, small = definition
        if type(small) is not cst.Assign or type(small.value) is not cst.Call:
            return False
        position = _target_position(small.targets[0].target, name)
        if position is None:
            return False
        return self._through_call(loop, statement, small.value, flow, depth, position)

    def _through_call(self, loop: TrainingLoop, statement: Statement, call: cst.Call, flow: LossFlow, depth: int,
                      position: int = 0) -> bool:
        """The loss is what the helper `call` runs returns: continue the flow at its `return`
        (the one walked from this call, when the loop walked the helper more than once);
        `position`: the element of a returned tuple that the caller unpacked into the loss."""
        helper = self.facts.helper(call, loop.function)
        if helper is None:
            return False
        returns = [c for c in loop.statements if c.helper is helper and type(c.small) is cst.Return]
        for candidate in sorted(returns, key=lambda c: c.call_site is not call):
            value = cast(cst.Return, candidate.small).value
            if value is None:
                return False
            if type(value) is cst.Tuple and value.elements:
                if position >= len(value.elements) or any(type(e) is cst.StarredElement for e in value.elements):
                    return False
                value = value.elements[position].value
            elif position:
                return False  # a tuple built elsewhere: which of its elements is the loss is not known here
            flow.entry_statement = statement
            inner, scalings = split_scaling(value, candidate)
            flow.scalings.extend(scalings)
            self._trace(loop, candidate, inner, flow, depth + 1)
            if self._home(helper) != self._home(statement.helper or loop.function):
                flow.reduction = UNKNOWN  # a loss another module's function returns: its scalings count, its reduction is unknown
            return True
        return False

    def _home(self, function: Optional[Function]) -> Optional[str]:
        """The module a function was read from: None for the analysed module's own."""
        project = self.facts.project
        return project.home_path(function) if project is not None and function is not None else None

    def _after(self, loop: TrainingLoop, backward: Statement, name: str) -> list[Scaling]:
        found = self._divided_at_call_site(loop, backward, name)
        for statement in loop.statements:
            if not backward.precedes(statement) or statement.loops != backward.loops:
                continue
            for small in statement.node.body:
                if type(small) is cst.AugAssign and dotted(small.target) == name and type(small.operator) is cst.DivideAssign:
                    found.append(Scaling("div", small.value, small, statement, True))
                elif type(small) is cst.Assign and dotted(small.targets[0].target) == name:
                    inner, scalings = split_scaling(small.value, statement)
                    if dotted(inner) != name:
                        return found
                    found.extend(Scaling(s.op, s.factor, s.node, statement, True) for s in scalings if s.op == "div")
        return found

    def _divided_at_call_site(self, loop: TrainingLoop, backward: Statement, name: str) -> list[Scaling]:
        """A helper that runs the backward of `name` and returns it (`def compute_and_backward(b):
        ... loss.backward(); return loss`), whose value the caller divides where it calls it
        (`loss = self.compute_and_backward(b) / n_micro`): those divisions run after the backward."""
        helper, call = backward.helper, backward.call_site
        if helper is None or call is None:
            return []
        returns = _returns(helper)
        if not returns or any(dotted(value) != name for value in returns):
            return []
        scope = backward.callers[-2] if len(backward.callers) > 1 else None
        for statement in loop.statements:
            small = statement.small
            if statement.helper is not scope or type(small) is not cst.Assign or len(small.targets) != 1:
                continue
            inner, scalings = split_scaling(small.value, statement)
            if inner is call:
                return [Scaling(s.op, s.factor, s.node, statement, True) for s in scalings if s.op == "div"]
        return []

    # -- reductions ------------------------------------------------------------
    def _scales_container_entries(self, function: cst.CSTNode) -> bool:
        """Whether a function stores a divided or multiplied loss into an entry of a container
        (`losses[key] = value / n`, `out["loss"] *= w`): a loss it then reads from that
        container is scaled there. Values that hold no graph (`info["loss"] = running / steps`
        of numbers, `info["steps/sec"] = steps / (time.time() - start)`) scale none."""
        known = self._container_scaling.get(id(function))
        if known is None:
            known = self._container_scaling[id(function)] = self._scaled_entry(list(walk(function)))
        return known

    def _scaled_entry(self, nodes: list[cst.CSTNode]) -> bool:
        def scaled(value: cst.CSTNode) -> bool:
            return any(type(n) is cst.BinaryOperation and type(n.operator) in (cst.Divide, cst.Multiply) for n in walk(value))

        def graph_free(value: cst.BaseExpression) -> bool:
            # `avg = total.item() / n`, `running / steps` of numbers, `torch.tensor(v / n)` (a new
            # leaf): numbers for a log
            return self.facts.holds_no_graph(value) or (
                type(value) is cst.Call and last_part(call_name(value) or "") == "tensor")

        # names bound to a scaled value (`value = value.mean() / loss_divisor`, then `losses[key] = value`)
        scaled_names = {t.target.value for node in nodes if type(node) is cst.Assign and scaled(node.value)
                        and not graph_free(node.value) for t in node.targets if type(t.target) is cst.Name}
        for node in nodes:
            if type(node) is cst.Assign and any(type(t.target) is cst.Subscript for t in node.targets):
                if (scaled(node.value) and not graph_free(node.value)) \
                        or (type(node.value) is cst.Name and node.value.value in scaled_names):
                    return True
            elif type(node) is cst.AugAssign and type(node.target) is cst.Subscript \
                    and type(node.operator) in (cst.DivideAssign, cst.MultiplyAssign):
                return True
        return False

    def reduction(self, expr: cst.BaseExpression, function: Optional[Function], flow: Optional[LossFlow] = None,
                  depth: int = 0, terms: Optional[TermReader] = None) -> Reduction:
        """mean / token / sum / unknown for an expression that computes a loss. `terms`
        reads the plain names that the terms of a sum or a weighted term hold (`loss +
        w * prior_loss`, `(loss_img + loss_txt) / 2` in a forward): without it a name is
        unknown."""
        if depth > MAX_REDUCTION_DEPTH:
            return UNKNOWN
        home = (self.facts.enclosing_function(expr) or function) if _reads_container(expr) else None
        if home is not None and self._scales_container_entries(home):
            # `report.losses[key] = value.mean() / divisor`, then `sum(l.mean() for l in losses.values())`:
            # the entries it reads may be those it scaled, under another name of the container
            return UNKNOWN
        if _masked_token_mean(expr):
            return TOKEN
        if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Add, cst.Subtract):
            kinds = {self.reduction(side, function, None, depth + 1, terms) for side in (expr.left, expr.right)}
            return kinds.pop() if len(kinds) == 1 else UNKNOWN
        if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply:
            if terms is not None and type(expr.left) is cst.Name and type(expr.right) is cst.Name:
                return self._weighted(expr.left, expr.right, depth, terms)
            inner, _ = split_scaling(expr, None)
            return UNKNOWN if inner is expr else self.reduction(inner, function, None, depth + 1, terms)
        if type(expr) is cst.Name and terms is not None:
            return terms(expr, depth)
        if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Minus:
            return self.reduction(expr.expression, function, None, depth + 1, terms)  # `-(p * log_q).sum(1).mean()`
        first = isinstance(expr, cst.Subscript) and int_value(_subscript_index(expr)) == 0
        if isinstance(expr, (cst.Attribute, cst.Subscript)) and (
                first or (type(expr) is cst.Attribute and expr.attr.value == "loss")
                or (type(expr) is cst.Subscript and string_value(_subscript_index(expr)) == "loss")):
            # a Hugging Face model's `outputs.loss` (`outputs[0]` of a call given `labels=`) is a
            # mean; a project model's is unknown
            labelled = self._labelled_outputs(expr.value, function)
            if first and not labelled:
                return UNKNOWN
            if not (self._hugging_face_module() or labelled) or self._from_loss_function(expr.value, function):
                return UNKNOWN
            return TOKEN if self._language_model() else MEAN
        if type(expr) is cst.Name and depth > 0:
            # `start_loss + end_loss` in a helper: each term as the function it is read in binds
            # it, once (the function the name stands in, whichever function reads the loss)
            scope = self.facts.enclosing_function(expr) or function
            local = [b for b in self.facts.bindings.get(expr.value, ())
                     if b.index is None and self.facts.enclosing_function(b.statement) is scope]
            return self.reduction(local[0].value, scope, None, depth + 1) if len(local) == 1 and scope else UNKNOWN
        if type(expr) is not cst.Call:
            return UNKNOWN
        return self._call(expr, function, depth)

    def _labelled_outputs(self, holder: cst.BaseExpression, function: Optional[Function]) -> bool:
        """The outputs of a model call given `labels=` (`outputs = model(input_ids=x, labels=y)`,
        every binding of the holder in the function that reads it, or the call itself): the
        Hugging Face calling convention, whose outputs begin with the model's own loss."""
        if type(holder) is cst.Call:
            return _given_labels(holder)
        if type(holder) is not cst.Name:
            return False
        bindings = [b for b in self.facts.values_in(holder.value, function)
                    if function is None or self.facts.enclosing_function(b.statement) is function]
        return bool(bindings) and all(b.index is None and _given_labels(b.value) for b in bindings)

    def _weighted(self, left: cst.Name, right: cst.Name, depth: int, terms: TermReader) -> Reduction:
        """`prior_loss_weight * prior_loss`, both plain names (either may be named for
        losses): the reduction of the one side that holds a loss, when the other is a weight
        of unknown origin and no count of samples or tokens (which would make a sum)."""
        if any(_sample_count(side) or looks_like_token_count(side.value) for side in (left, right)):
            return UNKNOWN
        kinds = [terms(left, depth + 1), terms(right, depth + 1)]
        known = [kind for kind in kinds if kind != UNKNOWN]
        return known[0] if len(known) == 1 else UNKNOWN

    def _call(self, call: cst.Call, function: Optional[Function], depth: int) -> Reduction:
        if type(call.func) is cst.Call and self.objects.built_kind(call.func, None) == "loss":
            # `nn.MSELoss()(output, target)`: the loss object built and called at once
            return self._built_loss(call, cast(cst.Call, constructed(call.func)))
        name = call_name(call) or ""
        qualified = self.facts.qualified(name) or ""
        tail = last_part(name)
        if not name and type(call.func) is cst.Attribute:
            tail = call.func.attr.value  # `(losses * weights).mean()`: a method of a computed tensor
        reduction = string_value(given.value) if (given := keyword(call, "reduction")) else None
        if reduction == "sum":
            return SUM
        if reduction is not None and reduction != "mean":
            return UNKNOWN
        if tail in ("mean", "nanmean"):
            return MEAN
        term = _summed_term(call)
        if term is not None and not self.facts.values_of("sum"):
            # builtin `sum(criterion(o, y) for o in outputs)`: a sum of per-head losses, each
            # reduced as its own term is, not a sum over samples
            return self.reduction(term, function, None, depth + 1)
        if tail in ("sum", "nansum"):
            return SUM
        token = tail == "cross_entropy" or "CrossEntropy" in tail or self.objects.kind_of(call.func) == "loss"
        if (qualified.startswith("torch.nn.functional.") or name.startswith("F.")) and _LOSS_FUNCTIONS.match(tail):
            return TOKEN if token and _FLATTEN.search(code(call)) else MEAN
        scope = self.facts.enclosing_function(call)
        if scope is not None and type(call.func) is cst.Name and call.func.value in all_parameters(scope) and not any(
                self.facts.enclosing_function(b.statement) is scope for b in self.facts.bindings.get(call.func.value, ())):
            # `def train(model, loader, criterion, ...)`: what its callers pass, not an object of that name elsewhere
            return self._passed_criterion(call, scope, call.func.value, depth)
        helper = self.facts.helper(call, function)
        if helper is None and type(call.func) is cst.Attribute and dotted(call.func.value) not in (None, "self"):
            # `loss_func.compute_loss(...)` on an object of a project class: that class's method
            helper = self.facts.instance_method(dotted(call.func.value), call.func.attr.value)
        if helper is not None:
            if self._home(helper) != self._home(function):
                return UNKNOWN  # a loss another module's function returns (`_through_call`)
            return self._returned(helper, depth)
        forward = self.facts.forward_of(call)
        if forward is not None:
            return self._forward_returned(forward, depth)  # `loss = self.model(input_ids, labels=labels)`
        callee = dotted(call.func)
        if callee is not None:
            bound = list(self.facts.values_in(callee, function))
            for binding in bound:
                # `nn.L1Loss() if regression else nn.CrossEntropyLoss()`: each arm builds a loss
                arms = (binding.value.body, binding.value.orelse) if type(binding.value) is cst.IfExp else (binding.value,)
                if all(self.objects.built_kind(arm, binding.index) == "loss" for arm in arms):
                    # `built_kind` knows only calls
                    kinds = {self._built_loss(call, cast(cst.Call, constructed(arm))) for arm in arms}
                    if kinds == {MEAN, TOKEN}:
                        return MEAN  # averaged either way; a token mean in only one arm is no token mean
                    return kinds.pop() if len(kinds) == 1 else UNKNOWN
            held = self._function_held(call, bound, depth)
            if held is not UNKNOWN:
                return held  # `self.criterion = rmse_loss` in `__init__`, then `self.criterion(preds, y)`
            # a criterion named so, bound nowhere and no parameter (an attribute a base class of
            # another module sets); one imported is another module's function: its reduction
            # is unknown unless the project reads it (above)
            # (`loss_helper.compute_loss(...)` on an object the module binds, of a class it imports or
            # defines, runs that class's method: another module's loss, or one the helper reads)
            receiver = callee.rpartition(".")[0]
            if (_CRITERION_NAME.match(last_part(callee)) and not self.facts.values_of(callee)
                    and callee.partition(".")[0] not in self.facts.imports and self._parameter_if_foreign(callee, function)
                    and not (receiver and receiver != "self" and self.facts.values_of(receiver))):
                return MEAN
        return UNKNOWN

    def _function_held(self, call: cst.Call, bound: "list[Binding]", depth: int) -> Reduction:
        """How `call` reduces when every binding of the name it calls (`bound`) stores a
        function itself, not a call's result: a function of the module (what it returns)
        or a `torch.nn.functional` loss (`self.criterion = F.mse_loss`). A parameter stored so
        (`self.criterion = criterion`) is what the class's constructors pass: unknown here."""
        if not bound or any(b.index is not None or type(b.value) not in (cst.Name, cst.Attribute) for b in bound):
            return UNKNOWN
        kinds: set[Reduction] = set()
        for binding in bound:
            scope = self.facts.enclosing_function(binding.statement)
            name = dotted(binding.value) or ""
            if scope is not None and name.partition(".")[0] in all_parameters(scope):
                return UNKNOWN
            kinds.add(self._criterion_object(call, binding.value, scope, depth + 1) if depth <= MAX_REDUCTION_DEPTH else UNKNOWN)
        return kinds.pop() if len(kinds) == 1 else UNKNOWN

    def _reader(self, loop: TrainingLoop, statement: Statement) -> Optional[Function]:
        """The function whose names a statement of the loop reads: the loop's own, or, for a
        statement of a helper read from another module, that helper (its names are its
        module's, not the analysed module's)."""
        project = self.facts.project
        if statement.helper is not None and project is not None and project.is_foreign(statement.helper):
            return statement.helper
        return loop.function

    def _parameter_if_foreign(self, name: str, function: Optional[Function]) -> bool:
        """In a function read from another module, a plain name is unbound in the analysed
        module's sense only when it is one of the function's parameters: any other plain name
        is bound (or imported) in that module, whatever the analysed module binds. Attributes
        (`self.loss_fn`) are read as in the analysed module."""
        project = self.facts.project
        if function is None or project is None or "." in name or not project.is_foreign(function):
            return True
        parameters = function.params
        return name in {p.name.value for p in (*parameters.posonly_params, *parameters.params, *parameters.kwonly_params)}

    def _built_loss(self, call: cst.Call, constructor: cst.Call) -> Reduction:
        """The reduction of `call`, a call of the loss object `constructor` builds
        (`nn.CrossEntropyLoss(ignore_index=-100)`): its `reduction=` keyword, mean by
        default; a token mean for a cross-entropy over flattened tokens."""
        bound = keyword(constructor, "reduction")
        kind = string_value(bound.value) if bound is not None else "mean"
        if kind == "sum":
            return SUM
        if kind != "mean":
            return UNKNOWN
        crossentropy = "CrossEntropy" in (call_name(constructor) or "")
        return TOKEN if crossentropy and _FLATTEN.search(code(call) + code(constructor) + self._arguments_made(call)) else MEAN

    def _arguments_made(self, call: cst.Call) -> str:
        """The source of what the call's plain-name arguments are bound to in its function
        (`active_logits = logits.view(-1, num_labels)`, `active_labels = torch.where(mask,
        labels.view(-1), ignore_index)`): flattened tokens may be made before the loss call."""
        scope = self.facts.enclosing_function(call)
        made = []
        for argument in call.args:
            if type(argument.value) is cst.Name:
                made += [code(b.value) for b in self.facts.bindings.get(argument.value.value, ())
                         if b.index is None and self.facts.enclosing_function(b.statement) is scope]
        return " ".join(made)

    def _passed_criterion(self, call: cst.Call, function: Function, parameter: str, depth: int) -> Reduction:
        """`def train(model, loader, criterion, ...)` calling its parameter `criterion(out, y)`:
        the criterion is whatever the function's callers pass, so it is reduced as every
        caller in the module passes it (`train(model, loader, nn.CrossEntropyLoss(), ...)`,
        a name the caller's scope binds to a loss object, a `torch.nn.functional` loss, or
        the parameter's default when a call passes none), when they all agree. With no
        caller in the module, a parameter named as a criterion (`criterion`, `loss_fn`) is a
        mean; any other is unknown, as it is when the module names
        the function otherwise (a callback), or when any caller passes something else.
        An object of the parameter's name bound elsewhere in the module is not what the
        function receives."""
        calls = self.facts.own_calls(function) if depth <= MAX_REDUCTION_DEPTH else None
        if calls is not None and not calls and _CRITERION_NAME.match(parameter):
            # no caller in the module (a `train(model, loader, optimizer, criterion)` whose
            # callers are elsewhere): a parameter named as a criterion is read as one, mean
            # by default, as the suite's and earlier hidden sets' samples write it; unless a
            # caller of another module passes what a factory of its own built
            # (`criterion = build_criterion(cfg)`), whose reduction is that module's
            return UNKNOWN if self._criterion_built_elsewhere(function, parameter) else MEAN
        if not calls:
            return UNKNOWN
        kinds: set[Reduction] = set()
        default = next((p.default for p in (*function.params.posonly_params, *function.params.params,
                                            *function.params.kwonly_params) if p.name.value == parameter), None)
        for site in calls:
            argument = argument_for(function, site, parameter)
            if argument is None and (default is None or any(a.star for a in site.args)):
                return UNKNOWN
            if argument is None:
                kinds.add(self._criterion_object(call, cast(cst.BaseExpression, default), None, depth + 1))
            else:
                kinds.add(self._criterion_object(call, argument, self.facts.enclosing_function(site), depth + 1))
        return kinds.pop() if len(kinds) == 1 else UNKNOWN

    def _criterion_built_elsewhere(self, function: Function, parameter: str) -> bool:
        """A project caller of the module's top-level `function` passes, as `parameter`, an
        object that a call other than a `torch.nn` loss class built."""
        project = self.facts.project
        name = function.name.value
        if project is None or self.facts.functions.get(name) is not function \
                or self.facts.parents.get(id(function)) is not self.facts.module:
            return False
        positions = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if parameter not in positions:
            return False
        return project.callers_pass_built_elsewhere(name, parameter, positions.index(parameter))

    def _criterion_object(self, call: cst.Call, argument: cst.BaseExpression, caller: Optional[Function],
                          depth: int) -> Reduction:
        """How `call` reduces when the criterion it calls is `argument`, as `caller` passes it:
        a loss object built there (or by the name's bindings in the caller's scope), a
        `torch.nn.functional` loss, an object of a project model class (its forward's loss),
        a function of the module (what it returns), or the caller's own parameter, passed on
        by its callers."""
        if type(argument) is cst.Call:
            kind = self.objects.built_kind(argument, None)
            return self._built_loss(call, cast(cst.Call, constructed(argument))) if kind == "loss" else UNKNOWN
        name = dotted(argument)
        if name is None:
            return UNKNOWN
        qualified = self.facts.qualified(name) or ""
        if qualified.startswith("torch.nn.functional.") and _LOSS_FUNCTIONS.match(last_part(qualified)):
            token = last_part(qualified) == "cross_entropy"
            return TOKEN if token and _FLATTEN.search(code(call)) else MEAN
        bindings = [b for b in self.facts.values_in(name, caller)
                    if caller is None or self.facts.enclosing_function(b.statement) in (caller, None)]
        if bindings and all(self.objects.built_kind(b.value, b.index) == "loss" for b in bindings):
            kinds = {self._built_loss(call, cast(cst.Call, constructed(b.value))) for b in bindings}
            return kinds.pop() if len(kinds) == 1 else UNKNOWN
        forward = self.facts.object_forward(name) if bindings else None
        if forward is not None:
            return self._forward_returned(forward, depth)  # a model of the project's class: `train(model, ...)`
        if bindings:
            return UNKNOWN
        if name in self.facts.functions and (caller is None or name not in all_parameters(caller)):
            return self._returned(self.facts.functions[name], depth)  # `train(model, loader, compute_loss)`
        if caller is not None and name in all_parameters(caller):
            return self._passed_criterion(call, caller, name, depth)
        return UNKNOWN

    def _returned(self, helper: Function, depth: int) -> Reduction:
        """The reduction of what a same-module helper returns (its first `return`)."""
        value = next((v for v in _returned_values(helper)), None)
        return UNKNOWN if value is None else self._returned_value(helper, value, depth)

    def _forward_returned(self, forward: Function, depth: int) -> Reduction:
        """The reduction of the loss a model's `forward` returns when it is given its labels.
        Its returns of a loss (a name holding "loss", or an expression) count and must agree;
        a return of another name (`return logits` when no labels were given) is the
        inference path, whose output no backward runs on. None left: unknown."""
        kinds = {self._returned_value(forward, value, depth) for value in _returned_values(forward)
                 if (name := dotted(value)) is None or "loss" in last_part(name).lower()}
        # a returned call (`return torch.sum(losses * mask)`) counts when it is a known reduction;
        # another (`return self.head(x)`, the logits) is the inference path's
        kinds |= {kind for value in _returned_values(forward)
                  if (name := dotted(value)) is not None and name.endswith("()") and "loss" not in name.lower()
                  and (kind := self._returned_value(forward, value, depth)) != UNKNOWN}
        return kinds.pop() if len(kinds) == 1 else UNKNOWN

    def _forward_element(self, forward: Function, position: int, depth: int) -> Reduction:
        """The reduction of the element at `position` of the tuples a model's `forward`
        returns (`mel_loss, metrics = model(batch)`): every such return must agree; a return
        of something else than a tuple that long (the inference path's logits) is skipped."""
        kinds = set()
        for value in _returns(forward):
            if type(value) is not cst.Tuple or any(type(e) is cst.StarredElement for e in value.elements):
                continue
            if position < len(value.elements):
                kinds.add(self._returned_value(forward, value.elements[position].value, depth))
        return kinds.pop() if len(kinds) == 1 else UNKNOWN

    def _returned_value(self, helper: Function, value: cst.BaseExpression, depth: int) -> Reduction:
        """The reduction of `value`, returned by `helper`: a name is read at its first
        assignment in the helper to something else than `None` (`loss = None` before the
        labels are checked binds no loss), and so are the names a returned sum adds up
        (`return (loss_img + loss_txt) / 2`). A division by a numeric constant (the mean
        of two terms) keeps the reduction; any other scaling (`/ self.accumulation_steps`)
        makes it unknown."""
        inner, scalings = split_scaling(value, None)
        if any(not _is_constant(s.factor) for s in scalings):
            return UNKNOWN
        name = dotted(inner)
        if name is not None and not name.endswith("()"):
            return self._assigned(helper, name, depth)
        return self.reduction(inner, helper, None, depth + 1, lambda term, level: self._assigned(helper, term.value, level))

    def _assigned(self, helper: Function, name: str, depth: int) -> Reduction:
        """The reduction of a loss a helper holds in `name`, read at its first assignment
        in the helper to something else than `None`; unknown when the helper assigns
        it nowhere (a parameter, a name of the module). A last assignment in the helper's own
        body that reduces the name itself (`loss = torch.mean(loss)` after `loss = ce(...)`
        with `reduction="none"` and `loss *= weights`) is what reaches the return: its
        reduction, when known."""
        assigned = [node for node in walk(helper.body)
                    if type(node) is cst.Assign and dotted(node.targets[0].target) == name and code(node.value) != "None"]
        if not assigned:
            return UNKNOWN
        last = assigned[-1]
        if len(assigned) > 1 and type(last.value) is cst.Call and _top_level(helper, last) \
                and any(type(n) is cst.Name and n.value == name for n in walk(last.value)):
            kind = self.reduction(last.value, helper, None, depth + 1)
            if kind != UNKNOWN:
                return kind
        return self.reduction(assigned[0].value, helper, None, depth + 1,
                              lambda term, level: self._assigned(helper, term.value, level))

    def _hugging_face_module(self) -> bool:
        """`trainers.hf_model_in_module`, asked once per module."""
        if self.hf_module is None:
            self.hf_module = hf_model_in_module(self.facts)
        return self.hf_module

    def _from_loss_function(self, holder: cst.BaseExpression, function: Optional[Function]) -> bool:
        """`terms = diffusion.training_losses(model, x, t)` then `terms["loss"]`: the dict a loss
        function returns, not a model's outputs (every binding of the holder calls a function
        named for losses)."""
        name = dotted(holder)
        bindings = self.facts.values_in(name, function) if name is not None else []
        return bool(bindings) and all(
            type(b.value) is cst.Call and b.index is None
            and _LOSS_FUNCTION_NAME.search(last_part(call_name(b.value) or "")) is not None
            for b in bindings)

    def _language_model(self) -> bool:
        if self.lm_module is None:
            self.lm_module = bool(_LM_CLASS.search(self.facts.text))
        return self.lm_module


# The keywords that hand a Hugging Face model its labels (`masked_lm_labels=`, `lm_labels=`: before transformers 3)
_LABELS_KEYWORDS = ("labels", "masked_lm_labels", "lm_labels")


def _given_labels(value: cst.BaseExpression) -> bool:
    """A model call given its labels (`model(x, labels=y)`), or a choice between two such calls
    (`model(x, masked_lm_labels=y) if args.mlm else model(x, labels=y)`)."""
    if type(value) is cst.IfExp:
        return _given_labels(value.body) and _given_labels(value.orelse)
    return type(value) is cst.Call and any(keyword(value, name) is not None for name in _LABELS_KEYWORDS)


def _top_level(function: Function, assignment: cst.Assign) -> bool:
    """The assignment is a statement of the function's own body, in no block of it."""
    body = function.body
    return type(body) is cst.IndentedBlock and any(
        type(line) is cst.SimpleStatementLine and any(small is assignment for small in line.body) for line in body.body)


def _returned_values(function: Function) -> list[cst.BaseExpression]:
    """What each `return` of the function returns, the first element of a tuple."""
    return [value.elements[0].value if type(value) is cst.Tuple and value.elements else value for value in _returns(function)]


def _returns(function: Function) -> list[cst.BaseExpression]:
    """What each `return` of the function returns, as written."""
    return [node.value for node in walk(function.body) if type(node) is cst.Return and node.value is not None]


def _stacked_list(value: cst.BaseExpression) -> Optional[tuple[str, bool]]:
    """(the list's name, whether its entries are summed) for a mean or sum of a list's entries:
    `torch.stack(losses).mean()`, `torch.stack(losses).sum()`, `torch.mean(torch.stack(losses))`,
    `sum(losses)`; None for anything else."""
    if type(value) is not cst.Call:
        return None
    func = value.func
    if type(func) is cst.Name and func.value == "sum" and len(value.args) == 1 and type(value.args[0].value) is cst.Name:
        return value.args[0].value.value, True
    if type(func) is cst.Attribute and func.attr.value in ("mean", "sum") and not value.args:
        inner, reduced = func.value, func.attr.value  # `torch.stack(losses).mean()`
    elif last_part(dotted(func) or "") in ("mean", "sum") and len(value.args) == 1 and value.args[0].keyword is None:
        inner, reduced = value.args[0].value, last_part(dotted(func) or "")  # `torch.mean(torch.stack(losses))`
    else:
        return None
    if type(inner) is not cst.Call or last_part(dotted(inner.func) or "") != "stack" or len(inner.args) != 1 \
            or type(inner.args[0].value) is not cst.Name:
        return None
    return inner.args[0].value.value, reduced == "sum"


def _appended_once(statements: list[Statement], before: Statement, name: str) -> Optional[tuple[Statement, cst.BaseExpression]]:
    """The one `name.append(value)` of the iteration before `before` (in the same function),
    with its statement; None when there is none or more than one."""
    found: list[tuple[Statement, cst.BaseExpression]] = []
    for statement in statements:
        if statement.order >= before.order or statement.helper is not before.helper:
            continue
        for small in statement.node.body:
            value = small.value if type(small) is cst.Expr else None
            if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "append" \
                    and dotted(value.func.value) == name and len(value.args) == 1 and value.args[0].keyword is None \
                    and not value.args[0].star:
                found.append((statement, value.args[0].value))
    return found[0] if len(found) == 1 else None


def _empty_sum(node: Optional[cst.BaseExpression]) -> bool:
    """`0`, `0.0` or a zero tensor (`torch.tensor(0.0, requires_grad=True).to(device)`,
    `torch.zeros(1, device=device)`, `pred.new_zeros(())`): where a loss summed term by
    term (`loss += ...`) starts."""
    if type(node) in (cst.Integer, cst.Float):
        return float(cast("cst.Integer | cst.Float", node).value) == 0
    node = constructed(node) if node is not None else None  # `.to(device)`, `.cuda()`: the same tensor
    if type(node) is not cst.Call:
        return False
    tail = last_part(dotted(node.func) or "")
    if tail in _ZERO_TENSORS:
        return True
    first = positional(node, 0)
    return tail == "tensor" and type(first) in (cst.Integer, cst.Float) \
        and float(cast("cst.Integer | cst.Float", first).value) == 0


_ZERO_TENSORS = frozenset({"zeros", "zeros_like", "new_zeros"})


def _summed_term(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The element of the builtin `sum(<term> for ...)` / `sum([<term> for ...])`."""
    if type(call.func) is not cst.Name or call.func.value != "sum" or not call.args or call.args[0].keyword is not None:
        return None
    argument = call.args[0].value
    if type(argument) is cst.GeneratorExp or type(argument) is cst.ListComp:
        return argument.elt
    return None


def _amp_scaled_loss(statement: Statement, name: str) -> Optional[cst.Call]:
    """The `amp.scale_loss(loss, ...)` call of a `with ... as name:` around the statement."""
    for item in statement.withs:
        call = item.item
        if (item.asname is not None and dotted(item.asname.name) == name and type(call) is cst.Call
                and last_part(call_name(call) or "") == "scale_loss" and positional(call, 0) is not None):
            return call
    return None


def _mean_of_terms(division: cst.BinaryOperation) -> bool:
    """`(loss_real + loss_fake) / 2`: a sum of N terms divided by the number N, written as a
    literal: the mean of the terms, no scaling of the loss."""
    count = division.right
    if type(count) not in (cst.Integer, cst.Float):
        return False
    terms, pending = 0, [division.left]
    while pending:
        node = pending.pop()
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
            pending += [node.left, node.right]
        else:
            terms += 1
    value = int_value(count) if type(count) is cst.Integer else float(cast(cst.Float, count).value.replace("_", ""))
    return terms > 1 and value == terms


def _mean_of_itself(value: cst.BaseExpression, name: str) -> bool:
    """`name.mean()` (no arguments) rebinding `name`."""
    return type(value) is cst.Call and not value.args and type(value.func) is cst.Attribute \
        and value.func.attr.value in ("mean", "nanmean") and dotted(value.func.value) == name


def _reads_container(expr: cst.BaseExpression) -> bool:
    """Whether an expression reads entries of a container as its loss: `d.values()`,
    `d.items()`, `d[key]`, also through a reducer (`sum(l for l in losses.values())`,
    `torch.stack(parts)`). Entries handed to a function that computes the loss from them
    (`self.weighted_loss(outputs[m], labels[idx])`) are its inputs, not the loss."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.Subscript or (type(node) is cst.Call and type(node.func) is cst.Attribute
                                           and node.func.attr.value in ("values", "items")):
            return True
        callee = call_name(node) if type(node) is cst.Call else None
        if callee is not None and not callee.endswith("()") and last_part(callee) not in _REDUCERS:
            stack.append(cast(cst.Call, node).func)  # `losses[k].mean()` reads the entry; `criterion(out[m], y)` computes a loss
            continue
        stack.extend(children(node))
    return False


# Calls whose result is made of the values they are given (`sum(...)`, `torch.stack(...)`).
_REDUCERS = frozenset({"sum", "mean", "stack", "cat", "max", "min", "nansum", "nanmean", "tensor", "float"})


def _subscript_index(node: cst.Subscript) -> Optional[cst.BaseExpression]:
    if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
        return node.slice[0].slice.value
    return None


def _last_definition(statements: list[Statement], before: Statement, name: str
                     ) -> Optional[tuple[Statement, cst.BaseSmallStatement]]:
    """The last assignment to `name` earlier in the iteration than `before`, in the
    same scope (the loop's own code, or the same inlined helper, walked from the same call:
    a helper the iteration calls twice binds its names afresh on each call)."""
    found: Optional[tuple[Statement, cst.BaseSmallStatement]] = None
    for statement in statements:
        if statement.order >= before.order:
            break
        if statement.helper is not before.helper or statement.exclusive_with(before):
            continue
        if before.helper is not None and statement.call_site is not before.call_site:
            continue
        for small in statement.node.body:
            if type(small) is cst.Assign:
                for target in small.targets:
                    if dotted(target.target) == name or _in_tuple(target.target, name):
                        found = (statement, small)
            elif (type(small) is cst.AugAssign or type(small) is cst.AnnAssign) and dotted(small.target) == name:
                if type(small) is cst.AnnAssign and small.value is None:
                    continue
                found = (statement, small)
            elif _in_place_scaling(small, name) is not None:
                found = (statement, small)
    return found


def _division_unless_one(value: cst.BaseExpression) -> cst.BaseExpression:
    """`loss / K if K > 1 else loss` (either arm order) is the division: the other arm runs
    only where K is 1, where dividing changes nothing."""
    if type(value) is not cst.IfExp:
        return value
    tested = {code(node) for node in walk(value.test) if type(node) in (cst.Name, cst.Attribute)}
    for divided, plain in ((value.body, value.orelse), (value.orelse, value.body)):
        if type(divided) is cst.BinaryOperation and type(divided.operator) is cst.Divide:
            if normalized(divided.left) == normalized(plain) and code(divided.right) in tested:
                return divided
    return value


def _self_added(small: cst.BaseSmallStatement, name: str) -> Optional[cst.BaseExpression]:
    """`loss = loss + term` (or `term + loss`): the term added to the loss."""
    if type(small) is not cst.Assign or len(small.targets) != 1 or dotted(small.targets[0].target) != name:
        return None
    value = small.value
    if type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Add:
        return None
    if dotted(value.left) == name and dotted(value.right) != name:
        return value.right
    if dotted(value.right) == name and dotted(value.left) != name:
        return value.left
    return None


def _in_place_scaling(small: cst.BaseSmallStatement, name: str) -> Optional[tuple[ScalingOp, cst.BaseExpression]]:
    """`loss.div_(K)` / `loss.mul_(w)` as a statement: the tensor is rescaled in place,
    like `loss /= K`."""
    if type(small) is not cst.Expr or type(small.value) is not cst.Call:
        return None
    call = small.value
    if type(call.func) is not cst.Attribute or dotted(call.func.value) != name or len(call.args) != 1:
        return None
    method = call.func.attr.value
    if method not in ("div_", "mul_") or call.args[0].keyword is not None or call.args[0].star:
        return None
    return ("div" if method == "div_" else "mul"), call.args[0].value


def _target_position(target: cst.BaseExpression, name: str) -> Optional[int]:
    """Where `name` stands among the targets of an unpacking assignment (0 for a plain
    target); None when a starred target comes first, so positions are not fixed."""
    if type(target) not in (cst.Tuple, cst.List):
        return 0
    for index, element in enumerate(cast("cst.Tuple | cst.List", target).elements):
        if type(element) is cst.StarredElement:
            return None
        target_name = dotted(element.value)
        if target_name is not None and (name == target_name or name.startswith(target_name + ".")):
            return index
    return None


def _in_tuple(target: cst.BaseExpression, name: str) -> bool:
    return type(target) in (cst.Tuple, cst.List) and any(
        dotted(e.value) == name for e in cast("cst.Tuple | cst.List", target).elements)
