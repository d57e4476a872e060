"""The gate: which files LibCST gets to see, decided without LibCST.

LibCST is the expensive step of a check (about a dozen times the cost of
`ast.parse`) and the fragile one: it segfaults on long boolean chains, takes
minutes on long operator or attribute chains, and rejects some valid Python.
So a file goes through two cheap stages first:

1. the text (`might_hold_training_code`): most files of a tree never mention
   a `.backward(` call outside comments and string literals
   (`accumlint.source.literals`), `training_step`, `accumulate_grad_batches` or
   `def compute_loss`;
2. Python's own parser (`screen`), which gives three answers:
   - the truth about syntax: an error is reported at CPython's position, the
     one `python file.py` would show (tokenizer errors included);
   - whether the file can hold anything a rule reads (`holds_training_code`):
     most files whose text mentions `.backward(` hold no training loop at all;
   - for the files it keeps, how deeply LibCST's tree would nest: beyond
     MAX_NESTING the file is refused before LibCST runs (`Unanalysable`),
     instead of crashing or hanging.

Stage two reads only the parts of Python's tree that the text points at (the
lines of the backward calls and of the names of the functions that reach
them), so a large file without training code costs little more than its
`ast.parse`. Every test it makes is conservative: when in doubt it keeps
the file. Nothing here imports LibCST.

Most files that reach stage two in a training repository plainly hold a
loop (`plainly_holds_training_code`: a backward call indented under a
`for` or `while` header, a `training_step`...). For them Python's tree is
not needed: `compile` of the text gives the truth about syntax for less than
`ast.parse`, `nesting` and `compile(tree)` together, and run
with a small recursion budget it also bounds the nesting (`_compiles_within_bound`).
Any doubt there (an error, a budget too small, a thread that shares the
recursion limit) sends the file down the full stage two, so what a file is
told does not depend on which way it went.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import re
import sys
import threading
import warnings
from typing import Iterator, Optional

from accumlint.compat.collector import collector_paused
from accumlint.source import backward
from accumlint.compat.compile_budget import LEVELS_PER_FRAME, budget_bounds_compile, compiles_within
from accumlint.source.literals import literals_of, word_character
from accumlint.source.patterns import LazyPattern

# How deep the tree may nest (chains of operators, attributes, calls and
# subscripts count a level per link). LibCST's parse grows about
# quadratically with it (a 1,000-link subscript chain takes seconds) and its
# native parser overflows its stack on a few thousand boolean operands; real
# code stays far below a hundred, and CPython's own limits (200 nested
# brackets, 100 indentation levels) bound everything but chains.
MAX_NESTING = 400

# Methods a framework calls once per micro-batch: their bodies are loop bodies.
FRAMEWORK_HOOKS = frozenset({"training_step", "compute_loss"})
# Whose mere mention makes a module worth analysing.
ACCUMULATION_SETTING = "accumulate_grad_batches"
_COMPUTE_LOSS_DEF = LazyPattern(r"def\s+compute_loss\b")

_LOOP_STATEMENTS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def might_hold_training_code(text: str) -> bool:
    """Stage one, on the text: most files of a tree fail it."""
    return _might_hold(text, backward_calls_in_code(text))


def lone_carriage_returns_as_newlines(text: str) -> str:
    """The text with each line ending that is a carriage return alone (old Mac files,
    mixed endings: Python ends a line there too) made a line feed, which is what the
    gate's scans and line counts look for. The same length, so offsets, lines and
    columns are those of the text."""
    if "\r" not in text:
        return text
    return _LONE_CARRIAGE_RETURN.sub("\n", text)


_LONE_CARRIAGE_RETURN = LazyPattern(r"\r(?!\n)")


def text_stage(text: str) -> Optional[bool]:
    """Stage one and the shortcut's test of the text in one scan of it: None when the
    file cannot hold training code, else `plainly_holds_training_code` (for `screen`)."""
    text = lone_carriage_returns_as_newlines(text)
    calls = backward_calls_in_code(text)
    return _plainly_holds(text, calls) if _might_hold(text, calls) else None


def _might_hold(text: str, backward_calls: list[int]) -> bool:
    if backward_calls or ACCUMULATION_SETTING in text or "training_step" in text:
        return True
    return "compute_loss" in text and _COMPUTE_LOSS_DEF.search(text) is not None


def backward_calls_in_code(text: str) -> list[int]:
    """The offsets of the `.backward(` calls outside comments and plain string literals
    (a library's docstrings are full of them); when the scan of literals is not sure, all."""
    forms = backward.BACKWARD
    if not any(word in text for word in forms.search_words):  # the common case costs one search
        return []
    calls = [
        offset
        for method in forms.methods
        for offset in _word_offsets(text, method)
        if _method_call_at(text, offset, len(method))
    ]
    if not calls:
        return calls
    literals = literals_of(text)
    return calls if literals is None else [offset for offset in calls if not literals.hold(offset)]


def plainly_holds_training_code(text: str) -> bool:
    """Whether the text alone shows what `holds_training_code` looks for: a backward call
    indented under a `for` or `while` header, a `training_step` or `compute_loss`
    definition, `with ...accumulate(`, or the Lightning setting.

    A shortcut, not a verdict: a wrong yes costs one LibCST parse of a file with nothing
    to report (the model reads the same shapes), a wrong no costs stage two's tree."""
    return _plainly_holds(text, backward_calls_in_code(text))


def _plainly_holds(text: str, backward_calls: list[int]) -> bool:
    if ACCUMULATION_SETTING in text:
        return True
    if ("training_step" in text or "compute_loss" in text) and _HOOK_DEFINITION.search(text):
        return True
    if "accumulate" in text and _ACCUMULATE_CONTEXT.search(text):
        return True
    return any(_under_a_loop_header(text, offset) for offset in backward_calls if not _own_backward(text, offset))


_HOOK_DEFINITION = LazyPattern(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(?:training_step|compute_loss)\b", re.MULTILINE)
_ACCUMULATE_CONTEXT = LazyPattern(r"^[ \t]*(?:async[ \t]+)?with\b[^\n]*[.\s]accumulate[ \t]*\(", re.MULTILINE)
_LOOP_HEADER = LazyPattern(r"(?:async[ \t]+)?(?:for|while)\b[^#\n]*:[ \t]*(?:#[^\n]*)?$")


def _under_a_loop_header(text: str, offset: int) -> bool:
    """Whether, going up from the line of `offset`, some line indented less than every
    line between them is a one-line `for` or `while` header (blank and comment lines
    skipped; a bracketed or continued line can mislead it, which costs only time)."""
    start = text.rfind("\n", 0, offset) + 1
    indent = _indentation(text, start)
    while indent > 0 and start > 0:
        end = start - 1
        start = text.rfind("\n", 0, end) + 1
        width = _indentation(text, start)
        if start + width == end or text[start + width] == "#":
            continue  # a blank or comment line says nothing about blocks
        if width < indent:
            if _LOOP_HEADER.match(text, start + width, end):
                return True
            indent = width
    return False


def _indentation(text: str, start: int) -> int:
    """How many spaces and tabs begin the line that starts at `start`."""
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return end - start


def _own_backward(text: str, offset: int) -> bool:
    """`self.backward(` and `super().backward(` (or `super(Cls, self).backward(`): the
    class's own method, as for `is_backward_call` (a `manual_backward` is Lightning's,
    whatever its receiver)."""
    forms = backward.BACKWARD
    word = _WORD.match(text, offset)
    if word is None or word.group() in forms.method_flavors:
        return False
    return forms.own_receiver_before.search(text, text.rfind("\n", 0, offset) + 1, offset) is not None


_WORD = LazyPattern(r"\w+")


def _word_offsets(text: str, word: str) -> Iterator[int]:
    """Where an identifier occurs in the text as a whole word (code, strings and comments alike)."""
    size = len(word)
    position = text.find(word)
    while position >= 0:
        end = position + size
        if (position == 0 or not word_character(text[position - 1])) and (
            end == len(text) or not word_character(text[end])
        ):
            yield position
        position = text.find(word, end)


def _method_call_at(text: str, offset: int, size: int) -> bool:
    """Whether the word at `offset` reads `.word(` (spaces and line continuations allowed)."""
    before = offset - 1
    while before >= 0 and text[before] in _BLANKS:
        before -= 1
    after = offset + size
    while after < len(text) and text[after] in _BLANKS:
        after += 1
    return before >= 0 and text[before] == "." and after < len(text) and text[after] == "("


_BLANKS = frozenset(" \t\n\r\f\\")


def holds_training_code(tree: ast.Module, text: str) -> bool:
    """Whether a module can hold something a rule reads; False means "skip LibCST".

    Conservative on purpose (a file wrongly dropped loses real findings): a
    module is kept when any clause holds. Add a clause when a rule reports on
    modules these do not keep; the gate test runs this over every fixture and
    every rule document's example.
    """
    if ACCUMULATION_SETTING in text:
        return True
    lines = _Lines(tree, text)
    if lines.functions_named(FRAMEWORK_HOOKS):
        return True  # the framework runs the loop around a `training_step` / `compute_loss`
    if any(_accumulate_context(path) for line in lines.mentions("accumulate") for path in lines.paths(line)):
        return True  # `with accelerator.accumulate(model):`
    backward_functions: set[str] = set()
    callable_classes: list[ast.ClassDef] = []
    for line in sorted({line for method in backward.BACKWARD.methods for line in lines.mentions(method)}):
        for path in lines.paths(line):
            for call_path in _backward_calls(path, line):
                if any(isinstance(node, _LOOP_STATEMENTS + _COMPREHENSIONS) for node in call_path):
                    return True  # a backward in a loop
                function = _innermost_function(call_path)
                if function is not None:
                    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and _steps_on_call_count(function):
                        return True  # one micro-batch per call, windows counted across calls
                    backward_functions.add(function.name)
                    if function.name == "__call__":
                        callable_classes.extend(n for n in call_path if type(n) is ast.ClassDef)
    if any(_used_elsewhere(lines, cls) for cls in callable_classes):
        return True  # `loss_scaler(loss, optimizer)`: an object whose `__call__` backpropagates
    return lines.referenced_in_loop(_reaching(lines, backward_functions))  # a helper a loop calls


def _steps_on_call_count(function: "ast.FunctionDef | ast.AsyncFunctionDef") -> bool:
    """The function adds one to an attribute of `self` and tests that attribute modulo
    something (`self.updates += 1`, `if self.updates % K == 0:`), or against a count when it
    also sets it back to 0 (`if self.acc >= K: ...; self.acc = 0`): a window over its calls."""
    counted = {ast.unparse(node.target) for node in ast.walk(function)
               if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add)
               and isinstance(node.target, ast.Attribute) and isinstance(node.target.value, ast.Name)
               and node.target.value.id == "self"}
    if not counted:
        return False
    for node in ast.walk(function):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = node.left.left if isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Add) else node.left
            if isinstance(left, ast.Attribute) and ast.unparse(left) in counted:
                return True
    reset = {ast.unparse(target) for node in ast.walk(function) if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.Constant) and node.value.value == 0 for target in node.targets}
    return any(isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.GtE, ast.Eq, ast.Gt))
               and ast.unparse(node.left) in counted & reset for node in ast.walk(function))


