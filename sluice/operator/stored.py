"""The stored workloads, each kept as its compact JSON text rather than as parsed objects.

A Job parsed into Python dicts and strings takes several times the bytes of its JSON, and
the operator keeps every managed workload of the cluster (docs/operations.md, *Sizing*).
What the scheduling passes read of a workload is its view (``ClusterState.reads``); the
object itself is read again only to write to it (a decision, a restore, the executor's
precondition) or to read it anew, so it is kept as text and parsed when asked for. Its
resourceVersion is kept beside the text: each watch event compares with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from sluice.api.objects import Obj

_COMPACT = json.JSONEncoder(separators=(",", ":"), check_circular=False)


def version_of(obj: Obj | None) -> int | None:
    """An object's resourceVersion as an integer (``as_version``)."""
    return as_version(((obj or {}).get("metadata") or {}).get("resourceVersion"))


def as_version(value: object) -> int | None:
    """resourceVersions are opaque, but the API server's are integers."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Packed:
    """One stored object packed as its compact JSON text, with its resourceVersion (None when
    not an integer) beside it."""

    version: int | None
    text: str

    def parsed(self) -> dict[str, Any]:
        """A new dict each time: a caller may change it without changing what is stored."""
        parsed: dict[str, Any] = json.loads(self.text)
        return parsed


class Stored(MutableMapping[str, Obj]):
    """Key -> object, kept as ``Packed``: reading a key parses it anew."""

    def __init__(self) -> None:
        self._packed: dict[str, Packed] = {}

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self._packed[key].parsed()

    def __setitem__(self, key: str, obj: Obj) -> None:
        self._packed[key] = Packed(version_of(obj), _COMPACT.encode(obj))

    def __delitem__(self, key: str) -> None:
        del self._packed[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)

    def __contains__(self, key: object) -> bool:
        return key in self._packed

    def packed(self, key: str) -> Packed | None:
        """What is stored under the key, unparsed (the same record until it is replaced)."""
        return self._packed.get(key)

    def version(self, key: str) -> int | None:
        """The stored object's resourceVersion, without parsing it."""
        kept = self._packed.get(key)
        return None if kept is None else kept.version
