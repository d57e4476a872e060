"""Names: turning expressions into dotted strings, and what a name suggests.

Real training code names its objects conventionally (`optimizer`, `opt_d`,
`lr_scheduler`, `grad_accum_steps`); when the module does not say what an
object is, its name is the evidence the model falls back on.
"""

from __future__ import annotations

import contextlib
import re
from functools import lru_cache
from typing import Optional, cast

import libcst as cst

from accumlint.compat.codegen import CodegenState, generate
from accumlint.source.patterns import LazyPattern

_OPTIMIZER_NAME = LazyPattern(
    r"(^|_)(optimi[sz]er|optim|opt)s?($|_|\d)|^opt[A-Z0-9]|^optimi[sz]er[A-Z0-9]|optimi[sz]er$",
)
_SCHEDULER_NAME = LazyPattern(r"sched|lr_?scheduler|warmup", re.IGNORECASE)
_SCALER_NAME = LazyPattern(r"(^|_)(grad_?)?scaler($|_)|^scaler", re.IGNORECASE)
_ACCUMULATION_NAME = LazyPattern(
    r"accum|grad_acc|gradient_acc|update_freq|micro_steps|micro_batches|n_micro|num_micro"
    r"|microbatches|accumulate|gas$|^gas|(^|_)acc_steps?$",
    re.IGNORECASE,
)
# A yes/no about the window, named as one (a switch, `use_grad_accum`, or a time relative to the
# accumulation, `allreduce_post_accumulation`): never K itself.
_PREDICATE_NAME = LazyPattern(
    r"^(is|should|do|need|use|enable|disable|with|no|allow)_|boundary|sync|(post|pre|after|before)_?accum",
    re.IGNORECASE,
)
_TOKEN_COUNT_NAME = LazyPattern(r"token|tok|count|num_items|n_items|ntok", re.IGNORECASE)
# Narrower: `count` also names counts of samples (a sample mean is no token mean).
_REAL_TOKEN_COUNT_NAME = LazyPattern(r"tok|items", re.IGNORECASE)
_BATCH_SIZE_NAME = LazyPattern(r"batch_size|bsz|batchsize|(^|_)bs($|_)", re.IGNORECASE)


def dotted(node: Optional[cst.CSTNode]) -> Optional[str]:
    """`self.optimizer` -> "self.optimizer"; `optimizers[0]` -> "optimizers[]";
    `self.optimizers()` -> "self.optimizers()"; None for anything else."""
    # exact types (LibCST's concrete nodes have no subclasses): `isinstance` against
    # LibCST's ABC-derived classes runs a Python-level `__instancecheck__` on a miss
    kind = type(node)
    if kind is cst.Name:
        return cast(cst.Name, node).value
    if kind is cst.Attribute:
        attribute = cast(cst.Attribute, node)
        base = dotted(attribute.value)
        return None if base is None else f"{base}.{attribute.attr.value}"
    if kind is cst.Subscript:
        base = dotted(cast(cst.Subscript, node).value)
        return None if base is None else f"{base}[]"
    if kind is cst.Call:
        base = dotted(cast(cst.Call, node).func)
        return None if base is None else f"{base}()"
    return None


def last_part(name: str) -> str:
    """The final component of a dotted name, without call or subscript marks."""
    return name.rstrip("()[]").rsplit(".", 1)[-1].rstrip("()[]")


def looks_like_optimizer(name: str, extra: tuple[str, ...] = ()) -> bool:
    tail = last_part(name)
    if tail in extra or name in extra:
        return True
    if _SCHEDULER_NAME.search(tail) or _SCALER_NAME.search(tail):
        return False
    return bool(_OPTIMIZER_NAME.search(tail))


def looks_like_scheduler(name: str) -> bool:
    return bool(_SCHEDULER_NAME.search(last_part(name)))


def looks_like_scaler(name: str) -> bool:
    tail = last_part(name)
    return bool(_SCALER_NAME.search(tail)) and not _SCHEDULER_NAME.search(tail)


