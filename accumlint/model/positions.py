"""Source positions of the few nodes a file reports: found in the text, or in one lean code-generation pass.

LibCST's `PositionProvider` builds a `CodeRange` for every node of the module
through a generator-based context manager per node, and splits every token
with a regular expression: on loop-dense code it costs more than the parse
itself (README, "Speed"). Only the nodes of the findings need a position, so this pass keeps
plain tuples while it generates the code, without storing the tokens, and
builds `CodeRange`s for the requested nodes only. The positions are LibCST's
own syntactic ones, or its whitespace-inclusive ones (what the fixer needs to
know which lines an edit touches); tests/test_positions.py compares them with
`PositionProvider` and `WhitespaceInclusivePositionProvider` on the fixtures.

Most reported nodes are calls on one line (`optimizer.step()`), and such a
call's source is the same text wherever it stands. When that text occurs
exactly once in the module's text, that occurrence is the call, and a pass
over the call alone, shifted there, gives its syntactic position. The other
reported nodes nearly all stand in a training loop: a pass over the innermost
statement that holds one, alone (its enclosing blocks' indentation pushed
first), generates that statement's exact source, and where that source occurs
once in the text, at the start of a line, that occurrence is the statement, so
the pass's lines only need shifting; where it occurs more than once, the
statement around it is tried, up to the outermost loop. The module pass runs
only for what neither places. (Only texts that LibCST reproduces exactly
qualify: it drops a byte-order mark, a form feed that starts a statement and
a last lone carriage return.)
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterable, Optional, Sequence, cast

import libcst as cst
from libcst.metadata import (
    CodePosition,
    CodeRange,
    MetadataWrapper,
    PositionProvider,
    WhitespaceInclusivePositionProvider,
)

from accumlint.compat.codegen import CodegenState, generate
from accumlint.model.tree import children

_NEWLINE = re.compile(r"\r\n?|\n")
Span = tuple[int, int, int, int]


class _Syntactic:
    """`record_syntactic_position` as a plain context manager (no generator frame)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: "_PositionState", node: cst.CSTNode, start_node: Optional[cst.CSTNode],
                 end_node: Optional[cst.CSTNode]) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = (self.state.line, self.state.column)

    def __exit__(self, *exc: object) -> None:
        spans = self.state.spans
        start = spans[self.start_node][:2] if self.start_node is not None else self.start
        end = spans[self.end_node][2:] if self.end_node is not None else (self.state.line, self.state.column)
        spans[self.node] = (*start, *end)


class _PositionState(CodegenState or object):  # type: ignore[misc]  # built only where CodegenState is usable
    """Tracks line and column while LibCST generates the code; keeps no tokens."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line = 1
        self.column = 0
        self.starts: list[tuple[int, int]] = []
        self.spans: dict[cst.CSTNode, Span] = {}

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:
        if "\n" not in value and "\r" not in value:
            self.column += len(value)
            return
        segments = _NEWLINE.split(value)
        self.line += len(segments) - 1
        self.column = len(segments[-1])

    def pop_trailing_newline(self) -> None:
        pass  # no tokens are kept, and LibCST's positions ignore the pop too

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        if node not in self.spans:  # a syntactic position recorded inside wins
            self.spans[node] = (*start, self.line, self.column)

    def record_syntactic_position(  # any context manager will do
        self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None, end_node: Optional[cst.CSTNode] = None,
    ) -> _Syntactic:
        return _Syntactic(self, node, start_node, end_node)


class _SourceState(_PositionState):
    """Also keeps the tokens: the generated source of what the pass covered."""

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        super().add_token(value)


class _InclusiveState(_PositionState):
    """Each node's whole code-generation extent, the whitespace it owns included."""

    def record_syntactic_position(  # type: ignore[override]  # any context manager will do
        self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None, end_node: Optional[cst.CSTNode] = None,
    ) -> "contextlib.nullcontext[None]":
        return _NOT_RECORDED


_NOT_RECORDED = contextlib.nullcontext()


def positions_of(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    text: str = "",
    calls: Iterable[cst.Call] = (),
    *,
    loops: Iterable[tuple[cst.CSTNode, Sequence[cst.CSTNode]]] = (),
    whitespace: bool = False,
) -> dict[cst.CSTNode, CodeRange]:
    """The syntactic `CodeRange` (1-based lines, 0-based columns) of each node of
    `module`, parsed from `text`; `calls` are calls known to stand in the module
    (the only nodes looked for in the text), `loops` are (loop, ancestors from the
    module down) of loops known to stand in it. With `whitespace`,
    `WhitespaceInclusivePositionProvider`'s range instead, from the module pass."""
    if CodegenState is None:  # LibCST's private state is not usable here (accumlint.compat.codegen)
        return _provided_positions(module, nodes, whitespace)
    spans: dict[cst.CSTNode, Span] = {}
    rest = []
    searchable = text and not whitespace and _NOT_REPRODUCED.search(text) is None
    known = {id(call) for call in calls} if searchable else set()
    for node in nodes:
        found = _spans_alone(module, node, (), text, whole_lines=False) if id(node) in known else None
        span = found.get(node) if found is not None else None
        if span is None:
            rest.append(node)
        else:
            spans[node] = span
    if rest and searchable:
        rest = _placed_in_loops(module, rest, text, loops, spans)
    if rest:
        state = (_InclusiveState if whitespace else _PositionState)(module)
        generate(module, state)
        spans.update((node, state.spans[node]) for node in rest if node in state.spans)
    return {node: CodeRange(CodePosition(*span[:2]), CodePosition(*span[2:])) for node, span in spans.items()}


