"""What one project module offers to the modules that import it, read with `ast`.

A summary is computed once per module text (Python's own parser: a fraction of
LibCST's cost) and holds only what the analysis follows across modules
(README, "The project around a file"): its imports, its functions and methods with their effects and
source, class attributes (`__init__`/`setup` and the class body, dataclass and
NamedTuple fields), module constants, argparse defaults, `**kwargs` dicts, and
the string literals that may name a configuration file. Values are kept as
source text; the model parses one of them only when it asks for it.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from typing import Iterator, Optional

from accumlint.source.gate import is_backward_call

# Effects the analysis follows across modules.
BACKWARD, STEP, ZEROING, LOSS_DIVISION, WRAP, SYNC_CONTROL, SCHEDULER = (
    "backward", "step", "zeroing", "loss-division", "wrap", "sync-control", "scheduler",
)
# Effects that make a function's statements part of a window (what rules report on).
ROLE_EFFECTS = frozenset({BACKWARD, STEP, ZEROING, LOSS_DIVISION, SCHEDULER})
WRAP_CALLEES = {"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard"}
_PREPARE = {"prepare", "prepare_model", "setup", "setup_module"}
_SYNC = {"no_sync", "no_backward_sync", "set_requires_gradient_sync", "disable_allreduce", "enable_allreduce"}
_OPTIMIZER_RECEIVER = ("opt", "optim", "optimizer", "scaler")
# A string literal that names a configuration file (`"configs/ds_config.json"`).
CONFIG_LITERAL = re.compile(r"""["']([^"'\s\\]{1,300}\.(?:json|ya?ml))["']""")
# Text that any effect needs (a function without any of them has none: no walk of its body).
_EFFECT_HINT = re.compile(r"backward|step|zero_grad|\.grad\b|loss|DDP|DistributedDataParallel|FSDP|FullyShardedDataParallel"
                          r"|fully_shard|deepspeed|prepare|setup|sync|allreduce|sched|LR\b")


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node`, itself first, in `ast.walk`'s order (breadth first), without
    its generator per node (`iter_child_nodes`): summaries walk every function they keep."""
    todo = [node]
    for current in todo:  # a list that grows while it is read: a queue
        for name in current._fields:
            value = getattr(current, name, None)
            if type(value) is list:
                todo.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                todo.append(value)
        yield current


def _may_hold(lines: list[str], node: ast.stmt, words: "tuple[str, ...] | set[str]") -> bool:
    """Whether the statement's source (decorators included) may hold one of `words`
    (identifiers or parts of them): False only when its text, all ASCII, holds none, in
    lines numbered as `ast` numbers them. A non-ASCII text may spell an identifier
    otherwise (Python normalises it, NFKC), so it is always walked."""
    if type(lines) is not _AlignedLines:
        return True
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
    text = "".join(lines[first - 1:node.end_lineno])
    return not text.isascii() or any(word in text for word in words)


class _AlignedLines(list[str]):
    """A module's lines (`str.splitlines`) known to be numbered as `ast` numbers them: its
    text holds no other line break than \n and \r (`str.splitlines` also breaks at form
    feeds and a few others, where `ast` does not)."""


# Line breaks of `str.splitlines` that Python's parser does not count.
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True, eq=False)
class FunctionSummary:
    """A module-level function or a method (`Class.method`): its effects and where its source is."""

    name: str
    line: int  # the first line of `source` in the module: the first decorator's, else the `def` line
    end: int  # its last line
    lines: list[str] = field(repr=False)  # the module's lines (shared by its functions)
    effects: frozenset[str] = frozenset()
    # the parameter (its position, its name) whose unwrapped module every `return` hands back
    # (`def unwrap(model): return model.module if hasattr(model, "module") else model`)
    unwraps: Optional[tuple[int, str]] = None

    @property
    def source(self) -> str:
        """The definition (decorators included), dedented; made only when asked."""
        text = "".join(self.lines[self.line - 1:self.end])
        return text if text[:1] not in (" ", "\t") else textwrap.dedent(text)


