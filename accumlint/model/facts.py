"""Module facts: what one walk over a module learns that every loop needs.

Imports (so `optim.AdamW`, `torch.optim.AdamW` and a bare `AdamW` are the same
thing), the bindings of every name (`optimizer = ...`, `self.scaler = ...`,
tuple unpacking from `accelerator.prepare(...)`), the functions and methods a
loop may call, the loops themselves with their ancestors, and the text-level
evidence some rules need (padding, `-100` labels).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, TypeVar, Union, cast

import libcst as cst

from accumlint.model.names import (
    argument_for, call_name, code, dict_entry, dotted, int_value, key_of, keyword, last_part, parameters, positional,
)
from accumlint.model.tree import ABSENT, KNOWN_CONTENT_FIELDS, LEAVES, SEQUENCES, calls_in, content_fields, record_parents, walk
from accumlint.source.gate import lone_carriage_returns_as_newlines
from accumlint.source.patterns import LazyPattern

if TYPE_CHECKING:
    from accumlint.project import ProjectView

Loop = Union[cst.For, cst.While]
Function = cst.FunctionDef
Answer = TypeVar("Answer")


class _Anywhere:
    """`values_of`'s default reader: every binding of the name, in any scope."""


_ANYWHERE = _Anywhere()


def _asked(name: str, reader: "Optional[Function] | _Anywhere") -> str:
    """`values_of`'s key for a question: the name, and the scope it is read in when one is given."""
    return name if reader is _ANYWHERE else f"{name}@{id(reader)}"


@dataclass(frozen=True, eq=False)
class Binding:
    """`target = value` (index set when the target is one element of an unpacking)."""

    target: str
    value: cst.BaseExpression
    index: Optional[int]
    statement: cst.CSTNode
    # for a value another project module's helper returns: the helper's call as this module wrote it
    # (`get_linear_schedule_with_warmup(opt, num_warmup_steps=w, num_training_steps=n)`, whose
    # `LambdaLR(opt, lr_lambda)` holds the length only in a closure)
    made_by: Optional[cst.Call] = None


@dataclass(eq=False)
class LoopSite:
    """A loop and where it stands: its enclosing function and all its ancestors
    (for a per-step function, `training_step`, the function stands for the loop)."""

    node: Union[Loop, Function]
    ancestors: tuple[cst.CSTNode, ...]

    @property
    def function(self) -> Optional[Function]:
        for node in reversed(self.ancestors):
            if type(node) is cst.FunctionDef:
                return node
        return None

    def siblings(self, *, before: bool) -> list[cst.CSTNode]:
        """Statements before (or after) the loop in each enclosing block, up to its
        function: where a zeroing before the loop or a flush step after it stands."""
        found: list[cst.CSTNode] = []
        child: cst.CSTNode = self.node
        for ancestor in reversed(self.ancestors):
            if type(ancestor) in (cst.IndentedBlock, cst.Module):
                body = list(cast("cst.IndentedBlock | cst.Module", ancestor).body)
                index = next((i for i, s in enumerate(body) if s is child), None)
                if index is not None:
                    found.extend(body[:index] if before else body[index + 1:])
            if type(ancestor) is cst.FunctionDef:
                break
            child = ancestor
        return found


# Padding to the longest sequence of a batch makes token counts differ between micro-batches;
# `padding="max_length"` gives every micro-batch the same count unless labels are also masked
# (-100, which is evidence of its own).
# (`-100` as a label, not as a slice's bound: `text[-100:]`)
_PADDING_EVIDENCE = LazyPattern(
    r"(?<![\w/.:-])-\s*100\b(?!\s*:)|DataCollatorWithPadding|DataCollatorForSeq2Seq|DataCollatorForLanguageModeling"
    r"|DataCollatorForTokenClassification|DataCollatorForWholeWordMask|\bpadding\s*=\s*(True|['\"]longest['\"])"
    r"|pad_sequence|label_pad_token_id|\.masked_fill\([^)]*ignore_index|labels?\[[^]]*\]\s*=\s*ignore_index"
    # the labels outside the attention mask set to the loss's index (`torch.where(active, labels.view(-1),
    # torch.tensor(loss_fct.ignore_index))`)
    r"|\bwhere\([^;]{0,300}?\bignore_index\b"
    # an ignore_index that names padding (`PAD_IDX`, `pad_id`, `tokenizer.pad_token_id`,
    # `tokenizer.token_to_id(PAD_TOKEN)`): padded targets
    r"|ignore_index\s*=\s*(?:[A-Za-z_]\w*\.)*\w*(?i:pad)\w*"
    r"|ignore_index\s*=\s*(?:[A-Za-z_]\w*\.)*\w+\([^)\n]*(?i:pad)"
)
# `ignore_index=-100` or `IGNORE_INDEX = -100` alone says which label a loss would skip,
# not that any label is skipped: it is not evidence that token counts differ.
_IGNORE_INDEX_DEFAULT = LazyPattern(
    r"ignore_index\s*=\s*-\s*100\b|^[ \t]*(?:self\.)?_?[A-Z_]*IGNORE[A-Z_]*\s*=\s*-\s*100\b", re.MULTILINE
)


# `CrossEntropyLoss(ignore_index=0)`, `ignore_index=-1`: a literal index the loss skips, whose padding is looked for
_IGNORED_VALUE = LazyPattern(r"ignore_index\s*=\s*(-?)\s*(\d+)\b")


def shows_padding(text: str) -> bool:
    """Whether the module shows that token counts differ between micro-batches (padding,
    labels set to -100, padding collators, an ignore_index that names padding, labels padded
    with the literal index the loss ignores). A lone carriage return ends a line, as in
    Python (the patterns read lines that end with a line feed)."""
    text = _BARE_TRIPLE_QUOTED.sub("", lone_carriage_returns_as_newlines(text))  # docstrings tell, code shows
    text = _IGNORE_INDEX_DEFAULT.sub("", re.sub(r"#[^\n]*", "", text))
    return bool(_PADDING_EVIDENCE.search(text)) or _labels_padded_to_ignored(text)


# A triple-quoted string that begins its line (a docstring, a block of prose): its words are
# no evidence of what the code does (`labels[pad_tokens] = -100` in a module's docstring).
_BARE_TRIPLE_QUOTED = re.compile(r'^[ \t]*[rRuU]?(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\')', re.MULTILINE)


def _labels_padded_to_ignored(text: str) -> bool:
    """`CrossEntropyLoss(ignore_index=0)` (or `-1`) and labels padded with that value
    (`label_ids.append(0)`, `lm_label_ids.append(-1)`, `labels += [0] * padding_length`, `label_ids + [0] * n`,
    any sequence by a padding count: `t = t + [0] * pad_len`, a padding
    call given it: `pad_right(y, pad_id=-1)`, `pad_sequence(..., padding_value=-1)`, the padding
    positions filled with it: `ids.masked_fill(ids == tokenizer.pad_token_id, -1)`): the
    padded positions are skipped, so each sequence counts its own real tokens."""
    for sign, digits in {match.groups() for match in _IGNORED_VALUE.finditer(text)}:
        value = rf"{re.escape(sign)}\s*{digits}(?!\d)"
        padded = (rf"\b(?:\w+_)?labels?(?:_ids?)?\.append\(\s*{value}\s*\)"
                  rf"|\b(?:\w+_)?labels?(?:_ids?)?\s*(?:\+=|=\s*(?:\w+_)?labels?(?:_ids?)?\s*\+)\s*\[\s*{value}\s*\]\s*\*"
                  # any sequence padded with it by a padding count (`t = t + [0] * pad_len` in a collator)
                  rf"|\b(?P<seq>\w+)\s*(?:\+=|=\s*(?P=seq)\s*\+)\s*\[\s*{value}\s*\]\s*\*\s*\(?\s*\w*(?i:pad)\w*"
                  # a padding helper or call given that value (`pad_right(y, pad_id=-1)`, `padding_value=-1`)
                  rf"|\b(?:pad_\w+|padding_value)\s*=\s*{value}(?![\w.])"
                  # the padding positions set to it (`x.masked_fill(x == tokenizer.pad_token_id, -1)`,
                  # `labels[labels == pad_id] = -1`)
                  rf"|\bmasked_fill_?\([^()\n]*\bpad\w*[^()\n]*,\s*{value}\s*\)"
                  rf"|\[[^\[\]\n]*==[^\[\]\n]*\bpad\w*\s*\]\s*=\s*{value}(?![\w.])")
        if re.search(padded, text):
            return True
    return False


_MAX_BASES = 8  # classes visited when looking up an inherited method


