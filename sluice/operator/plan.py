"""What a cycle's result means as writes to workloads (Jobs and the other kinds sluice gates,
each held and released through its adapter): pure, no client, tested on its own.

A plan is three ordered phases. Victims first (reclaimed, preempted and requeued jobs give
their room back before anyone takes it), then admissions, then the pending reasons of the jobs
that wait. Each write names its Job, carries a JSON merge patch, the spec generation and queue
the decision rests on (its precondition: a tenant's move or resize since voids it, a status
update does not), and the Event to post once the write has landed. The executor
(``executor.py``) only carries a plan out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sluice.api.constants import (
    ADMISSION_GATE,
    ADMITTED_AT_ANNOTATION,
    FLAVOR_ASSIGNMENT_ANNOTATION,
    PENDING_REASON_ANNOTATION,
    QUEUE_LABEL,
    RECLAIMED_BY_ANNOTATION,
    REQUEUE_REASON_ANNOTATION,
    REQUEUED_AT_ANNOTATION,
    REQUEUES_ANNOTATION,
)
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import flavor_assignment_text
from sluice.api.objects import Obj
from sluice.api.topology import Assignment
from sluice.api.views import WorkloadView
from sluice.api.workloads import Adapter, adapter_for
from sluice.api.workloads.domain_patches import (
    admission_patch,
    merged,
    pod_annotation,
    pod_ops,
    pointer_token,
    restore_patch,
)
from sluice.api.workloads.flavor_patches import (
    NotEnforceable,
    flavor_admission_patch,
    flavor_restore_patch,
)
from sluice.api.workloads.job import JOB
from sluice.api.workloads.pod_flavors import (
    PodFlavor,
    pod_flavor_ops,
    pod_flavors,
    straggler_flavors,
)
from sluice.api.workloads.pods import PodMember, PodWorkload
from sluice.api.workloads.size_patches import size_release_patch, with_size_restore
from sluice.scheduler.model import CycleResult, Decision, PendingJob
from sluice.scheduler.readiness import backoff_reason

Basis = tuple[int, str]
"""What a decision about a workload rests on: its spec's generation and its queue."""

log = logging.getLogger("sluice.operator.plan")

WriteKind = Literal["admit", "reclaim", "preempt", "requeue", "reason", "restore"]

POSITION_REFRESH = 30.0
"""Seconds between two writes of a pending job's reason that differ only in its position."""


def basis(obj: Obj) -> Basis:
    meta = obj.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL) or ""
    return int(meta.get("generation") or 0), str(queue)


def rfc3339(value: datetime) -> str:
    """A time as the operator writes it: UTC, to the second."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


@dataclass(frozen=True, slots=True)
class Plan:
    victims: tuple[Write, ...] = ()
    admissions: tuple[Write, ...] = ()
    reasons: tuple[Write, ...] = ()
    pending: frozenset[str] | None = frozenset()
    """Every job that waits after the cycle (the executor forgets when it last wrote the
    position of any other); None: the plan says nothing of who waits (a decision pass)."""


def adapter_of(obj: Obj | None) -> Adapter:
    """The adapter of a stored workload (docs/workloads.md); a Job's when it names none."""
    if obj is None:
        return JOB
    found = adapter_for(str(obj.get("apiVersion") or JOB.api_version), str(obj.get("kind") or ""))
    return found or JOB


def _eviction(decision: Decision, now: datetime, decided: Basis | None, adapter: Adapter) -> Write:
    annotations: dict[str, str | None] = {ADMITTED_AT_ANNOTATION: None}
    if decision.action == "requeue":
        # The time is written to the second, and the Event must say what the Job says.
        written = now.astimezone(UTC).replace(microsecond=0)
        reason = backoff_reason(decision.requeues, written, decision.reason)
        annotations |= {
            RECLAIMED_BY_ANNOTATION: None,
            REQUEUES_ANNOTATION: str(decision.requeues),
            REQUEUED_AT_ANNOTATION: rfc3339(now),
            REQUEUE_REASON_ANNOTATION: decision.reason,
            PENDING_REASON_ANNOTATION: reason,
        }
        event = EventSpec("Requeued", f"suspended by sluice, {reason}", warning=True)
    else:
        annotations |= {
            RECLAIMED_BY_ANNOTATION: decision.for_job or "",
            PENDING_REASON_ANNOTATION: f"{decision.action}ed for {decision.for_job}",
        }
        title = "Reclaimed" if decision.action == "reclaim" else "Preempted"
        event = EventSpec(title, f"{decision.reason}; suspended by sluice")
    patch = {"metadata": {"annotations": annotations}, **adapter.suspend_patch(True)}
    return Write(decision.action, decision.job, patch, decided, event)


