"""Resource vectors: exact milli-unit integers per resource name.

Absent and zero are the same thing in a vector. What an absent resource *means* in a limit
differs by field (0 in ``deserved`` and ``guarantee``, unlimited in ``capability``); callers say
which through the comparison they use, never by storing a sentinel.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, TypeVar, overload

from sluice.api.quantity import QuantityError, format_quantity, parse_quantity

_T = TypeVar("_T")


class Resources(Mapping[str, int]):
    """An immutable mapping of resource name to milli-units, without zero entries (but for a
    limit made by ``Resources.limit``, which keeps the zeros it names)."""

    __slots__ = ("_hash", "_m")

    def __init__(self, values: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        items = values.items() if isinstance(values, Mapping) else values
        self._m: dict[str, int] = {name: amount for name, amount in items if amount != 0}
        self._hash: int | None = None

    @classmethod
    def limit(cls, values: Mapping[str, int]) -> Resources:
        """A limit that keeps the resources it names at 0: in a ``capability`` a named 0
        allows none of that resource, where an absent one is unlimited."""
        out = cls()
        out._m = dict(values)
        return out

    @classmethod
    def parse(cls, raw: Any, field: str = "resources") -> Resources:
        """Read a Kubernetes resource map ``{"cpu": "4", "memory": "8Gi"}``.

        Raises QuantityError naming ``field.resource`` for anything that is not a quantity.
        """
        if raw is None:
            return EMPTY
        if not isinstance(raw, Mapping):
            raise QuantityError(f"{field}: expected a map of resource name to quantity")
        out: dict[str, int] = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not name:
                raise QuantityError(f"{field}: resource names must be non-empty strings")
            try:
                out[name] = parse_quantity(value)
            except QuantityError as err:
                where = f"{field}.{name}" if field else name
                raise QuantityError(f"{where}: {err}") from None
        return cls(out)

    # Mapping protocol -------------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._m[name]

    def get_amount(self, name: str) -> int:
        return self._m.get(name, 0)

    @property
    def amounts(self) -> Mapping[str, int]:
        """The mapping itself, read-only, for loops that look up many names (its ``get`` is
        the dict's own)."""
        return self._m

    def __iter__(self) -> Iterator[str]:
        return iter(self._m)

    @overload
    def get(self, name: str, /) -> int | None: ...

    @overload
    def get(self, name: str, /, default: int | _T) -> int | _T: ...

    def get(self, name: str, /, default: object = None) -> object:
        # The Mapping mixin raises and catches a KeyError for every absent name.
        return self._m.get(name, default)

    # The Mapping mixins go through __getitem__ one name at a time; the scheduler reads these
    # views hundreds of thousands of times a cycle, so hand out the dict's own (read-only) views.
    def items(self) -> ItemsView[str, int]:
        return self._m.items()

    def keys(self) -> KeysView[str]:
        return self._m.keys()

    def values(self) -> ValuesView[int]:
        return self._m.values()

    def __contains__(self, name: object) -> bool:
        return name in self._m

    def __len__(self) -> int:
        return len(self._m)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, Resources):
            return self._m == other._m
        if isinstance(other, Mapping):
            return self._m == {k: v for k, v in other.items() if v != 0}
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:  # immutable: hashed once
            self._hash = hash(frozenset(self._m.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"Resources({self.to_kube()!r})"

    def __bool__(self) -> bool:
        return bool(self._m)

    # Arithmetic -------------------------------------------------------------------------
    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._m)
        for name, amount in other.items():
            out[name] = out.get(name, 0) + amount
        return Resources(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._m)
        for name, amount in other.items():
            out[name] = out.get(name, 0) - amount
        return Resources(out)

    def scale(self, factor: int) -> Resources:
        if factor == 1 and 0 not in self._m.values():  # immutable: itself (a limit drops its zeros)
            return self
        return Resources({name: amount * factor for name, amount in self._m.items()})

    def maximum(self, other: Mapping[str, int]) -> Resources:
        names = set(self._m) | set(other)
        return Resources({n: max(self._m.get(n, 0), other.get(n, 0)) for n in names})

    def minimum(self, other: Mapping[str, int]) -> Resources:
        """Per-resource minimum where both are plain vectors (absent = 0)."""
        names = set(self._m) & set(other)
        return Resources({n: min(self._m[n], other[n]) for n in names})

    # Comparisons ------------------------------------------------------------------------
    def exceeding(
        self, limit: Mapping[str, int], *, absent_is_unlimited: bool
    ) -> list[tuple[str, int, int]]:
        """The resources over the limit, as (name, amount, limit) sorted by name."""
        over: list[tuple[str, int, int]] = []
        for name in sorted(self._m):
            amount = self._m[name]
            if amount <= 0:
                continue
            if name in limit:
                if amount > limit[name]:
                    over.append((name, amount, limit[name]))
            elif not absent_is_unlimited:
                over.append((name, amount, 0))
        return over

    # Output -----------------------------------------------------------------------------
    def to_kube(self) -> dict[str, str]:
        """Quantity strings as Kubernetes writes them, sorted by resource name."""
        return {name: format_quantity(self._m[name], name) for name in sorted(self._m)}

    def describe(self) -> str:
        """``cpu 4, memory 8Gi`` for messages."""
        if not self._m:
            return "nothing"
        return ", ".join(f"{name} {qty}" for name, qty in self.to_kube().items())


EMPTY = Resources()


def describe_amount(name: str, milli: int) -> str:
    """``cpu 6`` for messages: the resource and its quantity as Kubernetes writes it."""
    return f"{name} {format_quantity(milli, name)}"