@dataclass(eq=False)
class ModuleFacts:
    module: cst.Module
    # the text the module was parsed from: what `module.code` would generate, without generating
    # it (LibCST drops a byte-order mark, a form feed that starts a statement and a last lone
    # carriage return; no text search of the model can match across those)
    text: str = ""
    imports: dict[str, str] = field(default_factory=dict)
    # `from utils import *`: a name bound nowhere in sight may come from there
    star_imports: bool = False
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, cst.ClassDef] = field(default_factory=dict)
    class_of: dict[Function, cst.ClassDef] = field(default_factory=dict)
    # functions defined in another function's body, by that function and name
    nested: dict[tuple[Function, str], Function] = field(default_factory=dict)
    loops: list[LoopSite] = field(default_factory=list)
    len_arguments: set[str] = field(default_factory=set)
    calls: list[cst.Call] = field(default_factory=list)
    trainer_accumulation: Optional[cst.BaseExpression] = None
    window_token_normalization: bool = False
    # id(node) -> its parent, for every content node (`model.tree.children`) but the module:
    # loops' ancestors, and what the fix guard and the fixer walk up from an edit's target
    parents: dict[int, cst.CSTNode] = field(default_factory=dict, repr=False)
    # the project around the module (README, "The project around a file"); None: the module alone
    project: Optional["ProjectView"] = field(default=None, repr=False)
    _calls_of: dict[cst.CSTNode, list[cst.Call]] = field(default_factory=dict, repr=False)
    _called_methods: dict[int, Optional[Function]] = field(default_factory=dict, repr=False)
    # name -> `instance_class(name)`, once the bindings are all known (`settled`): every call on
    # an object asks it of its receiver, and a name not bound in the module asks the project
    _instance_classes: dict[str, Optional[str]] = field(default_factory=dict, repr=False)
    settled: bool = field(default=False, repr=False)  # `collect_facts` is done: no binding is added after
    _name_counts: Optional[tuple["Counter[str]", "Counter[str]", "Counter[str]"]] = field(default=None, repr=False)  # `_counted_names`
    _calls_by_name: Optional[dict[str, list[cst.Call]]] = field(default=None, repr=False)  # `calls_named`
    # (question, id(node)) -> (node, answer): `once`
    _answers: dict[tuple[Callable[..., Any], int], tuple[cst.CSTNode, Any]] = field(default_factory=dict, repr=False)
    # (id(call), id(caller), which) -> (call, caller, function): `helper` (0), `nested_helper` (1, 2 local)
    _helpers: dict[tuple[int, int, int], tuple[cst.Call, Optional[Function], Optional[Function]]] = field(
        default_factory=dict, repr=False)

    @cached_property
    def rebinds_globals(self) -> bool:
        """The module may rebind its globals from elsewhere: `exec(...)` (nanoGPT's
        configurator), `globals().update(...)` or `globals()[name] = ...`. A module-level
        literal is then only a default. A read of them (`globals().items()` to list the
        config keys, `k in globals()`, `globals()[k]`) rebinds nothing."""
        for call in self.calls:
            name = call_name(call)
            if name == "exec":
                return True
            if name in ("globals", "vars") and not call.args and self._writes_namespace(call):
                return True
        return False

    def _writes_namespace(self, call: cst.Call) -> bool:
        """`globals().update(...)`, `globals()[k] = v`, `exec(src, globals())`: the call's value
        is written through (or handed on, where it may be)."""
        parent = self.parents.get(id(call))
        if type(parent) is cst.Attribute:
            return parent.attr.value in ("update", "setdefault", "pop", "popitem", "clear", "__setitem__")
        if type(parent) is cst.Subscript:
            holder = self.parents.get(id(parent))
            return type(holder) in (cst.AssignTarget, cst.Del, cst.AugAssign) or (
                type(holder) is cst.Element and type(self.parents.get(id(holder))) is cst.Tuple)
        return type(parent) is cst.Arg or parent is None

    @cached_property
    def padding_evidence(self) -> bool:
        """`shows_padding` of the module's text, read only by the rule that needs it."""
        return shows_padding(self.text)

    def calls_in(self, statement: cst.CSTNode) -> list[cst.Call]:
        """`tree.calls_in`, once per statement: outer loops, helpers called from
        several sites and window questions all ask again for the same lines."""
        found = self._calls_of.get(statement)
        if found is None:
            found = self._calls_of[statement] = calls_in(statement)
        return found

    def once(self, question: Callable[[cst.CSTNode], Answer], node: cst.CSTNode) -> Answer:
        """`question(node)`, asked once per module, for a question whose answer depends on
        the node's subtree alone (the names a loop body binds): every walk of a loop, of
        the loops around it and of the helpers it calls asks again about the same nodes.
        The entry keeps the node, so its id is not reused while the module is analysed.
        The answer is shared: callers do not change it."""
        key = (question, id(node))
        known = self._answers.get(key)
        if known is None:
            known = self._answers[key] = (node, question(node))
        return cast(Answer, known[1])

    # -- names -------------------------------------------------------------
    def qualified(self, name: Optional[str]) -> Optional[str]:
        """Resolve the first component through the imports: `optim.SGD` -> `torch.optim.SGD`;
        through a name the module binds to an imported class or function itself
        (`wrapper = torch.nn.parallel.DistributedDataParallel`, then `wrapper(model)`), when
        every binding of it names the same one; and through what a project module that it
        star-imports imports (`ProjectView.star_imported`)."""
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.imports.get(head)
        if base is None:
            base = self._imported_alias(head)
            if base is None and self.project is not None and head not in self.bindings and head not in self.functions:
                base = self.project.star_imported(head)  # `from utils import *`, whose imports bring it
            if base is None:
                return name
        return f"{base}.{rest}" if rest else base

    def _imported_alias(self, name: str) -> Optional[str]:
        bindings = self.bindings.get(name)
        if not bindings:
            return None
        aliases = {dotted(b.value) if b.index is None else None for b in bindings}
        alias = aliases.pop() if len(aliases) == 1 else None
        if alias is None or alias.endswith("()") or alias.partition(".")[0] not in self.imports:
            return None
        return self.qualified(alias)  # its head is an import: resolved there, no alias followed

    def maker(self, call: cst.Call) -> Optional[str]:
        """The dotted name of what a call calls: its callee, or X for a callee every binding
        of which in the module is `functools.partial(X, ...)` (`new_loader = partial(DataLoader,
        batch_size=8)`, then `new_loader(train_set)` builds a DataLoader)."""
        callee = call_name(call)
        if callee is None or "." in callee:
            return callee
        bindings = [b for b in self.values_of(callee) if b.index is None]
        targets = {dotted(b.value.args[0].value) if type(b.value) is cst.Call and b.value.args
                   and b.value.args[0].keyword is None and last_part(call_name(b.value) or "") == "partial" else None
                   for b in bindings}
        found = targets.pop() if len(targets) == 1 and bindings else None
        return found if found is not None else callee

    def values_of(self, name: Optional[str], seen: Optional[set[str]] = None,
                  reader: "Optional[Function] | _Anywhere" = _ANYWHERE) -> list[Binding]:
        """Every binding of a name, following plain aliases (`opt = self.optimizer`); an alias
        to a plain name follows the bindings that name has where the alias is made
        (`self.net = net` in a method whose parameter is `net` holds the caller's value,
        not another method's local `net`). `reader`: the function whose reading of `name`
        is asked (None: module level); by default every binding of it.

        Each name is followed once per question, so aliases bound from one another
        (`self.model = self.net` in one method, `self.net = self.model` in another)
        end instead of recursing."""
        if name is None:
            return []
        seen = set() if seen is None else seen
        asked = _asked(name, reader)
        if asked in seen or len(seen) > 8:
            return []
        seen.add(asked)
        found: list[Binding] = []
        read = self.bindings.get(name, []) if isinstance(reader, _Anywhere) else self._visible(name, reader, seen)
        for binding in read:
            alias = dotted(binding.value) if binding.index is None else None
            if alias is not None and alias != name and not alias.endswith("()"):
                # a plain name is read where the alias is bound: a local of that function (a
                # parameter holds what the function's callers pass), else a global
                scope = self.enclosing_function(binding.statement) if "." not in alias else _ANYWHERE
                cycle = _asked(alias, scope) in seen  # asked already: its bindings are among those found
                found.extend(self.values_of(alias, seen, scope) or ([] if cycle else [binding]))
            else:
                found.append(binding)
        if not found and self.project is not None and reader is _ANYWHERE:
            return self.project.bindings(name, self)
        return found

    def _visible(self, name: str, reader: Optional[Function], seen: set[str]) -> list[Binding]:
        """The bindings of the plain name `name` that code in `reader` (None: module level)
        reads, by Python's scopes: its own, where it binds the name; where the name is its
        parameter, what the module's calls of it pass (`Trainer(model, opt, scheduler)` for
        `__init__(self, model, optimizer, scheduler)`), none when a call is unknown; else
        those of the module and of the functions around it (a closure)."""
        bindings = self.bindings.get(name, [])
        if reader is not None:
            own = [b for b in bindings if self.enclosing_function(b.statement) is reader]
            if own:
                return own
            params = reader.params
            if name in parameters(reader):
                return self._passed_values(name, reader, seen)
            if any(type(p) is cst.Param and p.name.value == name for p in (params.star_arg, params.star_kwarg)):
                return []
        around = set(map(id, ancestors(self.parents, reader))) if reader is not None else set()
        return [b for b in bindings if (home := self.enclosing_function(b.statement)) is None or id(home) in around]

    def _passed_values(self, parameter: str, function: Function, seen: set[str]) -> list[Binding]:
        """What every call of `function` the module makes passes for `parameter`, read in the
        caller's scope: none when the function's calls are unknown (another module's, or a
        name handed on), or a call passes an expression or nothing (the default)."""
        if not self.settled:  # the calls are still being collected: every binding of the name, as the module shows them
            return self.bindings.get(parameter, [])
        found: list[Binding] = []
        for call, argument in self._arguments_passed(function, parameter) or ():
            passed = dotted(moved_from(argument)) if argument is not None else None
            if passed is None or passed.endswith("()"):
                return []
            caller = self.enclosing_function(call) if "." not in passed else _ANYWHERE
            values = self.values_of(passed, seen, caller)
            if not values:
                return []
            found.extend(values)
        return found

    def passed_arguments(self, function: Function, parameter: str) -> Optional[list[Optional[cst.BaseExpression]]]:
        """What each call of `function` in the module (`calls_of_function`) passes for its
        `parameter` (None where a call passes nothing for it, and the default applies), in the
        order of the calls. None when the function's callers are unknown or a call unpacks
        arguments (`*args`, `**kwargs`), which may hold it."""
        passed = self._arguments_passed(function, parameter)
        return [argument for _, argument in passed] if passed is not None else None

    def _arguments_passed(self, function: Function, parameter: str
                          ) -> Optional[list[tuple[cst.Call, Optional[cst.BaseExpression]]]]:
        """Each call of `function` with what it passes for `parameter` (`passed_arguments`)."""
        calls = self.calls_of_function(function)
        if calls is None or any(arg.star for call in calls for arg in call.args):
            return None
        return [(call, argument_for(function, call, parameter)) for call in calls]

    def calls_of_function(self, function: Function) -> Optional[list[cst.Call]]:
        """Every call of `function` in the module (`own_calls`); for a class's `__init__`,
        every construction of the class (`Trainer(...)`). None when the module names the
        function or class otherwise too: its callers are then unknown."""
        if function.name.value != "__init__":
            return self.own_calls(function)
        owner = self.class_of.get(function)
        if owner is None or self.parents.get(id(owner)) is not self.module:
            return None
        name = owner.name.value
        calls = [c for c in self.calls_named(name) if type(c.func) is cst.Name]
        return calls if self._plain_names[name] == len(calls) + 1 else None

    def values_in(self, name: Optional[str], function: Optional[Function]) -> list[Binding]:
        """The bindings of a plain name as `function` reads it: a function that assigns the
        name reads its own bindings only (Python makes the name local there); otherwise
        every binding (module level, other functions: what `values_of` knows). Two loops of
        one file (`train_plain` and `train_accumulated`) may bind `criterion` differently."""
        if function is not None and name is not None and "." not in name and self.project is not None:
            foreign = self.project.module_bindings(function, name)
            if foreign is not None:
                return foreign  # a function of another module reads its own module's names
        found = self.values_of(name)
        if function is None or name is None or "." in name or not self.binds_locally(name, function):
            return found
        return [b for b in found if self.enclosing_function(b.statement) is function] or found

    def binds_locally(self, name: str, function: Optional[Function]) -> bool:
        """`function` binds the plain name `name` itself, so Python makes it local there: the
        function reads its own bindings of it, not another function's or the module's."""
        return function is not None and "." not in name and any(
            self.enclosing_function(b.statement) is function for b in self.bindings.get(name, ()))

    def method(self, function: Optional[Function], name: str) -> Optional[Function]:
        """A method `name` of the class that holds `function` (for `self.name(...)`), or the
        one it inherits from a base class of this module (`class EnergyTrainer(BaseTrainer)`
        calling `self._backward(loss)`), nearest first."""
        owner = self.class_of.get(function) if function is not None else None
        return self.class_method(owner, name) if owner is not None else None

    def class_method(self, owner: cst.ClassDef, name: str) -> Optional[Function]:
        """The method `name` a class of this module defines or inherits from a base class of
        this module, nearest first."""
        seen: set[int] = set()
        pending: list[cst.ClassDef] = [owner]
        while pending:
            cls = pending.pop(0)
            if id(cls) in seen or len(seen) >= _MAX_BASES:
                continue
            seen.add(id(cls))
            for statement in cls.body.body:
                if type(statement) is cst.FunctionDef and statement.name.value == name:
                    return statement
            for base in cls.bases:
                local = self.classes.get(dotted(base.value) or "")
                if local is not None:
                    pending.append(local)
        return None

    def rebound_unread(self, binding: Binding) -> bool:
        """The binding's line is followed in its own block by a plain rebinding of the same
        name before any statement mentions it (`scheduler = CosineAnnealingLR(...)`, then
        `scheduler = SequentialLR(...)`): no code ever sees the first value."""
        line: Optional[cst.CSTNode] = binding.statement
        while line is not None and type(line) is not cst.SimpleStatementLine:
            line = self.parents.get(id(line))
        block = self.parents.get(id(line)) if line is not None else None
        body = getattr(block, "body", None)
        if line is None or not isinstance(body, (list, tuple)):
            return False
        index = next((i for i, statement in enumerate(body) if statement is line), None)
        if index is None:
            return False
        for later in body[index + 1:]:
            mentions = any(dotted(node) == binding.target for node in walk(later)
                           if type(node) in (cst.Name, cst.Attribute))
            if not mentions:
                continue
            if type(later) is not cst.SimpleStatementLine or len(later.body) != 1 or type(later.body[0]) is not cst.Assign:
                return False
            assign = later.body[0]
            rebinds = len(assign.targets) == 1 and dotted(assign.targets[0].target) == binding.target
            return rebinds and not any(dotted(node) == binding.target for node in walk(assign.value)
                                       if type(node) in (cst.Name, cst.Attribute))
        return False

    def enclosing_function(self, node: cst.CSTNode) -> Optional[Function]:
        """The innermost function whose body holds `node` (None at module level)."""
        parent = self.parents.get(id(node))
        while parent is not None and type(parent) is not cst.FunctionDef:
            parent = self.parents.get(id(parent))
        return parent

    def own_calls(self, function: Function) -> Optional[list[cst.Call]]:
        """Every call of `function` in the module: by its name for a function
        (`train(model, loader, criterion)`), as `self.name(...)` from its own class for a
        method. None when the module names it otherwise too (a callback handed on, a
        method of that name in another class, an override), but on an object the instance
        holds (`self.model.train()`): its callers are then unknown."""
        name = function.name.value
        owner = self.class_of.get(function)
        if owner is None:
            calls = [c for c in self.calls_named(name) if type(c.func) is cst.Name]
        else:
            calls = [c for c in self.calls_named(name) if type(c.func) is cst.Attribute
                     and type(c.func.value) is cst.Name and c.func.value.value == "self"
                     and (caller := self.enclosing_function(c)) is not None and self.class_of.get(caller) is owner]
        count = (_name_counts(self) if owner is not None else self._plain_names)[name]
        if count != len(calls) + 1 and owner is not None:
            # `self.model.train()` beside the trainer's own `train` method: a method of an object
            # the instance holds, not of the instance
            count -= _counted_names(self)[2][name]
        if count != len(calls) + 1:
            return None
        return calls

    def pieces_walked(self, iterable: cst.BaseExpression) -> Optional[tuple[Optional[str], cst.BaseExpression]]:
        """The split of one batch that a loop over `iterable` walks (also inside `zip` or
        `enumerate`, written in place or through the one value a name is bound to: `pieces =
        torch.split(data, size)`): the name (None in place) and the piece count (`piece_count`,
        `UNCOUNTED` for a split by size). None when the iterable is no such split."""
        while type(iterable) is cst.Call and last_part(call_name(iterable) or "") in ("zip", "enumerate"):
            first = positional(iterable, 0)
            if first is None:
                return None
            iterable = first
        if type(iterable) not in (cst.Name, cst.Attribute):
            count = piece_count(iterable)
            return None if count is None else (None, count)
        name = dotted(iterable)
        bound = [b.value for b in self.values_of(name) if b.index is None]
        count = piece_count(bound[0]) if len(bound) == 1 else None
        return None if count is None else (name, count)

    @cached_property
    def piece_counts(self) -> frozenset[str]:
        """The names that say into how many pieces the module splits one batch (`n` of
        `x.chunk(n)`, `splits` of `torch.split(data, data.shape[0] // splits)`): a loop over
        the pieces backpropagates that many micro-batches, so the name is that loop's K."""
        found = set()
        for call in self.calls:
            count = piece_count(call)
            if count is not None and count is not UNCOUNTED and type(count) in (cst.Name, cst.Attribute):
                found.add(dotted(count))
        return frozenset(name for name in found if name is not None)

    def calls_named(self, name: str) -> list[cst.Call]:
        """The module's calls whose function is `name` or an attribute `name` (`train(...)`,
        `self.train(...)`, `model.requires_grad_(...)`), in order."""
        if not self.settled:  # calls are still being collected
            return [c for c in self.calls if _called_name(c) == name]
        if self._calls_by_name is None:
            grouped: dict[str, list[cst.Call]] = {}
            for call in self.calls:
                called = _called_name(call)
                if called is not None:
                    grouped.setdefault(called, []).append(call)
            self._calls_by_name = grouped
        return self._calls_by_name.get(name, [])

    @cached_property
    def _plain_names(self) -> "Counter[str]":
        """How often each identifier occurs as a name node that is no attribute's name (`train`
        in `train(model)`, not in `model.train()`): a module function is named only so."""
        names, attributes, _ = _counted_names(self)
        return names - attributes

    def prepared_element(self, call: cst.Call, index: int) -> Optional[cst.BaseExpression]:
        """What a framework's prepare returns at `index` of its tuple: the object given at that
        position, wrapped in its place (`model, opt, loader, sched = accelerator.prepare(model,
        opt, loader, get_linear_schedule_with_warmup(...))`, `fabric.setup`, apex's
        `amp.initialize`). None for any other call, DeepSpeed's `initialize` (it returns the
        engine first), and a position a starred argument hides."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value not in _PREPARES:
            return None
        if deepspeed_initialize(self.qualified(dotted(func)) or ""):
            return None
        positions = [arg for arg in call.args if arg.keyword is None]
        if any(arg.star for arg in positions[:index + 1]):
            return None
        return positional(call, index)

    def returned(self, call: cst.Call, index: Optional[int] = None) -> list[cst.BaseExpression]:
        """What a call of a module function (`wrap(model)`) or of a method of the caller's
        own class (`self.model_to_device(net)`) returns: the values of its `return`
        statements, a returned local name read through its bindings in that function.
        With `index`, the element at that position of each returned tuple
        (`model, optimizer = setup(args)` with `return model, optimizer`); a return of
        anything else adds nothing. Empty for anything else (other classes, other
        modules, builtins)."""
        function = self._callee(call)
        if function is None:
            return []
        found: list[cst.BaseExpression] = []
        for node in self.once(_valued_returns, function):
            if node.value is not None:
                value: Optional[cst.BaseExpression] = node.value
                if index is not None:
                    value = _element(node.value, index)
                if value is None:
                    continue
                if type(value) is cst.Name:
                    local = [b for b in self.bindings.get(value.value, ())
                             if b.index is None and self.enclosing_function(b.statement) is function]
                    if not local and self.foreign(function):  # another module's function: its own bindings
                        local = [b for b in self.once(_local_bindings, function).get(value.value, []) if b.index is None]
                    found.extend([b.value for b in _reaching(function, node, local)] or [value])
                else:
                    found.append(value)
        return found

    def _callee(self, call: cst.Call) -> Optional[Function]:
        """The module function (`wrap(model)`, or one defined in the calling function:
        `def step(model, batch): ...` inside `train`), method of the caller's own class
        (`self.model_to_device(net)`) or method of an object of a project class
        (`trainer.update(batch)`) a call runs; None for anything else."""
        func = call.func
        function = (self.local_function(call, func.value) or self.functions.get(func.value)) if type(func) is cst.Name else None
        if function is None and type(func) is cst.Attribute and dotted(func.value) == "self":
            function = self.method(self.enclosing_function(call), func.attr.value)
        if function is None and type(func) is cst.Attribute and self.project is not None:
            function = self.instance_method(dotted(func.value), func.attr.value)  # `trainer.update(batch)`
        if function is None and self.project is not None:
            # a function of another project module (`from base.trainer import detach`), resolved
            # where the call stands (`helper`: the loop's module, or another module's helper)
            function = self.helper(call, self.enclosing_function(call))
        return function

    def returns_hold_no_graph(self, call: cst.Call, index: Optional[int] = None, depth: int = 0,
                              key: Optional[str] = None) -> bool:
        """Whether what a call of a module function returns (with `index`, that element of its
        returned tuples) is known to hold no autograd graph at every `return`: a detached value,
        a number, or a local name whose bindings that reach the return hold none, followed
        through assignments, in-place updates (`total += part`) and the returns of the
        module functions they call (`part, cache = step(...)` with `step` returning
        `loss.item() / n`), in this module or in a project class's method of another module
        (its own local bindings). With `key`, the entry of that name in each returned dict
        written out (`return {"loss": loss.item() * k, "acc": acc}`). False for anything unknown
        (a third party's function, a parameter)."""
        function = self._callee(call)
        if function is None or depth > _MAX_FLOW_DEPTH:
            return False
        returns = self.once(_valued_returns, function)
        if not returns:
            return False
        for ret in returns:
            value: Optional[cst.BaseExpression] = ret.value
            if index is not None and value is not None:
                value = _element(value, index)
            if key is not None and value is not None:
                if type(value) is not cst.Dict and self.holds_no_graph(value, depth + 1):
                    continue  # `{k: v.detach() for ...}`, `data.detach()`: no entry of it holds a graph
                value = dict_entry(value, key)
            if value is None:
                return False
            if type(value) is cst.Name and value.value != "None":
                if not self._name_holds_no_graph(value.value, function, ret, depth + 1):
                    return False
            elif not self.holds_no_graph(value, depth + 1):
                return False
        return True

    def bound_to_returned_sequence(self, name: str, function: Optional[Function]) -> bool:
        """Whether a binding of `name` where `function` reads it is what a call of a module
        function returns whole, and that function returns a tuple or list at some `return`
        (`loss = fit_batch(...)` with `return total, reg`): the name may hold no tensor, and
        no tensor's methods."""
        for binding in self.values_in(name, function):
            value = binding.value
            if binding.index is None and type(value) is cst.Call:
                callee = self._callee(value)
                if callee is not None and any(
                        type(ret.value) in (cst.Tuple, cst.List) for ret in self.once(_valued_returns, callee)):
                    return True
        return False

    def holds_no_graph(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether a value is known to hold no autograd graph (see `returns_hold_no_graph`):
        a detached value (`detached`), a number, `None`, a conditional expression whose
        arms hold none, a comprehension of detached values, arithmetic of such values (`loss.item() / loss_div`, `running /
        steps`), a call that returns a plain number (`time.time()`, `len(loader)`), what a
        module function returns, or a local name of the function it is read in."""
        if depth > _MAX_FLOW_DEPTH:
            return False
        if type(value) in (cst.Integer, cst.Float) or detached(value):
            return True
        if type(value) is cst.Name and value.value == "None":
            return True
        if type(value) in (cst.Tuple, cst.List):  # `return loss.item(), reg.item()`
            return all(type(e) is cst.Element and self.holds_no_graph(e.value, depth + 1)
                       for e in cast("cst.Tuple | cst.List", value).elements)
        if type(value) is cst.IfExp:  # `float(loss.item()) if loss is not None else None`
            return self.holds_no_graph(value.body, depth + 1) and self.holds_no_graph(value.orelse, depth + 1)
        if type(value) is cst.DictComp:  # `{k: v.detach() for k, v in data.items()}`
            return detached(value.value)
        if type(value) in (cst.ListComp, cst.SetComp, cst.GeneratorExp):  # `[e.detach() for e in data]`
            return detached(cast("cst.ListComp | cst.SetComp | cst.GeneratorExp", value).elt)
        if type(value) is cst.BinaryOperation:  # `loss.item() / n`, `running / steps` of numbers
            return all(self.holds_no_graph(side, depth + 1) for side in (value.left, value.right))
        if type(value) is cst.Call:
            qualified = self.qualified(dotted(value.func)) or ""
            if qualified.partition(".")[0] in _NUMBER_MODULES or dotted(value.func) in _NUMBER_BUILTINS \
                    or qualified in _ARRAY_CONSTRUCTORS:
                return True  # `time.time()`, `len(loader)`, `math.sqrt(n)`, `np.array(losses)`: no graph
            return self.returns_hold_no_graph(value, None, depth + 1)
        function = self.enclosing_function(value) if type(value) is cst.Name else None
        if function is None:
            return False
        return self._name_holds_no_graph(cast(cst.Name, value).value, function, None, depth + 1)

    def _name_holds_no_graph(self, name: str, function: Function, at: Optional[cst.Return], depth: int) -> bool:
        """Every binding of a local name in `function` (those that reach the return `at`, when
        given) and every in-place update of it hold no graph; a parameter never bound
        there holds none when its default is a number (`loss_div=1`)."""
        bindings = [b for b in self.bindings.get(name, ()) if self.enclosing_function(b.statement) is function]
        if not bindings and self.foreign(function):
            bindings = self.once(_local_bindings, function).get(name, [])  # another module's function
        if at is not None:
            bindings = _reaching(function, at, bindings)
        for binding in bindings:
            if binding.index is None:
                if binding.value is not None and not self.holds_no_graph(binding.value, depth + 1):
                    return False
            elif type(binding.value) is not cst.Call or not self.returns_hold_no_graph(binding.value, binding.index, depth + 1):
                return False
        updates = [node.value for node in self.once(_in_place_updates, function) if dotted(node.target) == name]
        if any(not self.holds_no_graph(update, depth + 1) for update in updates):
            return False
        if bindings or updates:
            return True
        parameters = (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)
        default = next((p.default for p in parameters if p.name.value == name), None)
        return type(default) in (cst.Integer, cst.Float)

    def helper(self, call: cst.Call, caller: Optional[Function]) -> Optional[Function]:
        """The same-module function or method a call runs (`train_step(b)`, `self.train_step(b)`).

        Once the facts are settled, asked once per call and caller: the walks of a loop's
        own level, of its whole body and of the loops around it, and the window's and the
        loss reader's questions, ask again about the same calls."""
        if not self.settled:
            return self._helper(call, caller)
        key = (id(call), id(caller), 0)
        known = self._helpers.get(key)
        if known is None:
            known = self._helpers[key] = (call, caller, self._helper(call, caller))
        return known[2]

    def _helper(self, call: cst.Call, caller: Optional[Function]) -> Optional[Function]:
        func = call.func
        if self.project is not None:
            home = self.project.home_of_call(call)
            if home is not None:  # a call in another module's helper: resolved there
                return _unless_own_update(self, self.project.function(dotted(func), within=home))
        target = self._own_function(call, caller)
        if target is None and self.project is not None and not self._bound_here(call):
            target = _unless_own_update(self, self.project.function(dotted(func)))
        return None if target is caller else target

    def aliased_functions(self, call: cst.Call) -> list[Function]:
        """The functions a call through a name runs when every binding of that name, where the
        call reads it, is a function of the module or an imported project function (`step_fn =
        step_mse if kind == "mse" else step_l1`, or one assignment per arm of an `if`), then
        `step_fn(model, batch)`: one of them runs, the same one in every iteration. A `None`
        binding (`step_fn = None` before the arms) names none. Empty when any binding is
        something else, or the name names no function at all."""
        func = call.func
        if type(func) is not cst.Name or func.value not in self.bindings or func.value in self.functions \
                or func.value in self.imports:
            return []  # most calls: a builtin, an import, a function of the module, a name bound elsewhere
        if self.project is not None and self.project.home_of_call(call) is not None:
            return []  # a call in another module's helper: its own names
        bindings = self.values_in(func.value, self.enclosing_function(call))
        found: list[Function] = []
        values: list[cst.BaseExpression] = []
        for binding in bindings:
            if binding.index is not None or binding.value is None:
                return []
            values.append(binding.value)
        while values:
            value = values.pop()
            if type(value) is cst.IfExp:
                values += [value.body, value.orelse]
                continue
            if type(value) is not cst.Name:
                return []
            if value.value == "None":
                continue
            target = self.functions.get(value.value)
            if target is None and self.project is not None and value.value in self.imports:
                target = self.project.function(value.value)
            if target is None:
                return []
            if target not in found:
                found.append(target)
        return found

    def _bound_here(self, call: cst.Call) -> bool:
        """A plain callee that the module binds itself, not through an import: assigned, a
        class, or a parameter of a function around the call (a `from utils import *` function
        of that name is not the one called)."""
        func = call.func
        if type(func) is not cst.Name or func.value in self.imports:
            return False
        name = func.value
        if name in self.bindings or name in self.classes:
            return True
        function = self.enclosing_function(call)
        while function is not None:
            params = function.params
            if name in {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)} or any(
                    type(p) is cst.Param and p.name.value == name for p in (params.star_arg, params.star_kwarg)):
                return True
            function = self.enclosing_function(function)
        return False

    def local_function(self, call: cst.Call, name: str) -> Optional[Function]:
        """The function `name` defined in the body of a function around the call (innermost
        first): `def run_iter(batch): ...` in `main()`, called by name in `main`'s loop, runs
        there like a module function. Handed over uncalled (`optimizer.step(closure)`), it is
        not a call of it, so closures stay whole updates."""
        if not self.nested:
            return None
        function = self.enclosing_function(call)
        while function is not None:
            found = self.nested.get((function, name))
            if found is not None:
                return found
            function = self.enclosing_function(function)
        return None

    def nested_helper(self, call: cst.Call, helper: Function, *, local: bool = False) -> Optional[Function]:
        """A project function that a helper's call runs: the second call deep from the loop;
        once per call and helper, as `helper`. With `local` (the helper is the first call deep,
        and this module's own), a function or method of this module counts too:
        `train_batch(...)` calling `clip_grad_norms(...)` runs its clipping in the loop."""
        key = (id(call), id(helper), 2 if local else 1)
        known = self._helpers.get(key)
        if known is None:
            found = None
            if self.project is not None:
                found = _unless_own_update(self, self.project.function(dotted(call.func), within=helper))
            if found is None and local and (self.project is None or self.project.home_of_call(call) is None):
                found = self._own_function(call, helper)
            known = self._helpers[key] = (call, helper, found)
        return known[2]

    def _own_function(self, call: cst.Call, caller: Optional[Function]) -> Optional[Function]:
        """The function of this module (or method of the caller's class) a call in `caller`
        runs; never `caller` itself."""
        func = call.func
        target: Optional[Function] = None
        if type(func) is cst.Name:
            target = self.local_function(call, func.value) or self.functions.get(func.value)
        elif type(func) is cst.Attribute and dotted(func.value) == "self":
            target = self.method(caller, func.attr.value)
        return None if target is caller else target

    def instance_class(self, name: Optional[str]) -> Optional[str]:
        """The class an object was built from (`self.trainer = Trainer(...)` -> "Trainer"),
        when every binding of the name is a call of that one class (a capitalised callee)."""
        if name is None or name == "self" or name.endswith("()"):
            return None
        if not self.settled:
            return self._instance_class(name)
        if name not in self._instance_classes:
            self._instance_classes[name] = self._instance_class(name)
        return self._instance_classes[name]

    def _instance_class(self, name: str) -> Optional[str]:
        owners = set()
        for binding in self.values_of(name):
            value = binding.value
            if type(value) is cst.Name and value.value == "None" and binding.index is None:
                continue  # `awp = None` where the feature is off: no method of it runs
            if binding.index is not None or type(value) is not cst.Call:
                return None
            owners.add(dotted(value.func))
        if len(owners) != 1:
            return None
        owner = owners.pop()
        return owner if owner is not None and last_part(owner)[:1].isupper() else None

    def instance_method(self, name: Optional[str], method: str) -> Optional[Function]:
        """The method a call on an object of a project class runs (`self.helper.backward(loss)`):
        a class of this module, or one of another project module."""
        owner = self.instance_class(name)
        if owner is None:
            return None
        local = self.classes.get(owner)
        if local is not None:
            for statement in local.body.body:
                if type(statement) is cst.FunctionDef and statement.name.value == method:
                    return statement
            return None
        return self.project.method(owner, method) if self.project is not None else None

    def forward_of(self, call: cst.Call) -> Optional[Function]:
        """The `forward` that calling a model object runs (`self.model(input_ids,
        labels=labels)`, `model(x, y)`): the object is built from one class of this module
        (`Classifier(cfg)`, `Ner.from_pretrained(path)`), at most also rebound to itself moved
        or wrapped (`model.to(device)`, `DDP(model)`, `nn.DataParallel(model)`, whose forward
        is the module's), and that class (or a base class of this module) defines `forward`.
        None when anything else binds the object, or the class is another module's: a loss
        from another module's code is unknown (SPEC, GA201)."""
        name = dotted(call.func)
        function = self.enclosing_function(call)
        if name is not None and "." not in name and function is not None:
            scoped = self.values_in(name, function)
            wrapped = self._from_last_wrap(name, scoped)
            if wrapped is not scoped:
                return self._forward_of_bindings(name, wrapped)
        return self.object_forward(name)

    def object_forward(self, name: Optional[str]) -> Optional[Function]:
        """`forward_of` for the object bound to `name`."""
        return self._forward_of_bindings(name, self.values_of(name)) if name is not None else None

    def _forward_of_bindings(self, name: str, bindings: list[Binding]) -> Optional[Function]:
        if name == "self" or name.endswith("()"):
            return None
        owners = set()
        for binding in bindings:
            value = binding.value
            value = constructed(value)  # `Classifier(cfg).cuda()`: the object the constructor built
            if type(value) is not cst.Call:
                return None
            callee = dotted(value.func) or ""
            tail = last_part(callee)
            if binding.index is not None:
                if tail in _PREPARES and dotted(positional(value, binding.index)) == name:
                    continue  # `model, optimizer = amp.initialize(model, optimizer)`: the same module, wrapped
                return None
            first = positional(value, 0)
            if tail in _MODEL_WRAPS and dotted(first) == name or tail in _MOVES and dotted(value.func) == f"{name}.{tail}":
                continue  # `model = DDP(model)`, `model = model.to(device)`: the same module's forward
            if tail == "from_pretrained":
                callee = callee.rpartition(".")[0]
            if not last_part(callee)[:1].isupper():
                return None
            owners.add(callee)
        if len(owners) != 1:
            return None
        owner = owners.pop()
        local = self.classes.get(owner)
        return self.class_method(local, "forward") if local is not None else None

    def _from_last_wrap(self, name: str, bindings: list[Binding]) -> list[Binding]:
        """The bindings from the last one that wraps the object in a model class of this module
        (`model = build(cfg)`, then `model = LossWrapper(model, ...)`): in straight-line code of
        one function, what was bound before it is the wrapped module, and calling the object
        runs the wrapper's `forward`. All of them when there is no such wrap, or when it
        stands under a test or a loop, or another function binds the name too."""
        wraps = [i for i, b in enumerate(bindings) if b.index is None and type(b.value) is cst.Call
                 and dotted(positional(b.value, 0)) == name and dotted(b.value.func) in self.classes]
        if not wraps:
            return bindings
        last = bindings[wraps[-1]]
        if type(last.statement) is not cst.Assign:
            return bindings
        function = self.enclosing_function(last.statement)
        body = function.body.body if function is not None and type(function.body) is cst.IndentedBlock else ()
        if not any(type(statement) is cst.SimpleStatementLine and any(small is last.statement for small in statement.body)
                   for statement in body):
            return bindings  # under a test, a loop or a `with`: an earlier binding may reach the call too
        if any(self.enclosing_function(b.statement) is not function for b in bindings):
            return bindings
        return bindings[wraps[-1]:]

    def generator_field(self, node: cst.Subscript) -> Optional[tuple[cst.BaseExpression, Function, cst.Call]]:
        """What `meta["grad_accum_index"]` holds when `meta` is a target of the loop around it
        (`for meta, batch in batches:`) and the loop runs over a generator of this module
        (`batches = iter_micro_batches(loader, grad_accum_steps=K)`) whose one `yield`
        hands over, at that position, a dict literal bound once: that key's value there
        (`counter % grad_accum_steps`), with the generator and its call. Only a value over a counter the
        generator increments by one in the loop that yields (`counter += 1`) is read:
        it then changes with each micro-batch the generator hands over. None otherwise."""
        name, key = dotted(node.value), key_of(node)
        if name is None or "." in name or key is None:
            return None
        loop = next((a for a in reversed(ancestors(self.parents, node)) if type(a) is cst.For
                     and type(a.target) in (cst.Tuple, cst.List)), None)
        if loop is None:
            return None
        targets = [dotted(e.value) for e in cast("cst.Tuple | cst.List", loop.target).elements]
        if targets.count(name) != 1:
            return None
        call: cst.BaseExpression = loop.iter
        function = self.enclosing_function(loop)
        if type(call) is cst.Name:
            bound = self.values_in(call.value, function)
            call = bound[0].value if len(bound) == 1 and bound[0].index is None else call
        if type(call) is not cst.Call or type(call.func) is not cst.Name:
            return None
        generator = self.functions.get(call.func.value)
        if generator is None or self.local_function(call, call.func.value) is not None:
            return None
        yields = [n for n in walk(generator.body) if type(n) is cst.Yield and self.enclosing_function(n) is generator]
        if len(yields) != 1 or type(yields[0].value) is not cst.Tuple:
            return None
        elements = yields[0].value.elements
        if len(elements) != len(targets):
            return None
        held = dotted(elements[targets.index(name)].value)
        literals = [b.value for b in self.bindings.get(held or "", ()) if self.enclosing_function(b.statement) is generator]
        if held is None or len(literals) != 1 or type(literals[0]) is not cst.Dict:
            return None
        value = dict_entry(literals[0], key)
        if value is None or not _counts_yields(self, generator, yields[0], value):
            return None
        return value, generator, call

    def called_method(self, call: cst.Call) -> Optional[Function]:
        """The method of a project class that a call on one of its objects runs:
        `obj.name(...)` runs `name`, `obj(...)` (or `self.obj(...)`) runs `__call__`."""
        key = id(call)
        if key not in self._called_methods:
            func = call.func
            found = None
            receiver, method = (dotted(func.value), func.attr.value) if type(func) is cst.Attribute else (None, "")
            if receiver is not None:
                found = self._passed_object_method(call, receiver, method) or self.instance_method(receiver, method)
            if found is None:
                found = self._passed_object_method(call, dotted(func), "__call__") or self.instance_method(
                    dotted(func), "__call__")
            self._called_methods[key] = found
        return self._called_methods[key]

    def _passed_object_method(self, call: cst.Call, name: Optional[str], method: str) -> Optional[Function]:
        """The method `method` of the object that every caller of the call's function passes
        for its parameter `name` (a binding whose statement is that function: `runner`
        in `run_train_epoch(..., runner)` after `runner = BackwardRunner(...)`), a class of
        this module; the module's other functions may bind the name to other classes."""
        if name is None or "." in name:
            return None
        owner = self._passed_class(call, name)
        return self.class_method(owner, method) if owner is not None else None

    def _passed_class(self, call: cst.Call, name: Optional[str]) -> Optional[cst.ClassDef]:
        """The class of this module whose object every caller of the call's function passes
        for its parameter `name` (see `_passed_object_method`)."""
        if name is None or "." in name:
            return None
        function = self.enclosing_function(call)
        passed = [b for b in self.bindings.get(name, ()) if b.statement is function and type(b.value) is cst.Call]
        if function is None or len(passed) != 1:
            return None
        return self.classes.get(dotted(cast(cst.Call, passed[0].value).func) or "")

    def _project_object_at(self, call: cst.Call, name: Optional[str]) -> bool:
        """`project_object` for the receiver of `call`, read first as the object the callers of
        the call's function pass for it."""
        owner = self._passed_class(call, name)
        return self.project_object(name) if owner is None else self._plain_local_class(owner)

    def _plain_local_class(self, owner: cst.ClassDef, depth: int = 0) -> bool:
        """A class of this module that derives from nothing but `object` or other such classes
        of this module, none forwarding attributes (`__getattr__`): its methods are all it does."""
        if depth > _MAX_BASES or any(type(s) is cst.FunctionDef and s.name.value == "__getattr__" for s in owner.body.body):
            return False
        for base in self.class_bases(owner):
            local = self.classes.get(base)
            if base not in PLAIN_BASES and (local is None or not self._plain_local_class(local, depth + 1)):
                return False
        return True

    def object_method(self, call: cst.Call) -> Optional[Function]:
        """`ed_optimizer.step(loss, i)` on an object of a plain project class (`project_object`):
        the class's own method that the call runs, read, for `step` and `zero_grad`, the
        calls that would otherwise be read from the receiver's name. None
        when the receiver is anything else or the method cannot be read."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value not in _OBJECT_METHODS:
            return None
        if not self._project_object_at(call, dotted(func.value)):
            return None
        return self.called_method(call)

    def backward_method(self, call: cst.Call) -> Optional[Function]:
        """`learner.backward_batch(x, y)` on an object of a plain project class (`project_object`)
        whose method, read, runs a backward itself: the method runs in the loop like a helper
        function (methods are followed two calls deep from the loop). None for any other call,
        and for methods that backpropagate nothing (a logger's, a meter's)."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value in _OBJECT_METHODS:
            return None
        if not self._project_object_at(call, dotted(func.value)):
            return None
        method = self.called_method(call)
        if method is None:
            return None
        methods, names = self.once(_called_and_named, method)
        if not methods & _BACKWARD_METHODS or methods & _OWN_UPDATE_METHODS or names & _OWN_MODEL_NAMES:
            return None  # a whole update of its own (an inner adaptation of a copied model): not the window's
        return method

    def project_object(self, name: Optional[str]) -> bool:
        """Every binding of `name` builds an object of one project class (of this module or
        another) that derives from nothing but `object` and forwards no attribute
        (`__getattr__`): what its methods do is all it does, whatever its name says (an
        `EveryDreamOptimizer` wrapping the real optimizers is no optimizer). False when the
        class cannot be read, or has another base (a library optimizer it may extend)."""
        owner = self.instance_class(name)
        if owner is None:
            return False
        local = self.classes.get(owner)
        if local is not None:
            return self._plain_local_class(local)
        return self.project is not None and self.project.plain_class(owner)

    def steps_through_object(self, call: cst.Call) -> bool:
        """The call runs a method of a project object of another module that steps an
        optimizer (`self.helper.optimize(self.opt)`), itself or through a method of its class."""
        func = call.func
        if self.project is None or type(func) is not cst.Attribute:
            return False
        owner = self.instance_class(dotted(func.value))
        return owner is not None and owner not in self.classes and self.project.method_steps(owner, func.attr.value)

    def foreign(self, node: cst.CSTNode) -> bool:
        """Whether `node` stands in another module of the project (a helper read from there)."""
        return self.project is not None and self.project.owns(node)

    def class_bases(self, owner: cst.ClassDef) -> list[str]:
        return [self.qualified(dotted(base.value)) or "" for base in owner.bases]

    def framework_class(self, name: Optional[str]) -> Optional[str]:
        """The framework class whose objects a constructor named `name` builds, when it is
        a class of the project deriving from one (`class CustomAccelerator(Accelerator):`
        that overrides `gather_for_metrics`): a subclass is still an Accelerator, a Fabric, a
        GradScaler, with the constructor's arguments. None for any other name."""
        seen: set[str] = set()
        while name is not None and name not in seen and len(seen) < _MAX_BASES:
            seen.add(name)
            bases = self.bases_of(name)
            found = next((last_part(base) for base in bases if last_part(base) in FRAMEWORK_CLASSES), None)
            if found is not None:
                return found
            local = [base for base in bases if last_part(base) in self.classes]
            name = local[0] if len(local) == 1 else None
        return None

    def bases_of(self, name: Optional[str]) -> list[str]:
        """The bases of the class a name calls (`RLDSDataset` in `RLDSDataset(root, ...)`):
        a class of this module, or one of another project module as that module writes them.
        Empty when unknown."""
        if name is None:
            return []
        local = self.classes.get(last_part(name))
        if local is not None:
            return self.class_bases(local)
        return list(self.project.class_bases(name)) if self.project is not None else []


def _counts_yields(facts: ModuleFacts, generator: Function, produced: cst.Yield, value: cst.BaseExpression) -> bool:
    """`value` is `counter % K` (or `(counter + 1) % K`) of a counter the generator
    increments by one, once, in the loop that yields, and binds nowhere else in that loop."""
    if type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Modulo:
        return False
    counter = value.left
    if type(counter) is cst.BinaryOperation and type(counter.operator) is cst.Add:
        counter = counter.left
    name = dotted(counter)
    if type(counter) is not cst.Name or name is None:
        return False
    loop = next((a for a in reversed(ancestors(facts.parents, produced)) if type(a) in (cst.For, cst.While)), None)
    if loop is None:
        return False
    increments = [n for n in walk(loop) if type(n) is cst.AugAssign and dotted(n.target) == name]
    if len(increments) != 1 or type(increments[0].operator) is not cst.AddAssign or code(increments[0].value) != "1":
        return False
    inner = next((a for a in reversed(ancestors(facts.parents, increments[0])) if type(a) in (cst.For, cst.While)), None)
    rebound = any(facts.enclosing_function(b.statement) is generator and loop in ancestors(facts.parents, b.statement)
                  for b in facts.bindings.get(name, ()))
    return inner is loop and not rebound


def _valued_returns(function: cst.CSTNode) -> list[cst.Return]:
    """The `return` statements with a value under a function's body, nested functions' too, in
    `walk`'s order: what `ModuleFacts.returned` reads, asked for every call of the function."""
    return [node for node in walk(cast(Function, function).body) if type(node) is cst.Return and node.value is not None]


def _local_bindings(function: cst.CSTNode) -> dict[str, list[Binding]]:
    """The names a function of another module binds in its own body (`loss_val =
    loss.item()`, `a, b = f(...)`), as this module's `bindings` hold its own (`_bind`): what
    `_name_holds_no_graph` reads of a returned name there."""
    found: dict[str, list[Binding]] = {}
    for node in walk(cast(Function, function).body):
        if type(node) is cst.Assign:
            for target in node.targets:
                _bind(found, target.target, node.value, node)
    return found


def _called_and_named(function: cst.CSTNode) -> tuple[set[str], set[str]]:
    """The attribute names a function's body calls (`x.step()`: "step") and the plain names it
    reads; asked through `ModuleFacts.once` (it depends on the function alone), for every call
    that resolves to the function."""
    body = cast(Function, function).body
    methods = {node.func.attr.value for node in walk(body) if type(node) is cst.Call and type(node.func) is cst.Attribute}
    return methods, {node.value for node in walk(body) if type(node) is cst.Name}


def _unless_own_update(facts: ModuleFacts, function: Optional[Function]) -> Optional[Function]:
    """A project function of another module, unless it updates a copy of the model with an
    optimizer of its own (`fast = copy.deepcopy(model)`, an optimizer over it, its backward and
    step: a per-task adaptation): that update is not the window's, and which object the copy
    is cannot be read from the loop's module."""
    if function is None:
        return None
    methods, names = facts.once(_called_and_named, function)
    copies = (methods | names) & _COPYING_CALLS
    return None if copies and methods & _UPDATE_CALLS else function


# Calls that copy a model (`copy.deepcopy(model)`, learn2learn's `clone_module(model)`).
_COPYING_CALLS = frozenset({"deepcopy", "clone_module"})
# The calls that update parameters or their gradients (`opt.step()`, `opt.zero_grad()`).
_UPDATE_CALLS = frozenset({"step", "zero_grad"})
# The methods of a project object read from its class, not from its name (see `object_method`).
_OBJECT_METHODS = frozenset({"step", "zero_grad"})
# The method calls that make an object's method a backward helper (see `backward_method`).
_BACKWARD_METHODS = frozenset({"backward", "manual_backward"})
# What makes an object's backward method an update of its own: it steps, or works on a copy. One
# that zeroes and backpropagates without stepping (an adversarial weight perturbation's
# `attack_backward`) adds its gradients to the window's, and its zeroing is the window's.
_OWN_UPDATE_METHODS = frozenset({"step"}) | _COPYING_CALLS
_OWN_MODEL_NAMES = frozenset({"deepcopy", "optim", "SGD", "Adam", "AdamW"})
# Bases that add no behaviour of a library class: a class deriving from them alone is plain.
PLAIN_BASES = frozenset({"object", "ABC", "abc.ABC"})
# Framework classes whose project subclasses build objects of the same kind (`framework_class`).
FRAMEWORK_CLASSES = frozenset({"Accelerator", "Fabric", "GradScaler"})


def ancestors(parents: dict[int, cst.CSTNode], node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The nodes above `node`, outermost (the module) first."""
    found = []
    parent = parents.get(id(node))
    while parent is not None:
        found.append(parent)
        parent = parents.get(id(parent))
    found.reverse()
    return tuple(found)


def collect_facts(module: cst.Module, text: str, project: Optional["ProjectView"] = None) -> ModuleFacts:
    """One pre-order walk: each node's parent, and what the recorders take from it.

    Leaves (names, numbers, strings without code) get their parent but are not
    pushed: they are many of a module's nodes and hold nothing to record. The
    code inside string literals (f-string braces) gets parents too, but no
    recorder reads it."""
    facts = ModuleFacts(module=module, text=text, project=project)
    facts.window_token_normalization = "num_items_in_batch" in text
    parents = facts.parents
    stack: list[cst.CSTNode] = [module]
    pop, push = stack.pop, stack.append
    recorder_of = _RECORDERS.get
    fields_of = KNOWN_CONTENT_FIELDS.get
    while stack:
        node = pop()
        kind = type(node)
        recorder = recorder_of(kind)
        if recorder is not None:
            recorder(facts, node)
        if kind in _STRINGS:
            record_parents(parents, node)
            if kind is cst.FormattedString:
                _record_lengths_in(facts, cast(cst.FormattedString, node))
            elif kind is cst.ConcatenatedString:  # `f"batch {i}/{len(loader)}, " f"loss {loss:.4f}"`
                piece = cast(cst.BaseExpression, node)
                while isinstance(piece, cst.ConcatenatedString):
                    if isinstance(piece.left, cst.FormattedString):
                        _record_lengths_in(facts, piece.left)
                    piece = piece.right
                if isinstance(piece, cst.FormattedString):
                    _record_lengths_in(facts, piece)
            continue
        # `children(node)`, last first, inlined: this walk meets every node of the module
        for name in reversed(fields_of(kind) or content_fields(kind)):
            value = getattr(node, name)
            if type(value) in SEQUENCES:
                for child in reversed(value):
                    parents[id(child)] = node
                    if type(child) not in LEAVES:
                        push(child)
            elif value is not None and value is not ABSENT:
                parents[id(value)] = node
                if type(value) not in LEAVES:
                    push(value)
    if facts.trainer_accumulation is None:
        _trainer_accumulation_through_kwargs(facts)
    _objects_passed_by_own_callers(facts)
    if project is not None:
        _through_project_helpers(facts, project)
    facts.settled = True
    return facts


# A module that runs Lightning (its YAML's `accumulate_grad_batches` is its Trainer's).
_LIGHTNING = LazyPattern(r"\bLightningCLI\b|\bLightningModule\b|\bTrainer\(")


def _through_project_helpers(facts: ModuleFacts, project: "ProjectView") -> None:
    """`model = wrap_model(model)` where another project module's helper wraps it
    (`return DDP(model, ...)`) or builds a scheduler: the binding holds the call the
    helper returns, so every question about the name sees the wrap."""
    for bindings in facts.bindings.values():
        for position, binding in enumerate(bindings):
            value = binding.value
            if type(value) is cst.Call and type(value.func) in (cst.Name, cst.Attribute):
                returned = project.returned_call(dotted(value.func), binding.index)
                if returned is not None:
                    bindings[position] = Binding(binding.target, returned, None, binding.statement, value)
    _inherited_objects(facts, project)
    if facts.trainer_accumulation is None and _LIGHTNING.search(facts.text):
        steps = project.lightning_accumulation()
        if steps is not None:
            facts.trainer_accumulation = project.adopt(cst.Integer(str(steps)))


# The data-parallel wraps of a model, by the last part of the callee (`torch.nn.parallel.DDP`).
DATA_PARALLEL_WRAPS = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"})
_MODEL_WRAPS = DATA_PARALLEL_WRAPS | {"DataParallel"}  # wraps whose forward runs the module's (`forward_of`)
_PREPARES = frozenset({"initialize", "prepare", "setup"})  # return each object given, wrapped, in its place
_MOVES = frozenset({"to", "cuda", "half", "float", "bfloat16", "double"})  # methods returning the module itself


def deepspeed_initialize(qualified: str) -> bool:
    """The qualified callee is DeepSpeed's `initialize` (`deepspeed.initialize`, `ds.initialize` imported from it)."""
    return qualified.endswith("deepspeed.initialize") or last_part(qualified) == "initialize" and "deepspeed" in qualified


def constructed(value: cst.BaseExpression) -> cst.BaseExpression:
    """The constructor call under moves of the module it builds (`nn.CrossEntropyLoss().to(device)`,
    `Classifier(cfg).cuda().half()` -> the constructor's call): those return the object itself."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in _MOVES \
            and type(value.func.value) is cst.Call:
        value = value.func.value
    return value


def moved_from(value: cst.BaseExpression) -> cst.BaseExpression:
    """The object under moves of it (`model.to(device)`, `net.cuda().half()` -> `model`,
    `net`): a module's moves return the module itself."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in _MOVES:
        value = value.func.value
    return value


UNCOUNTED = cst.Name("__pieces__")  # split into pieces of a size: K is how many came out
# Methods that move or copy a tensor without changing its first dimension.
_SAME_PIECES = frozenset({"cpu", "cuda", "to", "contiguous", "detach", "clone", "float", "half", "bfloat16"})


def piece_count(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """How many pieces `value` splits one batch into: `n` of `x.chunk(n)` / `torch.chunk(x, n)`,
    of `x.reshape(n, size, ...)` and of a split into sizes of the batch's own length over
    `n` (`torch.split(x, x.shape[0] // n)`); `UNCOUNTED` for another split by size
    (`torch.split(x, size)`, `x.split(size)`, `x.view(-1, size, ...)`), else None."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in _SAME_PIECES:
        value = value.func.value  # `x.reshape(n, size, ...).cpu()`: the same pieces on another device
    if type(value) is not cst.Call:
        return None
    tail = last_part(call_name(value) or "")
    function = (call_name(value) or "").split(".")[0] == "torch"
    if tail == "chunk":
        chunks = keyword(value, "chunks")
        if chunks is not None:
            return chunks.value
        return positional(value, 1 if function else 0)
    if tail in ("split", "tensor_split"):
        split = positional(value, 0) if function else value.func.value if type(value.func) is cst.Attribute else None
        size = positional(value, 1 if function else 0)
        if tail == "split" and split is not None and type(size) is cst.BinaryOperation \
                and type(size.operator) is cst.FloorDivide and _length_of(size.left) == code(split):
            return size.right  # `torch.split(data, data.shape[0] // splits)`: `splits` pieces
        return UNCOUNTED
    if tail in ("reshape", "view") and not function and type(value.func) is cst.Attribute:
        # `x.reshape(n // size, size, *x.shape[1:])`: iterating it gives its first dimension's
        # pieces (`-1`: as many as come out)
        first, second = positional(value, 0), positional(value, 1)
        if first is None or second is None:
            return None
        return UNCOUNTED if int_value(first) == -1 else first
    return None


def _length_of(node: cst.BaseExpression) -> Optional[str]:
    """The code of the tensor whose first dimension `node` reads (`x.shape[0]`, `x.size(0)`,
    `len(x)`), else None."""
    if type(node) is cst.Subscript and type(node.value) is cst.Attribute and node.value.attr.value == "shape" \
            and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index and int_value(node.slice[0].slice.value) == 0:
        return code(node.value.value)
    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "size" \
            and int_value(positional(node, 0)) == 0:
        return code(node.func.value)
    if type(node) is cst.Call and dotted(node.func) == "len" and len(node.args) == 1:
        return code(node.args[0].value)
    return None


def _objects_passed_by_own_callers(facts: ModuleFacts) -> None:
    """A function holding a training loop that the module calls by name only, whose
    parameter receives, from every call, an object of one class of this module
    (`run_train_epoch(..., runner)` after `runner = BackwardRunner(model, ...)`): the
    parameter holds that object, a binding whose statement is the function, so the
    methods the loop calls on it (a backward, a step) run there. What a caller passes
    says nothing more: a model the callers wrap in DDP before passing it is a parameter
    of unknown type in the loop (SPEC: a receiver of unknown type stays unknown)."""
    trains = {id(node) for site in facts.loops for node in site.ancestors if type(node) in (cst.FunctionDef, cst.ClassDef)}
    for name, function in facts.functions.items():
        if id(function) in trains and facts.class_of.get(function) is None:
            for position, param in _parameters(function, skip_self=False):
                parameter = param.name.value
                if _rebound_in(facts, parameter, function) or parameter not in _receivers(facts, function.body):
                    continue
                objects = _passed_bindings(facts, name, parameter, position, _builds_project_object)
                if objects and len({code(b.value.func) for b in objects if type(b.value) is cst.Call}) == 1:
                    # `run_train_epoch(..., runner, ...)` after `runner = BackwardRunner(model, ...)`:
                    # the object every call passes (one class), for the calls the loop makes on it
                    facts.bindings.setdefault(parameter, []).append(Binding(parameter, objects[0].value, None, function))


def _parameters(function: cst.FunctionDef, skip_self: bool) -> list[tuple[Optional[int], cst.Param]]:
    """The function's parameters with their positions (None: keyword-only)."""
    positional = list(function.params.posonly_params) + list(function.params.params)
    if skip_self:
        positional = positional[1:]
    return [*enumerate(positional), *((None, p) for p in function.params.kwonly_params)]


def _rebound_in(facts: ModuleFacts, name: str, function: cst.FunctionDef) -> bool:
    """The function binds `name` itself (a parameter it rebinds no longer holds what a caller passed)."""
    return any(facts.enclosing_function(b.statement) is function for b in facts.bindings.get(name, ()))


def _builds_project_object(facts: ModuleFacts, value: cst.BaseExpression) -> bool:
    """`BackwardRunner(model, device)`: an object of a class this module defines."""
    return type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in facts.classes


def _receivers(facts: ModuleFacts, body: cst.CSTNode) -> set[str]:
    """The plain names whose methods `body` calls (`runner.step()`: "runner"), or that it
    calls itself (`loss_scaler(loss, optimizer)`)."""
    found = set()
    for node in facts.calls_in(body):
        func = node.func
        if type(func) is cst.Attribute and type(func.value) is cst.Name:
            found.add(func.value.value)
        elif type(func) is cst.Name:
            found.add(func.value)
    return found


def _passed_bindings(facts: ModuleFacts, callee: str, parameter: str, position: Optional[int],
                     accept: Callable[[ModuleFacts, cst.BaseExpression], bool]) -> Optional[list[Binding]]:
    """The bindings that every call of the module's `callee` passes as `parameter` (at
    `position`, or by keyword) and that `accept` takes: for each call, the bindings of the
    name it passes, in the call's own scope. None when any call passes something else or
    the module names `callee` otherwise."""
    calls = [c for c in facts.calls if type(c.func) is cst.Name and c.func.value == callee]
    if not calls or facts._plain_names[callee] != len(calls) + 1:
        return None  # named otherwise too (a callback, a base class): callers unknown (`model.train()` is no naming of `train`)
    found: list[Binding] = []
    for call in calls:
        if any(arg.star for arg in call.args):
            return None
        passed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == parameter), None)
        given = [a.value for a in call.args if a.keyword is None]
        if passed is None and position is not None and position < len(given):
            passed = given[position]
        if type(passed) is not cst.Name:
            return None
        scope = facts.enclosing_function(call)
        accepted = [b for b in facts.bindings.get(passed.value, ()) if b.index is None
                    and facts.enclosing_function(b.statement) is scope and accept(facts, b.value)]
        if not accepted:
            return None
        found.extend(accepted)
    return found


def _called_name(call: cst.Call) -> Optional[str]:
    """The name a call's function ends in: `f` of `f(...)` and of `obj.f(...)`."""
    func = call.func
    if type(func) is cst.Name:
        return func.value
    if type(func) is cst.Attribute:
        return func.attr.value
    return None


def _name_counts(facts: ModuleFacts) -> "Counter[str]":
    """How often each identifier occurs as a name node in the module (definitions, calls,
    references, attribute names), counted once per module."""
    return _counted_names(facts)[0]


def _counted_names(facts: ModuleFacts) -> tuple["Counter[str]", "Counter[str]", "Counter[str]"]:
    """How often each identifier occurs as a name node, how often as an attribute's name
    (`train` in `model.train()`), and how often as the attribute of an object the instance
    holds (`train` in `self.model.train()`): one walk of the module, once."""
    if facts._name_counts is None:
        names: "Counter[str]" = Counter()
        attributes: "Counter[str]" = Counter()
        held: "Counter[str]" = Counter()
        for node in walk(facts.module):
            if type(node) is cst.Name:
                names[node.value] += 1
            elif type(node) is cst.Attribute:
                attributes[node.attr.value] += 1
                owner = node.value
                if type(owner) is cst.Attribute and (dotted(owner) or "").startswith("self."):
                    held[node.attr.value] += 1
        facts._name_counts = (names, attributes, held)
    return facts._name_counts


def _inherited_objects(facts: ModuleFacts, project: "ProjectView") -> None:
    """`self.model = DDP(...)`, `self.accelerator = Accelerator(...)` or `self.optimizer =
    self.accelerator.prepare(...)` in a base class of another project module: the attribute
    of the subclass holds that object too (a binding whose statement is the subclass),
    unless the subclass redefines the assigning method without calling the base's."""
    for cls in facts.classes.values():
        bases = [name for base in cls.bases if (name := dotted(base.value)) is not None]
        if not bases or not any(name.partition(".")[0] in facts.imports for name in bases):
            continue
        for attribute, method, value, index in project.inherited_objects(bases):
            own = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == method), None)
            if own is not None and not any(type(n) is cst.Attribute and n.attr.value == method for n in walk(own.body)):
                continue
            facts.bindings.setdefault(f"self.{attribute}", []).append(Binding(f"self.{attribute}", value, index, cls))


