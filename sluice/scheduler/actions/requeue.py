"""Admitted jobs whose pods were not scheduled within podsReadyTimeout give their quota back:
suspended again, they wait out a back-off and then queue behind the jobs of their priority
(sluice/scheduler/readiness.py says when). Runs before any admission, so the quota they free
serves the same cycle."""

from __future__ import annotations

from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.readiness import unready
from sluice.scheduler.session import Session


def requeue(session: Session, outcome: Outcome) -> None:
    timeout = session.config.pods_ready_timeout
    if session.snapshot.pods is None or not timeout:
        return  # a dump without pods says nothing of them
    for job in session.admitted_at_start:
        if job.queue not in session.queues:
            continue  # its queue is gone: it counts against no queue to give back to
        why = unready(job.view, job.pods, session.now, timeout)
        if why is not None:
            outcome.requeue(session, job, why)
