"""Record, a tuple with named fields that behaves as collections.namedtuple's but costs a sixth as much to define,
since the hook defines its records on every tool call."""

from __future__ import annotations

from collections import _tuplegetter  # namedtuple's own field getter, in C; collections is loaded before the hook is
from keyword import iskeyword  # loaded by collections


class Record(tuple):
    """A tuple whose fields are named by its subclass: `class Answer(Record, fields="deny ask", defaults=("",))`.

    namedtuple compiles a `__new__` for each class with eval and builds a docstring for each field: about 0.1 ms a
    class, 3 ms over the hook's records. A subclass here sets its fields up in `__init_subclass__` instead, with
    the same getters, tuple semantics, repr, `_replace`, `_asdict`, `_make` and errors; defaults fill the rightmost
    fields, as namedtuple's do. A subclass declared without `fields` keeps its parent's.
    """

    __slots__ = ()

    _fields: tuple[str, ...] = ()
    _field_defaults: dict[str, object] = {}  # noqa: RUF012 (read-only: each record class gets its own)
    __match_args__: tuple[str, ...] = ()

    def __init_subclass__(cls, fields: str | tuple[str, ...] | None = None, defaults: tuple = (), **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if fields is None:
            return
        names = tuple(fields.replace(",", " ").split()) if isinstance(fields, str) else tuple(fields)
        _check_names(cls.__name__, names, defaults)
        cls._fields = cls.__match_args__ = names
        cls._field_defaults = dict(zip(names[len(names) - len(defaults) :], defaults, strict=True))
        for index, name in enumerate(names):
            setattr(cls, name, _tuplegetter(index, f"Alias for field number {index}"))

    def __new__(cls, *args: object, **kwargs: object):
        if kwargs or len(args) != len(cls._fields):
            args = _bind(cls, args, kwargs)
        return tuple.__new__(cls, args)

    @classmethod
    def _make(cls, iterable):
        """A record from any iterable of exactly its fields' values (no defaults applied), as namedtuple's."""
        result = tuple.__new__(cls, iterable)
        if len(result) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")
        return result

    def _replace(self, /, **changes: object):
        """A copy with the named fields changed; ValueError for a name that is not a field, as namedtuple's."""
        result = self._make(map(changes.pop, self._fields, self))
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return result

    def _asdict(self) -> dict[str, object]:
        return dict(zip(self._fields, self, strict=True))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True))
        return f"{type(self).__name__}({shown})"

    def __getnewargs__(self) -> tuple:
        return tuple(self)  # copy and pickle rebuild the record through __new__ from its values


def _check_names(typename: str, names: tuple[str, ...], defaults: tuple) -> None:
    """The field names namedtuple would refuse, refused with its messages."""
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or iskeyword(name):
            raise ValueError(f"Type names and field names must be valid identifiers: {name!r}")
        if name.startswith("_"):
            raise ValueError(f"Field names cannot start with an underscore: {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"Encountered duplicate field name in {typename}: {names!r}")
    if len(defaults) > len(names):
        raise TypeError("Got more default values than field names")


def _bind(cls: type[Record], args: tuple, kwargs: dict[str, object]) -> tuple:
    """The values of `cls(*args, **kwargs)` in field order, defaults filled; TypeError naming the argument that is
    missing, unknown, given twice or one too many, as a function's signature would."""
    fields, defaults, name = cls._fields, cls._field_defaults, cls.__name__
    if len(args) > len(fields):
        raise TypeError(f"{name}() takes {len(fields)} positional arguments but {len(args)} were given")
    values, absent = list(args), []
    for field in fields[len(args) :]:
        if field in kwargs:
            values.append(kwargs.pop(field))  # kwargs is this call's own dict
        elif field in defaults:
            values.append(defaults[field])
        else:
            absent.append(field)
    for key in kwargs:  # what is left was given twice or is no field
        raise TypeError(f"{name}() got {_twice_or_unknown(key, fields)} {key!r}")
    if absent:
        listed = " and ".join(", ".join(repr(f) for f in absent).rsplit(", ", 1))
        raise TypeError(f"{name}() missing {len(absent)} required argument{'s' * (len(absent) > 1)}: {listed}")
    return tuple(values)


def _twice_or_unknown(key: str, fields: tuple[str, ...]) -> str:
    return "multiple values for argument" if key in fields else "an unexpected keyword argument"