def _trainer_accumulation_through_kwargs(facts: ModuleFacts) -> None:
    """`Trainer(**trainer_kwargs)` with `accumulate_grad_batches` in a dict the module builds."""
    from accumlint.model.kwargs import keywords  # kwargs reads these facts

    for call in facts.calls:
        if any(arg.star == "**" for arg in call.args):
            value = (keywords(facts, call) or {}).get("accumulate_grad_batches")
            if value is not None:
                facts.trainer_accumulation = value
                return


def _record_loop(facts: ModuleFacts, node: Loop) -> None:
    facts.loops.append(LoopSite(node, ancestors(facts.parents, node)))


def _record_call(facts: ModuleFacts, node: cst.Call) -> None:
    facts.calls.append(node)
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "accumulate_grad_batches":
            facts.trainer_accumulation = arg.value
    if type(node.func) is cst.Name and node.func.value == "len" and node.args:
        name = dotted(node.args[0].value)
        if name is not None:
            facts.len_arguments.add(name)
    elif type(node.func) is cst.Attribute and node.func.attr.value == "__len__" and not node.args:
        name = dotted(node.func.value)  # `train_loader.__len__()`: its length, taken the long way
        if name is not None:
            facts.len_arguments.add(name)


def _record_lengths_in(facts: ModuleFacts, node: cst.FormattedString) -> None:
    """`f"{len(loader)} batches"`: a length taken inside an f-string is taken all the same
    (the rest of a string's calls are not the module's: logging text is not read)."""
    for part in node.parts:
        if type(part) is not cst.FormattedStringExpression:
            continue
        for inner in walk(part.expression):
            if type(inner) is cst.Call and type(inner.func) is cst.Name and inner.func.value == "len" and inner.args:
                name = dotted(inner.args[0].value)
                if name is not None:
                    facts.len_arguments.add(name)