@dataclass(frozen=True)
class ClassSummary:
    name: str
    bases: tuple[str, ...]
    # field or attribute -> source of its default / assigned value (`__init__`, `setup`, body)
    attributes: dict[str, str]
    fields: tuple[str, ...]  # dataclass / NamedTuple fields in order (positional arguments)
    record: bool  # a dataclass or NamedTuple: a call's missing arguments take the defaults
    # attribute -> (the method that assigns it, the source of the DDP/FSDP call assigned):
    # `self.model = DDP(self.model, ...)` in any method, read by subclasses in other modules
    wraps: dict[str, tuple[str, str]] = field(default_factory=dict)
    # attribute -> (the method that assigns it, the source of the value, the element taken of
    # it): the framework objects a method keeps, `self.accelerator = Accelerator(...)` and
    # `self.model, self.optimizer = self.accelerator.prepare(...)` (element 1 for the optimizer)
    kept: dict[str, tuple[str, str, Optional[int]]] = field(default_factory=dict)


@dataclass
class ModuleSummary:
    path: str
    # local name -> (module, imported name or None for `import a.b`, level)
    imports: dict[str, tuple[str, Optional[str], int]] = field(default_factory=dict)
    functions: dict[str, FunctionSummary] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    constants: dict[str, str] = field(default_factory=dict)  # bound once at module level
    argparse_defaults: dict[str, str] = field(default_factory=dict)  # dest -> default source
    argparse_builders: frozenset[str] = frozenset()  # functions that build or parse the parser
    config_paths: tuple[str, ...] = ()  # string literals naming a .json / .yaml file
    error: Optional[str] = None  # the module could not be parsed: nothing is known of it
    lines: list[str] = field(default_factory=list, repr=False)  # its text, for `passes`
    _passes: Optional[tuple[tuple["Passed", ...], frozenset[str]]] = field(default=None, repr=False)

    def passes(self) -> tuple["Passed", ...]:
        """What each call of a dotted name in the module passes (`Passed`), read once per
        summary, when a module asks what its callers pass: most modules are never asked."""
        return self._calls()[0]

    def named_otherwise(self) -> frozenset[str]:
        """The dotted names the module's code reads other than as the callee of a call (a
        base class, a callback handed on, `fit = engine.train`)."""
        return self._calls()[1]

    def _calls(self) -> tuple[tuple["Passed", ...], frozenset[str]]:
        if self._passes is None:
            self._passes = _passes("".join(self.lines)) if self.error is None else ((), frozenset())
        return self._passes

    def role_helpers(self) -> list[str]:
        """The names (sorted) of the module's top-level functions that hold a role effect,
        and of its classes whose own methods hold one (an object's `step`): what a loop of
        another module may run, whose statements are then part of its window."""
        return sorted({f.name.partition(".")[0] for f in self.functions.values()
                       if f.effects & ROLE_EFFECTS and ("." not in f.name or f.name.partition(".")[0] in self.classes)})


# What a name passed as an argument holds as far as the caller's own function (or module
# level) shows before the call: the dotted callee of each call it was bound to (with the
# element taken of a tuple-returning call: `model, opt = setup(model, opt)` gives
# ("setup", 0)), ("", None) for a value that is no call (or an unwrapped `x.module`);
# None for anything else (a parameter of the caller, a `for` target, an expression).
Held = Optional[tuple[tuple[str, Optional[int]], ...]]
HELD_PLAIN: tuple[tuple[str, Optional[int]], ...] = (("", None),)


@dataclass(frozen=True)
class Passed:
    """One call of a dotted name: its callee as written, its line, and what each argument
    holds (`Held`), by position (empty when a `*args` makes positions unknown) and keyword."""

    callee: str
    line: int
    positional: tuple[Held, ...]
    keywords: dict[str, Held]


