"""Gates: `if` tests that mark the boundary of an accumulation window.

A test is read as a boolean formula over boundary tests: `(i + 1) % K == 0`,
`i % K == K - 1`, `not (i + 1) % K`, `i % K == 0`, `counter == K`,
`counter >= K`, `counter - last_step >= K`, `accelerator.sync_gradients`,
`engine.is_gradient_accumulation_boundary()`, combined with `or` (a last-batch
clause), `and`, `not`, or held in a variable first. The result says whether
the test is true on boundaries ("positive") or off them (`% K != 0`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Final, Literal, Optional

import libcst as cst

from accumlint.model.names import dotted, int_value, last_part, minus_one, normalized
from accumlint.model.tree import walk

# The forms of a modulo test, by what the tested expression is:
GateForm = Literal["plus_one", "zero", "count", "countdown"]
PLUS_ONE: Final = "plus_one"  # (i + 1) % K == 0, i % K == K - 1: boundary after micro-batch i (0-based)
ZERO: Final = "zero"  # i % K == 0
COUNT: Final = "count"  # counter == K, counter >= K
# `not left`, `left == 0`: a counter set to K and counted down on each micro-batch
# (`parse_countdown`: a candidate until the loop finds the count and its K)
COUNTDOWN: Final = "countdown"
_FORM_BY_OFFSET: dict[int, GateForm] = {0: ZERO, 1: PLUS_ONE}  # `(i + offset) % K == 0`
# What a gate tests (see `Gate`).
GateKind = Literal["modulo", "count", "sync", "boundary"]


@dataclass(frozen=True, eq=False)
class Gate:
    """A window boundary test.

    kind: modulo (`% K`), count (`== K`), sync (`accelerator.sync_gradients`,
    Fabric/Lightning flags), boundary (DeepSpeed's engine method).
    test: the comparison that holds the boundary test (GA106/GA107 edit it).
    positive: True when the whole `if` test is true on boundaries.
    """

    kind: GateKind
    test: cst.BaseExpression
    positive: bool
    counter: Optional[str] = None
    k: Optional[cst.BaseExpression] = None
    form: Optional[GateForm] = None
    has_clause: bool = False
    has_condition: bool = False
    whole_test: Optional[cst.BaseExpression] = None
    since: Optional[str] = None  # `ni - last_step >= K`: the name that remembers the last boundary
    # the test's negation guards a sibling `if` (`if i % K != 0:` beside `if i % K == 0:`): a clause
    # added to either test would let both arms run on one micro-batch
    paired: bool = False

    def condition_skips_only_the_start(self) -> bool:
        """`i % K == 0 and i > 0` (or `i != 0`, `i >= 1`, `i and ...`: the counter's own truth):
        the extra condition reads only the counter and is false only at 0, so the windows are
        still shifted by one (the first one holds K + 1 micro-batches)."""
        test = self.whole_test
        if type(test) is not cst.BooleanOperation or type(test.operator) is not cst.And:
            return False
        other = test.right if test.left is self.test else test.left if test.right is self.test else None
        if other is not None and type(other) in (cst.Name, cst.Attribute):
            return dotted(other) == self.counter
        if type(other) is not cst.Comparison or len(other.comparisons) != 1:
            return False
        if type(other.comparisons[0].operator) is cst.GreaterThanEqual and int_value(other.comparisons[0].comparator) == 1:
            return {dotted(n) for n in walk(other.left) if type(n) in (cst.Name, cst.Attribute)} == {self.counter}
        names = {dotted(n) for n in walk(other) if type(n) in (cst.Name, cst.Attribute)}
        bound = other.comparisons[0].comparator
        return names == {self.counter} and int_value(bound) == 0 and type(other.comparisons[0].operator) in (
            cst.GreaterThan, cst.NotEqual)


Resolver = Callable[[str], Optional[cst.BaseExpression]]


def parse_gate(test: cst.BaseExpression, resolve: Resolver) -> Optional[Gate]:
    """The gate a test expresses, or None when it is not a window boundary."""
    gate = _parse(test, resolve, depth=0)
    return None if gate is None else replace(gate, whole_test=test)


def _parse(test: cst.BaseExpression, resolve: Resolver, depth: int) -> Optional[Gate]:
    if depth > 6:
        return None
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = _parse(test.expression, resolve, depth + 1)
        return None if inner is None else replace(inner, positive=not inner.positive)
    if type(test) is cst.BooleanOperation:
        return _parse_boolean(test, resolve, depth)
    if type(test) is cst.Comparison:
        return _parse_comparison(test, resolve)
    if type(test) is cst.BinaryOperation and type(test.operator) is cst.Modulo:
        # `if (i + 1) % K:` is true off the boundary
        gate = _modulo(test, test, zero_means_boundary=True)
        return None if gate is None else replace(gate, positive=False)
    if type(test) is cst.IfExp and {_bool(test.body), _bool(test.orelse)} == {True, False}:
        # `True if (j + 1) % K == 0 else False`: the test itself (negated when the arms are swapped)
        inner = _parse(test.test, resolve, depth + 1)
        if inner is None:
            return None
        return inner if _bool(test.body) else replace(inner, positive=not inner.positive)
    if type(test) is cst.Call:
        callee = dotted(test.func) or ""
        if last_part(callee) == "is_gradient_accumulation_boundary":
            return Gate("boundary", test, True)
        return None
    name = dotted(test)
    if name is None:
        return None
    if last_part(name) == "sync_gradients":
        return Gate("sync", test, True)
    value = resolve(name)
    if value is not None and value is not test:
        return _parse(value, resolve, depth + 1)
    return None


def _bool(node: cst.BaseExpression) -> Optional[bool]:
    """The value of a `True` or `False` literal; None for anything else."""
    return {"True": True, "False": False}.get(node.value) if type(node) is cst.Name else None


def _parse_boolean(test: cst.BooleanOperation, resolve: Resolver, depth: int) -> Optional[Gate]:
    is_or = type(test.operator) is cst.Or
    parts = boolean_operands(test, type(test.operator))
    parsed = [_parse(part, resolve, depth + 1) for part in parts]
    kept = _without_world_of_k([_read_through(part, resolve) for part in parts], parsed, is_or)
    if len(kept) == 1:
        return parsed[kept[0]]  # `K > 1 and i % K == 0`, `i % K == 0 or K == 1`: the gate alone
    if len(kept) == 2 and len(parts) > 2:
        first, second = kept
        return _combined(parsed[first], parsed[second], parts[first], parts[second], is_or)
    if len(parts) == 2:
        return _combined(parsed[0], parsed[1], test.left, test.right, is_or)
    # nothing was K's world: as written, two operands at a time (a side that is one operand is parsed)
    left = parsed[0] if test.left is parts[0] else _parse(test.left, resolve, depth + 1)
    right = parsed[-1] if test.right is parts[-1] else _parse(test.right, resolve, depth + 1)
    return _combined(left, right, test.left, test.right, is_or)


def _read_through(part: cst.BaseExpression, resolve: Resolver) -> cst.BaseExpression:
    """An operand as the test it names (`not use_accum` after `use_accum = K > 0`: `not K > 0`),
    one binding deep; the operand itself otherwise."""
    if type(part) is cst.UnaryOperation and type(part.operator) is cst.Not:
        inner = _read_through(part.expression, resolve)
        return part if inner is part.expression else part.with_changes(expression=inner)
    name = dotted(part) if type(part) in (cst.Name, cst.Attribute) else None
    value = resolve(name) if name is not None else None
    return value if type(value) is cst.Comparison else part


def boolean_operands(test: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    """The operands of a chain of one boolean operator (`a and b and c`: a, b, c), in order."""
    if type(test) is cst.BooleanOperation and type(test.operator) is operator:
        return boolean_operands(test.left, operator) + boolean_operands(test.right, operator)
    return [test]


def _without_world_of_k(parts: list[cst.BaseExpression], parsed: list[Optional[Gate]], is_or: bool) -> list[int]:
    """The positions of the operands that are not K's world: an operand that compares a gate's
    K with 1 (`single_micro_batch_arm`) on the side where the others decide (K above 1 in an
    `and`, K equal to 1 in an `or`, where every micro-batch is a boundary anyway) is no
    condition and no clause of the count. All positions when there is none."""
    everything = list(range(len(parts)))
    for gate in parsed:
        if gate is None or gate.k is None or dotted(gate.k) is None:
            continue
        k = dotted(gate.k)
        kept = [i for i in everything
                if parsed[i] is gate or single_micro_batch_arm(parts[i], lambda e: dotted(e) == k) is not is_or]
        if len(kept) < len(parts):
            return kept
    return everything


def _combined(left: Optional[Gate], right: Optional[Gate], left_node: cst.BaseExpression,
              right_node: cst.BaseExpression, is_or: bool) -> Optional[Gate]:
    """The gate of `left_node and/or right_node`, from what each operand parses as."""
    gate = left or right
    if gate is None:
        return None
    if left is not None and right is not None:
        # `A % K == 0 or i == n - 1`: keep the modulo test, the other acts as a clause
        preferred = left if left.kind == "modulo" or right.kind != "modulo" else right
        return replace(preferred, has_clause=True)
    other = right_node if left is not None else left_node
    if is_or and gate.positive and _first_micro_batches(other, gate.counter):
        # `it == 1 or it % K == 0`: an extra step at the run's start, no last-batch clause
        return gate
    if not is_or and gate.positive and _past_first_micro_batch(other, gate.counter):
        # `step > 0 and step % K == 0`: only the count's first value is left out, which a
        # boundary on `step + 1` never is; the gate is the modulo test's
        return gate
    if gate.positive == is_or:
        # positive test `or` something: a last-batch clause; negative `and` something: the same, negated
        return replace(gate, has_clause=True)
    return replace(gate, has_condition=True)


def _first_micro_batches(test: cst.BaseExpression, counter: Optional[str]) -> bool:
    """`counter == 0` or `counter == 1`: true only at the first micro-batch of the count."""
    if counter is None or type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    return type(target.operator) is cst.Equal and dotted(test.left) == counter and int_value(target.comparator) in (0, 1)


def _past_first_micro_batch(test: cst.BaseExpression, counter: Optional[str]) -> bool:
    """`counter > 0`, `counter != 0`, `counter >= 1`, `0 < counter`: false only at a count's first value (0)."""
    if counter is None or type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    left, right = test.left, target.comparator
    operator: type[cst.BaseCompOp] = type(target.operator)
    if dotted(right) == counter and int_value(left) is not None:
        left, right, operator = right, left, _MIRRORED.get(operator, operator)  # `0 < counter`
    if dotted(left) != counter:
        return False
    return (operator, int_value(right)) in {(cst.GreaterThan, 0), (cst.NotEqual, 0), (cst.GreaterThanEqual, 1)}


def _parse_comparison(test: cst.Comparison, resolve: Resolver) -> Optional[Gate]:
    if len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    operator = target.operator
    left, right = test.left, target.comparator
    held = resolve(dotted(left) or "") if int_value(right) == 0 and type(left) in (cst.Name, cst.Attribute) else None
    if type(held) is cst.BinaryOperation and type(held.operator) is cst.Modulo and type(operator) in (cst.Equal, cst.NotEqual):
        # `acc_step = acc_step % K` earlier in the iteration, then `if acc_step == 0:`: the
        # remainder held in a variable is the modulo test
        gate = _modulo(held, test, zero_means_boundary=True, compared=right)
        return None if gate is None else replace(gate, positive=type(operator) is cst.Equal)
    if type(left) is cst.BinaryOperation and type(left.operator) is cst.Modulo:
        equal = type(operator) is cst.Equal
        if type(operator) is cst.GreaterThan and int_value(right) == 0:
            operator = cst.NotEqual()  # `n % K > 0` is `n % K != 0`
        if not (equal or type(operator) is cst.NotEqual):
            return None
        gate = _modulo(left, test, zero_means_boundary=int_value(right) == 0, compared=right)
        return None if gate is None else replace(gate, positive=equal)
    since = None
    if type(left) is cst.BinaryOperation and type(left.operator) is cst.Subtract:
        # `ni - last_opt_step >= accumulate` (yolov5 / ultralytics)
        since = dotted(left.right)
        if since is None:
            return None
        left = left.left
    counter = dotted(left)
    if counter is None or type(right) is cst.Integer and int_value(right) in (0, 1) \
            or type(right) is cst.Float and float(right.value) in (0.0, 1.0):
        return None  # `cfg.grad_clip != 0.0`: a setting's test, not a count of micro-batches
    if type(operator) in (cst.Equal, cst.GreaterThanEqual):
        return Gate("count", test, True, counter=counter, k=right, form=COUNT, since=since)
    if type(operator) in (cst.LessThan, cst.NotEqual):
        return Gate("count", test, False, counter=counter, k=right, form=COUNT, since=since)
    return None


def parse_countdown(test: cst.BaseExpression) -> Optional[Gate]:
    """The countdown a test may end (`if not left:`, `if left == 0:`, `if remaining > 0:`): a
    gate over the name it tests, true (positive) when the count has run out, without its K;
    None for any other test. Only a loop that sets the name to K, counts it down on each
    micro-batch and sets it back to K where the test holds makes it a window's gate."""
    positive = True
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, positive = test.expression, not positive
    name = dotted(test)
    if name is not None and not name.endswith("()"):
        return Gate("count", test, not positive, counter=name, form=COUNTDOWN)  # true while micro-batches remain
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or dotted(test.left) is None:
        return None
    ended = _countdown_test(test.comparisons[0].operator, test.comparisons[0].comparator)
    if ended is None:
        return None
    return Gate("count", test, ended == positive, counter=dotted(test.left), form=COUNTDOWN)


def _countdown_test(operator: cst.BaseCompOp, bound: cst.BaseExpression) -> Optional[bool]:
    """Whether `left <op> bound` is true when a countdown has reached its end (`left == 0`,
    `left <= 0`, `left < 1`: True; `left != 0`, `left > 0`, `left >= 1`: False); None for any
    other comparison."""
    value = int_value(bound) if type(bound) is cst.Integer else None
    kind = type(operator)
    if value == 0 and kind in (cst.Equal, cst.LessThanEqual):
        return True
    if value == 0 and kind in (cst.NotEqual, cst.GreaterThan):
        return False
    if value == 1 and kind is cst.LessThan:
        return True
    if value == 1 and kind is cst.GreaterThanEqual:
        return False
    return None


def _modulo(
    expression: cst.BinaryOperation,
    test: cst.BaseExpression,
    *,
    zero_means_boundary: bool,
    compared: Optional[cst.BaseExpression] = None,
) -> Optional[Gate]:
    """`A % K` compared with 0 (or with K - 1): which counter, which form."""
    k = expression.right
    numerator = expression.left
    offset = 0
    if type(numerator) is cst.BinaryOperation and type(numerator.operator) is cst.Subtract \
            and type(numerator.right) in (cst.Name, cst.Attribute):
        # `(step + 1 - start_iter) % K`: windows counted from where the run (re)started
        numerator = numerator.left
    if type(numerator) is cst.BinaryOperation and type(numerator.operator) is cst.Add:
        if int_value(numerator.left) is not None and int_value(numerator.right) is None:
            offset, numerator = int_value(numerator.left) or 0, numerator.right  # `(1 + i) % K`
        else:
            offset = int_value(numerator.right) or 0
            numerator = numerator.left
    counter = _length_counter(numerator) or dotted(numerator)
    if counter is None or counter.endswith("()"):
        return None
    if zero_means_boundary:
        form = _FORM_BY_OFFSET.get(offset)
    elif compared is not None and offset == 0 and _is_k_minus_one(compared, k):
        form = PLUS_ONE
    else:
        return None
    if form is None:
        return None
    return Gate("modulo", test, True, counter=counter, k=k, form=form)


def _length_counter(node: cst.BaseExpression) -> Optional[str]:
    """`len(losses)` of a list the loop appends to once per micro-batch counts them, from 1
    after the append: its text stands for the counter (no binding increments it)."""
    if type(node) is not cst.Call or dotted(node.func) != "len" or len(node.args) != 1:
        return None
    name = dotted(node.args[0].value)
    return None if name is None or name.endswith("()") else f"len({name})"


def _is_k_minus_one(node: cst.BaseExpression, k: cst.BaseExpression) -> bool:
    left = minus_one(node)
    if left is not None:
        return normalized(left) == normalized(k)
    if type(node) is cst.Integer and type(k) is cst.Integer:
        return int_value(node) == (int_value(k) or 0) - 1
    return False


# `K > 1` and its spellings: (comparison, literal) pairs true exactly when K > 1,
# and those true exactly when K == 1 (K a positive count).
# K compared with 1, or with 0 (`K > 0` switches accumulation on; with K = 1 every micro-batch closes
# a window anyway): the comparisons true where K may accumulate, and those true where it cannot
_ABOVE_ONE = {(cst.GreaterThan, 1), (cst.GreaterThanEqual, 2), (cst.NotEqual, 1), (cst.GreaterThan, 0),
              (cst.GreaterThanEqual, 1)}
_EQUAL_ONE = {(cst.Equal, 1), (cst.LessThanEqual, 1), (cst.LessThan, 2), (cst.Equal, 0), (cst.LessThanEqual, 0),
              (cst.LessThan, 1)}
_MIRRORED: dict[type[cst.BaseCompOp], type[cst.BaseCompOp]] = {cst.GreaterThan: cst.LessThan, cst.LessThan: cst.GreaterThan, cst.GreaterThanEqual: cst.LessThanEqual,
             cst.LessThanEqual: cst.GreaterThanEqual, cst.Equal: cst.Equal, cst.NotEqual: cst.NotEqual}


def single_micro_batch_arm(test: cst.BaseExpression, is_k: Callable[[cst.BaseExpression], bool]) -> Optional[bool]:
    """Which arm of `if test:` runs with K equal to 1, when the test compares K with 1
    (`K > 1`, `K == 1`, `K <= 1`, `1 < K`, `not K > 1`), or with no K at all (`if not K:`,
    `if K is None:`): True for the `if` arm, False for the `else` arm, None when the test
    is not such a comparison. That arm is a plain loop: no accumulation happens there."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = single_micro_batch_arm(test.expression, is_k)
        return None if inner is None else not inner
    if is_k(test):
        return False  # `if K:` / `if not K:`: where K is 0 or None, nothing accumulates
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if type(target.operator) in (cst.Is, cst.IsNot) and type(target.comparator) is cst.Name \
            and target.comparator.value == "None" and is_k(test.left):
        return type(target.operator) is cst.Is  # `if K is None:`: no accumulation configured
    operator: Optional[type[cst.BaseCompOp]]
    operator, left, right = type(target.operator), test.left, target.comparator
    if is_k(right) and int_value(left) is not None:
        operator, left, right = _MIRRORED.get(operator), right, left
    if operator is None or not is_k(left):
        return None
    pair = (operator, int_value(right))
    if pair in _ABOVE_ONE:
        return False
    if pair in _EQUAL_ONE:
        return True
    return None
