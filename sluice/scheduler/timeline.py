"""Cycles over simulated time: jobs arrive when they were created, run for known durations
and end; each cycle sees the previous one's decisions and usage. What ``sluice simulate
--minutes`` prints, and how the order the usage plugin gives over time is tested without a
cluster.

Simulated time knows no pods: nodes hold only admitted jobs (as in a dump without pods), and
a job with no known duration runs on to the end.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sluice.api.views import JobPhase, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.model import CycleResult, Snapshot


@dataclass(slots=True)
class Timeline:
    admitted: dict[str, datetime] = field(default_factory=dict)
    """Job -> when it was first admitted."""
    finished: dict[str, datetime] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    """Jobs in the order they were first admitted."""
    last: CycleResult | None = None

    def waits(self, jobs: list[WorkloadView]) -> dict[str, list[float]]:
        """Queue -> seconds from creation to first admission of each of its admitted jobs."""
        out: dict[str, list[float]] = {}
        for job in jobs:
            when = self.admitted.get(job.key)
            if when is not None:
                wait = (when - job.creation_timestamp).total_seconds()
                out.setdefault(job.queue, []).append(wait)
        return out


def median_waits(timeline: Timeline, jobs: list[WorkloadView]) -> dict[str, float]:
    return {q: statistics.median(w) for q, w in sorted(timeline.waits(jobs).items())}


def run_for(
    snapshot: Snapshot,
    until: datetime,
    step: timedelta,
    durations: Mapping[str, timedelta],
) -> Timeline:
    """Cycles every ``step`` from ``snapshot.now`` through ``until``: before each, the jobs
    created by then are there and the admitted ones whose duration has passed are complete."""
    out = Timeline()
    everyone = list(snapshot.workloads)
    state = replace(snapshot, pods=None)
    now = snapshot.now
    while now <= until:
        arrived = [j for j in everyone if j.creation_timestamp <= now]
        current = {j.key: j for j in state.workloads}
        jobs = [_aged(current.get(j.key, j), durations, now, out) for j in arrived]
        state = replace(state, workloads=tuple(jobs), now=now)
        result = run_cycle(state)
        for decision in result.decisions:
            if decision.action == "admit" and decision.job not in out.admitted:
                out.admitted[decision.job] = now
                out.order.append(decision.job)
        usage = {n: q.usage for n, q in result.queues.items() if q.usage is not None}
        state = replace(apply_decisions(state, result, now), usage=usage)
        out.last = result
        now += step
    return out


def _aged(
    job: WorkloadView, durations: Mapping[str, timedelta], now: datetime, out: Timeline
) -> WorkloadView:
    """The job complete once it has run its duration since it was admitted."""
    took = durations.get(job.key)
    if took is None or not job.phase.admitted or job.admitted_at is None:
        return job
    if job.admitted_at + took > now:
        return job
    out.finished.setdefault(job.key, job.admitted_at + took)
    return replace(job, phase=JobPhase.COMPLETED)