def _record_function(facts: ModuleFacts, node: Function) -> None:
    owner = facts.parents.get(id(node))
    grandparent = facts.parents.get(id(owner)) if owner is not None else None
    # a method's parent chain is ClassDef -> IndentedBlock -> FunctionDef
    if type(grandparent) is cst.ClassDef:
        facts.class_of[node] = grandparent
    elif type(owner) is cst.Module:
        # module-level only: a nested function is usually a closure handed to
        # `optimizer.step(closure)`, a whole update of its own
        facts.functions.setdefault(node.name.value, node)
    else:
        # found by name only from calls inside the function that defines it (`local_function`)
        outer = facts.enclosing_function(node)
        if outer is not None:
            facts.nested.setdefault((outer, node.name.value), node)


def _record_class(facts: ModuleFacts, node: cst.ClassDef) -> None:
    facts.classes[node.name.value] = node


def _record_assign(facts: ModuleFacts, node: cst.Assign) -> None:
    if _unreachable(facts, node):
        return
    for target in node.targets:
        _bind(facts.bindings, target.target, node.value, node)


def _record_annotated(facts: ModuleFacts, node: cst.AnnAssign) -> None:
    if node.value is not None and not _unreachable(facts, node):
        _bind(facts.bindings, node.target, node.value, node)


