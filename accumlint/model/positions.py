"""Source positions of the few nodes a file reports, in one lean code-generation pass.

LibCST's `PositionProvider` builds a `CodeRange` for every node of the module
through a generator-based context manager per node, and splits every token
with a regular expression: on loop-dense code it costs more than twice the
parse. Only the nodes of the findings need a position, so this pass keeps
plain tuples while it generates the code, without storing the tokens, and
builds `CodeRange`s for the requested nodes only. The positions are LibCST's
own syntactic ones, or its whitespace-inclusive ones (what the fixer needs to
know which lines an edit touches); tests/test_positions.py compares them with
`PositionProvider` and `WhitespaceInclusivePositionProvider` on the fixtures.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterable

import libcst as cst
from libcst.metadata import CodePosition, CodeRange
from libcst._nodes.internal import CodegenState

_NEWLINE = re.compile(r"\r\n?|\n")
Span = tuple[int, int, int, int]


class _Syntactic:
    """`record_syntactic_position` as a plain context manager (no generator frame)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: "_PositionState", node: cst.CSTNode, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = (self.state.line, self.state.column)

    def __exit__(self, *exc: object) -> None:
        spans = self.state.spans
        start = spans[self.start_node][:2] if self.start_node is not None else self.start
        end = spans[self.end_node][2:] if self.end_node is not None else (self.state.line, self.state.column)
        spans[self.node] = (*start, *end)


class _PositionState(CodegenState):
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

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> _Syntactic:
        return _Syntactic(self, node, start_node, end_node)


class _InclusiveState(_PositionState):
    """Each node's whole code-generation extent, the whitespace it owns included."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> contextlib.nullcontext:
        return _NOT_RECORDED


_NOT_RECORDED = contextlib.nullcontext()


def positions_of(
    module: cst.Module, nodes: Iterable[cst.CSTNode], *, whitespace: bool = False
) -> dict[cst.CSTNode, CodeRange]:
    """The syntactic `CodeRange` (1-based lines, 0-based columns) of each node; with
    `whitespace`, `WhitespaceInclusivePositionProvider`'s range instead."""
    state = (_InclusiveState if whitespace else _PositionState)(module)
    module._codegen(state)
    found: dict[cst.CSTNode, CodeRange] = {}
    for node in nodes:
        span = state.spans.get(node)
        if span is not None:
            found[node] = CodeRange(CodePosition(span[0], span[1]), CodePosition(span[2], span[3]))
    return found