def _admission(decision: Decision, now: datetime, decided: Basis | None, adapter: Adapter) -> Write:
    patch = {
        "metadata": {
            "annotations": {
                ADMITTED_AT_ANNOTATION: rfc3339(now),
                PENDING_REASON_ANNOTATION: None,
                RECLAIMED_BY_ANNOTATION: None,
            }
        },
        **adapter.suspend_patch(False),
    }
    event = EventSpec("Admitted", f"admitted by queue {decision.queue}: {decision.reason}")
    return Write("admit", decision.job, patch, decided, event)


def _reason(
    pending: PendingJob, job: WorkloadView | None, clock: float, written: Mapping[str, float]
) -> Write | None:
    """Why a job waits, when that changed from what its stored object says (its latest view,
    ``job``). A change of position alone (the jobs ahead were admitted) is written at most
    every POSITION_REFRESH seconds per job, or each admission would rewrite every job queued
    behind it (``sluice job why`` derives the live position). An Event, a Warning as kubectl
    shows them, only when the cause itself changed."""
    if job is None or job.pending_reason == pending.reason:
        return None
    same_cause = job.pending_cause == pending.cause
    if same_cause and _refreshed_lately(pending, clock, written):
        return None
    patch = {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: pending.reason}}}
    event = None if same_cause else EventSpec("Pending", pending.reason, warning=True)
    return Write("reason", pending.job, patch, None, event)


def _refreshed_lately(pending: PendingJob, clock: float, written: Mapping[str, float]) -> bool:
    """Whether the job's reason was written less than POSITION_REFRESH seconds ago."""
    last = written.get(pending.job)
    return last is not None and clock - last < POSITION_REFRESH


def plan(
    result: CycleResult,
    workloads: Mapping[str, Obj],
    views: Mapping[str, WorkloadView],
    decided_on: Mapping[str, Basis],
    now: datetime,
    clock: float,
    positions_written: Mapping[str, float],
    pod_workloads: Mapping[str, PodWorkload] | None = None,
    flavors: Mapping[str, FlavorView] | None = None,
) -> Plan:
    """The writes of one cycle's result against the workloads as stored (``workloads``, by
    key: parsed only for the jobs decided on or to be given their templates back; ``views``,
    their latest views, for the others), the workloads of plain pods the cycle saw
    (``pod_workloads``, by key) and the Flavors (``flavors``, by name) admissions name.

    ``decided_on`` maps each job to the generation and queue the cycle saw; ``clock`` and
    ``positions_written`` (job -> clock of its last reason write) pace position updates.
    """
    pods = pod_workloads or {}
    named = flavors or {}
    victims: list[Write] = []
    admissions: list[Write] = []
    for d in result.decisions:
        try:
            write = _decision(d, workloads, views, decided_on, now, pods, named)
        except NotEnforceable as err:
            # Released without its flavor, its pods would go anywhere while counted in it.
            log.warning("event=admission-not-written job=%s reason=%s", d.job, err.reason)
            continue
        (admissions if d.action == "admit" else victims).append(write)
    reasons: list[Write | None] = []
    confined: list[str] = []  # waiting jobs whose latest view records an assignment or sizes
    for p in result.pending:
        workload = pods.get(p.job)
        if workload is None:
            view = views.get(p.job)
            reasons.append(_reason(p, view, clock, positions_written))
            if view is not None and (view.assignment or view.flavors or view.sized):
                confined.append(p.job)
        else:
            reasons.append(_pod_reason(p, workload, clock, positions_written))
    admitted = {d.job for d in result.decisions if d.action == "admit"}
    reasons = _with_restores(confined, workloads, admitted, reasons)
    for key, workload in pods.items():
        if workload.view is None:
            reasons.append(_group_waiting(workload, now))
        elif workload.stragglers and key not in admitted:
            release = _stragglers(workload, now, named)
            admissions.extend(() if release is None else (release,))
    return Plan(
        victims=tuple(victims),
        admissions=tuple(admissions),
        reasons=tuple(w for w in reasons if w is not None),
        pending=frozenset(p.job for p in result.pending),
    )