_JUMPS = (cst.Raise, cst.Return, cst.Continue, cst.Break)


def _unreachable(facts: ModuleFacts, node: cst.CSTNode) -> bool:
    """An assignment after a `raise` (or `return`, `continue`, `break`) of its own block
    never runs (`raise RuntimeError("FSDP is not supported anymore")` above a dead
    `model = FSDP(...)`): it binds nothing."""
    line = facts.parents.get(id(node))
    block = facts.parents.get(id(line)) if line is not None else None
    if type(line) is not cst.SimpleStatementLine or type(block) is not cst.IndentedBlock:
        return False
    for statement in block.body:
        if statement is line:
            return False
        if type(statement) is cst.SimpleStatementLine and type(statement.body[-1]) in _JUMPS:
            return True
    return False


def _record_with_item(facts: ModuleFacts, node: cst.WithItem) -> None:
    if node.asname is not None:
        _bind(facts.bindings, node.asname.name, node.item, node)


def _record_import_node(facts: ModuleFacts, node: Union[cst.Import, cst.ImportFrom]) -> None:
    _record_import(facts, node)


# Exact-type dispatch: one dict look-up per node instead of a chain of
# isinstance checks against LibCST's ABCs (each a Python-level __instancecheck__).
_RECORDERS: dict[type, Callable[[ModuleFacts, Any], None]] = {  # each takes its key's nodes
    cst.For: _record_loop,
    cst.While: _record_loop,
    cst.Call: _record_call,
    cst.FunctionDef: _record_function,
    cst.ClassDef: _record_class,
    cst.Assign: _record_assign,
    cst.AnnAssign: _record_annotated,
    cst.Import: _record_import_node,
    cst.ImportFrom: _record_import_node,
    cst.WithItem: _record_with_item,
}
_STRINGS = frozenset({cst.SimpleString, cst.ConcatenatedString, cst.FormattedString})
_SEQUENCE_DISPLAYS = (cst.Tuple, cst.List)


