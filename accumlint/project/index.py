"""The view one analysis has of the project (`ProjectView`), over the index of module
summaries (`accumlint.project.modules`).

`ProjectView` is what
the model of one module asks: which project function a call runs (two calls
deep from the loop), what an imported name, a config object's field or an
argparse default holds, and which configuration files the module names. It
records every file it read with a hash of its content, so the result cache
can re-check the module when one of them changes.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Optional, TypeVar, Union

import libcst as cst

from accumlint.project.configs import ConfigError, ConfigFacts
from accumlint.project.modules import INDEX, ProjectIndex, digest, summary_of_text
from accumlint.project.root import resolve_module, resolve_submodule
from accumlint.model.facts import PLAIN_BASES
from accumlint.model.tree import children, walk
from accumlint.project.summary import (
    SCHEDULER,
    STEP,
    WRAP,
    CONFIG_LITERAL,
    WRAP_CALLEES,
    ClassSummary,
    FunctionSummary,
    ModuleSummary,
    Held,
    imports_and_configs,
    summarize,
)

if TYPE_CHECKING:
    from accumlint.model.facts import Binding, ModuleFacts

# How many `from a import b` re-exports a name is followed through.
MAX_HOPS = 4
# How many calls deep from the loop project functions are followed.
MAX_DEPTH = 2
# A method's calls of the other methods of its class (`self.name(`).
_SELF_CALL = re.compile(r"\bself\.(\w+)\(")

Symbol = Union[FunctionSummary, ClassSummary, "Constant", "ModuleRef"]
_Node = TypeVar("_Node", bound=cst.CSTNode)


@dataclass(frozen=True)
class Constant:
    module: ModuleSummary
    source: str


@dataclass(frozen=True)
class ModuleRef:
    module: ModuleSummary


def view_for(path: Optional[str], text: str, module: Optional[cst.Module] = None) -> Optional["ProjectView"]:
    """The view of the project for the module at `path` (None: not a file on disk, e.g.
    stdin). With its LibCST `module`, the view's own summary holds only what the model asks
    of it (imports, configuration files), read from that tree."""
    if not path or path == "-" or not path.endswith(".py") or not os.path.isfile(path):
        return None
    summary = imports_and_configs(path, text, module) if module is not None else summary_of_text(path, text)
    return ProjectView(INDEX, os.path.abspath(path), summary)


def view_for_file(path: str) -> Optional["ProjectView"]:
    """The view of the project for a module read from disk (its summary cached by the index)."""
    entry = INDEX.entry(path)
    if entry is None or entry.summary.error is not None:
        return None
    return ProjectView(INDEX, os.path.abspath(path), entry.summary)


@dataclass(eq=False)
class ProjectView:
    """What the model of one module may ask of the project."""

    index: ProjectIndex
    path: str
    summary: ModuleSummary
    reads: dict[str, str] = field(default_factory=dict)  # path -> sha256 of the content read
    _functions: dict[tuple[str, str, int], Optional[cst.FunctionDef]] = field(default_factory=dict)
    # id(foreign function node) -> (its module, its depth from the loop)
    _homes: dict[int, tuple[ModuleSummary, int]] = field(default_factory=dict)
    # id(call in a foreign function) -> that function: a call is resolved where it stands
    _call_homes: dict[int, cst.FunctionDef] = field(default_factory=dict)
    _symbols: dict[tuple[str, str], Optional[Symbol]] = field(default_factory=dict)
    # id(foreign function node) -> (the module parsed from its source alone, its summary, its file)
    _snippets: dict[int, tuple[cst.Module, FunctionSummary, str]] = field(default_factory=dict)
    _node_functions: dict[int, int] = field(default_factory=dict)  # id(node) -> id(its function)
    _indexed: set[int] = field(default_factory=set)  # the functions `_node_functions` covers
    _foreign: set[int] = field(default_factory=set)
    _keep: list[cst.CSTNode] = field(default_factory=list)
    _literals: list[tuple[str, str]] = field(default_factory=list)  # `_config_literals`, once found
    _literals_found: bool = False
    # (callee, index) that `returned_call` found no call for: asked again for every binding of the call
    _no_returned_call: set[tuple[str, Optional[int]]] = field(default_factory=set)

    @property
    def root(self) -> str:
        return self.index.root_of(self.path)

    # -- modules and names ---------------------------------------------------------
    def _module(self, path: Optional[str]) -> Optional[ModuleSummary]:
        if path is None:
            return None
        if os.path.abspath(path) == self.path:
            return self.summary
        entry = self.index.entry(path)
        if entry is None or entry.summary.error is not None:
            return None
        self.reads[path] = entry.digest
        return entry.summary

    def symbol(self, module: ModuleSummary, name: str, hops: int = 0) -> Optional[Symbol]:
        """What a dotted name means in `module`: a project function, class, literal
        constant or module; None when unknown or not the project's (asked once per view)."""
        key = (module.path, name)
        if key not in self._symbols:
            self._symbols[key] = None  # a name met again while it is being resolved (a cycle): unknown
            self._symbols[key] = self._symbol(module, name, hops)
        return self._symbols[key]

    def _symbol(self, module: ModuleSummary, name: str, hops: int) -> Optional[Symbol]:
        if hops > MAX_HOPS:
            return None
        head, _, rest = name.partition(".")
        found: Optional[Symbol] = None
        if head in module.functions and not rest:
            found = module.functions[head]
        elif head in module.classes:
            owner = module.classes[head]
            if not rest:
                return owner
            method = module.functions.get(f"{head}.{rest}")
            if method is not None:
                return method
            source = owner.attributes.get(rest)
            return Constant(module, source) if source is not None and _literal(source) else None
        elif head in module.constants and not rest:
            source = module.constants[head]
            return Constant(module, source) if _literal(source) else None
        elif head in module.imports:
            target, imported, level = module.imports[head]
            if imported is None:  # `import a.b` binds `a`; `import a.b as c` binds `c` to `a.b`
                base = target if target != head or "." in target else head
                return self._through_modules(module, base, level, rest, hops)
            source_module = self._module(resolve_module(self.root, module.path, target, level))
            inner = self.symbol(source_module, imported, hops + 1) if source_module is not None else None
            if inner is None:
                sub = self._module(resolve_submodule(self.root, module.path, target, level, imported))
                inner = ModuleRef(sub) if sub is not None else None
            if inner is None or not rest:
                return inner
            if type(inner) is ModuleRef:
                return self.symbol(inner.module, rest, hops + 1)
            if type(inner) is ClassSummary:
                return self.symbol(self._home_of_class(inner), f"{inner.name}.{rest}", hops + 1)
            return None
        else:
            return self._star_symbol(module, name, hops)
        return found

    def _star_symbol(self, module: ModuleSummary, name: str, hops: int) -> Optional[Symbol]:
        """A function that `from utils import *` brings into `module` (`_star_module`). Only
        functions: what else a star import binds stays unknown."""
        star = self._star_module(module, name)
        found = self.symbol(star, name, hops + 1) if star is not None else None
        return found if type(found) is FunctionSummary else None

    def star_imported(self, name: str) -> Optional[str]:
        """The dotted name a plain `name` stands for when a project module this one
        star-imports imports it from elsewhere (`from utilities import *`, whose `from
        torch.nn.utils import clip_grad_norm_` brings `clip_grad_norm_`). None when unknown,
        when that module defines the name itself, or imports it from another project module."""
        star = self._star_module(self.summary, name)
        if star is None or name not in star.imports or name in star.functions or name in star.classes \
                or name in star.constants:
            return None
        target, imported, level = star.imports[name]
        if level or imported == "*":
            return None  # a relative import: another project module's name
        return f"{target}.{imported}" if imported is not None else target

    def _star_module(self, module: ModuleSummary, name: str) -> Optional[ModuleSummary]:
        """The module whose `name` a star import brings into `module`: the last star-imported
        module that binds it, when every star import of `module` is a project module (a
        third-party one may bind the name too) and that module exports it (no `_` prefix, in
        `__all__` when it has one)."""
        stars = [(target, level) for target, imported, level in module.imports.values() if imported == "*"]
        if not stars or name.startswith("_") or "." in name:
            return None
        modules = [self._module(resolve_module(self.root, module.path, target, level)) for target, level in stars]
        for star in reversed(modules):
            if star is None:
                return None
            if name in star.functions or name in star.classes or name in star.constants or name in star.imports:
                exported = star.constants.get("__all__")
                return None if exported is not None and name not in _literal_names(exported) else star
        return None

    def _through_modules(self, module: ModuleSummary, base: str, level: int, rest: str, hops: int) -> Optional[Symbol]:
        parts = rest.split(".") if rest else []
        current = self._module(resolve_module(self.root, module.path, base, level))
        path = base
        while parts and current is None and len(path.split(".")) < 6:
            path = f"{path}.{parts.pop(0)}"
            current = self._module(resolve_module(self.root, module.path, path, level))
        if current is None:
            return None
        if not parts:
            return ModuleRef(current)
        return self.symbol(current, ".".join(parts), hops + 1)

    def _home_of_class(self, owner: ClassSummary) -> ModuleSummary:
        for entry in self.index._entries.values():
            if entry.summary.classes.get(owner.name) is owner:
                return entry.summary
        return self.summary

    # -- functions -------------------------------------------------------------------
    def function(self, callee: Optional[str], within: Optional[cst.FunctionDef] = None) -> Optional[cst.FunctionDef]:
        """The project function (of another module) a call to `callee` runs, parsed, from
        the loop's module (`within` None) or from inside a helper; None beyond two calls
        deep, for a same-module function of the loop's module, and when unknown."""
        if callee is None or callee.endswith("()") or callee.startswith("self."):
            return None
        if within is None:
            module, depth = self.summary, 1
        else:
            home = self._homes.get(id(within))
            module, depth = (home[0], home[1] + 1) if home is not None else (self.summary, 2)
        if depth > MAX_DEPTH:
            return None
        head = callee.partition(".")[0]
        if module is self.summary and head not in module.imports and not (
                "." not in callee and any(imported == "*" for _, imported, _ in module.imports.values())):
            return None  # the module's own functions are the model's (`ModuleFacts.helper`)
        found = self.symbol(module, callee)
        if type(found) is not FunctionSummary or "." in found.name:
            return None
        return self._load(found, depth)

    def unwrapped_parameter(self, callee: Optional[str], within: Optional[cst.FunctionDef] = None) -> Optional[tuple[int, str]]:
        """For a call of a project function of another module that hands back its parameter's
        unwrapped module (`FunctionSummary.unwraps`), that parameter's position and name. It
        is read from the summary, so a call at any depth of the helpers the loop walks is
        answered (`within`: the helper the call is in)."""
        if callee is None or callee.endswith("()") or callee.startswith("self."):
            return None
        home = self._homes.get(id(within)) if within is not None else None
        module = home[0] if home is not None else self.summary
        if module is self.summary and callee.partition(".")[0] not in module.imports:
            return None
        found = self.symbol(module, callee)
        return found.unwraps if type(found) is FunctionSummary and "." not in found.name else None

    def method(self, owner: str, name: str) -> Optional[cst.FunctionDef]:
        """The method `name` of a project class of another module, parsed, for a call on one
        of its instances: `owner` is the class as the loop's module names it (`Helper` for
        `self.helper = Helper(...)`). None when unknown. Its body is read, never walked as
        part of the loop."""
        found = self._method(owner, name)
        return self._load(found, 1) if found is not None else None

    def plain_class(self, owner: str) -> bool:
        """`owner` (as the loop's module names it) is a project class of another module that
        derives from nothing but `object` (`PLAIN_BASES`) and defines no `__getattr__`; False
        when unknown."""
        if owner.endswith("()") or owner.partition(".")[0] not in self.summary.imports:
            return False
        found = self.symbol(self.summary, owner)
        return type(found) is ClassSummary and self._plain(found, 0)

    def _plain(self, owner: ClassSummary, depth: int) -> bool:
        """A project class whose bases are `object` or plain project classes themselves (a few
        levels up, `class Engine(BaseEngine)` with `class BaseEngine:` in another module), none
        defining `__getattr__`."""
        home = self._home_of_class(owner)
        if depth > 3 or self.symbol(home, f"{owner.name}.__getattr__") is not None:
            return False
        for base in owner.bases:
            if base in PLAIN_BASES:
                continue
            parent = self.symbol(home, base) if re.fullmatch(r"[\w.]+", base) else None
            if type(parent) is not ClassSummary or parent is owner or not self._plain(parent, depth + 1):
                return False
        return True

    def class_bases(self, owner: str) -> tuple[str, ...]:
        """The bases of `owner` (as the loop's module names it), a project class of another
        module, as its own module writes them (`("IterableDataset",)`); empty when unknown."""
        if owner.endswith("()") or owner.partition(".")[0] not in self.summary.imports:
            return ()
        found = self.symbol(self.summary, owner)
        return found.bases if type(found) is ClassSummary else ()

    def module_constant(self, name: str) -> Optional[str]:
        """The source of a module constant of another project module that `name` reads
        through the module itself (`import config.args as args` ... `args.accum_steps`):
        bound once at that module's top level. None when the head is not a project module
        (an object, an argparse namespace) or the constant is unknown."""
        head, _, attribute = name.rpartition(".")
        if not head or "." in attribute or head.partition(".")[0] not in self.summary.imports:
            return None
        found = self.symbol(self.summary, head)
        if type(found) is not ModuleRef:
            return None
        return found.module.constants.get(attribute)

    def maker_mentions(self, maker: str, word: "re.Pattern[str]") -> bool:
        """Whether the module that defines `maker` (a project class or function of another
        module, as the loop's module names it) holds `word` in its text: what that module
        computes (a data pipeline that sizes whole windows with the accumulation setting).
        False when unknown."""
        if maker.endswith("()"):
            return False
        home: Optional[ModuleSummary] = None
        if maker.partition(".")[0] in self.summary.imports:
            found = self.symbol(self.summary, maker)
            if type(found) is ClassSummary:
                home = self._home_of_class(found)
            elif type(found) is FunctionSummary:
                home = self._module_of_function(found)
        elif "." not in maker:  # `from pkg.data import *`: the star-imported project module that defines it
            for target, imported, level in self.summary.imports.values():
                star = self._module(resolve_module(self.root, self.path, target, level)) if imported == "*" else None
                if star is not None and (maker in star.classes or maker in star.functions):
                    home = star
        return home is not None and home is not self.summary and any(word.search(line) for line in home.lines)

    def method_steps(self, owner: str, name: str) -> bool:
        """Whether that method, or a method of its class it calls (`self.name(...)`), steps
        an optimizer."""
        found = self._method(owner, name)
        if found is None:
            return False
        if STEP in found.effects:
            return True
        home = self._owner(found)
        prefix = found.name.rpartition(".")[0]
        return home is not None and any(
            sibling is not None and STEP in sibling.effects
            for sibling in (home.functions.get(f"{prefix}.{called}") for called in set(_SELF_CALL.findall(found.source)))
        )

    def _method(self, owner: str, name: str) -> Optional[FunctionSummary]:
        if owner.endswith("()") or owner.partition(".")[0] not in self.summary.imports:
            return None
        found = self.symbol(self.summary, f"{owner}.{name}")
        return found if type(found) is FunctionSummary and "." in found.name else None

    def _load(self, found: FunctionSummary, depth: int) -> Optional[cst.FunctionDef]:
        """A function or method of another module parsed, known as read `depth` calls deep."""
        owner = self._owner(found)
        if owner is None or owner is self.summary:
            return None
        key = (owner.path, found.name, depth)
        if key not in self._functions:
            parsed = _parsed_function(owner.path, self.reads.get(owner.path), found, depth)
            node = parsed.node
            self._functions[key] = node
            if node is not None:
                self._homes[id(node)] = (owner, depth)
                self._snippets[id(node)] = (parsed.snippet, found, owner.path)
                self._foreign.update(parsed.ids)
                self._keep.append(node)  # ids stay unique while the view lives
                for call in parsed.calls:
                    self._call_homes[id(call)] = node
        return self._functions[key]

    def _owner(self, function: FunctionSummary) -> Optional[ModuleSummary]:
        for path in self.reads:
            entry = self.index._entries.get(path)
            if entry is not None and entry.summary.functions.get(function.name) is function:
                return entry.summary
        return self.summary if self.summary.functions.get(function.name) is function else None

    def position(self, node: cst.CSTNode) -> Optional[tuple[str, int, int, int, int]]:
        """Where a node read from another module stands: (file, line, column, end line,
        end column), 1-based; None when it was not read from a project function."""
        from accumlint.model.positions import positions_of

        found = self.snippet_of(node)
        if found is None:
            return None
        snippet, summary, path = found
        where = positions_of(snippet, [node]).get(node)
        if where is None:
            return None
        offset = summary.line - 1
        first = summary.lines[offset]
        shift = len(first) - len(first.lstrip(" \t")) + 1  # a method's source is read dedented
        return (path, where.start.line + offset, where.start.column + shift, where.end.line + offset,
                where.end.column + shift)

    def snippet_of(self, node: cst.CSTNode) -> Optional[tuple[cst.Module, FunctionSummary, str]]:
        """The project function a node was read from: the module LibCST made of its
        definition alone, its summary (where it stands) and its file; None when the node
        stands in the analysed module."""
        if len(self._indexed) < len(self._snippets):
            for function_id, (snippet, _, _) in self._snippets.items():
                if function_id in self._indexed:
                    continue
                self._indexed.add(function_id)
                for inner in walk(snippet):
                    self._node_functions[id(inner)] = function_id
        function_id = self._node_functions.get(id(node))
        return self._snippets[function_id] if function_id is not None else None

    def _adopted(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """Every content node under `node` (tokens need no mark), now known to stand
        outside the analysed module."""
        found = list(walk(node))
        self._foreign.update(id(inner) for inner in found)
        self._keep.append(node)  # ids stay unique while the view lives
        return found

    def adopt(self, node: _Node) -> _Node:
        """Mark a node made from another module's facts (a value, a returned call) as foreign."""
        self._adopted(node)
        return node

    def owns(self, node: cst.CSTNode) -> bool:
        """Whether a node was read from another module (or made from its facts)."""
        return id(node) in self._foreign

    def home_of_call(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The foreign function a call stands in (None: it stands in the analysed module)."""
        return self._call_homes.get(id(call))

    def is_foreign(self, function: cst.CSTNode) -> bool:
        return id(function) in self._homes

    def home_path(self, function: cst.CSTNode) -> Optional[str]:
        """The path of the module a foreign function was read from (None: the analysed module's own)."""
        home = self._homes.get(id(function))
        return home[0].path if home is not None else None

    def returned_call(self, callee: Optional[str], index: Optional[int] = None) -> Optional[cst.Call]:
        """For a call of a project function that wraps a model or builds a scheduler and
        returns calls of one callee (`return DDP(model, ...)`, in every arm), that call with its callee written in
        full (`torch.nn.parallel.DistributedDataParallel`), so the caller's module reads it
        whatever it imports. With `index`, the element at that position of the tuples it
        returns (`model, opt = setup_ddp(model, opt)` with `return model, opt`). A function
        that returns what another project function returns (`return wrap_ddp(net, rank)`)
        is followed to it: two calls deep from the caller."""
        if callee is None or callee.partition(".")[0] not in self.summary.imports:
            return None
        asked = (callee, index)
        if asked in self._no_returned_call:  # the view's answers do not change while it lives
            return None
        found = self._returned_call(self.summary, callee, index, 1)
        if found is None:
            self._no_returned_call.add(asked)
        return found

    def _returned_call(self, module: ModuleSummary, callee: str, index: Optional[int], depth: int) -> Optional[cst.Call]:
        found = self.symbol(module, callee)
        if type(found) is not FunctionSummary:
            return None
        owner = self._owner(found)
        through = not found.effects & {WRAP, SCHEDULER}
        if owner is None or (through and (depth >= MAX_DEPTH or not (
                _RETURNS_A_CALL.search(found.source) or _calls_a_builder(owner, found)))):
            return None  # most functions return no call at all: nothing to parse
        node, values = _returned_values(found.source)
        if node is None:
            return None
        if through:
            return self._returned_through(owner, list(_bound_returns(found.source)), index, depth)
        returned = list(values)
        if index is not None:
            tuples = [v for v in returned if type(v) is cst.Tuple and len(v.elements) > index]
            if len(tuples) != len(returned):
                return None
            returned = [v.elements[index].value for v in tuples]
        returns = [value for r in returned for value in _through_wrapped_local(node, r)]
        returns = _without_unwrapped_parameter(node, returns)
        calls = [value for value in returns if type(value) is cst.Call]
        if not calls or len(calls) != len(returns):
            return None
        # arms that build the same thing with other options (`DDP(m, static_graph=True)` on
        # a newer torch, `DDP(m)` otherwise) return one kind of object
        names = {_dotted(value.func) for value in calls}
        call = calls[0]
        name = _dotted(call.func)
        if name is None or len(names) != 1:
            return None
        full = _qualified_callee(owner, name)
        if full is None:
            return None  # a callee the helper's module defines itself: unknown here
        return self.adopt(call.with_changes(func=cst.parse_expression(full)))

    def _returned_through(self, owner: ModuleSummary, returned: list[Optional[cst.BaseExpression]],
                          index: Optional[int], depth: int) -> Optional[cst.Call]:
        """What a function returns (`returned`, the values of its `return` statements) when
        each is a call of one project function of its module's (an element of its tuples,
        with `index`), followed there."""
        if depth >= MAX_DEPTH:
            return None
        inner_index = index  # `return setup(model, opt)`: the element of what `setup` returns
        tuples = [v for v in returned if isinstance(v, cst.Tuple)]
        if index is not None and returned and len(tuples) == len(returned):
            if any(len(v.elements) <= index for v in tuples):
                return None
            returned, inner_index = [v.elements[index].value for v in tuples], None
        names = {_dotted(v.func) if isinstance(v, cst.Call) else None for v in returned}
        name = names.pop() if len(names) == 1 else None
        if name is None or name.endswith("()") or name.startswith("self."):
            return None
        return self._returned_call(owner, name, inner_index, depth + 1)

    def passed_by_callers(self, function: str, parameter: str, position: int) -> Optional[list[tuple[ModuleSummary, Held]]]:
        """What each project caller of this module's top-level `function` passes as its
        `parameter` (at `position`, or by keyword): the caller's summary and what the name
        it passes holds there (`Held`). Callers are every module that imports this one and
        names the function, under any alias, inside a loop or not; empty when none is found.
        None when it is unknown: a caller that cannot be read, a function also named
        otherwise (a base class, a callback handed on), a call that passes `*args` or
        leaves the parameter to its default, or a project too large to read whole."""
        from accumlint.project.importers import callers_of, dependency

        found = callers_of(self.root, self.path, function)
        key, fingerprint = dependency(self.root, self.path, [function], callers=True)
        self.reads[key] = fingerprint  # a module that starts (or stops) calling it changes the answer
        if found is None:
            return None
        passed: list[tuple[ModuleSummary, Held]] = []
        for other, _ in found:
            entry = self.index.entry(other)
            if entry is None or entry.summary.error is not None:
                return None  # a module that may call it cannot be read: what it passes is unknown
            callees = self._names_of(entry.summary, other, function)
            if not callees:
                continue  # it names another module's function of that name
            self.reads[other] = entry.digest
            if callees & entry.summary.named_otherwise():
                return None  # also named otherwise (a base class, a callback handed on): callers unknown
            for call in entry.summary.passes():
                if call.callee not in callees:
                    continue
                if parameter in call.keywords:
                    passed.append((entry.summary, call.keywords[parameter]))
                elif position < len(call.positional):
                    passed.append((entry.summary, call.positional[position]))
                else:
                    return None  # `*args`, `**options`, or left to its default: unknown
        return passed

    def callers_pass_built_elsewhere(self, function: str, parameter: str, position: int) -> bool:
        """Some project caller of `function` passes as `parameter` an object that a call other
        than a `torch.nn` loss class built (`criterion = build_criterion(cfg)`, a project
        loss class, a factory of another package): what the function receives is another
        module's object, whose reduction that module decides."""
        for caller, held in self.passed_by_callers(function, parameter, position) or ():
            for callee, _ in held or ():
                full = _qualified_callee(caller, callee) or ""
                if callee and not (full.startswith("torch.nn.") and full.endswith("Loss")):
                    return True
        return False

    def _names_of(self, module: ModuleSummary, path: str, function: str) -> set[str]:
        """The dotted names under which `module` (at `path`) calls this module's `function`
        (resolved here, not by `symbol`: the analysed module's own summary lists no functions)."""
        names: set[str] = set()
        for local, (target, imported, level) in module.imports.items():
            if imported == function:
                if resolve_module(self.root, path, target, level) == self.path:
                    names.add(local)
            elif imported is None:
                base = target if local == target.partition(".")[0] else local
                if resolve_module(self.root, path, target, level) == self.path:
                    names.add(f"{base}.{function}")
            elif resolve_submodule(self.root, path, target, level, imported) == self.path:
                names.add(f"{local}.{function}")  # `from pkg import engine`, `engine.train(...)`
        return names

    def inherited_objects(self, bases: list[str]) -> list[tuple[str, str, cst.BaseExpression, Optional[int]]]:
        """What base classes of other project modules keep on `self`: for a class of the
        analysed module with these bases (as written there), each (attribute, method that
        assigns it, the value with its callee written in full, the element taken of it),
        nearest class first. The values are data-parallel wraps (`self.model = DDP(...)`),
        an Accelerator (`self.accelerator = Accelerator(gradient_accumulation_steps=...)`)
        and what its `prepare` returns (`self.model, self.optimizer =
        self.accelerator.prepare(...)`). An assignment in a method that a class nearer the
        subclass redefines without calling the base's is left out: it never runs for the
        subclass's objects."""
        found: list[tuple[str, str, cst.BaseExpression, Optional[int]]] = []
        redefined: set[str] = set()
        level = [(self.summary, base) for base in bases]
        for _ in range(MAX_HOPS):
            following: list[tuple[ModuleSummary, str]] = []
            for module, base in level:
                owner = self.symbol(module, base) if base else None
                if type(owner) is not ClassSummary:
                    continue
                home = self._home_of_class(owner)
                if home is not self.summary:  # the analysed module's own classes are the model's
                    for attribute, (method, source) in owner.wraps.items():
                        expression = self._qualified_wrap(home, source)
                        if method not in redefined and expression is not None:
                            found.append((attribute, method, expression, None))
                    for attribute, (method, source, index) in owner.kept.items():
                        expression = self._qualified_call(home, source)
                        if method not in redefined and expression is not None:
                            found.append((attribute, method, expression, index))
                for name, function in home.functions.items():
                    cls, _, method = name.partition(".")
                    if cls == owner.name and method and f".{method}(" not in function.source:
                        redefined.add(method)
                following.extend((home, inner) for inner in owner.bases)
            level = following
        return found

    def _qualified_call(self, home: ModuleSummary, source: str) -> Optional[cst.BaseExpression]:
        """A call of `home`, its callee written in full when `home` imports it (`Accelerator(...)`
        as `accelerate.Accelerator(...)`), as it is when it is a method (`self.accelerator.prepare(...)`)."""
        try:
            value = cst.parse_expression(source)
        except Exception:  # noqa: BLE001 - a text LibCST cannot read back: unknown
            return None
        if type(value) is not cst.Call:
            return None
        return self.adopt(_with_full_callee(home, value) or value)

    def _qualified_wrap(self, home: ModuleSummary, source: str) -> Optional[cst.BaseExpression]:
        """A wrapping expression of `home` with each wrapping callee written in full."""
        try:
            value = cst.parse_expression(source)
        except Exception:  # noqa: BLE001 - a text LibCST cannot read back: unknown
            return None
        arms = [value.body, value.orelse] if type(value) is cst.IfExp else [value]
        replacements: dict[cst.BaseExpression, cst.BaseExpression] = {}
        for arm in arms:
            full = _with_full_callee(home, arm) if type(arm) is cst.Call else None
            if full is not None:
                replacements[arm] = full
        if not replacements:
            return None
        if type(value) is cst.IfExp:
            value = value.with_changes(body=replacements.get(value.body, value.body),
                                       orelse=replacements.get(value.orelse, value.orelse))
        else:
            value = replacements[value]
        return self.adopt(value)

    # -- values ------------------------------------------------------------------------
    def module_bindings(self, function: cst.CSTNode, name: str) -> Optional[list["Binding"]]:
        """The module-level bindings of a plain `name` that a function read from another
        module (`function`) sees: its own module's, never the analysed module's (both may bind
        `criterion`). A constant bound once there is parsed, a call's callee written in full
        through that module's imports (`nn.CrossEntropyLoss()` as `torch.nn.CrossEntropyLoss()`);
        a callee that module defines itself, any other name, or a value it binds otherwise:
        unknown, no binding. None when `function` was not read from another module."""
        home = self._homes.get(id(function))
        if home is None:
            return None
        return self._module_binding(home[0], name)

    def _module_binding(self, module: ModuleSummary, name: str) -> list["Binding"]:
        """The module-level binding of `name` in `module`, as any module may read it: a
        literal constant, or a call whose callee is written in full through `module`'s
        imports (`nn.CrossEntropyLoss()` as `torch.nn.CrossEntropyLoss()`); a callee the
        module defines itself, any other value, or a name it imports: no binding."""
        from accumlint.model.facts import Binding

        source = module.constants.get(name)
        if source is None or name in module.imports:
            return []
        try:
            value = cst.parse_expression(source)
        except Exception:  # noqa: BLE001 - a text LibCST cannot read back: unknown
            return []
        if type(value) is cst.Call:
            full = _qualified_callee(module, _dotted(value.func) or "")
            if full is None:
                return []
            value = value.with_changes(func=cst.parse_expression(full))
        elif not _literal(source):
            return []
        return [Binding(name, self.adopt(value), None, value)]

    def _imported_object(self, name: str) -> list["Binding"]:
        """`from objectives import criterion` with `criterion = nn.CrossEntropyLoss()` at the
        top of the project module `objectives`: that module's binding, its callee written in
        full (a `torch.nn` object, a loss: built the same whoever imports it). A name that
        module imports in turn, builds from its own class or from another library (an
        optimizer, an accelerator, whose other facts the importer cannot see), stays unknown."""
        imported = self.summary.imports.get(name)
        if imported is None:
            return []
        target, what, level = imported
        if what is None or what == "*":
            return []
        source_module = self._module(resolve_module(self.root, self.summary.path, target, level))
        if source_module is None:
            return []
        found = self._module_binding(source_module, what)
        value = found[0].value if found else None
        if type(value) is not cst.Call or not (_dotted(value.func) or "").startswith("torch.nn."):
            return []
        return found

    def bindings(self, name: str, facts: "ModuleFacts") -> list["Binding"]:
        """Bindings of `name` that the project knows: an imported literal constant
        (`from config import ACCUM_STEPS`, `config.ACCUM_STEPS`), a field of a project
        dataclass / NamedTuple / class built in the module (`cfg = TrainConfig()` then
        `cfg.grad_accum`), an argparse default (`args = parse_args()` then `args.accum`)."""
        from accumlint.model.facts import Binding

        head, _, rest = name.partition(".")
        source: Optional[str] = None
        if head in facts.imports and head not in facts.bindings and head in self.summary.imports:
            found = self.symbol(self.summary, name)
            source = found.source if type(found) is Constant else None
            if found is None and not rest:
                return self._imported_object(name)
        elif rest and "." not in rest and head in facts.bindings:
            source = self._field(facts, head, rest)
        if source is None:
            return []
        try:
            value = cst.parse_expression(source)
        except Exception:  # noqa: BLE001 - a text LibCST cannot read back: unknown
            return []
        return [Binding(name, self.adopt(value), None, value)]

    def parsed_arguments(self, facts: "ModuleFacts", head: str) -> bool:
        """Whether the module binds `head` once to the command line's parsed arguments
        (`args = parser.parse_args()`, `args = parse_options()` of a project function that
        builds or parses an argparse parser): its fields' defaults are not the run's values."""
        values = facts.bindings.get(head, [])
        if len(values) != 1 or type(values[0].value) is not cst.Call:
            return False
        callee = _dotted(values[0].value.func) or ""
        if callee.endswith((".parse_args", ".parse_known_args")):
            return True
        if callee.partition(".")[0] not in self.summary.imports:
            return False
        found = self.symbol(self.summary, callee)
        return type(found) is FunctionSummary and found.name in self._module_of_function(found).argparse_builders

    def _field(self, facts: "ModuleFacts", head: str, attribute: str) -> Optional[str]:
        values = facts.bindings.get(head, [])
        if len(values) != 1 or values[0].index is not None or type(values[0].value) is not cst.Call:
            return None
        call = values[0].value
        callee = _dotted(call.func)
        if callee is None:
            return None
        if callee.endswith(".parse_args") or callee.endswith(".parse_known_args"):
            return self._argparse_default(facts, callee.rpartition(".")[0], attribute)
        if callee.partition(".")[0] not in self.summary.imports:
            return None
        found: Optional[Symbol] = self.symbol(self.summary, callee)
        if type(found) is FunctionSummary and found.name in self._module_of_function(found).argparse_builders:
            return self._module_of_function(found).argparse_defaults.get(attribute)
        if type(found) is FunctionSummary:  # `cfg = default_config()` that returns `RunConfig(...)`
            found, call = self._returned_instance(found) or (None, call)
        if type(found) is not ClassSummary:
            return None
        if any(arg.star for arg in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == attribute:
                return None  # the call's own keyword: the module's binding says it
        positional = [arg for arg in call.args if arg.keyword is None]
        if positional and (not found.record or attribute not in found.fields
                           or found.fields.index(attribute) < len(positional)):
            return None
        source = found.attributes.get(attribute)
        if attribute in found.fields and not found.record:
            return None
        return source if source is not None and _literal(source) else None

    def _returned_instance(self, function: FunctionSummary) -> Optional[tuple[ClassSummary, cst.Call]]:
        """For a project function whose one `return` builds an object of a project class
        (`def default_config(): return RunConfig(lr=3e-4)`), that class and that call."""
        try:
            tree = ast.parse(function.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        returns = [n for n in ast.walk(tree) if type(n) is ast.Return]
        if len(returns) != 1 or type(returns[0].value) is not ast.Call:
            return None
        returned = returns[0].value
        name = ast.unparse(returned.func)
        owner = self._module_of_function(function)
        found = self.symbol(owner, name) if re.fullmatch(r"[\w.]+", name) else None
        if type(found) is not ClassSummary:
            return None
        try:
            call = cst.parse_expression(ast.unparse(returned))
        except Exception:  # noqa: BLE001 - a text LibCST cannot read back: unknown
            return None
        return (found, call) if type(call) is cst.Call else None

    def _argparse_default(self, facts: "ModuleFacts", parser: str, attribute: str) -> Optional[str]:
        """`args = build_parser().parse_args()` or `parser = build_parser()` ... `parser.parse_args()`."""
        builder = parser[:-2] if parser.endswith("()") else None
        if builder is None:
            values = facts.bindings.get(parser, [])
            if len(values) != 1 or type(values[0].value) is not cst.Call:
                return None
            builder = _dotted(values[0].value.func)
        if builder is None or builder.partition(".")[0] not in self.summary.imports:
            return None
        found = self.symbol(self.summary, builder)
        if type(found) is not FunctionSummary:
            return None
        module = self._module_of_function(found)
        if found.name not in module.argparse_builders:
            return None
        return module.argparse_defaults.get(attribute)

    def _module_of_function(self, function: FunctionSummary) -> ModuleSummary:
        return self._owner(function) or self.summary

    def imported_modules(self) -> list[str]:
        """The project modules the module's imports name (what a check may read of them)."""
        return imported_modules(self.root, self.path, self.summary.imports)

    # -- configuration files ---------------------------------------------------------------
    def configs(self) -> tuple[list[ConfigFacts], list[ConfigError]]:
        """The configuration files the module names by a literal path that exist in the project."""
        facts: list[ConfigFacts] = []
        errors: list[ConfigError] = []
        root = self.root
        folder = os.path.dirname(self.path)
        for literal, named_in in self._config_literals():
            for base in (folder, named_in, root, os.getcwd()):
                candidate = os.path.normpath(os.path.join(base, literal))
                if not (candidate == root or candidate.startswith(root.rstrip(os.sep) + os.sep)):
                    continue
                if os.path.isfile(candidate):
                    found = self.index.config(candidate)
                    if found is not None:
                        try:
                            with open(candidate, "rb") as handle:
                                self.reads[candidate] = digest(handle.read())
                        except OSError:
                            pass
                    if isinstance(found, ConfigFacts):
                        facts.append(found)
                    elif isinstance(found, ConfigError):
                        errors.append(found)
                    break
        return facts, errors

    def _config_literals(self) -> list[tuple[str, str]]:
        """The literal paths of configuration files the module names, each with the folder of
        the module that names it: the module's own string literals, and the argparse
        defaults of the project modules it imports (`--deepspeed_config` defaulting to
        `configs/ds.json` in the options module its `parse_args()` comes from)."""
        if self._literals_found:
            return self._literals
        folder = os.path.dirname(self.path)
        found = [(literal, folder) for literal in self.summary.config_paths]
        if self.summary.imports:
            for module in self.imported_modules():
                entry = self.index.entry(module, mentioning="add_argument")  # most modules build no parser
                if entry is None or not entry.summary.argparse_defaults:
                    continue
                self.reads[module] = entry.digest
                for default in entry.summary.argparse_defaults.values():
                    found.extend((literal, os.path.dirname(module)) for literal in CONFIG_LITERAL.findall(default))
        self._literals, self._literals_found = found, True
        return found

    def deepspeed_config(self) -> Optional[ConfigFacts]:
        """The one DeepSpeed JSON the module names (None: none, or several)."""
        found = [c for c in self.configs()[0] if c.kind == "deepspeed"]
        return found[0] if len({c.path for c in found}) == 1 else None

    def accelerate_deepspeed_accumulation(self) -> Optional[int]:
        """K of the one accelerate config the module names, when it runs DeepSpeed (None:
        none, several, another `distributed_type`, or no K in it). Only there does
        `accelerate launch` hand the config's K to the Accelerator."""
        found = {c.accumulation_steps for c in self.configs()[0]
                 if c.kind == "accelerate" and c.distributed_type == "DEEPSPEED"}
        return found.pop() if len(found) == 1 else None

    def lightning_accumulation(self) -> Optional[int]:
        found = {c.accumulation_steps for c in self.configs()[0] if c.kind == "lightning"}
        return found.pop() if len(found) == 1 else None


def imported_modules(root: str, path: str, imports: dict[str, tuple[str, Optional[str], int]]) -> list[str]:
    """The project modules that the imports (`ModuleSummary.imports`) of the module at `path`
    (absolute) name, in the project rooted at `root`, sorted."""
    found: set[str] = set()
    for target, imported, level in imports.values():
        module = resolve_module(root, path, target, level)
        if module is None and imported is not None:
            module = resolve_submodule(root, path, target, level, imported)
        elif imported is not None:
            sub = resolve_submodule(root, path, target, level, imported)
            found.update([sub] if sub is not None else [])
        if module is not None and os.path.abspath(module) != path:
            found.add(module)
    return sorted(found)


def imports_module(path: str, target: str) -> bool:
    """Whether the module at `path` imports the project module at `target` (absolute), as the
    imports of its view (`view_for_file(path).imported_modules()`) say; read without
    summarising the module (`ProjectIndex.imports`): most modules asked are not analysed."""
    imports = INDEX.imports(path)
    if imports is None:
        return False
    return target in {os.path.abspath(m) for m in imported_modules(INDEX.root_of(path), os.path.abspath(path), imports)}


def _literal(source: str) -> bool:
    """A value written as a Python literal (numbers, strings, containers of them), or a
    `dict(key=literal, ...)` call (a `**kwargs` dict written with keywords): a value that
    means the same read from any module."""
    try:
        ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _keyword_dict(source)
    return True


def _literal_names(source: str) -> frozenset[str]:
    """The strings of a literal list or tuple (`__all__ = ["seq_loss", ...]`); empty otherwise."""
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return frozenset()
    return frozenset(v for v in value if type(v) is str) if type(value) in (list, tuple) else frozenset()


def _keyword_dict(source: str) -> bool:
    """`dict(mixed_precision="bf16", gradient_accumulation_steps=4)`: only keywords, each a literal."""
    if not source.startswith("dict("):
        return False
    try:
        call = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    if type(call) is not ast.Call or type(call.func) is not ast.Name or call.func.id != "dict" or call.args:
        return False
    try:
        for keyword in call.keywords:
            if keyword.arg is None:
                return False
            ast.literal_eval(keyword.value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _qualified_callee(module: ModuleSummary, callee: str) -> Optional[str]:
    """A wrap's callee as written in `module`, in full through its imports (None: plain,
    or a callee the module defines itself)."""
    if not callee:
        return None
    head, _, rest = callee.partition(".")
    imported = module.imports.get(head)
    if imported is None or imported[2] != 0:
        return None
    target, what, _ = imported
    qualified = f"{target}.{what}" if what else target
    return f"{qualified}.{rest}" if rest else qualified


def _with_full_callee(module: ModuleSummary, call: cst.Call) -> Optional[cst.Call]:
    """`call`, of `module`, with its callee written in full through `module`'s imports
    (`DDP(m)` as `torch.nn.parallel.DistributedDataParallel(m)`); None when the callee is not
    imported there."""
    full = _qualified_callee(module, _dotted(call.func) or "")
    return None if full is None else call.with_changes(func=cst.parse_expression(full))


def _names_a_wrap(callee: Optional[str]) -> bool:
    """A callee that wraps a model for data parallelism, by its last part (`DDP`,
    `torch.nn.parallel.DistributedDataParallel`, `fully_shard`)."""
    return (callee or "").rpartition(".")[2] in WRAP_CALLEES


def _dotted(node: cst.BaseExpression) -> Optional[str]:
    from accumlint.model.names import dotted

    return dotted(node)


class _Parsed(NamedTuple):
    """A function of another module parsed alone (`_parsed_function`): the module LibCST
    made of its definition, the definition, the ids of every content node under it (what
    a view marks as foreign) and its calls (each resolved where it stands)."""

    snippet: Optional[cst.Module]
    node: Optional[cst.FunctionDef]
    ids: frozenset[int]
    calls: tuple[cst.Call, ...]
    source: str  # the text parsed


# (file, digest of its content, function, depth) -> the function parsed, most recently used last
_PARSED: "OrderedDict[tuple[str, str, str, int], _Parsed]" = OrderedDict()
# What `_PARSED` may hold: functions, and characters of their source in all.
MAX_PARSED = 512
MAX_PARSED_CHARS = 2_000_000
_parsed_chars = 0


def _parsed_function(path: str, content: Optional[str], function: FunctionSummary, depth: int) -> _Parsed:
    """A function of the module at `path` (whose content has the digest `content`; None:
    unknown) parsed alone, as a view reads it `depth` calls deep from the loop. Every view
    of the process that reads it at that depth shares one parse (LibCST's nodes never
    change; each view marks them as its own), so a helper that many checked modules call
    is parsed once per worker, not once per caller. A new content of the file is a new
    key: a changed file is read again. Bounded in functions and characters (the least
    recently read go first)."""
    global _parsed_chars
    key = (path, content or "", function.name, depth)
    found = _PARSED.get(key) if content is not None else None
    if found is not None and found.source == function.source:
        _PARSED.move_to_end(key)
        return found
    snippet, node = _parse_function_source(function.source)
    inner = list(walk(node)) if node is not None else []
    found = _Parsed(snippet, node, frozenset(id(n) for n in inner), tuple(n for n in inner if type(n) is cst.Call),
                    function.source)
    if content is None:
        return found
    replaced = _PARSED.pop(key, None)
    _parsed_chars -= len(replaced.source) if replaced is not None else 0
    _PARSED[key] = found
    _parsed_chars += len(found.source)
    while len(_PARSED) > MAX_PARSED or _parsed_chars > MAX_PARSED_CHARS:
        _parsed_chars -= len(_PARSED.popitem(last=False)[1].source)
    return found


@functools.lru_cache(maxsize=1024)
def _returned_values(text: str) -> tuple[Optional[cst.FunctionDef], tuple[Optional[cst.BaseExpression], ...]]:
    """A function's definition parsed alone and the values of its own `return` statements,
    once per text (every module that imports the function asks what it returns). Read-only:
    what a caller keeps of them, it copies (`with_changes`)."""
    node = _parse_function_source(text)[1]
    return node, tuple(r.value for r in _returns(node)) if node is not None else ()


def _parse_function_source(text: str) -> tuple[Optional[cst.Module], Optional[cst.FunctionDef]]:
    source = text if text.endswith("\n") else text + "\n"
    from accumlint.source.parsing import parse_module

    try:
        module = parse_module(source)
    except Exception:  # noqa: BLE001 - what LibCST cannot parse stays unknown
        return None, None
    node = module.body[0] if module.body else None
    return (module, node) if type(node) is cst.FunctionDef else (None, None)


# a `return` statement whose value holds a call (`return wrap(model)`, `return m, build(o)`)
_RETURNS_A_CALL = re.compile(r"^[ \t]*return\b[^#\n]*[\w)\]][ \t]*\(", re.MULTILINE)


def _through_wrapped_local(function: cst.FunctionDef, value: Optional[cst.BaseExpression]) -> list[Optional[cst.BaseExpression]]:
    """A returned local name that the function binds to a DDP/FSDP call in some arm
    (`model = DDP(model, ...)` under `if num_gpus > 1:`, then `return model`) stands for
    that call: the caller's model is wrapped whenever the run is distributed. Anything
    else is returned as it is."""
    if type(value) is not cst.Name:
        return [value]
    wraps: list[Optional[cst.BaseExpression]] = []
    for node in walk(function.body):
        if type(node) is cst.Assign and len(node.targets) == 1 and _dotted(node.targets[0].target) == value.value:
            bound = node.value
            if type(bound) is cst.Call and _names_a_wrap(_dotted(bound.func)):
                wraps.append(bound)
    return wraps or [value]


def _calls_a_builder(module: ModuleSummary, function: FunctionSummary) -> bool:
    """Whether the function's source calls a function of its own module that wraps a model
    or builds a scheduler (`model = _wrap(net)` then `return model, opt`)."""
    return any(f"{name}(" in function.source for name, other in module.functions.items()
               if "." not in name and other is not function and other.effects & {WRAP, SCHEDULER})


@functools.lru_cache(maxsize=1024)
def _bound_returns(text: str) -> tuple[Optional[cst.BaseExpression], ...]:
    """The values of the `return` statements of the function defined by `text`
    (`_returned_values`), each through `_bound_call`, once per text: every module whose
    binding calls the function asks, and each asks again for every binding of that call.
    Read-only, as `_returned_values`' are."""
    node, values = _returned_values(text)
    if node is None:
        return ()
    bindings = _Bindings(node)
    return tuple(_bound_call(node, value, bindings) for value in values)


# The statements that may bind a local name (`_bound_call`).
_BINDING_STATEMENTS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.With, cst.NamedExpr)


class _Bindings:
    """The statements of a function that may bind a name, each with the names it reads or
    binds and the dotted names it binds, in the order `walk` meets them: read in one walk
    of the function, for every returned name `_bound_call` asks about."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.function = function
        self._found: Optional[list[tuple[cst.CSTNode, frozenset[str], tuple[Optional[str], ...]]]] = None

    def binding(self, name: str) -> list[cst.CSTNode]:
        """The statements that hold the name `name` and bind it (as a whole target or one
        element of a tuple target)."""
        if self._found is None:
            self._found = [
                (node, frozenset(n.value for n in walk(node) if type(n) is cst.Name), tuple(_dotted(t) for t in _targets(node)))
                for node in walk(self.function.body) if type(node) in _BINDING_STATEMENTS
            ]
        return [node for node, names, targets in self._found if name in names and name in targets]


def _bound_call(function: cst.FunctionDef, value: Optional[cst.BaseExpression],
                bindings: Optional[_Bindings] = None) -> Optional[cst.BaseExpression]:
    """A returned value, or the elements of a returned tuple, with each local name bound once
    in the function to a call replaced by that call (`model = _wrap(net)` ... `return model,
    opt`); a name bound otherwise or more than once is returned as it is. `bindings`, the
    function's binding statements read once (`_Bindings`), serves every name asked."""
    if bindings is None:
        bindings = _Bindings(function)
    if type(value) is cst.Tuple:
        return value.with_changes(elements=[e.with_changes(value=_bound_call(function, e.value, bindings))
                                            for e in value.elements])
    if type(value) is not cst.Name:
        return value
    bound = bindings.binding(value.value)
    if len(bound) != 1 or type(bound[0]) is not cst.Assign or type(bound[0].value) is not cst.Call:
        return value
    return bound[0].value


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """What a binding statement binds, as written (tuple targets spelled out one level)."""
    if type(node) is cst.Assign:
        found = [t.target for t in node.targets]
    elif type(node) is cst.With:
        found = [item.asname.name for item in node.items if item.asname is not None]
    else:
        target = getattr(node, "target", None)
        found = [target] if target is not None else []
    return [e.value for t in found if isinstance(t, (cst.Tuple, cst.List)) for e in t.elements] + found


def _without_unwrapped_parameter(function: cst.FunctionDef,
                                 returns: list[Optional[cst.BaseExpression]]) -> list[Optional[cst.BaseExpression]]:
    """A wrapping helper that hands back the model it was given unchanged in one arm
    (`if world_size == 1: return model`) and a DDP/FSDP call of it in another wraps the
    caller's model whenever the run is distributed: the returns of that parameter are
    left out, the wrap calls kept. When no return is a wrap call, nothing is left out."""
    parameters = {p.name.value for p in (*function.params.posonly_params, *function.params.params)}
    kept = [v for v in returns if not (type(v) is cst.Name and v.value in parameters)]
    wraps = [v for v in kept if type(v) is cst.Call and _names_a_wrap(_dotted(v.func))]
    return kept if kept and len(wraps) == len(kept) else returns


def _returns(function: cst.FunctionDef) -> list[cst.Return]:
    """The function's own `return` statements (not those of nested functions). Its content
    children only (`tree.children`): `CSTNode.children` copies each node it is asked of."""
    found: list[cst.Return] = []
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if type(node) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if type(node) is cst.Return:
            found.append(node)
            continue
        stack.extend(children(node))
    return found