def looks_like_accumulation(name: str, extra: tuple[str, ...] = ()) -> bool:
    """A name for K, the number of micro-batches in a window (`grad_accum_steps`,
    `args.gradient_accumulation_steps`, `update_freq`), or one the configuration lists.
    K is a count: a yes/no of the window (`is_gradient_accumulation_boundary`,
    `should_sync`, `do_accumulate`, `use_grad_accum`, `allreduce_post_accumulation`) is not
    it, whatever words it shares."""
    tail = last_part(name)
    if tail in extra or name in extra:
        return True
    return bool(_ACCUMULATION_NAME.search(tail)) and not _PREDICATE_NAME.search(tail)


def looks_like_token_count(name: str) -> bool:
    """A name for a count that may be of tokens (`num_tokens`, `n_tok`, `count`, `num_items_in_batch`)."""
    return bool(_TOKEN_COUNT_NAME.search(last_part(name)))


def names_token_count(name: str) -> bool:
    """A name for a count of real tokens (`num_tokens`, `n_tok`, `num_items_in_batch`):
    narrower than `looks_like_token_count`, whose `count` also names counts of samples."""
    return _REAL_TOKEN_COUNT_NAME.search(last_part(name)) is not None


def looks_like_batch_size(name: str) -> bool:
    return bool(_BATCH_SIZE_NAME.search(last_part(name)))


def call_name(call: cst.Call) -> Optional[str]:
    """The dotted name of what a call calls (`torch.optim.AdamW`), if it has one."""
    return dotted(call.func)


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call, index: int) -> Optional[cst.BaseExpression]:
    position = 0
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            if position == index:
                return arg.value
            position += 1
    return None


def string_value(node: Optional[cst.CSTNode]) -> Optional[str]:
    """The text of a string literal; None for bytes and anything else.

    A literal without backslashes or carriage returns (nearly all: `"mean"`, `"cuda"`)
    is what stands between its quotes. LibCST's `evaluated_value` runs
    `ast.literal_eval`, whose nested functions are left for the cyclic collector on
    every call, so only the others go through it."""
    if type(node) is not cst.SimpleString:
        return None
    text = node.value
    if "\\" not in text and "\r" not in text:
        quote = text[-1]
        start = text.index(quote)
        if text[:start].lower() in ("", "r", "u"):
            width = 3 if text.startswith(quote * 3, start) and len(text) - start >= 6 else 1
            return text[start + width:len(text) - width]
    value = node.evaluated_value
    return value if isinstance(value, str) else None


def key_of(subscript: cst.Subscript) -> Optional[str]:
    """`d["key"]` -> "key"."""
    if len(subscript.slice) != 1 or type(subscript.slice[0].slice) is not cst.Index:
        return None
    return string_value(subscript.slice[0].slice.value)


def dict_entry(value: cst.BaseExpression, key: str) -> Optional[cst.BaseExpression]:
    """The value a dict written out (`{"loss": loss, "log": logs}`) holds under the string
    `key`; None for anything else."""
    if type(value) is not cst.Dict:
        return None
    for element in value.elements:
        if type(element) is cst.DictElement and string_value(element.key) == key:
            return element.value
    return None


def int_value(node: Optional[cst.CSTNode]) -> Optional[int]:
    if type(node) is cst.Integer:
        return int(node.value.replace("_", ""), 0)
    return None


def adds_one(small: cst.CSTNode) -> Optional[str]:
    """The name or attribute chain that a statement counts up by one (`step += 1`,
    `j = j + 1`, `j = 1 + j`); None for anything else."""
    if type(small) is cst.AugAssign:
        return dotted(small.target) if type(small.operator) is cst.AddAssign and int_value(small.value) == 1 else None
    if type(small) is not cst.Assign or len(small.targets) != 1:
        return None
    target, value = dotted(small.targets[0].target), small.value
    if target is None or type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Add:
        return None
    if (dotted(value.left) == target and int_value(value.right) == 1) or (
            int_value(value.left) == 1 and dotted(value.right) == target):
        return target
    return None