def _bind(bindings: dict[str, list[Binding]], target: cst.BaseExpression, value: cst.BaseExpression,
          statement: cst.CSTNode) -> None:
    """Record `target = value` in `bindings` (name -> its bindings), element by element."""
    if type(target) in _SEQUENCE_DISPLAYS:
        elements = [element.value for element in cast("cst.Tuple | cst.List", target).elements]
        if type(value) in _SEQUENCE_DISPLAYS and len(items := cast("cst.Tuple | cst.List", value).elements) == len(elements):
            for element, item in zip(elements, items):
                _bind(bindings, element, item.value, statement)
            return
        for index, element in enumerate(elements):
            name = dotted(element)
            if name is not None:
                bindings.setdefault(name, []).append(Binding(name, value, index, statement))
        return
    name = dotted(target)
    if name is not None:
        bindings.setdefault(name, []).append(Binding(name, value, None, statement))


# How many steps (a name to its bindings, a call to its returns, an operand) `holds_no_graph`
# follows before it calls a value unknown: a few helpers deep, each a few names long.
_MAX_FLOW_DEPTH = 12


def _in_place_updates(function: cst.CSTNode) -> list[cst.AugAssign]:
    """The augmented assignments (`total += part`) in a function's body."""
    return [node for node in walk(function) if type(node) is cst.AugAssign]


