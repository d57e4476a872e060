"""The slot-storing node constructors (accumlint.compat.node_init) build the nodes LibCST's own do.

They replace LibCST's dataclass constructors process-wide, so each test here puts
the originals back when it ends.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Iterator

import libcst as cst
import pytest
from libcst import CSTNode
from threads import beside_another_thread

from accumlint.compat import node_init
from accumlint.source import parsing

# The parser installs them in accumlint's own command only (accumlint.compat.enable).
pytestmark = pytest.mark.usefixtures("speedups_on")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "fixtures").rglob("*.py"))
PUBLIC_NODE_TYPES = [
    kind
    for kind in vars(cst).values()
    if isinstance(kind, type) and issubclass(kind, cst.CSTNode) and "__slots__" in kind.__dict__ and not inspect.isabstract(kind)
]


@pytest.fixture
def originals() -> Iterator[dict[type, object]]:
    """LibCST's own constructors, restored after the test."""
    saved = {kind: kind.__dict__["__init__"] for kind in node_init._node_types()}
    try:
        yield saved
    finally:
        for kind, constructor in saved.items():
            kind.__init__ = constructor


def _nodes(module: cst.Module) -> Iterator[cst.CSTNode]:
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def test_every_public_node_type_gets_the_constructor(originals: dict[type, object]) -> None:
    """Fails when a LibCST release declares its nodes so that they keep their own (slower) one."""
    node_init.install()
    kept = [kind.__name__ for kind in PUBLIC_NODE_TYPES if kind.__dict__["__init__"] is originals[kind]]
    assert PUBLIC_NODE_TYPES and kept == []


def test_the_parse_of_every_fixture_is_the_same(originals: dict[type, object]) -> None:
    texts = [path.read_text(encoding="utf-8") for path in FIXTURES]
    before = [cst.parse_module(text) for text in texts]
    node_init.install()
    for text, plain in zip(texts, before):
        built = cst.parse_module(text)
        assert built.deep_equals(plain)
        assert built.code == text


def test_nodes_rebuilt_from_their_fields_and_from_defaults_are_the_same(originals: dict[type, object]) -> None:
    """Every field passed by keyword, then only the required ones (defaults and default factories),
    then the defaults of LibCST's own signature passed explicitly (as hypothesis's `builds` does
    with a signature it read before the constructors were installed)."""
    samples: dict[type, cst.CSTNode] = {}
    for path in FIXTURES:
        for node in _nodes(cst.parse_module(path.read_text(encoding="utf-8"))):
            samples.setdefault(type(node), node)
    node_init.install()
    assert len(samples) > 100
    for kind, node in samples.items():
        fields = dataclasses.fields(kind)
        every = {field.name: getattr(node, field.name) for field in fields}
        required = {
            field.name: getattr(node, field.name)
            for field in fields
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        }
        signature = inspect.signature(originals[kind])
        spelled_out = {**required, **{name: p.default for name, p in signature.parameters.items() if name in every and p.default is not p.empty}}
        for arguments in (every, required, spelled_out):
            ours = _built(kind, kind.__init__, arguments)
            theirs = _built(kind, originals[kind], arguments)
            assert ours == theirs if isinstance(ours, str) else ours.deep_equals(theirs), kind.__name__
        positional = kind(*every.values())
        assert positional.deep_equals(node), kind.__name__


def _built(kind: type, constructor, arguments: dict) -> "cst.CSTNode | str":
    """The node a constructor builds, or its validation error's message."""
    node = kind.__new__(kind)
    try:
        constructor(node, **arguments)
    except cst.CSTValidationError as error:
        return str(error)
    return node


def test_default_factories_make_a_fresh_value_each_time(originals: dict[type, object]) -> None:
    node_init.install()
    first, second = cst.Call(func=cst.Name("f")), cst.Call(func=cst.Name("g"))
    assert first.whitespace_after_func.deep_equals(second.whitespace_after_func)
    assert first.whitespace_after_func is not second.whitespace_after_func


