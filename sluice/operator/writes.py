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

WriteKind = Literal["admit", "reclaim", "preempt", "requeue", "reason", "restore", "record"]


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


TAKEN_BACK = {"reclaim": "Reclaimed", "preempt": "Preempted"}


def decision_event(decision: Decision, done: str, reason: str = "") -> EventSpec:
    """The Event a decision's write posts on its workload. An admission names its queue
    (``done``: what was admitted, "admitted" or "growth admitted"); a requeue says what sluice
    did and why (``reason``, else the decision's), as a warning; a victim says why, then what
    sluice did to it."""
    if decision.action == "admit":
        return EventSpec("Admitted", f"{done} by queue {decision.queue}: {decision.reason}")
    if decision.action == "requeue":
        return EventSpec("Requeued", f"{done}: {reason or decision.reason}", warning=True)
    return EventSpec(TAKEN_BACK[decision.action], f"{decision.reason}; {done}")


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
class Beside:
    """A JSON patch of an object that is not the workload but carries out its decision (the
    RayCluster a RayJob runs, whose workers a shrink names to KubeRay): written before the
    workload's own patch, which waits on it landing, so the workload's record never says
    less than what runs."""

    group: str
    version: str
    plural: str
    key: str
    """namespace/name; "" when the object is not known: the write lands nowhere, and the
    workload's patch is not written either."""
    patch: tuple[Mapping[str, Any], ...]


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
    beside: Beside | None = None
    """Written first, the workload's patch only once it landed (``Beside``)."""
