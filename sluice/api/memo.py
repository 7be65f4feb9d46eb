"""Bounded memo tables for what reading objects works out over and over (the value of a
quantity string, the request of a pod shape), and one switch that turns them all off.

A cluster's tens of thousands of objects repeat a few hundred quantity strings and pod
shapes, so each is worked out once and looked up after. Each table is a least-recently-used
table of a fixed size: the operator runs for months and meets shapes that never come back.
What is remembered is a pure function of its key, so a table changes how fast an object is
read, never what is read; ``uncached`` reads without any table, for the tests that check this
and for the benchmark that measures what the tables save.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_tables: list[Memo[Any, Any]] = []
_MAP: Any = object()
"""Opens the key of a map, so that no list's key is a map's."""


class Memo(Generic[K, V]):
    """``compute`` remembered for the last ``size`` keys it was asked about: ``lookup(key)``.
    An exception is not remembered: the key is worked out again (and fails again) when next
    asked."""

    __slots__ = ("_remembered", "compute", "lookup")

    def __init__(self, compute: Callable[[K], V], size: int) -> None:
        self.compute = compute
        self._remembered = lru_cache(maxsize=size)(compute)
        self.lookup: Callable[[K], V] = self._remembered
        _tables.append(self)

    def size(self) -> int:
        """How many keys it holds now."""
        return self._remembered.cache_info().currsize

    def clear(self) -> None:
        self._remembered.cache_clear()


@contextmanager
def uncached() -> Iterator[None]:
    """Within it, every memo table computes afresh and remembers nothing (not thread-safe:
    for tests and benchmarks, not for the operator)."""
    was = [table.lookup for table in _tables]
    for table in _tables:
        table.lookup = table.compute
    try:
        yield
    finally:
        for table, lookup in zip(_tables, was, strict=True):
            table.lookup = lookup


def tables() -> tuple[Memo[Any, Any], ...]:
    """Every memo table."""
    return tuple(_tables)


def clear_all() -> None:
    """Forget everything every table remembers."""
    for table in _tables:
        table.clear()


class Unkeyable(ValueError):
    """A value that cannot be a memo key (``frozen``)."""


def keyable(value: object) -> bool:
    """A scalar a memo key may hold: a string or an integer. Not a boolean or a float: in
    Python ``True == 1`` and ``1.0 == 1``, yet ``True`` is not the quantity ``1``, nor does
    ``str(1.0)`` read as ``str(1)``."""
    kind = type(value)
    return kind is str or kind is int


def frozen(value: Any) -> Hashable:
    """A JSON value (of maps, lists, strings, integers, nulls) as a memo key: two keys are
    equal only for equal values with the same types throughout. Raises Unkeyable for any
    other value."""
    if value is None or keyable(value):
        scalar: Hashable = value
        return scalar
    if isinstance(value, Mapping):
        out = [_MAP]
        for key, item in value.items():
            if type(key) is not str:
                raise Unkeyable(key)
            out += (key, frozen(item))
        return tuple(out)
    if type(value) is list:
        return tuple(frozen(item) for item in value)
    raise Unkeyable(value)


def thawed(key: Any) -> Any:
    """The JSON value a ``frozen`` key stands for."""
    if type(key) is not tuple:
        return key
    if key and key[0] is _MAP:
        return {key[i]: thawed(key[i + 1]) for i in range(1, len(key), 2)}
    return [thawed(item) for item in key]
