"""The writes a plan is made of (``plan.py``): each names its workload, carries a merge patch
or the changes of its pods, what the decision rests on and the Event to post once it landed.
Pure, no client: the executor (``executor.py``) carries them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sluice.api.constants import QUEUE_LABEL
from sluice.api.objects import Obj
from sluice.api.workloads import Adapter, adapter_for
from sluice.api.workloads.job import JOB
from sluice.scheduler.model import Decision

Basis = tuple[int, str]
"""What a decision about a workload rests on: its spec's generation and its queue."""

WriteKind = Literal["admit", "reclaim", "preempt", "requeue", "reason", "restore"]


def basis(obj: Obj) -> Basis:
    meta = obj.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL) or ""
    return int(meta.get("generation") or 0), str(queue)


def rfc3339(value: datetime) -> str:
    """A time as the operator writes it: UTC, to the second."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def adapter_of(obj: Obj | None) -> Adapter:
    """The adapter of a stored workload (docs/workloads.md); a Job's when it names none."""
    if obj is None:
        return JOB
    found = adapter_for(str(obj.get("apiVersion") or JOB.api_version), str(obj.get("kind") or ""))
    return found or JOB


@dataclass(frozen=True, slots=True)
class EventSpec:
    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True, slots=True)
class PodChange:
    """One write of one pod of a plain-pod workload: a JSON patch (a list of operations), a
    merge patch (a mapping), or, with neither, its deletion. ``version`` and ``uid`` are the
    pod's as the cycle saw it: a patch that carries the version is refused if the pod has
    changed since, a deletion if it is another pod of that name."""

    pod: str  # namespace/name
    uid: str
    version: str = ""
    patch: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Write:
    """One merge patch of one workload, and the Event that announces it once it landed; or,
    for a workload of plain pods, the writes to its pods (``pods``), the Event going on the
    first."""

    kind: WriteKind
    workload: str  # namespace/name
    patch: Mapping[str, Any]
    basis: Basis | None = None  # None: valid whatever it has become (a pending reason)
    event: EventSpec | None = None
    pods: tuple[PodChange, ...] | None = None
    """None: a write of the workload object itself."""
    decision: Decision | None = None
    """The decision the write carries out (None: a reason, a restore, a straggler's release):
    the metrics count it once it has landed."""
    created: datetime | None = None
    """When the workload decided on was created: an admission's wait is measured from it."""