def _used_elsewhere(lines: "_Lines", cls: ast.ClassDef) -> bool:
    """Whether the module mentions the class outside its own definition (builds an object
    of it, which a loop may call under any name)."""
    end = cls.end_lineno or cls.lineno
    return any(not cls.lineno <= line <= end for line in lines.mentions(cls.name))


def _reaching(lines: "_Lines", backward_functions: set[str]) -> set[str]:
    """Functions that call a backward, directly or through same-module functions that
    name them (a name's every mention counts, strings and comments included), and the
    names assigned one of them (`step_fn = step_mse if kind == "mse" else step_l1`)."""
    reaching = set(backward_functions)
    pending = list(reaching)
    while pending:
        name = pending.pop()
        for line in lines.mentions(name):
            for path in lines.paths(line):
                aliases = [t.id for t in path[-1].targets if isinstance(t, ast.Name)] \
                    if path and isinstance(path[-1], ast.Assign) else []
                for found in [node.name for node in path if isinstance(node, _FUNCTIONS)] + aliases:
                    if found not in reaching:
                        reaching.add(found)
                        pending.append(found)
    return reaching


class _Lines:
    """Python's tree of a module, read by line: which statements hold a line, and
    where a piece of text occurs. Lookups descend one branch at a time."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        self.text = text
        self._starts: dict[int, list[int]] = {}
        self._mentions: dict[str, list[int]] = {}
        self._comprehensions_of: dict[int, list[ast.AST]] = {}

    def mentions(self, name: str) -> list[int]:
        """The (1-based) lines that mention an identifier (as a name or an attribute, or in a
        string or comment), in order."""
        lines = self._mentions.get(name)
        if lines is None:
            lines = []
            line, previous = 1, 0
            for offset in _word_offsets(self.text, name):
                line += self.text.count("\n", previous, offset)
                previous = offset
                if not lines or lines[-1] != line:
                    lines.append(line)
            self._mentions[name] = lines
        return lines

    def paths(self, line: int) -> Iterator[list[ast.AST]]:
        """Each chain of statements (outermost first) whose innermost statement holds `line`
        and has no statement inside it that does (several share a line: `if x: a(); b()`)."""
        stack: list[list[ast.AST]] = [[self.tree]]
        while stack:
            path = stack.pop()
            inner = [child for block in _blocks(path[-1]) for child in self._holding(block, line)]
            if not inner:
                yield path
            stack.extend(path + [child] for child in inner)

    def _holding(self, block: list, line: int) -> list[ast.AST]:
        starts = self._starts.get(id(block))
        if starts is None:
            starts = self._starts[id(block)] = [_first_line(node) for node in block]
        index = bisect.bisect_right(starts, line) - 1
        holding = []
        while index >= 0 and _last_line(block[index]) >= line:
            holding.append(block[index])
            index -= 1
        return holding

    def functions_named(self, names: "set[str] | frozenset[str]") -> list[ast.AST]:
        """Every function definition of the module with one of these names."""
        found = []
        for name in sorted(names):
            for line in self.mentions(name):
                for path in self.paths(line):
                    found.extend(node for node in path if isinstance(node, _FUNCTIONS) and node.name == name)
        return list({id(node): node for node in found}.values())

    def referenced_in_loop(self, names: set[str]) -> bool:
        """Whether any of the names is mentioned inside a loop (statement or comprehension)."""
        for name in names:
            for line in self.mentions(name):
                for path in self.paths(line):
                    if any(isinstance(node, _LOOP_STATEMENTS) for node in path):
                        return True
                    if any(_covers(node, line) for node in self._comprehensions(path[-1])):
                        return True
        return False

    def _comprehensions(self, statement: ast.AST) -> list[ast.AST]:
        """The comprehensions of a statement outside its nested statements, found once per
        statement (a generated table of thousands of lines may mention a name on each)."""
        found = self._comprehensions_of.get(id(statement))
        if found is None:
            found = [node for node in _expressions(statement) if isinstance(node, _COMPREHENSIONS)]
            self._comprehensions_of[id(statement)] = found
        return found


def _blocks(node: ast.AST) -> Iterator[list]:
    """The statement lists directly inside a node (a handler's or a case's body counts
    as the node's own: neither is a statement)."""
    for field in _BLOCK_FIELDS:
        block = getattr(node, field, None)
        if not block:
            continue
        if field in ("handlers", "cases"):
            for part in block:
                yield part.body
        else:
            yield block


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", None)
    return min([node.lineno] + [d.lineno for d in decorators]) if decorators else node.lineno


def _last_line(node: ast.AST) -> int:
    return node.end_lineno or node.lineno


def _covers(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def _header(node: ast.AST) -> Iterator[ast.AST]:
    """The children of a node that are not statements of its blocks (a compound
    statement's header, decorators, handlers' types and case patterns)."""
    for _, value in ast.iter_fields(node):
        if isinstance(value, list):
            if value and not isinstance(value[0], ast.stmt):
                yield from (item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            yield value


def _expressions(statement: ast.AST) -> Iterator[ast.AST]:
    """Every node of a statement outside its nested statements."""
    stack = [statement]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(_header(node))


def _backward_calls(path: list[ast.AST], line: int) -> Iterator[list[ast.AST]]:
    """The backward calls on `line` of the statements of `path`, each with its
    ancestors: the statements of `path`, then the comprehensions around the call."""
    for statement in path[1:]:
        stack: list[tuple[ast.AST, list[ast.AST]]] = [(statement, [])]
        while stack:
            node, around = stack.pop()
            if type(node) is ast.Call and is_backward_call(node.func) and _covers(node, line):
                yield path + around
            inner = around + [node] if isinstance(node, _COMPREHENSIONS) else around
            stack.extend((child, inner) for child in _header(node))


def is_backward_call(func: ast.AST) -> bool:
    """Whether a call of `func` (Python's tree) is a backward call (`backward.BACKWARD`)."""
    forms = backward.BACKWARD
    return type(func) is ast.Attribute and func.attr in forms.methods and forms.is_backward(func.attr, _dotted(func.value))


def _dotted(node: ast.AST) -> Optional[str]:
    """A receiver as `model.names.dotted` spells it (`self`, `super()`, `a.b[]`), or None.
    Without recursion: the gate sees chains deeper than Python's recursion limit."""
    suffixes: list[str] = []
    while True:
        kind = type(node)
        if kind is ast.Name:
            return node.id + "".join(reversed(suffixes))
        if kind is ast.Attribute:
            suffixes.append(f".{node.attr}")
            node = node.value
        elif kind is ast.Subscript:
            suffixes.append("[]")
            node = node.value
        elif kind is ast.Call:
            suffixes.append("()")
            node = node.func
        else:
            return None


def _innermost_function(path: list[ast.AST]) -> Optional[ast.AST]:
    for node in reversed(path):
        if isinstance(node, _FUNCTIONS):
            return node
    return None


def _accumulate_context(path: list[ast.AST]) -> bool:
    for node in path:
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                call = item.context_expr
                if type(call) is ast.Call and _called_name(call.func) == "accumulate":
                    return True
    return False


def nesting(tree: ast.Module) -> int:
    """How deep the tree nests (a boolean chain counts a level per operand).

    The walk reads each node's fields directly (faster than
    `ast.iter_child_nodes`), and counts a name's load/store context as a level
    without visiting it, as `iter_child_nodes` would."""
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > deepest:
            deepest = depth
        child_depth = depth + (len(node.values) if type(node) is ast.BoolOp else 1)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push((item, child_depth))
            elif isinstance(value, ast.expr_context):
                if child_depth > deepest:
                    deepest = child_depth
            elif isinstance(value, ast.AST):
                push((value, child_depth))
    return deepest


def _called_name(func: ast.AST) -> object:
    if type(func) is ast.Attribute:
        return func.attr
    if type(func) is ast.Name:
        return func.id
    return None


def screen(text: str, path: str, *, gate: bool = True, plain: Optional[bool] = None) -> bool:
    """Whether LibCST should analyse the text. Raises ParseFailure or Unanalysable.

    With `gate=False` (`--no-prefilter`) every valid file is analysed, but
    syntax and nesting are still checked first. `plain` is what `text_stage`
    said, when the caller has it.
    """
    text = lone_carriage_returns_as_newlines(text)
    if plain is None and gate:
        plain = plainly_holds_training_code(text)
    if (not gate or plain) and _compiles_within_bound(text, path):
        return True
    try:
        tree = parse_python(text, path)
    except ParseFailure as failure:
        if not newer_python_reads(text, failure):
            raise
        # valid Python of a newer version: without CPython's tree the gate cannot look
        # further, and the analysis (LibCST, which reads it) decides
        return True
    if gate and not holds_training_code(tree, text):
        return False
    depth = nesting(tree)
    if depth > MAX_NESTING:
        raise Unanalysable(f"nested too deeply (depth {depth}; the limit is {MAX_NESTING})")
    compile_check(tree, path, text)
    return True


class ParseFailure(Exception):
    """The text is not Python; carries CPython's 1-based position."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.column = column
        self.message = message


class Unanalysable(Exception):
    """Valid Python (or Python too deep for CPython itself) that accumlint cannot analyse."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@contextlib.contextmanager
def _checked_files_warnings_ignored() -> Iterator[None]:
    """CPython warns while it parses and compiles the checked file (`x is not "0"`,
    invalid escapes): the file is valid, and its warnings are not accumlint's to print.
    (`catch_warnings(action=...)` would do, from Python 3.11 on.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def parse_python(text: str, path: str) -> ast.Module:
    """Python's tree of the text; raises ParseFailure at CPython's position, or Unanalysable."""
    try:
        with collector_paused(), _checked_files_warnings_ignored():
            return ast.parse(text, filename=path)
    except SyntaxError as error:
        raise _failure(error, text) from None
    except ValueError as error:  # Python 3.10 and 3.11 reject null bytes with ValueError (3.12: SyntaxError)
        if "\0" not in text:
            raise
        raise _failure(SyntaxError(str(error)), text) from None
    except (RecursionError, MemoryError):
        raise Unanalysable("too deeply nested for Python's own parser") from None


# CPython's messages for what Python 3.12 made valid in f-strings (PEP 701): a replacement
# field that reuses the string's quote, holds a backslash or a comment, or spans lines.
_PEP_701_MESSAGES = ("f-string",)
# A line that starts Python 3.12's type parameter syntax (PEP 695): `type Alias = ...`,
# `def first[T](items: list[T]) -> T:`, `class Box[T]:`.
_PEP_695_LINE = LazyPattern(r"^\s*(type\s+\w+\s*(\[[^\]]*\])?\s*=|(async\s+)?def\s+\w+\s*\[|class\s+\w+\s*\[)")


def newer_python_reads(text: str, failure: "ParseFailure") -> bool:
    """Whether a text the running Python rejects is valid Python of a newer version, which
    LibCST reads: before Python 3.12, `f"{row["name"]}"` (PEP 701) and `def first[T](...)`,
    `type Alias = ...` (PEP 695) are syntax errors. Code written for the newer Python is
    checked as that Python reads it, never reported as a syntax error of the interpreter
    accumlint happens to run on."""
    if sys.version_info >= (3, 12):
        return False
    lines = text.split("\n")  # CPython's line numbers (`screen` made lone carriage returns newlines)
    failing = lines[failure.line - 1] if 0 < failure.line <= len(lines) else ""
    if not failure.message.startswith(_PEP_701_MESSAGES) and _PEP_695_LINE.search(failing) is None:
        return False
    import libcst

    from accumlint.source.parsing import parse_module

    try:
        parse_module(text)
    except (libcst.ParserSyntaxError, RecursionError):
        return False
    return True


def compile_check(tree: ast.Module, path: str, text: str) -> None:
    """Errors CPython reports only when compiling ('return' outside a function, ...)."""
    try:
        with _checked_files_warnings_ignored():
            compile(tree, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise _failure(error, text) from None
    except (RecursionError, MemoryError):
        raise Unanalysable("too deeply nested for Python's compiler") from None


# The Python frames of recursion budget `compile` gets in the shortcut. CPython's
# symbol table counts LEVELS_PER_FRAME levels per frame of budget and refuses deeper
# code with RecursionError (`accumlint.compat.compile_budget`); real training files
# need under ten.
_COMPILE_FRAMES = 16
# What a passing compile bounds: each statement or expression level the symbol table
# counts has at most two nodes between it and the next that `nesting` counts (a
# function's arguments and argument, a call's keyword), plus a name's context. A
# boolean chain is one level there and a level per operand for `nesting`: at most one
# more per `and`/`or` of the text.
_NESTING_WITHIN_BUDGET = 3 * LEVELS_PER_FRAME * (_COMPILE_FRAMES + 1) + 1
_BOOLEAN_OPERATORS = LazyPattern(r"\b(?:and|or)\b")


def _compiles_within_bound(text: str, path: str) -> bool:
    """Whether CPython compiles the text with a recursion budget small enough that its tree
    provably nests at most MAX_NESTING deep. False is no verdict: the caller then
    learns the truth from Python's tree (the error, its position, the depth).

    Only alone: the recursion limit is the whole interpreter's, and another thread
    could hit the lowered one."""
    if threading.active_count() != 1 or not budget_bounds_compile():
        return False
    if _NESTING_WITHIN_BUDGET + _boolean_operators(text, MAX_NESTING - _NESTING_WITHIN_BUDGET) > MAX_NESTING:
        return False
    with _checked_files_warnings_ignored():
        return compiles_within(text, path, _COMPILE_FRAMES)


def _boolean_operators(text: str, enough: int) -> int:
    """How many `and`/`or` words the text holds, or more: the letters' count bounds it, costs
    far less than finding the words, and is all the caller needs while within `enough`."""
    letters = text.count("and") + text.count("or")
    return letters if letters <= enough else len(_BOOLEAN_OPERATORS.findall(text))


def _failure(error: SyntaxError, text: str) -> ParseFailure:
    line, column = error.lineno, error.offset
    if line is None and "\0" in text:  # "source code cannot contain null bytes" has no position
        at = text.index("\0")
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
    return ParseFailure(max(line or 1, 1), max(column or 1, 1), error.msg)


