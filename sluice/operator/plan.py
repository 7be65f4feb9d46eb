"""What a cycle's result means as writes to Jobs: pure, no client, tested on its own.

A plan is three ordered phases. Victims first (reclaimed, preempted and requeued jobs give
their room back before anyone takes it), then admissions, then the pending reasons of the jobs
that wait. Each write names its Job, carries a JSON merge patch, the spec generation and queue
the decision rests on (its precondition: a tenant's move or resize since voids it, a status
update does not), and the Event to post once the write has landed. The executor
(``executor.py``) only carries a plan out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sluice.api.constants import (
    ADMITTED_AT_ANNOTATION,
    PENDING_REASON_ANNOTATION,
    QUEUE_LABEL,
    RECLAIMED_BY_ANNOTATION,
    REQUEUE_REASON_ANNOTATION,
    REQUEUED_AT_ANNOTATION,
    REQUEUES_ANNOTATION,
)
from sluice.api.views import split_pending_reason
from sluice.scheduler.model import CycleResult, Decision, PendingJob
from sluice.scheduler.readiness import backoff_reason

Obj = Mapping[str, Any]

Basis = tuple[int, str]
"""What a decision about a Job rests on: its spec's generation and its queue."""

WriteKind = Literal["admit", "reclaim", "preempt", "requeue", "reason"]

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
class Write:
    """One merge patch of one Job, and the Event that announces it once it landed."""

    kind: WriteKind
    job: str  # namespace/name
    patch: Mapping[str, Any]
    basis: Basis | None = None  # None: valid whatever the Job has become (a pending reason)
    event: EventSpec | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    victims: tuple[Write, ...] = ()
    admissions: tuple[Write, ...] = ()
    reasons: tuple[Write, ...] = ()
    pending: frozenset[str] = frozenset()
    """Every job that waits after the cycle (the executor forgets when it last wrote the
    position of any other)."""


def _eviction(decision: Decision, now: datetime, decided: Basis | None) -> Write:
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
    patch = {"metadata": {"annotations": annotations}, "spec": {"suspend": True}}
    return Write(decision.action, decision.job, patch, decided, event)


def _admission(decision: Decision, now: datetime, decided: Basis | None) -> Write:
    patch = {
        "metadata": {
            "annotations": {
                ADMITTED_AT_ANNOTATION: rfc3339(now),
                PENDING_REASON_ANNOTATION: None,
                RECLAIMED_BY_ANNOTATION: None,
            }
        },
        "spec": {"suspend": False},
    }
    event = EventSpec("Admitted", f"admitted by queue {decision.queue}: {decision.reason}")
    return Write("admit", decision.job, patch, decided, event)


def _reason(
    pending: PendingJob, job: Obj | None, clock: float, written: Mapping[str, float]
) -> Write | None:
    """Why a job waits, when that changed. A change of position alone (the jobs ahead were
    admitted) is written at most every POSITION_REFRESH seconds per job, or each admission
    would rewrite every job queued behind it (``sluice job why`` derives the live position).
    An Event, a Warning as kubectl shows them, only when the cause itself changed."""
    if job is None:
        return None
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    previous = annotations.get(PENDING_REASON_ANNOTATION)
    text = pending.reason
    if previous == text:
        return None
    same_cause = split_pending_reason(previous)[1] == pending.cause
    last = written.get(pending.job)
    if same_cause and last is not None and clock - last < POSITION_REFRESH:
        return None
    patch = {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: text}}}
    event = None if same_cause else EventSpec("Pending", text, warning=True)
    return Write("reason", pending.job, patch, None, event)


def plan(
    result: CycleResult,
    jobs: Mapping[str, Obj],
    decided_on: Mapping[str, Basis],
    now: datetime,
    clock: float,
    positions_written: Mapping[str, float],
) -> Plan:
    """The writes of one cycle's result against the Jobs as stored (``jobs``, by key).

    ``decided_on`` maps each job to the generation and queue the cycle saw; ``clock`` and
    ``positions_written`` (job -> clock of its last reason write) pace position updates.
    """
    victims = [
        _eviction(d, now, decided_on.get(d.job)) for d in result.decisions if d.action != "admit"
    ]
    admissions = [
        _admission(d, now, decided_on.get(d.job)) for d in result.decisions if d.action == "admit"
    ]
    reasons: Sequence[Write | None] = [
        _reason(p, jobs.get(p.job), clock, positions_written) for p in result.pending
    ]
    return Plan(
        victims=tuple(victims),
        admissions=tuple(admissions),
        reasons=tuple(w for w in reasons if w is not None),
        pending=frozenset(p.job for p in result.pending),
    )
