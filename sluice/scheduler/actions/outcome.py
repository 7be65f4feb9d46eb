"""What the actions of one cycle decide, gathered as they go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sluice.scheduler.model import Decision
from sluice.scheduler.placement import Assignment
from sluice.scheduler.readiness import backoff_reason
from sluice.scheduler.session import JobInfo, Session

WAITS_FOR_ROOM = "its preemptionPolicy is Never: it waits for room and takes none back"


@dataclass(slots=True)
class Outcome:
    decisions: list[Decision] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    """Pending job -> why it waits (without its position, added at the end)."""
    evicted: list[JobInfo] = field(default_factory=list)
    """Victims of this cycle: pending again, but not re-admitted before the next cycle."""
    changed: bool = True
    """Something was evicted since the last admission pass, so another pass may admit more."""

    def waits_for_room(self, job: JobInfo) -> None:
        """A job whose preemptionPolicy is Never was passed over by reclaim or preempt: its
        reason says so, once."""
        reason = self.reasons.get(job.key)
        if reason and WAITS_FOR_ROOM not in reason:
            self.reasons[job.key] = f"{reason}; {WAITS_FOR_ROOM}"

    def admit(self, session: Session, job: JobInfo, reason: str, assignment: Assignment) -> None:
        session.admit(job, assignment)
        self.reasons.pop(job.key, None)
        self.decisions.append(Decision("admit", job.key, job.queue, reason))

    def evict(
        self,
        session: Session,
        kind: Literal["reclaim", "preempt"],
        victim: JobInfo,
        for_job: JobInfo,
    ) -> None:
        session.evict(victim)
        self.evicted.append(victim)
        self.reasons[victim.key] = f"{kind}ed for {for_job.key}; waits for quota again"
        self.changed = True
        self.decisions.append(
            Decision(
                kind,
                victim.key,
                victim.queue,
                f"{kind}ed for {for_job.key} of queue {for_job.queue}",
                for_job=for_job.key,
            )
        )

    def requeue(self, session: Session, job: JobInfo, why: str) -> None:
        """The job gives its quota back and waits out its back-off (readiness.py)."""
        session.evict(job)
        self.evicted.append(job)
        requeues = job.view.requeues + 1
        self.reasons[job.key] = backoff_reason(requeues, session.now, why)
        self.changed = True
        self.decisions.append(Decision("requeue", job.key, job.queue, why, requeues=requeues))
