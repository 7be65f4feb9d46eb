"""Reading a record sluice keeps on a workload per pod set: a JSON object in one annotation,
keyed by pod set name (``sluice.dev/flavor-assignment``, docs/flavors.md;
``sluice.dev/admitted-size``, docs/elastic.md).

Each record has its own entries; this reads the object around them. A record is read whole
or not at all: when any part of it is not what sluice writes, it reads as none, so what is
undone from it is never half of what was done.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def pod_set_records(
    annotations: Mapping[str, Any], key: str, entry: Callable[[str, Any], T | None]
) -> tuple[T, ...]:
    """The entries of the record in annotation ``key``, sorted by pod set name, each read by
    ``entry`` (pod set name, its JSON value; None when it is not one sluice writes); () when
    none is recorded, the text is not a JSON object, or any entry reads as None."""
    raw = annotations.get(key)
    if not isinstance(raw, str):
        return ()
    try:
        body = json.loads(raw)
    except ValueError:
        return ()
    if not isinstance(body, dict):
        return ()
    out: list[T] = []
    for pod_set, value in sorted(body.items()):
        read = entry(str(pod_set), value)
        if read is None:
            return ()
        out.append(read)
    return tuple(out)
