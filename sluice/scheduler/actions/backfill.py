"""backfill: jobs that request nothing are admitted wherever they wait, even behind a fifo head."""

from __future__ import annotations

from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.fit import place
from sluice.scheduler.session import Session


def backfill(session: Session, outcome: Outcome) -> None:
    for leaf in admissible_leaves(session, outcome):
        info = session.queues[leaf]
        for job in info.pending_jobs:
            if job.admitted or any(a > 0 for a in job.request.values()):
                continue
            # It takes no room, but its pods still need a node that may take them.
            assignment = place(session, job)
            if assignment is None:
                outcome.unplaceable(job)
            else:
                outcome.admit(session, job, "backfill: requests nothing", assignment)
        info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]
