"""The writes that say why a workload waits (``plan.py``'s last phase): on a Job or another
gated kind, on an admitted workload whose growth waits, on each gated pod of a workload of
plain pods, and on a group of pods that is not a workload yet. A change of position alone is
paced; an Event goes out only when the cause itself changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from sluice.api.constants import PENDING_REASON_ANNOTATION
from sluice.api.views import (
    WorkloadView,
    growth_reason,
    split_growth_reason,
    split_pending_reason,
)
from sluice.api.workloads.pods import PodMember, PodWorkload
from sluice.operator.writes import EventSpec, PodChange, Write
from sluice.scheduler.growth import growth_pods
from sluice.scheduler.model import PendingJob

POSITION_REFRESH = 30.0
"""Seconds between two writes of a pending job's reason that differ only in its position."""

GROUP_SETTLE = timedelta(seconds=5)
"""How long after its latest pod was created a group that is not a workload yet says what it
waits for: a group still being created would otherwise be told so once per pod."""


def job_reason(
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


def growth_pending_reason(
    pending: PendingJob,
    key: str,
    job: WorkloadView | None,
    clock: float,
    written: Mapping[str, float],
) -> Write | None:
    """Why an admitted workload's growth waits (its growth entry ``pending``), written on
    the workload ``key`` as its pending reason, told apart by how it starts
    (``growth_reason``): paced and announced as a waiting job's (``job_reason``)."""
    if job is None or not job.phase.admitted:
        return None
    text = growth_reason(growth_pods(job), pending.reason)
    if job.pending_reason == text:
        return None
    said = split_growth_reason(job.pending_reason)
    same_cause = said is not None and split_pending_reason(said)[1] == pending.cause
    if same_cause and _refreshed_lately(replace(pending, job=key), clock, written):
        return None
    patch = {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: text}}}
    event = None if same_cause else EventSpec("Pending", text, warning=True)
    return Write("reason", key, patch, None, event)


def growth_reasons_gone(views: Mapping[str, WorkloadView], growing: set[str]) -> list[Write]:
    """The growth reason dropped from each admitted workload whose growth no longer waits
    (admitted, taken back, or its size lowered again)."""
    return [
        Write("reason", key, {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: None}}})
        for key, view in views.items()
        if view.sized
        and key not in growing
        and view.phase.admitted
        and split_growth_reason(view.pending_reason) is not None
    ]


def _refreshed_lately(pending: PendingJob, clock: float, written: Mapping[str, float]) -> bool:
    """Whether the job's reason was written less than POSITION_REFRESH seconds ago."""
    last = written.get(pending.job)
    return last is not None and clock - last < POSITION_REFRESH


# Plain pods (docs/workloads.md, "Plain pods and pod groups") ---------------------------------


def _reason_changes(members: Sequence[PodMember], text: str) -> tuple[PodChange, ...]:
    patch = {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: text}}}
    return tuple(
        PodChange(m.key, m.uid, patch=patch)
        for m in members
        if m.gated and m.pending_reason != text
    )


def pod_reason(
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


def group_waiting(workload: PodWorkload, now: datetime) -> Write | None:
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
