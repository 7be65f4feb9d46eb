"""preempt: inside one queue, a higher-priority pending job suspends lower-priority ones."""

from __future__ import annotations

from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.fit import cluster_failure, queue_failure
from sluice.scheduler.order import leaf_order
from sluice.scheduler.session import JobInfo, Session


def _victim_order(job: JobInfo) -> tuple[int, float, str]:
    admitted = job.admitted_at.timestamp() if job.admitted_at else 0.0
    return (job.priority, -admitted, job.key)


def preempt(session: Session, outcome: Outcome) -> None:
    for leaf in leaf_order(session, admissible_leaves(session, outcome)):
        info = session.queues[leaf]
        for job in list(info.pending_jobs):
            if job.admitted or job in outcome.evicted:
                continue
            if queue_failure(session, job) is None and cluster_failure(session, job) is None:
                continue
            victims = sorted(
                (
                    v
                    for v in info.admitted_jobs
                    if v.priority < job.priority and v.view.preemptable and not v.fresh
                ),
                key=_victim_order,
            )
            if not victims:
                continue
            chosen: list[JobInfo] = []
            freed: dict[str, int] = {}
            for victim in victims:
                chosen.append(victim)
                for r, a in victim.request.items():
                    freed[r] = freed.get(r, 0) + a
                in_queue = {name: freed for name in session.chain(leaf)}
                if (
                    queue_failure(session, job, in_queue) is None
                    and cluster_failure(session, job, freed) is None
                ):
                    for v in chosen:
                        outcome.evict(session, "preempt", v, job)
                    outcome.admit(session, job, f"preempt: higher priority in queue {leaf}")
                    break
        info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]
