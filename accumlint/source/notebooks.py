"""Jupyter notebooks as one Python module: code cells in order, IPython syntax masked.

The analysis needs the whole notebook at once (the optimizer is built in one
cell, the loop runs in another), so the code cells are joined into one
"virtual" module. Each cell starts with a marker *statement* (an inert
string), and each IPython line (`%magic`, `!shell`, `x = !cmd`, `obj?`)
becomes a placeholder comment: LibCST keeps both through fixes, so the fixed
module splits back into cells and the magics come back exactly as they were.
The marker is a statement, not a comment, because LibCST attaches a comment
to the statement below it: a fix that inserts code before a cell's first
statement (GA101's zeroing before the loop) would land above the marker, at
the end of the previous cell, and a fix that moves that statement would take
the marker along.

The notebook is read and written with the stdlib `json` module, not nbformat:
nbformat validates, upgrades and normalizes the whole document (minor
versions, cell ids), which would rewrite outputs and metadata we promise to
leave untouched, and it is not otherwise a dependency. Keys keep their order
and the indentation and ASCII escaping are detected, so only fixed cells change.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from accumlint.diagnostics import Diagnostic
from accumlint.source.files import SourceError, unified_diff

_CELL = "'accumlint-cell {}'"
# A magic becomes a statement (so a block holding only a magic stays a block),
# its continuation lines comments.
_MAGIC = "pass  # accumlint-magic {}"
_MAGIC_CONTINUED = "# accumlint-magic {}"
_CELL_LINE = re.compile(r"'accumlint-cell (\d+)'")
_MAGIC_LINE = re.compile(r"\s*(?:pass\s*)?# accumlint-magic (\d+)\s*")
_SOURCE_KEY = re.compile(r'^\s*"source"\s*:')  # a cell's `"source":` key, on its own line (nbformat's layout)

# `%magic`, `!shell`, `x = %magic` / `x = !shell`, and `obj?` / `obj??` help lines.
_IPYTHON_LINE = re.compile(r"\s*(?:[%!]|[\w.]+\s*=\s*[%!])|\s*[\w.]+\?\??\s*$")
# Cell magics whose body is ordinary Python (the rest hold other languages).
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3"})


@dataclass(frozen=True)
class _Cell:
    number: int  # 1-based position among all the notebook's cells, as users count them
    text: str


def _source_text(source: Any) -> str:
    """A cell's source: a string or a list of strings (nbformat); anything else is not a notebook."""
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    raise SourceError(f"not a valid notebook: a cell's source is {type(source).__name__} data, not text")


def _refuse_lone_surrogates(text: str, number: int) -> None:
    """JSON may escape half of a UTF-16 pair alone (`"\\ud800"`): that is no character, and
    no Python source can hold it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        half = ord(text[error.start])
        raise SourceError(f"not a valid notebook: cell {number} holds half of a UTF-16 surrogate pair alone (\\u{half:04x}), which is not text") from None


def _table(value: Any) -> dict:
    """A metadata entry that should be a JSON object; anything else counts as absent."""
    return value if isinstance(value, dict) else {}


def _is_python(data: dict) -> bool:
    metadata = _table(data.get("metadata"))
    language = _table(metadata.get("language_info")).get("name") or _table(metadata.get("kernelspec")).get("language")
    return language is None or str(language).lower() == "python"


def _code_cells(data: dict) -> tuple[_Cell, ...]:
    if not _is_python(data):
        return ()
    cells = []
    for number, cell in enumerate(data.get("cells") or [], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        text = _source_text(cell.get("source", ""))
        if not text.isascii():
            _refuse_lone_surrogates(text, number)
        magic = re.match(r"\s*%%(\w+)", text)
        if magic and magic.group(1) not in _PYTHON_CELL_MAGICS:
            continue
        cells.append(_Cell(number, text))
    return tuple(cells)


def _mask(cells: tuple[_Cell, ...]) -> tuple[str, list[int], list[int], list[str]]:
    """The virtual module, each cell's first line in it, cell numbers, masked lines."""
    lines: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    magics: list[str] = []
    for cell in cells:
        lines.append(_CELL.format(cell.number))
        starts.append(len(lines) + 1)
        numbers.append(cell.number)
        continued = False
        python = _Continuation()
        for index, line in enumerate(cell.text.split("\n")):
            if continued or (not python.open and (
                    (index == 0 and line.lstrip().startswith("%%")) or _IPYTHON_LINE.match(line))):
                indent = line[: len(line) - len(line.lstrip())]
                lines.append(indent + (_MAGIC_CONTINUED if continued else _MAGIC).format(len(magics)))
                magics.append(line)
                continued = line.endswith("\\")
            else:
                lines.append(line)
                python.read(line)
    return "\n".join(lines), starts, numbers, magics