def _decision(
    d: Decision,
    workloads: Mapping[str, Obj],
    views: Mapping[str, WorkloadView],
    decided_on: Mapping[str, Basis],
    now: datetime,
    pods: Mapping[str, PodWorkload],
    flavors: Mapping[str, FlavorView],
) -> Write:
    """The write that carries out one decision, with the decision and when its workload was
    created (``plan``'s arguments); its domain and flavors go in the patch that releases
    it. Raises NotEnforceable when its flavors cannot be written."""
    workload = pods.get(d.job)
    seen = views.get(d.job)
    if workload is not None:
        write = _pod_decision(d, workload, now, flavors)
        seen = workload.view
    elif d.action == "admit":
        obj = workloads.get(d.job)  # parsed once (``stored.py``)
        adapter = adapter_of(obj)
        write = _admission(d, now, decided_on.get(d.job), adapter)
        extra = admission_patch(d.domain, obj, adapter)
        extra = flavor_admission_patch(d.flavors, obj, adapter, flavors, extra)
        if obj is not None:  # sizes (api.workloads.size_patches)
            extra = size_release_patch(d.sizes, obj, adapter, extra)
        if extra:
            write = replace(write, patch=merged(write.patch, extra))
    else:
        write = _eviction(d, now, decided_on.get(d.job), adapter_of(workloads.get(d.job)))
    created = seen.creation_timestamp if seen is not None else None
    return replace(write, decision=d, created=created)


def _with_restores(
    confined: list[str],
    jobs: Mapping[str, Obj],
    admitted: set[str],
    reasons: list[Write | None],
) -> list[Write | None]:
    """Each waiting workload that sluice had confined to Topology domains, admitted into
    flavors or admitted smaller (``confined``: its latest view records any of these; only
    those are looked at as stored) and that is suspended now gets its templates and sizes
    back as before (api.workloads.domain_patches, flavor_patches, size_patches), in the same
    write as its pending reason when it has one. A Job's templates may change only once its
    pods are gone: the API server refuses the write till then, and a later cycle writes it
    again."""
    by_job = {w.workload: i for i, w in enumerate(reasons) if w is not None and w.pods is None}
    out = list(reasons)
    for job in confined:
        obj = None if job in admitted else jobs.get(job)
        if obj is None:
            continue
        i = by_job.get(job)
        write = out[i] if i is not None else None
        adapter, base = adapter_of(obj), write.patch if write is not None else None
        restore = restore_patch(obj, adapter, base)
        restore = (
            flavor_restore_patch(obj, adapter, base if restore is None else restore) or restore
        )
        restore = with_size_restore(obj, adapter, restore, base)
        if restore is None:
            continue
        # A template inside a list is written whole: the write rests on the spec it was
        # worked out from.
        if write is None:
            out.append(Write("restore", job, restore, basis(obj)))
        else:
            assert i is not None
            out[i] = replace(write, patch=restore, basis=basis(obj))
    return out


# Plain pods (docs/workloads.md, "Plain pods and pod groups") ---------------------------------


def _annotation_path(key: str) -> str:
    return "/metadata/annotations/" + pointer_token(key)


def _release_patch(
    member: PodMember, now: datetime, domain: str = "", flavor: PodFlavor | None = None
) -> list[dict[str, Any]]:
    """Remove sluice's gate from a pod that has not changed since the cycle saw it, and stamp
    its admission; put it in its Topology ``domain`` and on its ``flavor``'s nodes first
    (api.workloads.domain_patches, api.workloads.flavor_patches)."""
    gate = f"/spec/schedulingGates/{member.gate_index}"
    ops: list[dict[str, Any]] = [
        {"op": "replace", "path": "/metadata/resourceVersion", "value": member.resource_version},
        {"op": "test", "path": f"{gate}/name", "value": ADMISSION_GATE},
        *pod_ops(member, domain),
    ]
    stamps = {ADMITTED_AT_ANNOTATION: rfc3339(now), **pod_annotation(domain, member)}
    if flavor is not None:
        asked = Assignment.parse(domain)
        also = {asked.level: asked.value} if asked is not None else {}
        flavor_ops, added = pod_flavor_ops(member, *flavor, also)
        ops += flavor_ops
        stamps[FLAVOR_ASSIGNMENT_ANNOTATION] = flavor_assignment_text((added,))
    ops.append({"op": "remove", "path": gate})
    if not member.has_annotations:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": stamps})
        return ops
    for key, value in stamps.items():
        ops.append({"op": "add", "path": _annotation_path(key), "value": value})
    if member.pending_reason is not None:
        ops.append({"op": "remove", "path": _annotation_path(PENDING_REASON_ANNOTATION)})
    return ops