def test_the_new_constructors_still_validate_and_refuse_bad_arguments(originals: dict[type, object]) -> None:
    node_init.install()
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
    with pytest.raises(TypeError, match="value"):
        cst.Name()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="colour"):
        cst.Name("x", colour="red")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cst.Name("x").value = "y"  # type: ignore[misc]


def test_a_node_type_with_a_field_that_is_no_plain_slot_keeps_its_constructor() -> None:
    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        value: str

    @dataclasses.dataclass(frozen=True)
    class Slotted:
        __slots__ = ("value",)
        value: str

    assert node_init._constructor(Unslotted) is None
    assert node_init._constructor(Slotted) is not None


def test_the_parser_installs_them_only_once_enough_text_was_parsed(
    monkeypatch: pytest.MonkeyPatch, originals: dict[type, object]
) -> None:
    installs: list[int] = []
    monkeypatch.setattr(node_init, "install", lambda: installs.append(parsing._parsed_chars))
    monkeypatch.setattr(parsing, "_parsed_chars", 0)
    monkeypatch.setattr(parsing, "INSTALL_AFTER_CHARS", 30)
    for _ in range(4):
        parsing.parse_module("total = step + 1\n")  # 17 characters
    assert installs == [34]


def test_the_constructors_leave_out_the_hook_only_while_told(
    monkeypatch: pytest.MonkeyPatch, originals: dict[type, object]
) -> None:
    node_init.install()
    calls: list[str] = []
    monkeypatch.setattr(CSTNode, "__post_init__", lambda node: calls.append(type(node).__name__))
    node_init.validating(False)
    try:
        cst.Name("x")
        assert calls == []
    finally:
        node_init.validating(True)
    cst.Name("x")
    assert calls == ["Name"]


def test_a_parse_alone_calls_no_hook_and_one_beside_another_thread_calls_it_for_every_node(
    monkeypatch: pytest.MonkeyPatch, originals: dict[type, object]
) -> None:
    node_init.install()
    counted: list[int] = []
    plain_parse = cst.parse_module

    def parse_and_count(text: str) -> cst.Module:
        hook = CSTNode.__post_init__
        calls = [0]

        def counting(node: CSTNode) -> None:
            calls[0] += 1
            hook(node)

        CSTNode.__post_init__ = counting
        try:
            plain_parse(text)
        finally:
            CSTNode.__post_init__ = hook
        counted.append(calls[0])
        return plain_parse(text)

    monkeypatch.setattr(cst, "parse_module", parse_and_count)
    parsing.parse_module("total = step + 1\n")
    beside_another_thread(lambda: parsing.parse_module("total = step + 1\n"))
    assert counted[0] == 0 and counted[1] > 10
    assert node_init._CALL_POST_INIT.cell_contents is True


def test_a_node_type_with_a_hook_of_its_own_keeps_its_constructor() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked(cst.Name):
        __slots__ = ()

        def __post_init__(self) -> None:
            super().__post_init__()

    assert node_init._constructor(Checked) is None
    assert node_init._constructor(cst.Name) is not None


def test_without_dataclasses_factory_marker_the_types_with_a_factory_keep_their_own(
    monkeypatch: pytest.MonkeyPatch, originals: dict[type, object]
) -> None:
    """`dataclasses._HAS_DEFAULT_FACTORY` missing (a Python that renames it): a node type with a
    default factory keeps LibCST's constructor, the others get the new one, and the parse
    of every fixture is still LibCST's."""
    monkeypatch.setattr(node_init, "_FACTORY", None)
    texts = [path.read_text(encoding="utf-8") for path in FIXTURES]
    before = [cst.parse_module(text) for text in texts]
    node_init.install()
    factories = [
        kind for kind in PUBLIC_NODE_TYPES
        if any(field.default_factory is not dataclasses.MISSING for field in dataclasses.fields(kind))
    ]
    assert factories and all(kind.__dict__["__init__"] is originals[kind] for kind in factories)
    assert cst.Name.__dict__["__init__"] is not originals[cst.Name]
    for text, plain in zip(texts, before):
        assert cst.parse_module(text).deep_equals(plain)