def imports_and_configs(path: str, text: str, module) -> ModuleSummary:
    """What the analysed module itself needs of its own summary, from its LibCST tree:
    its top-level imports and the configuration files it names (no second parse)."""
    import libcst as cst

    from accumlint.model.facts import import_bindings

    summary = ModuleSummary(path)
    for statement in module.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is cst.ImportFrom and type(small.names) is cst.ImportStar:
                target = small.module.value if type(small.module) is cst.Name else (
                    cst.Module([]).code_for_node(small.module) if small.module is not None else "")
                summary.imports[star_key(target, len(small.relative))] = (target, "*", len(small.relative))
            elif type(small) is cst.Import or type(small) is cst.ImportFrom:
                for binding in import_bindings(small):
                    imported = (binding.module, binding.name, binding.level)
                    if binding.keeps_earlier:
                        summary.imports.setdefault(binding.local, imported)
                    else:
                        summary.imports[binding.local] = imported
    summary.config_paths = tuple(sorted(set(CONFIG_LITERAL.findall(text))))
    return summary


def summarize(path: str, text: str) -> ModuleSummary:
    """The summary of one module's text; an unparsable one is empty with `error` set."""
    summary = ModuleSummary(path)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        summary.error = f"{type(error).__name__}: {error}"
        return summary
    lines = text.splitlines(keepends=True)
    if not _OTHER_BREAKS.search(text):
        lines = _AlignedLines(lines)
    rebound: set[str] = set()
    for statement in tree.body:
        _module_statement(summary, statement, lines, rebound)
    for name in rebound:
        summary.constants.pop(name, None)
    if "add_argument" in text:
        builders, defaults = _argparse(tree, lines)
        summary.argparse_builders = frozenset(builders)
        summary.argparse_defaults = defaults
    summary.config_paths = tuple(sorted(set(CONFIG_LITERAL.findall(text))))
    summary.lines = lines
    return summary


def definition_holds_role(definition: str) -> Optional[bool]:
    """Whether one top-level `def` or `class`, given as its own text (`importers.helper_definitions`),
    holds a role effect as `ModuleSummary.role_helpers` reads it: the function's own effects, or
    those of one of the class's methods. The effects of a definition are read from its own
    statements alone, so its text says what the whole module's summary would, without
    parsing the rest of a large module. None when the text does not parse by itself (a
    string whose lines begin in the first column cuts it): the module's summary decides."""
    try:
        tree = ast.parse(definition)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1:
        return None
    node = tree.body[0]
    lines = definition.splitlines(keepends=True)
    if type(node) is ast.FunctionDef:
        return bool(_function(node.name, node, lines).effects & ROLE_EFFECTS)
    if type(node) is ast.ClassDef:
        return any(bool(_function(f"{node.name}.{inner.name}", inner, lines).effects & ROLE_EFFECTS)
                   for inner in node.body if type(inner) is ast.FunctionDef)
    return None


def definition_effects(text: str, name: str) -> Optional[frozenset[str]]:
    """The effects `summarize` gives the module's top-level function `name`, else the
    `__call__` of its class `name` (what an object of it runs when called), or, for a name
    `Class.method`, that method of the class; None when the
    module defines neither or does not parse. Only that definition is walked: the gate's
    project clause asks it of large modules (a framework's) whose other definitions it
    never needs. An ASCII text that spells neither a `def` of the name nor `__call__` (most
    classes define no `__call__`) defines neither: it is not parsed. (A backslash may continue
    the `def` line before the name; another text may spell an identifier otherwise, which
    Python normalises, NFKC.)"""
    owner, _, method = name.rpartition(".")  # `Trainer.update`: a method of the class `Trainer`
    defined = method if owner else name
    if text.isascii() and (owner or "__call__" not in text) \
            and re.search(rf"\bdef[\s\\]+{re.escape(defined)}\b", text) is None:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    function: Optional[ast.FunctionDef] = None
    call: Optional[ast.FunctionDef] = None
    for statement in tree.body:  # the last definition of a name is the summary's, as there
        if type(statement) is ast.FunctionDef and statement.name == name:
            function = statement
        elif type(statement) is ast.ClassDef and statement.name == (owner or name):
            for inner in statement.body:
                if type(inner) is ast.FunctionDef and inner.name == (method if owner else "__call__"):
                    call = inner
    chosen = function or call
    return _function(name, chosen, text.splitlines(keepends=True)).effects if chosen is not None else None


