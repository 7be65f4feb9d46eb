"""Admitted but not running: when an admitted job gives its quota back because its pods were
not scheduled in time (``podsReadyTimeout``), and how long it then waits before it may be
admitted again (an exponential back-off).

A job is waiting for its pods while one of them exists unbound (not finished, not being
deleted), counted from the later of its admission and that pod's creation, so a job whose
node fails later gets the same time again for its new pods; or while no pod of it has been
created since its admission. Pods the Job controller has not yet recreated after a failure
are its business (it backs off on purpose) and do not count. Nor do the pods of a workload
admitted with a record of its sizes that still carry sluice's gate: they are its growth,
waiting for the queue, not for a node (docs/elastic.md, *Timeouts and shrinking*).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sluice.api.config import format_duration
from sluice.api.views import PodView, WorkloadView

BACKOFF_BASE = timedelta(minutes=1)
BACKOFF_MAX = timedelta(hours=1)
SHOWN_PODS = 3
"""Pods named per kube-scheduler message in a reason; the rest are counted."""


def backoff(requeues: int) -> timedelta:
    """How long a job requeued ``requeues`` times waits: 1m, 2m, 4m ... at most 1h."""
    if requeues <= 0:
        return timedelta(0)
    return min(BACKOFF_BASE * (1 << min(requeues - 1, 16)), BACKOFF_MAX)


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def backoff_reason(requeues: int, requeued_at: datetime, why: str) -> str:
    until = requeued_at + backoff(requeues)
    times = "once" if requeues == 1 else f"{requeues} times"
    return f"requeued {times}, waits until {_time(until)}: {why}"


def backing_off(job: WorkloadView, now: datetime) -> str | None:
    """Why a pending job may not be admitted yet, or None once its back-off is over."""
    if job.requeued_at is None or job.requeues <= 0:
        return None
    if now >= job.requeued_at + backoff(job.requeues):
        return None
    return backoff_reason(job.requeues, job.requeued_at, job.requeue_reason or "")


def unready(
    job: WorkloadView, pods: Sequence[PodView], now: datetime, timeout: timedelta
) -> str | None:
    """Why an admitted job gives its quota back now, or None while it may keep it."""
    if timeout <= timedelta(0) or job.admitted_at is None or job.pod_count <= 0:
        return None
    admitted = job.admitted_at
    if now - admitted < timeout:
        return None  # whatever its pods do, it had less than the timeout since admission
    waiting = [p for p in pods if not p.finished and p.node is None and not p.terminating]
    if job.sized:  # a resizable workload's gated pods are its growth, waiting for the queue
        waiting = [p for p in waiting if not p.gated]
    if waiting:
        since = max(admitted, min(p.creation_timestamp for p in waiting))
        if now - since < timeout:
            return None
        limit = format_duration(timeout)
        return f"{len(waiting)} of its pods not scheduled within {limit}: {_grouped(waiting)}"
    if any(p.creation_timestamp >= admitted for p in pods):
        return None
    return f"no pod of it was created within {format_duration(timeout)} of its admission"


def _grouped(pods: Sequence[PodView]) -> str:
    """``a, b (kube-scheduler's message); c (another message)``, the most pods first."""
    by_message: dict[str, list[str]] = {}
    for pod in sorted(pods, key=lambda p: p.name):
        by_message.setdefault(pod.unschedulable or "no word from kube-scheduler", []).append(
            pod.name
        )
    parts = []
    for message, names in sorted(by_message.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(names[:SHOWN_PODS])
        more = f" and {len(names) - SHOWN_PODS} more" if len(names) > SHOWN_PODS else ""
        parts.append(f"{shown}{more} ({message})")
    return "; ".join(parts)
