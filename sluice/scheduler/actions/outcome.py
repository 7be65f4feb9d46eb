"""What the actions of one cycle decide, gathered as they go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sluice.scheduler.actions.growth_victims import named_deletes, shrunk_sizes
from sluice.scheduler.fit import cluster_failure, placeable, unplaced
from sluice.scheduler.flavor_choice import Chosen, flavor_reason
from sluice.scheduler.growth import growth_sizes
from sluice.scheduler.model import Decision
from sluice.scheduler.partial import whole_sizes
from sluice.scheduler.placement import Footprint
from sluice.scheduler.readiness import backoff_reason
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import Where

WAITS_FOR_ROOM = "its preemptionPolicy is Never: it waits for room and takes none back"
FREED_AFTER_ITS_TURN = (
    "its pods did not fit on the nodes at its turn; room taken back later this cycle holds"
    " them: it is tried again next cycle"
)
"""Why a job whose pods fit on the room the cycle leaves waits all the same: the room came
from victims taken after its turn (nothing but victims adds room during a cycle), and no
admission follows them in the same cycle."""


@dataclass(slots=True)
class Outcome:
    made: dict[int, Decision] = field(default_factory=dict)
    """The decisions by the order they were made in (``decisions``): a workload suspended
    after its parts were taken drops its one decision without a walk through the others."""
    reasons: dict[str, str] = field(default_factory=dict)
    """Pending job -> why it waits (without its position, added at the end)."""
    unplaced: dict[str, JobInfo] = field(default_factory=dict)
    """Jobs whose pods did not fit on the nodes: their reason is written once the cycle is
    over, on the room it leaves (explaining costs a look at every node)."""
    evicted: list[JobInfo] = field(default_factory=list)
    """Victims of this cycle: pending again, but not re-admitted before the next cycle."""
    changed: bool = True
    """Something was evicted since the last admission pass, so another pass may admit more."""
    passive: set[str] = field(default_factory=set)
    """Jobs whose preemptionPolicy is Never that reclaim or preempt passed over."""
    flavor_reasons: dict[tuple[object, ...], str] = field(default_factory=dict)
    """Why jobs alike of a queue with flavors wait, as worked out once the cycle is over."""
    unplaced_reasons: dict[tuple[object, ...], str] = field(default_factory=dict)
    """Why jobs alike whose pods did not fit wait, as worked out once the cycle is over."""
    dropped: int = 0
    """How many decisions were dropped from ``made``: its keys count them too."""
    shrunk: dict[str, dict[str, int]] = field(default_factory=dict)
    """Workload -> pod set -> the pods taken from it above its minimum this cycle: it stays
    admitted, smaller."""
    first: dict[str, int] = field(default_factory=dict)
    """Job -> the key of its first decision in ``made``, where a workload's shrink goes
    (``_shrink``) without a walk through every decision of the cycle."""

    @property
    def decisions(self) -> list[Decision]:
        """The decisions, in the order they were made."""
        return list(self.made.values())

    def _decide(self, decision: Decision) -> None:
        at = len(self.made) + self.dropped
        self.first.setdefault(decision.job, at)
        self.made[at] = decision

    def waits_for_room(self, job: JobInfo) -> None:
        """A job whose preemptionPolicy is Never was passed over by reclaim or preempt: its
        reason says so, once."""
        self.passive.add(job.key)

    def unplaceable(self, job: JobInfo) -> None:
        self.reasons[job.key] = ""
        self.unplaced[job.key] = job

    def reason(self, session: Session, job: JobInfo) -> str:
        """Why the job waits, "" when no action said. One whose pods did not fit is told
        what stops it now: the cluster's free room, or the room on the nodes (of a queue
        with flavors: each flavor tried and what stopped it)."""
        said = self.reasons.get(job.key, "")
        if not said and job.key in self.unplaced:
            said = cluster_failure(session, job) or (
                self._flavor_reason(session, job)
                if session.queues[job.queue].flavor_list
                else self._unplaced(session, job)
            )
        if said and job.key in self.passive and WAITS_FOR_ROOM not in said:
            said = f"{said}; {WAITS_FOR_ROOM}"
        return said

    def _unplaced(self, session: Session, job: JobInfo) -> str:
        """``unplaced`` on the room the cycle leaves, once for jobs alike, unless their pods
        fit there: then the room came after their turn (``FREED_AFTER_ITS_TURN``)."""
        view = job.view
        alike = (view.request, view.pod_sets, view.topology)
        said = self.unplaced_reasons.get(alike)
        if said is None:
            fits = placeable(session, job)
            said = FREED_AFTER_ITS_TURN if fits else unplaced(session, job)
            self.unplaced_reasons[alike] = said
        return said

    def _flavor_reason(self, session: Session, job: JobInfo) -> str:
        """``flavor_reason``, once for jobs alike: the cycle is over, nothing changes."""
        view = job.view
        alike = (job.queue, view.request, view.pod_sets, view.topology)
        said = self.flavor_reasons.get(alike)
        if said is None:
            said = self.flavor_reasons[alike] = flavor_reason(session, job)
        return said

    def admit(
        self,
        session: Session,
        job: JobInfo,
        reason: str,
        footprint: Footprint,
        domain: Where | None = None,
        chosen: Chosen | None = None,
        sizes: tuple[tuple[str, int, int], ...] = (),
    ) -> None:
        """``chosen``: the flavors its pod sets go in, for a queue with flavors. A growth
        entry's admission carries its workload's record raised by it (``growth_sizes``); a
        resizable workload admitted whole carries its whole sizes (``whole_sizes``)."""
        grows = session.grows.get(job.key)
        if grows is not None:
            sizes = growth_sizes(grows, job.view)
        elif not sizes:
            sizes = whole_sizes(job.view)
        if chosen is None:
            session.admit(job, footprint)
        else:
            session.admit(job, footprint, chosen.flavors, chosen.held_in)
        self.reasons.pop(job.key, None)
        where = domain.text if domain is not None else ""
        flavors = chosen.flavors if chosen is not None else ()
        decision = Decision(
            "admit", job.key, job.queue, reason, domain=where, flavors=flavors, sizes=sizes
        )
        self._decide(decision)

    def evict(
        self,
        session: Session,
        kind: Literal["reclaim", "preempt"],
        victim: JobInfo,
        for_job: JobInfo,
    ) -> None:
        """The victim suspended; a victim above a minimum (actions/growth_victims.py) taken
        from its workload, which stays admitted at a lower size. A workload suspended after
        some of its parts were taken this cycle is suspended whole: its lowered size is not
        written (the suspension gives back the size it asks)."""
        if victim.part_of is not None:
            self._shrink(session, kind, victim, for_job)
            return
        victim = victim.rest_of or victim
        if self.shrunk.pop(victim.key, None) is not None:
            # Its one decision of the cycle is its shrink: admitted in the cycle, it would be
            # fresh, never a victim; suspended, it would have no parts left to give.
            del self.made[self.first.pop(victim.key)]
            self.dropped += 1
        session.evict(victim)
        self.evicted.append(victim)
        self.reasons[victim.key] = f"{kind}ed for {for_job.key}; waits for quota again"
        self.changed = True
        self._decide(
            Decision(
                kind,
                victim.key,
                victim.queue,
                f"{kind}ed for {for_job.key} of queue {for_job.queue}",
                for_job=for_job.key,
            )
        )

    def _shrink(
        self,
        session: Session,
        kind: Literal["reclaim", "preempt"],
        part: JobInfo,
        for_job: JobInfo,
    ) -> None:
        """One decision per workload shrunk in the cycle, its sizes lowered by every part
        taken: the write lowers its size field and its record (docs/scheduler.md, *Victims
        above a minimum*)."""
        job = part.part_of
        assert job is not None
        session.shrink(part)
        self.changed = True
        taken = self.shrunk.setdefault(job.key, {})
        pod_set, pods, _ = part.part
        taken[pod_set] = taken.get(pod_set, 0) + pods
        sizes = shrunk_sizes(job, taken)
        said = ", ".join(f"{name} {admitted} of {asked}" for name, asked, admitted in sizes)
        decision = Decision(
            kind,
            job.key,
            job.queue,
            f"{kind}ed for {for_job.key} of queue {for_job.queue} above its minimum: "
            f"runs at {said}",
            for_job=for_job.key,
            sizes=sizes,
            deletes=named_deletes(job),
        )
        # In the place of its first shrink, before every admission it made room for.
        at = self.first.get(job.key)
        if at is None:
            self._decide(decision)
        else:
            self.made[at] = decision

    def requeue(self, session: Session, job: JobInfo, why: str) -> None:
        """The job gives its quota back and waits out its back-off (readiness.py)."""
        session.evict(job)
        self.evicted.append(job)
        requeues = job.view.requeues + 1
        self.reasons[job.key] = backoff_reason(requeues, session.now, why)
        self.changed = True
        self._decide(Decision("requeue", job.key, job.queue, why, requeues=requeues))
