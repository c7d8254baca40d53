"""memsync.util.records: the record classes behave as the standard dataclasses they replace."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, ClassVar

import pytest

from memsync.util import records
from memsync.util.records import FrozenInstanceError, asdict, field, fields, recordclass, replace


@recordclass(frozen=True)
class Point:
    x: int
    y: int = 0
    label: str = field(default="", compare=False)
    secret: str | None = field(default=None, repr=False)


@recordclass
class Bag:
    name: str
    items: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "bag"


@recordclass
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@recordclass
class Labelled(Bag):
    tag: str = "t"


@recordclass(slots=True)
class Slotted:
    a: int
    b: str = "b"


@recordclass
class Outer:
    inner: Point
    many: list[Point] = field(default_factory=list)
    by_name: dict[str, Bag] = field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class StdPoint:
    x: int
    y: int = 0
    label: str = dataclasses.field(default="", compare=False)
    secret: str | None = dataclasses.field(default=None, repr=False)


def test_init_takes_positional_keyword_and_defaults_like_a_dataclass() -> None:
    assert (Point(1).x, Point(1).y) == (1, 0)
    assert Point(1, 2) == Point(x=1, y=2)
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((), {}), ((1, 2, "l", "s", 5), {}), ((1,), {"x": 2}),
                                                           ((1,), {"z": 3})]
    for args, kwargs in cases:
        with pytest.raises(TypeError):
            Point(*args, **kwargs)
        with pytest.raises(TypeError):
            StdPoint(*args, **kwargs)


def test_repr_eq_and_hash_match_the_standard_dataclass() -> None:
    ours, theirs = Point(1, 2, "a", "hidden"), StdPoint(1, 2, "a", "hidden")
    assert repr(ours).replace("Point", "X") == repr(theirs).replace("StdPoint", "X")
    assert "hidden" not in repr(ours)
    assert Point(1, 2, "a") == Point(1, 2, "b")  # compare=False
    assert Point(1, 2) != Point(1, 3)
    other: object = StdPoint(1, 2)
    assert Point(1, 2) != other
    assert hash(Point(1, 2, "a")) == hash(Point(1, 2, "b"))
    assert len({Point(1, 2), Point(1, 2), Point(2, 2)}) == 2


def test_a_frozen_record_refuses_assignment_and_deletion() -> None:
    point = Point(1)
    with pytest.raises(FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del point.x
    assert isinstance(FrozenInstanceError(), AttributeError)
    assert point.x == 1


def test_a_mutable_record_is_unhashable_and_gets_a_fresh_default_each_time() -> None:
    one, two = Bag("a"), Bag("b")
    one.items.append("x")
    assert two.items == []
    with pytest.raises(TypeError):
        hash(one)
    assert Bag.kind == "bag"
    assert [f.name for f in fields(Bag)] == ["name", "items"]  # ClassVar is not a field


def test_post_init_and_inherited_fields() -> None:
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)
    assert Checked(3).value == 3
    child = Labelled("n", ["i"], "tag")
    assert (child.name, child.items, child.tag) == ("n", ["i"], "tag")
    assert [f.name for f in fields(child)] == ["name", "items", "tag"]


def test_slots_leave_no_instance_dict() -> None:
    item = Slotted(1)
    assert not hasattr(item, "__dict__")
    with pytest.raises(AttributeError):
        item.c = 1  # type: ignore[attr-defined]
    assert (item.a, item.b) == (1, "b")


def test_asdict_replace_and_copy() -> None:
    outer = Outer(Point(1), [Point(2, 3)], {"k": Bag("b", ["x"])})
    assert asdict(outer) == {"inner": {"x": 1, "y": 0, "label": "", "secret": None},
                             "many": [{"x": 2, "y": 3, "label": "", "secret": None}],
                             "by_name": {"k": {"name": "b", "items": ["x"]}}}
    moved = replace(Point(1, 2, "l"), y=5)
    assert (moved.x, moved.y, moved.label) == (1, 5, "l")
    with pytest.raises(TypeError):
        replace(Point(1), z=1)
    with pytest.raises(TypeError):
        asdict(Point)
    deep = copy.deepcopy(outer)
    assert deep == outer and deep.many is not outer.many
    assert records.is_recordclass(outer) and records.is_recordclass(Outer) and not records.is_recordclass(object())


def test_bad_declarations_are_refused_as_dataclasses_refuses_them() -> None:
    with pytest.raises(ValueError, match="mutable default"):
        @recordclass
        class Shared:
            items: list[str] = []  # noqa: RUF012 - the declaration under test

    with pytest.raises(TypeError, match="follows default"):
        @recordclass
        class Order:
            a: int = 0
            b: int  # type: ignore[misc]

    with pytest.raises(ValueError):
        field(default=1, default_factory=list)


@pytest.mark.parametrize("warm", [False, True], ids=["generic", "compiled"])
def test_both_inits_bind_arguments_as_the_standard_one_does(warm: bool) -> None:
    """A class's first instances go through the generic __init__, later ones the compiled one."""
    @recordclass
    class Mixed:
        a: int
        b: str = "b"
        c: list[str] = field(default_factory=list)

        def __post_init__(self) -> None:
            self.c.append("post")

    @dataclasses.dataclass
    class StdMixed:
        a: int
        b: str = "b"
        c: list[str] = dataclasses.field(default_factory=list)

        def __post_init__(self) -> None:
            self.c.append("post")

    generic = Mixed.__init__
    for _ in range(records._COMPILE_AFTER + 1 if warm else 0):
        Mixed(0)
    assert (Mixed.__init__ is generic) is not warm
    good: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((1,), {}), ((1, "x"), {}), ((), {"a": 1, "c": ["z"]}),
                                                          ((1,), {"b": "y"})]
    for args, kwargs in good:
        ours, theirs = Mixed(*args, **kwargs), StdMixed(*args, **kwargs)
        assert (ours.a, ours.b, ours.c) == (theirs.a, theirs.b, theirs.c)
    bad: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((), {}), ((1, "x", [], 4), {}), ((1,), {"a": 2}),
                                                         ((1,), {"d": 3}), ((), {"b": "x"})]
    for args, kwargs in bad:
        with pytest.raises(TypeError):
            StdMixed(*args, **kwargs)
        with pytest.raises(TypeError):
            Mixed(*args, **kwargs)
    if warm:
        assert Mixed.__init__.__qualname__.endswith("Mixed.__init__")


@pytest.mark.slow
def test_memsync_defines_no_standard_dataclasses() -> None:
    """memsync's record types are all cheap records: a standard one costs ~0.35 ms at import."""
    import ast
    from pathlib import Path

    import memsync

    standard = []
    for source in sorted(Path(memsync.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if (isinstance(node, ast.ImportFrom) and node.module == "dataclasses") or (
                    isinstance(node, ast.Import) and any(a.name == "dataclasses" for a in node.names)):
                standard.append(f"{source.name}:{node.lineno}")
    assert standard == []
