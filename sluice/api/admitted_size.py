"""The record of a workload admitted smaller than it asked (``sluice.dev/admitted-size``,
docs/elastic.md, *Admitted smaller*).

Per pod set admitted smaller: the pods it asked and the pods admitted, and each field sluice
lowered (``spec.parallelism``, a worker group's ``replicas``) with the value it had. Putting
the asked size back reads this record and never the spec it came from, so a requeue restores
exactly what was lowered. Written as compact JSON with sorted keys, so the same sizes are
always the same text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.api.constants import ADMITTED_SIZE_ANNOTATION
from sluice.api.pod_set_records import pod_set_records


@dataclass(frozen=True, slots=True)
class SizeRecord:
    """One pod set admitted smaller: its pods asked and admitted, and the fields lowered."""

    pod_set: str
    asked: int
    admitted: int
    fields: tuple[tuple[str, int], ...] = ()
    """Each field lowered (as messages name it), with the value it had."""


def asked_size(count: int, record: SizeRecord) -> int:
    """The pods a pod set asks, its spec saying ``count`` and its record ``record``: what
    it asked before sluice lowered it, while it still holds the size sluice wrote; else
    ``count``, since a size its owner changed since is its own."""
    return record.asked if count == record.admitted else count


def size_record_text(records: Sequence[SizeRecord]) -> str:
    """The annotation's value for these pod sets."""
    body = {
        r.pod_set: {"admitted": r.admitted, "asked": r.asked, "fields": dict(r.fields)}
        for r in records
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def size_records_of(annotations: Mapping[str, Any]) -> tuple[SizeRecord, ...]:
    """The pod sets recorded in a workload's annotations, by name; () when none is recorded
    or the record is not one sluice writes (nothing is then put back)."""
    return pod_set_records(annotations, ADMITTED_SIZE_ANNOTATION, _entry)


def _count(value: Any) -> int | None:
    """A count as sluice writes one; None for anything else."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def _entry(pod_set: str, entry: Any) -> SizeRecord | None:
    if not isinstance(entry, dict):
        return None
    asked, admitted, fields = (
        _count(entry.get("asked")),
        _count(entry.get("admitted")),
        entry.get("fields"),
    )
    if asked is None or admitted is None or admitted > asked:
        return None
    if not isinstance(fields, dict) or any(_count(v) is None for v in fields.values()):
        return None
    return SizeRecord(
        pod_set, asked, admitted, tuple(sorted((str(k), v) for k, v in fields.items()))
    )
