"""backfill: jobs that request nothing are admitted wherever they wait, even behind a fifo head."""

from __future__ import annotations

from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.fit import place, unplaced
from sluice.scheduler.flavor_choice import choose_flavors
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session


def backfill(session: Session, outcome: Outcome) -> None:
    for leaf in admissible_leaves(session, outcome):
        info = session.queues[leaf]
        for job in info.pending_jobs:
            if job.admitted or any(a > 0 for a in job.request.values()):
                continue
            if info.flavor_list:
                _in_flavor(session, outcome, job)
                continue
            # It takes no room, but its pods still need a node that may take them.
            assignment = place(session, job)
            if assignment is None:
                outcome.unplaceable(job)
            else:
                outcome.admit(session, job, "backfill: requests nothing", assignment)
        info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]


def _in_flavor(session: Session, outcome: Outcome, job: JobInfo) -> None:
    """A job of a queue with flavors goes in one as any admission does (flavor_choice.py):
    its pods are held to the flavor's nodes."""
    chosen = choose_flavors(session, job)
    if isinstance(chosen, str) or chosen.waits:
        outcome.reasons[job.key] = chosen if isinstance(chosen, str) else chosen.waits
        return
    placing = chosen.job(job)
    assignment = place(session, placing)
    if assignment is None:
        outcome.reasons[job.key] = unplaced(session, placing)
        return
    reason = f"backfill: requests nothing, in {chosen.text}"
    outcome.admit(session, job, reason, assignment, None, chosen)