# Modules and builtins whose calls return plain numbers, never a tensor with a graph.
_NUMBER_MODULES = frozenset({"time", "math"})
_NUMBER_BUILTINS = frozenset({"len", "int", "round"})
# numpy's constructors of arrays: an array holds numbers, never a graph (given a tensor that
# requires grad, they raise rather than keep one).
_ARRAY_CONSTRUCTORS = frozenset(f"numpy.{name}" for name in ("array", "asarray", "stack", "concatenate", "vstack", "hstack"))
# Methods whose result holds no autograd graph (a Python number, a copy off the graph).
DETACHING_METHODS = frozenset({"item", "detach", "tolist", "cpu", "numpy", "float", "data"})


def detached(value: cst.BaseExpression) -> bool:
    """A value that holds no autograd graph: a detaching call (`loss.item()`, `float(loss)`,
    `loss.detach()`), `.data`, or arithmetic of one with numbers or non-loss names (`loss.item() * K`,
    `float(loss) / n`)."""
    if type(value) is cst.Call:
        return last_part(dotted(value.func) or "") in DETACHING_METHODS
    if type(value) is cst.Attribute and value.attr.value == "data":
        return True  # `loss.detach().cpu().data`, `loss.data`: the tensor off the graph
    if type(value) is cst.UnaryOperation:
        return detached(value.expression)
    if type(value) is cst.BinaryOperation:
        left, right = value.left, value.right
        return (detached(left) and _scalar_operand(right)) or (detached(right) and _scalar_operand(left))
    return False