class _Continuation:
    """Whether the Python read so far leaves a statement open (a bracket, a string, a
    trailing backslash): the next line continues it, so `    %(epoch, loss))` there is
    the `%` operator, not a magic."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: Optional[str] = None  # the delimiter of a string left open by a line
        self.backslash = False

    @property
    def open(self) -> bool:
        return self.depth > 0 or self.quote is not None or self.backslash

    def read(self, line: str) -> None:
        index, size = 0, len(line)
        comment = False
        while index < size:
            char = line[index]
            if self.quote is not None:
                if char == "\\":
                    index += 2
                    continue
                if line.startswith(self.quote, index):
                    index += len(self.quote)
                    self.quote = None
                    continue
            elif char == "#":
                comment = True
                break
            elif char in "\"'":
                triple = char * 3
                self.quote = triple if line.startswith(triple, index) else char
                index += len(self.quote)
                continue
            elif char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(self.depth - 1, 0)
            index += 1
        if self.quote is not None and len(self.quote) == 1:
            self.quote = None if not line.endswith("\\") else self.quote  # an unterminated one-line string ends here
        self.backslash = self.quote is None and not comment and line.endswith("\\")


def _split_lines(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+", text)


@dataclass(frozen=True)
class NotebookDocument:
    """A `.ipynb` file: the text analysed is the virtual module of its code cells."""

    path: str
    data: dict
    original: bytes
    cells: tuple[_Cell, ...]
    text: str
    _starts: list[int]
    _numbers: list[int]
    _magics: list[str]

    @classmethod
    def from_bytes(cls, path: str, data: bytes) -> "NotebookDocument":
        try:
            notebook = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as error:
            raise SourceError(f"not a valid notebook (JSON): {error}") from None
        except RecursionError:
            raise SourceError("not a valid notebook: its JSON is nested too deeply to read") from None
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells", []), list):
            raise SourceError("not a valid notebook: no list of cells")
        return cls._build(path, notebook, data, _code_cells(notebook))

    @classmethod
    def _build(cls, path: str, notebook: dict, original: bytes, cells: tuple[_Cell, ...]) -> "NotebookDocument":
        text, starts, numbers, magics = _mask(cells)
        return cls(path, notebook, original, cells, text, starts, numbers, magics)

    # -- positions

    def _cell_at(self, line: int) -> int:
        return max(bisect.bisect_right(self._starts, line) - 1, 0)

    def locate(self, diagnostic: Diagnostic) -> Diagnostic:
        """The diagnostic with its line counted inside its cell, and the cell number.

        A line named in the message ("after the optimizer step (line 17)") is
        counted inside its cell too, and names the cell when it is another one.
        """
        if not self._starts:
            return diagnostic
        index = self._cell_at(diagnostic.line)
        start = self._starts[index]
        line = max(diagnostic.line - start + 1, 1)
        end_line = max(diagnostic.end_line - start + 1, line) if self._cell_at(diagnostic.end_line) == index else line
        located = diagnostic._replace(line=line, end_line=end_line, cell=self._numbers[index])
        if diagnostic.related_line is None:
            return located
        related_index = self._cell_at(diagnostic.related_line)
        related_line = max(diagnostic.related_line - self._starts[related_index] + 1, 1)
        named = f"line {related_line}"
        if related_index != index:
            named = f"cell {self._numbers[related_index]}, {named}"
        old = f"line {diagnostic.related_line}"
        return located._replace(
            message=diagnostic.message.replace(old, named),
            help=diagnostic.help.replace(old, named),
            related_line=related_line,
        )

    def file_line(self, diagnostic: Diagnostic) -> Optional[int]:
        """The line of the `.ipynb` file (its JSON) that holds a located diagnostic's source line.

        CI viewers (GitHub annotations, code scanning) show a notebook as its
        JSON text, so that is where a finding must point. Known when the file
        lays out each cell's `source` list one line per element (nbformat and
        Jupyter write it so); else the line of the cell's `"source"` key; None
        when even that cannot be told apart.
        """
        raw = self.original.decode("utf-8-sig", "replace").split("\n")
        keys = [number for number, text in enumerate(raw) if _SOURCE_KEY.search(text)]
        cells = self.data.get("cells") or []
        if len(keys) != len(cells) or diagnostic.cell is None or not 0 < diagnostic.cell <= len(cells):
            return None
        key_line = keys[diagnostic.cell - 1]
        source = cells[diagnostic.cell - 1].get("source")
        if isinstance(source, list) and 0 < diagnostic.line <= len(source):
            candidate = key_line + diagnostic.line
            element = source[diagnostic.line - 1]
            forms = {json.dumps(element, ensure_ascii=False), json.dumps(element)}
            if candidate < len(raw) and raw[candidate].strip().rstrip(",") in forms:
                return candidate + 1
        return key_line + 1

    def text_line(self, diagnostic: Diagnostic) -> int:
        """The line of the virtual module a located (cell-relative) diagnostic is on."""
        if diagnostic.cell not in self._numbers:
            return diagnostic.line
        return self._starts[self._numbers.index(diagnostic.cell)] + diagnostic.line - 1

    def lines(self, diagnostic: Diagnostic) -> list[str]:
        """The lines of the diagnostic's cell (its line numbers count inside the cell)."""
        for cell in self.cells:
            if cell.number == diagnostic.cell:
                return cell.text.split("\n")
        return []

    # -- fixes

    def replaced(self, text: str) -> "NotebookDocument":
        """The notebook with its code cells taken from a fixed virtual module."""
        texts: dict[int, list[str]] = {}
        current: Optional[list[str]] = None
        before: list[str] = []
        for line in text.split("\n"):
            marker = _CELL_LINE.fullmatch(line)
            if marker:
                current = texts.setdefault(int(marker.group(1)), [])
                continue
            magic = _MAGIC_LINE.fullmatch(line)
            if magic and int(magic.group(1)) < len(self._magics):
                line = self._magics[int(magic.group(1))]
            (before if current is None else current).append(line)
        if list(texts) != self._numbers:
            raise SourceError("the fixed code could not be mapped back to the notebook's cells")
        if before and self._numbers:
            texts[self._numbers[0]][:0] = before
        cells = []
        for cell in self.cells:
            fixed = "\n".join(texts[cell.number])
            trailing = len(cell.text) - len(cell.text.rstrip("\n"))
            cells.append(_Cell(cell.number, fixed.rstrip("\n") + "\n" * trailing if fixed != cell.text else fixed))
        return self._build(self.path, self.data, self.original, tuple(cells))

    def diff(self, before: "NotebookDocument") -> str:
        old = {cell.number: cell.text for cell in before.cells}
        return "".join(
            unified_diff(old[cell.number], cell.text, f"{self.path}:cell {cell.number}")
            for cell in self.cells
            if old.get(cell.number) != cell.text
        )

    def encoded(self) -> bytes:
        """The notebook's bytes: the original ones unless a cell's code changed."""
        changed = {cell.number: cell.text for cell in self.cells}
        cells = self.data.get("cells", [])
        if all(_source_text(cells[number - 1].get("source", "")) == text for number, text in changed.items()):
            return self.original
        notebook = dict(self.data)
        notebook["cells"] = [
            _with_source(cell, changed[number]) if number in changed else cell
            for number, cell in enumerate(cells, 1)
        ]
        raw = self.original.decode("utf-8-sig")
        indent = re.match(r"\{\r?\n([ \t]+)", raw)
        ascii_only = raw.isascii() and "\\u" in raw
        rendered = json.dumps(notebook, indent=indent.group(1) if indent else None, ensure_ascii=ascii_only)
        if raw.endswith("\n"):
            rendered += "\n"
        bom = b"\xef\xbb\xbf" if self.original.startswith(b"\xef\xbb\xbf") else b""
        return bom + rendered.encode("utf-8")


def _with_source(cell: dict, text: str) -> dict:
    if _source_text(cell.get("source", "")) == text:
        return cell
    updated = dict(cell)
    updated["source"] = _split_lines(text) if isinstance(cell.get("source"), list) else text
    return updated