def _provided_positions(
    module: cst.Module, nodes: Iterable[cst.CSTNode], whitespace: bool
) -> dict[cst.CSTNode, CodeRange]:
    """`positions_of` through LibCST's public position providers (the module's own nodes,
    not a copy): the same ranges, at the cost of one for every node of the module."""
    provider = WhitespaceInclusivePositionProvider if whitespace else PositionProvider
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(provider)
    return {node: ranges[node] for node in nodes if node in ranges}


# what LibCST does not reproduce: a byte-order mark, a form feed, a carriage return
# without a line feed (a file's last line ending, when every line ends so)
_NOT_REPRODUCED = re.compile(r"[\ufeff\f]|\r(?!\n)")


def _placed_in_loops(
    module: cst.Module,
    nodes: list[cst.CSTNode],
    text: str,
    loops: Iterable[tuple[cst.CSTNode, Sequence[cst.CSTNode]]],
    spans: dict[cst.CSTNode, Span],
) -> list[cst.CSTNode]:
    """Place what passes over statements of the outermost loops can; the nodes they could not.

    Each node is looked for in the innermost statement that holds it, then in
    the statements around that one, up to the loop: the first whose source
    occurs once in the text places it (and whatever else it holds)."""
    placed: dict[cst.CSTNode, Span] = {}
    tried: set[int] = set()
    wanted = {id(node) for node in nodes}
    for loop, ancestors in loops:
        if not wanted:
            break
        if any(type(ancestor) in _LOOPS for ancestor in ancestors):
            continue
        for node_id, holders in _holders(module, loop, _indents(module, ancestors), wanted).items():
            for statement, indents in holders:
                if node_id not in wanted:
                    break
                if id(statement) in tried:
                    continue
                tried.add(id(statement))
                found = _spans_alone(module, statement, indents, text, whole_lines=True)
                if found is not None:
                    placed.update(found)
                    wanted.difference_update(id(node) for node in found)
    remaining = []
    for node in nodes:
        span = placed.get(node)
        if span is None:
            remaining.append(node)
        else:
            spans[node] = span
    return remaining


_LOOPS = (cst.For, cst.While)
Holders = list[tuple[cst.CSTNode, tuple[str, ...]]]


def _indents(module: cst.Module, ancestors: Sequence[cst.CSTNode]) -> tuple[str, ...]:
    """The indentation the blocks and `match` statements around a statement push."""
    return tuple(_indent(module, cast("cst.IndentedBlock | cst.Match", ancestor)) for ancestor in ancestors if type(ancestor) in (cst.IndentedBlock, cst.Match))


def _indent(module: cst.Module, node: cst.IndentedBlock | cst.Match) -> str:
    """What a block (or a `match`, for its cases) adds to the indentation, as LibCST generates it."""
    return module.default_indent if node.indent is None else node.indent


def _holders(
    module: cst.Module, loop: cst.CSTNode, indents: tuple[str, ...], wanted: set[int]
) -> dict[int, Holders]:
    """For each wanted node inside the loop: the statements that hold it, innermost
    first, each with the indentation it is generated with. Only statements of a
    block's body count: LibCST generates such a statement the same way alone as
    inside its module (an `elif`, which generates as `if` alone, does not count)."""
    found: dict[int, Holders] = {}
    stack: list[tuple[cst.CSTNode, Holders, tuple[str, ...]]] = [(loop, [(loop, indents)], indents)]
    while stack and len(found) < len(wanted):
        node, holders, current = stack.pop()
        if id(node) in wanted:
            found[id(node)] = holders
        kind = type(node)
        if kind is cst.IndentedBlock:
            block = cast(cst.IndentedBlock, node)
            inner = (*current, _indent(module, block))
            stack.extend((statement, [(statement, inner), *holders], inner) for statement in block.body)
            continue
        if kind is cst.Match:
            current = (*current, _indent(module, cast(cst.Match, node)))
        stack.extend((child, holders, current) for child in children(node))
    return found


def _spans_alone(
    module: cst.Module, node: cst.CSTNode, indents: tuple[str, ...], text: str, *, whole_lines: bool
) -> Optional[dict[cst.CSTNode, Span]]:
    """The spans of a node and the nodes inside it, from a pass over it alone (with the
    indentation of the blocks around it pushed first), where the source that pass
    generates occurs exactly once in the text; None elsewhere.

    A statement (`whole_lines`) must occur at a line's start. Anything else must
    be one line: after a line break inside brackets the text carries the
    indentation of the block, which a node alone does not generate."""
    state = _SourceState(module)
    state.indent_tokens.extend(indents)
    generate(node, state)
    source = "".join(state.tokens)
    if not whole_lines and ("\n" in source or "\r" in source):
        return None
    at = text.find(source)
    if at < 0 or text.find(source, at + 1) >= 0:
        return None
    line_start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1  # (a lone "\r" ends a line too)
    if whole_lines and line_start != at:
        return None
    lines = text.count("\n", 0, at) + text.count("\r", 0, at) - text.count("\r\n", 0, at)
    columns = at - line_start
    return {
        inner: (first + lines, start + columns if first == 1 else start, last + lines, end + columns if last == 1 else end)
        for inner, (first, start, last, end) in state.spans.items()
    }