def _scalar_operand(value: cst.BaseExpression) -> bool:
    """An operand that adds no graph beside a detached value: a number, a detached value, or a
    name that does not name a loss (`K`, `args.accum_steps`, `x.size(0)`)."""
    if type(value) in (cst.Integer, cst.Float) or detached(value):
        return True
    if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in ("size", "numel"):
        return True
    name = dotted(value)
    return name is not None and "loss" not in last_part(name).lower()


def _reaching(function: Function, ret: cst.Return, bindings: list[Binding]) -> list[Binding]:
    """The bindings of a returned name that may reach `ret`: when the return and a binding both
    stand directly in the function's body, the binding shadows every one before it
    (`loss = compute(...)`, ..., `loss = loss.item()`, `return loss`)."""
    body = function.body.body if type(function.body) is cst.IndentedBlock else ()
    line_of: dict[int, int] = {}
    for position, line in enumerate(body):
        if type(line) is cst.SimpleStatementLine:
            for small in line.body:
                line_of[id(small)] = position
    at = line_of.get(id(ret))
    if at is None:
        return bindings
    shadowing = [line_of[id(b.statement)] for b in bindings if line_of.get(id(b.statement), at) < at]
    if not shadowing:
        return bindings
    last = max(shadowing)
    after = {id(node) for line in body[last + 1:at] for node in walk(line)}
    return [b for b in bindings if line_of.get(id(b.statement)) == last or id(b.statement) in after]


def _element(value: cst.BaseExpression, index: int) -> Optional[cst.BaseExpression]:
    """The element at `index` of a tuple or list display with no starred element, else None."""
    if type(value) not in _SEQUENCE_DISPLAYS:
        return None
    elements = cast("cst.Tuple | cst.List", value).elements
    if index >= len(elements) or any(type(e) is cst.StarredElement for e in elements):
        return None
    return elements[index].value


def _record_import(facts: ModuleFacts, node: Union[cst.Import, cst.ImportFrom]) -> None:
    if type(node) is cst.ImportFrom and type(node.names) is cst.ImportStar:
        facts.star_imports = True
    for binding in import_bindings(node):
        if binding.keeps_earlier:
            facts.imports.setdefault(binding.local, binding.qualified)
        else:
            facts.imports[binding.local] = binding.qualified


@dataclass(frozen=True)
class ImportBinding:
    """A name an import statement binds, and what it names: `import a.b as c` binds `c`
    to module `a.b`; `from ..a import b as c` binds `c` to `b` of module `a`, two levels up."""

    local: str
    module: str  # the module imported, or imported from ("" for `from . import b`)
    name: Optional[str]  # the name imported from `module`; None for `import ...`
    level: int  # the leading dots of a relative import
    # `import a.b` binds only `a` (to module `a`), and an earlier import of `a` is kept
    keeps_earlier: bool = False

    @property
    def qualified(self) -> str:
        """The dotted name the local stands for (`torch.optim.AdamW`); a relative import's
        dots are dropped."""
        if self.name is None:
            return self.module
        return f"{self.module}.{self.name}" if self.module else self.name


def import_bindings(node: Union[cst.Import, cst.ImportFrom]) -> list[ImportBinding]:
    """The names an import statement binds (none for `from a import *`): the one reading
    of imports, for the module facts, the project's summary of the analysed module and
    the scopes."""
    if type(node.names) is cst.ImportStar:
        return []
    found = []
    if type(node) is cst.Import:
        for alias in node.names:
            full = dotted(alias.name)
            if full is None:
                continue
            if alias.asname is not None:
                found.append(ImportBinding(dotted(alias.asname.name) or full, full, None, 0))
            else:
                head = full.split(".")[0]
                found.append(ImportBinding(head, head, None, 0, keeps_earlier=True))
        return found
    node = cast(cst.ImportFrom, node)  # an `import` returned above
    base = dotted(node.module) if node.module is not None else ""
    for alias in cast("Sequence[cst.ImportAlias]", node.names):  # a star import returned first
        name = dotted(alias.name)
        if name is None:
            continue
        local = dotted(alias.asname.name) if alias.asname is not None else name
        found.append(ImportBinding(local or name, base or "", name, len(node.relative)))
    return found