def _passes(text: str) -> tuple[tuple[Passed, ...], frozenset[str]]:
    """Each call of a dotted name in a module's text (`Passed`), with what each argument
    holds before the call in the caller's own function (or at module level); and the
    dotted names its code reads other than as a callee."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return (), frozenset()
    callees = {id(node.func) for node in _walk(tree) if type(node) is ast.Call}
    others = frozenset(name for node in _walk(tree) if type(node) in (ast.Name, ast.Attribute) and id(node) not in callees
                       and (name := ast_dotted(node)) is not None)
    found: list[Passed] = []
    scopes: list[ast.AST] = [tree] + [n for n in _walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        assigned: dict[str, list[tuple[int, Optional[tuple[str, Optional[int]]]]]] = {}  # name -> (line, what it holds)
        calls: list[ast.Call] = []
        stack: list[ast.AST] = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With,
                                 ast.AsyncWith, ast.NamedExpr)):
                for name, held in _bound_by(node):
                    assigned.setdefault(name, []).append((node.lineno, held))
            if isinstance(node, ast.Call) and ast_dotted(node.func) is not None:
                calls.append(node)
            stack.extend(ast.iter_child_nodes(node))
        for call in calls:
            def holds(arg: ast.expr) -> Held:
                if isinstance(arg, ast.Attribute) and arg.attr == "module":
                    return HELD_PLAIN
                if not isinstance(arg, ast.Name):
                    return None
                before = [held for line, held in assigned.get(arg.id, ()) if line < call.lineno]
                if not before or None in before:
                    return None
                return tuple(dict.fromkeys(held for held in before if held is not None))

            positional = tuple(holds(arg) for arg in call.args if not isinstance(arg, ast.Starred))
            if len(positional) != len(call.args):
                positional = ()  # `f(*args)`: positions unknown
            keywords = {k.arg: holds(k.value) for k in call.keywords if k.arg is not None}
            found.append(Passed(ast_dotted(call.func) or "", call.lineno, positional, keywords))
    return tuple(found), others


def _bound_by(node: ast.AST) -> list[tuple[str, Optional[tuple[str, Optional[int]]]]]:
    """The names a statement binds, with what each holds after it (see `Held`): the callee
    of a call (`model = DDP(model)`, `model, opt = setup(model, opt)` with the element's
    index), ("", None) for a value that is no call, None for what is unknown (a `for` or
    `with` target, a starred or nested target). apex's `amp.initialize` returns the
    objects it was given, patched in place: the names hold what they held (nothing bound)."""
    value = getattr(node, "value", None)
    callee = ast_dotted(value.func) if isinstance(value, ast.Call) else None
    if isinstance(node, ast.Assign) and (callee or "").endswith("amp.initialize"):
        return []
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return [(target.id, (callee, None) if callee is not None else ("", None))]
        if isinstance(target, (ast.Tuple, ast.List)) and callee is not None and not any(
                isinstance(e, ast.Starred) for e in target.elts):
            bound: list[tuple[str, Optional[tuple[str, Optional[int]]]]] = []
            for position, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    bound.append((element.id, (callee, position)))
                else:
                    bound.extend((n.id, None) for n in _walk(element) if isinstance(n, ast.Name))
            return bound
    targets: list[Optional[ast.AST]]
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items]
    else:
        targets = [getattr(node, "target", None)]
    return [(n.id, None) for target in targets if target is not None for n in _walk(target) if isinstance(n, ast.Name)]


def _expression(node: ast.AST, lines: list[str]) -> Optional[str]:
    """An expression's exact source (offsets are UTF-8 byte columns), or None."""
    if node.end_lineno is None or node.end_col_offset is None:
        return None
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first].encode()[node.col_offset:node.end_col_offset].decode(errors="replace")
    head = lines[first].encode()[node.col_offset:].decode(errors="replace")
    tail = lines[last].encode()[:node.end_col_offset].decode(errors="replace")
    return "(" + head + "".join(lines[first + 1:last]) + tail + ")"


