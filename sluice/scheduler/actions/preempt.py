"""preempt: inside one queue, a higher-priority pending job suspends lower-priority ones.

Victims are the queue's own admitted jobs of strictly lower priority that may be preempted,
in victim order (lowest priority, most recently admitted, most recently created, name); if
all of them together would not make room, nothing is preempted. A fifo queue preempts only
for its first waiting job.
"""

from __future__ import annotations

from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.reclaim import victim_order
from sluice.scheduler.fit import fits
from sluice.scheduler.order import leaf_order
from sluice.scheduler.session import JobInfo, Session


def preempt(session: Session, outcome: Outcome) -> None:
    for leaf in leaf_order(session, admissible_leaves(session, outcome)):
        info = session.queues[leaf]
        waiting = [j for j in info.pending_jobs if not j.admitted]
        if not waiting:
            continue
        top = max(j.priority for j in waiting)
        victims = sorted(
            (
                v
                for v in info.admitted_jobs
                if v.view.preemptable and not v.fresh and v.priority < top
            ),
            key=victim_order,
        )
        if victims:
            _preempt_in(session, outcome, leaf, victims)
        info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]


def _preempt_in(session: Session, outcome: Outcome, leaf: str, victims: list[JobInfo]) -> None:
    failed: list[tuple[int, dict[str, int]]] = []  # (priority, request) that found no room
    fifo = session.queues[leaf].queue.spec.dequeue_strategy == "fifo"
    first: JobInfo | None = None
    for job in session.queues[leaf].pending_jobs:
        if job.admitted or job.evicted:
            continue
        if fifo and first is not None and not first.admitted:
            break  # a fifo queue's later jobs wait behind its first that does not fit
        first = job
        if job.never_preempts:
            outcome.waits_for_room(job)
            continue
        if not victims or victims[0].priority >= job.priority:
            continue
        if any(
            p >= job.priority and all(job.request.get(r, 0) >= a for r, a in req.items())
            for p, req in failed
        ):
            continue
        if fits(session, job):
            continue
        chosen: list[JobInfo] = []
        freed: dict[str, int] = {}
        for victim in victims:
            if victim.priority >= job.priority:
                break
            chosen.append(victim)
            for r, a in victim.request.items():
                freed[r] = freed.get(r, 0) + a
            if fits(session, job, freed, freed):
                for v in chosen:
                    outcome.evict(session, "preempt", v, job)
                    victims.remove(v)
                outcome.admit(session, job, f"preempt: higher priority in queue {leaf}")
                break
        if not job.admitted:
            failed.append((job.priority, dict(job.request)))
