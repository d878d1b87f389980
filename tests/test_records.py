"""records.Record behaves as collections.namedtuple does: each case runs on a Record and on a namedtuple of the same
fields and defaults and must come out the same (values, repr, errors), and copies and pickles round-trip."""

from __future__ import annotations

import copy
import json
import pickle
from collections import namedtuple

import pytest

from abilities_mcp.records import Record


class Point(Record, fields="x y z", defaults=(0,)):
    """A record with a required field, a defaulted one and a method."""

    __slots__ = ()

    x: int
    y: int
    z: int  # = 0

    def total(self) -> int:
        return self.x + self.y + self.z


class Labelled(Point):
    """A subclass of a record that adds no fields: it keeps its parent's."""

    __slots__ = ()

    def label(self) -> str:
        return f"{self.x}/{self.y}"


class Flag(Record, fields=("on", "why"), defaults=(False, "")):
    """Fields given as a sequence, every one defaulted."""

    __slots__ = ()


TWINS = {Point: namedtuple("Point", "x y z", defaults=(0,)), Flag: namedtuple("Flag", "on why", defaults=(False, ""))}
# Ways to call each class: positional, by keyword, mixed, defaults left out or given.
CALLS = [
    (Point, (1, 2, 3), {}),
    (Point, (1, 2), {}),
    (Point, (), {"x": 1, "y": 2}),
    (Point, (1,), {"z": 5, "y": 2}),
    (Point, ([1], {"a": 2}), {}),
    (Flag, (), {}),
    (Flag, (True,), {}),
    (Flag, (), {"why": "because"}),
]
# What the code does with a record, each applied to the Record and to its namedtuple twin.
USES = {
    "tuple": tuple,
    "index": lambda r: (r[0], r[-1], r[:2]),
    "fields": lambda r: [getattr(r, name) for name in r._fields],
    "len": len,
    "equal-to-twin-and-tuple": lambda r: (
        r == TWINS[Point](*r) if len(r) == 3 else r == TWINS[Flag](*r),
        r == tuple(r),
    ),
    "hash": hash,
    "json": json.dumps,
    "is-a-tuple": lambda r: isinstance(r, tuple),
    "field-names": lambda r: (r._fields, type(r)._fields, r.__match_args__),
    "field-defaults": lambda r: r._field_defaults,
    "asdict": lambda r: r._asdict(),
    "repr": repr,
    "str": str,
    "replace": lambda r: (tuple(r._replace()), repr(r._replace(**{r._fields[-1]: "new"}))),
    "make": lambda r: repr(type(r)._make(iter(r))),
    "unpack": lambda r: [*r],
    "tuple-methods": lambda r: (r.count(r[0]), r.index(r[0]), r + (9,), r * 2),
    "getnewargs": lambda r: r.__getnewargs__(),
}


@pytest.mark.parametrize("use", USES, ids=list(USES))
@pytest.mark.parametrize(("cls", "args", "kwargs"), CALLS, ids=[f"{c.__name__}-{i}" for i, (c, *_) in enumerate(CALLS)])
def test_a_record_is_used_as_the_namedtuple_of_its_fields_is(cls, args, kwargs, use) -> None:
    record, twin = cls(*args, **kwargs), TWINS[cls](*args, **kwargs)

    assert outcome(USES[use], record) == outcome(USES[use], twin)


def outcome(use, record) -> tuple:
    """What `use` returns, or the type of what it raises (a record holding a list has no hash)."""
    try:
        return ("returned", use(record))
    except Exception as error:
        return ("raised", type(error))


BAD_CALLS = [
    ((), {}, "x"),  # missing required arguments
    ((1,), {}, "y"),
    ((1, 2, 3, 4), {}, "4 were given"),  # too many positional
    ((1, 2), {"w": 3}, "'w'"),  # unknown keyword
    ((1, 2), {"x": 3}, "'x'"),  # given twice
]


@pytest.mark.parametrize(("args", "kwargs", "named"), BAD_CALLS, ids=["none", "missing", "many", "unknown", "twice"])
def test_a_call_a_namedtuple_refuses_is_refused_with_a_type_error_naming_the_argument(args, kwargs, named) -> None:
    with pytest.raises(TypeError):
        TWINS[Point](*args, **kwargs)

    with pytest.raises(TypeError, match=named):
        Point(*args, **kwargs)


def test_replace_and_make_refuse_what_namedtuple_refuses() -> None:
    point = Point(1, 2)

    with pytest.raises(ValueError, match=r"\['w'\]"):
        point._replace(w=1)
    with pytest.raises(TypeError, match="Expected 3 arguments, got 2"):
        Point._make([1, 2])
    assert point._replace(z=4) == (1, 2, 4) and type(point._replace(z=4)) is Point and point == (1, 2, 0)


@pytest.mark.parametrize(
    "fields",
    ["x x", "x _y", "x class", "x 1y"],
    ids=["duplicate", "underscore", "keyword", "not-an-identifier"],
)
def test_field_names_namedtuple_refuses_are_refused_when_the_class_is_defined(fields) -> None:
    with pytest.raises(ValueError):
        namedtuple("Bad", fields)

    with pytest.raises(ValueError):

        class Bad(Record, fields=fields):
            __slots__ = ()


def test_more_defaults_than_fields_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError):

        class Bad(Record, fields="x", defaults=(1, 2)):
            __slots__ = ()


@pytest.mark.parametrize(
    "copier",
    [copy.copy, copy.deepcopy, *(lambda r, p=p: pickle.loads(pickle.dumps(r, protocol=p)) for p in range(6))],
    ids=["copy", "deepcopy", *(f"pickle-{p}" for p in range(6))],
)
def test_copies_and_pickles_are_equal_records_of_the_same_class(copier) -> None:
    for record in (Point(1, [2], {"three": 3}), Labelled(1, 2), Flag()):
        copied = copier(record)

        assert copied == record and type(copied) is type(record) and repr(copied) == repr(record)


def test_fields_are_read_only_and_a_record_has_no_instance_dict() -> None:
    point = Point(1, 2)

    with pytest.raises(AttributeError):
        point.x = 5
    with pytest.raises(AttributeError):
        point.other = 5
    assert point.x == 1 and not hasattr(point, "__dict__")


def test_a_subclass_of_a_record_keeps_its_fields_methods_and_repr() -> None:
    labelled = Labelled(1, y=2)

    assert labelled == (1, 2, 0) and labelled.total() == 3 and labelled.label() == "1/2"
    assert repr(labelled) == "Labelled(x=1, y=2, z=0)" and labelled._replace(x=7).label() == "7/2"
    assert Labelled._fields == Point._fields and Labelled._field_defaults == {"z": 0}


def test_a_record_is_matched_by_position_and_by_keyword() -> None:
    match Point(1, 2):
        case Point(first, second, z=0):
            matched = (first, second)
        case _:
            matched = None

    assert matched == (1, 2)


def test_records_of_different_classes_do_not_share_fields_or_defaults() -> None:
    assert Point._field_defaults == {"z": 0} and Flag._field_defaults == {"on": False, "why": ""}
    assert Record._fields == () and Record._field_defaults == {}
    assert Point(1, 2).y == 2 and Flag(True, "w").why == "w"
