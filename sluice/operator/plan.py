"""What a cycle's result means as writes to workloads (Jobs and the other kinds sluice gates,
each held and released through its adapter): pure, no client, tested on its own.

A plan is three ordered phases. Victims first (reclaimed, preempted and requeued jobs give
their room back before anyone takes it), then admissions, then the pending reasons of the jobs
that wait. Each write names its Job, carries a JSON merge patch, the spec generation and queue
the decision rests on (its precondition: a tenant's move or resize since voids it, a status
update does not), and the Event to post once the write has landed (``writes.py``). The
executor (``executor.py``) only carries a plan out.

This module orders the writes and makes a Job's own (released, suspended); the others are
worked out where they live: the templates a release confines and a requeue restores
(``template_writes.py``), a size raised or lowered (``size_writes.py``), pods released or
deleted (``pod_writes.py``) and why a workload waits (``reason_writes.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from sluice.api.constants import (
    ADMITTED_AT_ANNOTATION,
    PENDING_REASON_ANNOTATION,
    RECLAIMED_BY_ANNOTATION,
    REQUEUE_REASON_ANNOTATION,
    REQUEUED_AT_ANNOTATION,
    REQUEUES_ANNOTATION,
)
from sluice.api.flavor import FlavorView
from sluice.api.objects import Obj
from sluice.api.views import WorkloadView
from sluice.api.workloads import Adapter
from sluice.api.workloads.domain_patches import merged
from sluice.api.workloads.flavor_patches import NotEnforceable
from sluice.api.workloads.pods import PodWorkload
from sluice.operator.pod_writes import gate_release, pod_decision, stragglers
from sluice.operator.reason_writes import (
    group_waiting,
    growth_pending_reason,
    growth_reasons_gone,
    job_reason,
    pod_reason,
)
from sluice.operator.size_writes import growth, shrink
from sluice.operator.template_writes import release_patch, with_restores
from sluice.operator.writes import Basis, EventSpec, Write, adapter_of, rfc3339
from sluice.scheduler.growth import grown_workload
from sluice.scheduler.model import CycleResult, Decision
from sluice.scheduler.readiness import backoff_reason

log = logging.getLogger("sluice.operator.plan")


def written_on(decision: Decision) -> str:
    """The workload a decision is written on, whose spec it rests on: its own, or for an
    admitted growth entry (sluice/scheduler/growth.py) the workload it grows."""
    return grown_workload(decision.job) or decision.job


@dataclass(frozen=True, slots=True)
class Plan:
    victims: tuple[Write, ...] = ()
    admissions: tuple[Write, ...] = ()
    reasons: tuple[Write, ...] = ()
    pending: frozenset[str] | None = frozenset()
    """Every job that waits after the cycle (the executor forgets when it last wrote the
    position of any other); None: the plan says nothing of who waits (a decision pass)."""


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
    explains: bool = True,
) -> Plan:
    """The writes of one cycle's result against the workloads as stored (``workloads``, by
    key: parsed only for the jobs decided on or to be given their templates back; ``views``,
    their latest views, for the others), the workloads of plain pods the cycle saw
    (``pod_workloads``, by key) and the Flavors (``flavors``, by name) admissions name.

    ``decided_on`` maps each job to the generation and queue the cycle saw; ``clock`` and
    ``positions_written`` (job -> clock of its last reason write) pace position updates.
    ``explains``: the result says who waits (the full pass): growth reasons of workloads whose
    growth no longer waits are then dropped, which looks at every stored workload.
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
    growing: set[str] = set()  # admitted workloads whose growth waits
    for p in result.pending:
        workload = pods.get(p.job)
        grows = grown_workload(p.job)
        if grows is not None:
            growing.add(grows)
            reasons.append(
                growth_pending_reason(p, grows, views.get(grows), clock, positions_written)
            )
        elif workload is None:
            view = views.get(p.job)
            reasons.append(job_reason(p, view, clock, positions_written))
            if view is not None and (view.assignment or view.flavors or view.sized):
                confined.append(p.job)
        else:
            reasons.append(pod_reason(p, workload, clock, positions_written))
    admitted = {d.job for d in result.decisions if d.action == "admit"}
    reasons = with_restores(confined, workloads, admitted, reasons)
    if explains:
        done = growing | {written_on(d) for d in result.decisions}
        reasons += growth_reasons_gone(views, done)
    admissions += [gate_release(key, gated) for key, gated in result.releases]
    for key, workload in pods.items():
        if workload.view is None:
            reasons.append(group_waiting(workload, now))
        elif workload.stragglers and key not in admitted:
            release = stragglers(workload, now, named)
            admissions.extend(() if release is None else (release,))
    return Plan(
        victims=tuple(victims),
        admissions=tuple(admissions),
        reasons=tuple(w for w in reasons if w is not None),
        pending=frozenset(written_on(Decision("admit", p.job, p.queue)) for p in result.pending),
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
    grows = written_on(d)
    if grows != d.job:
        write = growth(d, grows, workloads.get(grows), decided_on.get(grows))
    elif workload is not None:
        write = pod_decision(d, workload, now, flavors)
        seen = workload.view
    elif d.action == "admit":
        obj = workloads.get(d.job)  # parsed once (``stored.py``)
        adapter = adapter_of(obj)
        write = _admission(d, now, decided_on.get(d.job), adapter)
        extra = release_patch(d, obj, adapter, flavors)
        if extra:
            write = replace(write, patch=merged(write.patch, extra))
    elif d.shrinks:
        write = shrink(d, workloads.get(d.job), decided_on.get(d.job))
    else:
        write = _eviction(d, now, decided_on.get(d.job), adapter_of(workloads.get(d.job)))
    created = seen.creation_timestamp if seen is not None else None
    return replace(write, decision=d, created=created)
