"""Stage two of the gate: Python's own parser decides what LibCST gets to see.

LibCST is the expensive step of a check (about a dozen times the cost of
`ast.parse`) and the fragile one: it segfaults on long boolean chains, takes
minutes on long operator or attribute chains, and rejects some valid Python.
So every file that passes the text prefilter is first parsed by CPython,
which costs little and gives three answers:

- the truth about syntax: an error is reported at CPython's position, the one
  `python file.py` would show (tokenizer errors included);
- how deeply LibCST's tree would nest: beyond MAX_NESTING the file is refused
  before LibCST runs (`Unanalysable`), instead of crashing or hanging;
- whether the file can hold anything a rule reads (`holds_training_code`):
  most files whose text mentions `backward(` hold no training loop at all.

Nothing here imports LibCST.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# How deep the tree may nest (chains of operators, attributes, calls and
# subscripts count a level per link). LibCST's parse grows about
# quadratically with it (a 1,000-link subscript chain takes seconds) and its
# native parser overflows its stack on a few thousand boolean operands; real
# code stays far below a hundred, and CPython's own limits (200 nested
# brackets, 100 indentation levels) bound everything but chains.
MAX_NESTING = 400

# Calls that run a backward pass (SPEC section 2), by the called name.
BACKWARD_NAMES = frozenset({"backward", "manual_backward"})
# Methods a framework calls once per micro-batch: their bodies are loop bodies.
FRAMEWORK_HOOKS = frozenset({"training_step", "compute_loss"})
# Names whose mere presence makes a module worth analysing.
ACCUMULATION_SETTINGS = frozenset({"accumulate_grad_batches"})

_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


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


@dataclass
class GateFacts:
    """What one walk over Python's tree learns about a module, for `holds_training_code`."""

    nesting: int = 0
    backward_in_loop: bool = False
    # Functions (by name) that call a backward themselves, and those among them with a loop.
    backward_functions: set[str] = field(default_factory=set)
    looping_functions: set[str] = field(default_factory=set)
    # Names each function refers to, and the names referred to inside any loop.
    references: dict[str, set[str]] = field(default_factory=dict)
    loop_references: set[str] = field(default_factory=set)
    framework_hooks: bool = False
    accumulation_settings: bool = False
    accumulate_context: bool = False


def holds_training_code(facts: GateFacts) -> bool:
    """Whether a module can hold something a rule reads; False means "skip LibCST".

    Conservative on purpose (a file wrongly dropped loses real findings): a
    module is kept when any clause holds. Add a clause (and the fact it
    reads) when a rule reports on modules these do not keep; the gate test
    runs this over every fixture and every rule document's example.
    """
    if facts.backward_in_loop or facts.framework_hooks or facts.accumulation_settings:
        return True
    if facts.accumulate_context:  # `with accelerator.accumulate(model):`
        return True
    if facts.backward_functions & facts.looping_functions:  # a per-step function with its own loop
        return True
    return bool(_reaching_backward(facts) & facts.loop_references)  # a helper a loop calls or passes on


def _reaching_backward(facts: GateFacts) -> set[str]:
    """Functions that call a backward, directly or through same-module functions they name."""
    reaching = set(facts.backward_functions)
    grown = True
    while grown:
        grown = False
        for name, referred in facts.references.items():
            if name not in reaching and referred & reaching:
                reaching.add(name)
                grown = True
    return reaching


def parse_python(text: str, path: str) -> ast.Module:
    """Python's tree of the text; raises ParseFailure at CPython's position, or Unanalysable."""
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as error:
        raise _failure(error, text) from None
    except ValueError as error:  # Python 3.10 and 3.11 reject null bytes with ValueError (3.12: SyntaxError)
        if "\0" not in text:
            raise
        raise _failure(SyntaxError(str(error)), text) from None
    except (RecursionError, MemoryError):
        raise Unanalysable("too deeply nested for Python's own parser") from None


def compile_check(tree: ast.Module, path: str, text: str) -> None:
    """Errors CPython reports only when compiling ('return' outside a function, ...)."""
    try:
        compile(tree, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise _failure(error, text) from None
    except (RecursionError, MemoryError):
        raise Unanalysable("too deeply nested for Python's compiler") from None


def _failure(error: SyntaxError, text: str) -> ParseFailure:
    line, column = error.lineno, error.offset
    if line is None and "\0" in text:  # "source code cannot contain null bytes" has no position
        at = text.index("\0")
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
    return ParseFailure(max(line or 1, 1), max(column or 1, 1), error.msg)


def survey(tree: ast.Module) -> GateFacts:
    """One iterative walk (deep trees must not recurse) collecting the gate's facts."""
    facts = GateFacts()
    # (node, nesting, inside a loop, enclosing function name or None)
    stack: list[tuple[ast.AST, int, bool, object]] = [(tree, 0, False, None)]
    while stack:
        node, depth, in_loop, function = stack.pop()
        if depth > facts.nesting:
            facts.nesting = depth
        kind = type(node)
        if kind is ast.Call:
            name = _called_name(node.func)
            if name in BACKWARD_NAMES:
                if in_loop:
                    facts.backward_in_loop = True
                if function is not None:
                    facts.backward_functions.add(function)
        elif kind is ast.Name or kind is ast.Attribute:
            name = node.id if kind is ast.Name else node.attr
            if in_loop:
                facts.loop_references.add(name)
            if function is not None:
                facts.references.setdefault(function, set()).add(name)
            if name in ACCUMULATION_SETTINGS:
                facts.accumulation_settings = True
        elif kind is ast.keyword:
            if node.arg in ACCUMULATION_SETTINGS:
                facts.accumulation_settings = True
        elif kind in _FUNCTIONS:
            if node.name in FRAMEWORK_HOOKS:
                facts.framework_hooks = True
            function = node.name
        elif kind is ast.With or kind is ast.AsyncWith:
            if any(_called_name(item.context_expr.func) == "accumulate"
                   for item in node.items if isinstance(item.context_expr, ast.Call)):
                facts.accumulate_context = True
        if kind in _LOOPS:
            in_loop = True
            if function is not None:
                facts.looping_functions.add(function)
        child_depth = depth + (len(node.values) if kind is ast.BoolOp else 1)
        for child in ast.iter_child_nodes(node):
            stack.append((child, child_depth, in_loop, function))
    return facts


def _called_name(func: ast.AST) -> object:
    if type(func) is ast.Attribute:
        return func.attr
    if type(func) is ast.Name:
        return func.id
    return None


def screen(text: str, path: str, *, gate: bool = True) -> bool:
    """Whether LibCST should analyse the text. Raises ParseFailure or Unanalysable.

    With `gate=False` (`--no-prefilter`) every valid file is analysed, but
    syntax and nesting are still checked first.
    """
    tree = parse_python(text, path)
    facts = survey(tree)
    if gate and not holds_training_code(facts):
        return False
    if facts.nesting > MAX_NESTING:
        raise Unanalysable(f"nested too deeply (depth {facts.nesting}; the limit is {MAX_NESTING})")
    compile_check(tree, path, text)
    return True