def entered(item: cst.WithItem) -> cst.BaseExpression:
    """The expression whose context a `with` item enters: the item's own, or, of `a and b`,
    the last operand and, of `a or b`, the first. A context manager object is true, so
    `and` evaluates to its right side and `or` to its left:
    `with accelerator.accumulate(a) and accelerator.accumulate(b):` enters only b's."""
    value = item.item
    while type(value) is cst.BooleanOperation:
        value = value.right if type(value.operator) is cst.And else value.left
    return value


def minus_one(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` of `x - 1` (the last index of a count, `K - 1`, `len(loader) - 1`); None otherwise."""
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Subtract and int_value(node.right) == 1:
        return node.left
    return None


_EMPTY_MODULE = cst.Module(body=[])  # whose default indentation and newline a node alone is generated with


class _TextState(CodegenState or object):  # type: ignore[misc]  # built only where CodegenState is usable
    """LibCST's code generation for the text alone: what `Module.code_for_node` does, with
    a module's default indentation and newline, but no node's syntactic position is
    recorded, so the `with` each node opens for it costs no generator."""

    def __init__(self, indent: str = _EMPTY_MODULE.default_indent, newline: str = _EMPTY_MODULE.default_newline) -> None:
        super().__init__(default_indent=indent, default_newline=newline)

    def record_syntactic_position(  # any context manager will do
        self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None, end_node: Optional[cst.CSTNode] = None,
    ) -> contextlib.nullcontext[None]:
        return _NOT_RECORDED


_NOT_RECORDED = contextlib.nullcontext()


@lru_cache(maxsize=4096)
def code(node: cst.CSTNode) -> str:
    """Source text of a node, used to compare expressions (e.g. two spellings of K).

    Remembered per node (nodes never change and compare by identity): the model
    and several rules ask for the text of the same expressions, and LibCST
    generates it anew each time."""
    if CodegenState is None:  # LibCST's private state is not usable here (accumlint.compat.codegen)
        return _EMPTY_MODULE.code_for_node(node).strip()
    state = _TextState()
    generate(node, state)
    return "".join(state.tokens).strip()


def module_text(module: cst.Module) -> str:
    """`module.code`, what LibCST writes the module back as (with its own indentation and
    newline), generated without recording each node's syntactic position: asked of a
    whole module, whose every node `Module.code_for_node` opens a generator for."""
    if CodegenState is None:  # LibCST's private state is not usable here (accumlint.compat.codegen)
        return module.code
    state = _TextState(module.default_indent, module.default_newline)
    generate(module, state)
    return "".join(state.tokens)


def normalized(node: cst.CSTNode) -> str:
    """Source text without spaces or outer parentheses, for comparing expressions."""
    text = re.sub(r"\s+", "", code(node))
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1]
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if depth < 0:
            return False
    return depth == 0


def parameters(function: cst.FunctionDef) -> list[str]:
    """The names of a function's parameters that a call may pass by position or keyword."""
    params = function.params
    return [p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]]


def argument_for(helper: cst.FunctionDef, call: cst.Call, parameter: str) -> Optional[cst.BaseExpression]:
    """The expression `call` passes for the helper's `parameter`, by position or keyword.
    None when it passes none (the default applies) or when a `*` / `**` argument before it
    may hold it. A method's `self` is bound by the object: `obj.method(x)`, `obj(x)` for
    `__call__`, and `Trainer(x)` for `__init__`."""
    names = parameters(helper)
    if names and names[0] == "self" and (type(call.func) is cst.Attribute
                                         or helper.name.value in ("__call__", "__init__")):
        names = names[1:]
    position = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == parameter:
                return arg.value
            continue
        if arg.star:
            return None
        if position < len(names) and names[position] == parameter:
            return arg.value
        position += 1
    return None