def _release(
    key: str,
    members: Sequence[PodMember],
    now: datetime,
    event: EventSpec | None,
    domain: str = "",
    flavors: Mapping[str, PodFlavor] | None = None,
) -> Write:
    """``flavors``: the flavor of each pod (by key) that goes on one."""
    on = flavors or {}
    changes = tuple(
        PodChange(m.key, m.uid, m.resource_version, _release_patch(m, now, domain, on.get(m.key)))
        for m in members
    )
    return Write("admit", key, {}, None, event, changes)


def _stragglers(
    workload: PodWorkload, now: datetime, flavors: Mapping[str, FlavorView]
) -> Write | None:
    """The release of the gated pods of an admitted workload, on the flavors of the pods they
    replace; None when one of those cannot be told or no longer exists (logged)."""
    try:
        on = straggler_flavors(workload, flavors)
    except NotEnforceable as err:
        log.warning("event=admission-not-written job=%s reason=%s", workload.key, err.reason)
        return None
    return _release(workload.key, workload.stragglers, now, None, workload.domain, on)


def _pod_decision(
    decision: Decision, workload: PodWorkload, now: datetime, flavors: Mapping[str, FlavorView]
) -> Write:
    """Admitted: every gated pod of it released, each on its flavor. A victim: every pod of
    it that runs deleted (their controller creates them again, gated, and they queue anew).
    Raises NotEnforceable when its flavors cannot be written."""
    if decision.action == "admit":
        gated = [m for m in workload.members if m.gated]
        event = EventSpec("Admitted", f"admitted by queue {decision.queue}: {decision.reason}")
        on = pod_flavors(decision.flavors, workload, gated, flavors)
        return _release(workload.key, gated, now, event, decision.domain, on)
    doomed = tuple(
        PodChange(m.key, m.uid) for m in workload.members if not m.gated and not m.finished
    )
    if decision.action == "requeue":
        event = EventSpec("Requeued", f"pods deleted by sluice: {decision.reason}", warning=True)
    else:
        title = "Reclaimed" if decision.action == "reclaim" else "Preempted"
        event = EventSpec(title, f"{decision.reason}; pods deleted by sluice")
    return Write(decision.action, workload.key, {}, None, event, doomed)


def _reason_changes(members: Sequence[PodMember], text: str) -> tuple[PodChange, ...]:
    patch = {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: text}}}
    return tuple(
        PodChange(m.key, m.uid, patch=patch)
        for m in members
        if m.gated and m.pending_reason != text
    )


def _pod_reason(
    pending: PendingJob, workload: PodWorkload, clock: float, written: Mapping[str, float]
) -> Write | None:
    """Why a workload of plain pods waits, on each of its gated pods, paced as a Job's."""
    text = pending.reason
    changes = _reason_changes(workload.members, text)
    if not changes:
        return None
    view = workload.view
    same_cause = view is not None and view.pending_cause == pending.cause
    recorded = view is not None and view.pending_reason is not None
    if recorded and same_cause and _refreshed_lately(pending, clock, written):
        return None
    event = None if same_cause else EventSpec("Pending", text, warning=True)
    return Write("reason", pending.job, {}, None, event, changes)


GROUP_SETTLE = timedelta(seconds=5)
"""How long after its latest pod was created a group that is not a workload yet says what it
waits for: a group still being created would otherwise be told so once per pod."""


def _group_waiting(workload: PodWorkload, now: datetime) -> Write | None:
    """A group that is not a workload yet says what it waits for, on each of its pods, once
    it has stopped growing for GROUP_SETTLE (a later cycle, at the latest the resync)."""
    if now - max(m.creation_timestamp for m in workload.members) < GROUP_SETTLE:
        return None
    changes = _reason_changes(workload.members, workload.waiting)
    if not changes:
        return None
    first = workload.members[0].pending_reason
    event = None if first == workload.waiting else EventSpec("Pending", workload.waiting, True)
    return Write("reason", workload.key, {}, None, event, changes)