def imports_only(text: str) -> Optional[dict[str, tuple[str, Optional[str], int]]]:
    """The imports `summarize` records of a module's text (its top-level import statements),
    without the rest of the summary; None when the text does not parse (`summarize` then
    knows nothing of it either). Whether a module imports another is asked of more
    modules than are then analysed."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    imports: dict[str, tuple[str, Optional[str], int]] = {}
    for statement in tree.body:
        _import_statement(imports, statement)
    return imports


def star_key(module: str, level: int) -> str:
    """The key under which `ModuleSummary.imports` keeps `from module import *` (no name
    can be spelled so): `(module, "*", level)`, in the order the imports stand."""
    return f"*{'.' * level}{module}"


def _import_statement(imports: dict[str, tuple[str, Optional[str], int]], statement: ast.stmt) -> bool:
    """Record what a top-level `import` or `from ... import` binds; False for another statement."""
    kind = type(statement)
    if kind is ast.Import:
        for alias in statement.names:
            if alias.asname:
                imports[alias.asname] = (alias.name, None, 0)
            else:
                head = alias.name.split(".")[0]
                imports.setdefault(head, (head, None, 0))
    elif kind is ast.ImportFrom:
        for alias in statement.names:
            if alias.name != "*":
                imports[alias.asname or alias.name] = (statement.module or "", alias.name, statement.level or 0)
            else:
                imports[star_key(statement.module or "", statement.level or 0)] = (statement.module or "", "*", statement.level or 0)
    else:
        return False
    return True


def _module_statement(summary: ModuleSummary, statement: ast.stmt, lines: list[str], rebound: set[str]) -> None:
    kind = type(statement)
    if _import_statement(summary.imports, statement):
        return
    if kind is ast.FunctionDef:
        summary.functions[statement.name] = _function(statement.name, statement, lines)
    elif kind is ast.ClassDef:
        summary.classes[statement.name] = _class(summary, statement, lines)
    elif kind in (ast.Assign, ast.AnnAssign):
        targets = statement.targets if kind is ast.Assign else [statement.target]
        value = statement.value
        for target in targets:
            if type(target) is ast.Name and value is not None:
                if target.id in summary.constants:
                    rebound.add(target.id)
                text = _expression(value, lines)
                if text is not None:
                    summary.constants[target.id] = text
    elif kind is ast.AugAssign and type(statement.target) is ast.Name:
        rebound.add(statement.target.id)
    elif kind in (ast.If, ast.Try):
        # `try: import x except ImportError: ...`, `if TYPE_CHECKING:`: names bound there are not constants
        for node in _walk(statement):
            if type(node) is ast.Name and type(node.ctx) is ast.Store:
                rebound.add(node.id)


def ast_dotted(node: ast.AST) -> Optional[str]:
    """The dotted name an `ast` expression spells (`torch.nn.parallel.DDP`), if any."""
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def wraps_otherwise(callee: str) -> bool:
    """A call that hands back a distributed engine of its own rather than a DDP/FSDP module
    (`deepspeed.initialize(...)`, `accelerator.prepare(model)`, `fabric.setup(model)`)."""
    return "deepspeed.initialize" in callee or (callee.rpartition(".")[2] in _PREPARE and "." in callee)


def _unwrapped_parameter(node: ast.FunctionDef) -> Optional[tuple[int, str]]:
    """The parameter whose `.module` every `return` of the function reads (an unwrap
    helper), with its position among those a call passes by position."""
    returns = [inner.value for inner in _walk(node) if type(inner) is ast.Return and inner.value is not None]
    if not returns:
        return None
    for position, parameter in enumerate([*node.args.posonlyargs, *node.args.args]):
        inner = f"{parameter.arg}.module"
        if all(any(type(n) is ast.Attribute and ast_dotted(n) == inner for n in _walk(value)) for value in returns):
            return position, parameter.arg
    return None


def _function(name: str, node: ast.FunctionDef, lines: list[str]) -> FunctionSummary:
    effects: set[str] = set()
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    unwraps = _unwrapped_parameter(node) if any(".module" in line for line in lines[first - 1:node.end_lineno]) else None
    if not any(_EFFECT_HINT.search(line) for line in lines[first - 1:node.end_lineno]):
        return FunctionSummary(name, first, node.end_lineno, lines, unwraps=unwraps)
    for inner in _walk(node):
        kind = type(inner)
        if kind is ast.Call:
            callee = ast_dotted(inner.func) or ""
            tail = callee.rsplit(".", 1)[-1]
            if is_backward_call(inner.func):
                effects.add(BACKWARD)
            elif tail == "step" and any(p in callee.lower() for p in _OPTIMIZER_RECEIVER):
                effects.add(STEP)
            elif tail == "zero_grad":
                effects.add(ZEROING)
            elif tail in WRAP_CALLEES or wraps_otherwise(callee):
                effects.add(WRAP)
            elif tail in _SYNC:
                effects.add(SYNC_CONTROL)
            elif "lr_scheduler" in callee or ("schedule" in tail.lower() and tail.startswith("get_")) or tail.endswith("LR"):
                effects.add(SCHEDULER)
        elif kind is ast.Attribute and inner.attr in _SYNC | {"require_backward_grad_sync"}:
            effects.add(SYNC_CONTROL)
        elif kind is ast.Assign and any(type(t) is ast.Attribute and t.attr == "grad" for t in inner.targets):
            effects.add(ZEROING)
        elif kind is ast.BinOp and type(inner.op) is ast.Div and "loss" in (ast_dotted(inner.left) or "").lower():
            effects.add(LOSS_DIVISION)
        elif kind is ast.AugAssign and type(inner.op) is ast.Div and "loss" in (ast_dotted(inner.target) or "").lower():
            effects.add(LOSS_DIVISION)
    return FunctionSummary(name, first, node.end_lineno, lines, frozenset(effects), unwraps)


def _class(summary: ModuleSummary, node: ast.ClassDef, lines: list[str]) -> ClassSummary:
    bases = tuple(ast_dotted(base) or "" for base in node.bases)
    decorators = {(ast_dotted(d.func if type(d) is ast.Call else d) or "").rsplit(".", 1)[-1] for d in node.decorator_list}
    record = "dataclass" in decorators or any(b.rsplit(".", 1)[-1] == "NamedTuple" for b in bases)
    attributes: dict[str, str] = {}
    wraps: dict[str, tuple[str, str]] = {}
    kept: list[tuple[str, str, str, Optional[int]]] = []
    fields: list[str] = []
    assigned_twice: set[str] = set()
    for statement in node.body:
        if type(statement) is ast.AnnAssign and type(statement.target) is ast.Name:
            fields.append(statement.target.id)
            if statement.value is not None:
                text = _expression(statement.value, lines)
                if text is not None:
                    attributes[statement.target.id] = text
        elif type(statement) is ast.Assign and len(statement.targets) == 1 and type(statement.targets[0]) is ast.Name:
            text = _expression(statement.value, lines)
            if text is not None:
                attributes[statement.targets[0].id] = text
        elif type(statement) is ast.FunctionDef:
            summary.functions[f"{node.name}.{statement.name}"] = _function(f"{node.name}.{statement.name}", statement, lines)
            _wrapped_attributes(statement, lines, wraps)
            _kept_objects(statement, lines, kept)
            if statement.name in ("__init__", "setup", "__post_init__") and _may_hold(lines, statement, ("self",)):
                for inner in _walk(statement):
                    if type(inner) is ast.Assign and len(inner.targets) == 1:
                        target = ast_dotted(inner.targets[0]) or ""
                        if target.startswith("self.") and target.count(".") == 1:
                            attribute = target[5:]
                            if attribute in attributes and attribute not in fields:
                                assigned_twice.add(attribute)
                            text = _expression(inner.value, lines)
                            if text is not None:
                                attributes[attribute] = text
    for name in assigned_twice:
        attributes.pop(name, None)
    once = [attribute for attribute, *_ in kept]
    # an attribute assigned twice in the class holds one object or the other: left out
    objects = {attribute: (method, source, index) for attribute, method, source, index in kept
               if once.count(attribute) == 1}
    return ClassSummary(node.name, bases, attributes, tuple(fields), record, wraps, objects)


def _wrapped_attributes(method: ast.FunctionDef, lines: list[str], wraps: dict[str, tuple[str, str]]) -> None:
    """`self.X = DDP(...)` (or FSDP, or `DDP(...) if ... else ...`) in a method: X is wrapped
    for data parallelism when that method runs."""
    if not _may_hold(lines, method, WRAP_CALLEES):
        return
    for inner in _walk(method):
        if type(inner) is not ast.Assign or len(inner.targets) != 1:
            continue
        target = ast_dotted(inner.targets[0]) or ""
        if not target.startswith("self.") or target.count(".") != 1:
            continue
        value = inner.value
        arms = [value.body, value.orelse] if type(value) is ast.IfExp else [value]
        if any(type(arm) is ast.Call and (ast_dotted(arm.func) or "").rsplit(".", 1)[-1] in WRAP_CALLEES for arm in arms):
            text = _expression(value, lines)
            if text is not None:
                wraps.setdefault(target[5:], (method.name, text))


# What a method keeps on `self` that a subclass of another module uses as its own: an
# Accelerator it builds, and what that Accelerator's `prepare` returns (`_kept_objects`).
_KEPT_CALLEES = frozenset({"Accelerator", "prepare"})


def _kept_objects(method: ast.FunctionDef, lines: list[str], kept: list[tuple[str, str, str, Optional[int]]]) -> None:
    """`self.accelerator = Accelerator(...)` and `self.model, self.optimizer =
    self.accelerator.prepare(self.model, self.optimizer)` in a method: (attribute, method,
    source of the value, element of it) for each attribute that holds such an object
    when the method runs (an element of what `prepare` returns for each target of a tuple)."""
    if not _may_hold(lines, method, _KEPT_CALLEES):
        return
    for inner in _walk(method):
        if type(inner) is not ast.Assign or len(inner.targets) != 1 or type(inner.value) is not ast.Call:
            continue
        if (ast_dotted(inner.value.func) or "").rsplit(".", 1)[-1] not in _KEPT_CALLEES:
            continue
        text = _expression(inner.value, lines)
        target = inner.targets[0]
        elements = list(enumerate(target.elts)) if type(target) in (ast.Tuple, ast.List) else [(None, target)]
        for index, element in elements:
            name = ast_dotted(element) or ""
            if text is not None and name.startswith("self.") and name.count(".") == 1:
                kept.append((name[5:], method.name, text, index))


# What a function that builds an argparse parser calls (the end of the callee's name).
_PARSER_CALLS = ("ArgumentParser", "parse_args", "add_argument")


def _argparse(tree: ast.Module, lines: list[str]) -> tuple[set[str], dict[str, str]]:
    """Functions that build an argparse parser, and each `add_argument` default by dest.
    A dest added twice (two parsers) is dropped: its default is not known."""
    builders: set[str] = set()
    defaults: dict[str, str] = {}
    seen: set[str] = set()
    for node in _walk(tree):
        if type(node) is not ast.Call or type(node.func) is not ast.Attribute or node.func.attr != "add_argument":
            continue
        dest = next((k.value for k in node.keywords if k.arg == "dest"), None)
        dest_name = dest.value if type(dest) is ast.Constant and type(dest.value) is str else None
        if dest_name is None:
            names = [a.value for a in node.args if type(a) is ast.Constant and type(a.value) is str]
            longs = [n for n in names if n.startswith("--")]
            chosen = longs[0] if longs else (names[0] if names else None)
            dest_name = chosen.lstrip("-").replace("-", "_") if chosen else None
        if dest_name is None:
            continue
        if dest_name in seen:
            defaults.pop(dest_name, None)
            continue
        seen.add(dest_name)
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        if default is not None and type(default) is ast.Constant:
            defaults[dest_name] = repr(default.value)
    for node in tree.body:
        if type(node) is ast.FunctionDef and _may_hold(lines, node, _PARSER_CALLS) and any(
            type(n) is ast.Call and _callee_tail(n.func).endswith(_PARSER_CALLS)
            for n in _walk(node)
        ):
            builders.add(node.name)
    return builders, defaults


def _callee_tail(func: ast.AST) -> str:
    """The last name of a callee, also of a method of a computed value
    (`build_parser().parse_args`: "parse_args")."""
    if type(func) is ast.Attribute:
        return func.attr
    return func.id if type(func) is ast.Name else ""
