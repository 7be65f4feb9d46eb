"""The victims reclaim or preempt has chosen for one job, and what they free together: in the
cluster, below each queue whose limit stops the job, and on each node. The job may take their
room when all three are enough; victims it turns out not to need are then let go."""

from __future__ import annotations

from collections.abc import Mapping

from sluice.scheduler.fit import place
from sluice.scheduler.placement import Assignment, Footprint
from sluice.scheduler.session import JobInfo, Session

Taken = dict[str, dict[str, int]]


class Victims:
    def __init__(self, session: Session, job: JobInfo, over: Taken) -> None:
        """``over``: queue -> resource -> how far admitting the job takes it past its limit
        (fit.queue_overage), freed only by victims below that queue."""
        self.session = session
        self.job = job
        self.over = over
        total, used = session.total, session.used
        # What the cluster must free; more than it lacks where free room is below zero.
        self.need = {
            r: a - total.get_amount(r) + used.get(r, 0)
            for r, a in job.request.items()
            if a > total.get_amount(r) - used.get(r, 0)
        }
        self.chosen: list[JobInfo] = []
        self.freed: dict[str, int] = {}
        self.below: Taken = {q: {} for q in over}
        self.room: Footprint = {}

    def counted(self) -> bool:
        """Whether they free what the cluster lacks and each limit is over by, in total."""
        return all(self.freed.get(r, 0) >= a for r, a in self.need.items()) and all(
            self.below[q].get(r, 0) >= a
            for q, limits in self.over.items()
            for r, a in limits.items()
        )

    def helps_pods(self, victim: JobInfo) -> bool:
        """Whether the victim holds something the job's pods ask for on a node they may use."""
        pod = self.job.view.pod
        wanted = [r for r, a in pod.request.items() if a > 0]
        eligible = self.session.placement.eligible(pod)[1]
        return any(
            i in eligible and (not wanted or any(room.get(r, 0) > 0 for r in wanted))
            for i, room in victim.footprint.items()
        )

    def add(self, victim: JobInfo) -> None:
        self.chosen.append(victim)
        self._count(victim, 1)

    def _count(self, victim: JobInfo, sign: int) -> None:
        _add(self.freed, victim.held, sign)
        for q in self.session.chain(victim.queue):
            if q in self.below:
                _add(self.below[q], victim.request, sign)
        for i, room in victim.footprint.items():
            _add(self.room.setdefault(i, {}), room, sign)

    def place(self) -> Assignment | None:
        """Where the job's pods go once the chosen victims are gone, if they all fit."""
        if not self.counted():
            return None
        return place(self.session, self.job, self.room)

    def prune(self, assignment: Assignment) -> Assignment:
        """Let go the victims the job does not need after all: one whose room its pods do not
        use (``assignment``) when the job still fits without it, the last chosen first. Those
        whose room the pods use stay, and so do those that free what the cluster or a
        limit lacks: they go in the order they were chosen. Returns where the pods go."""
        used = {i for i, _ in assignment}
        for victim in reversed(list(self.chosen)):
            if used.intersection(victim.footprint):
                continue
            self._count(victim, -1)
            placed = self.place()
            if placed is None:
                self._count(victim, 1)
            else:
                self.chosen.remove(victim)
                assignment = placed
        return assignment


def _add(target: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for r, a in amounts.items():
        target[r] = target.get(r, 0) + sign * a
