"""The conditions of reclaim (docs/scheduler.md, "Reclaim") and what they keep over one cycle:
which jobs may be victims and in which order, which queues may give, what the queues above
their deserved share could give back together, and what the search by domain keeps from one
job to the next. Both the walk of the candidates (reclaim.py) and the search by domain
(reclaim_domain.py) ask these.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sluice.api.views import EPOCH, WorkloadView
from sluice.scheduler.actions.growth_victims import with_parts
from sluice.scheduler.actions.victims import PerQueue
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Footprint
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session

Order = tuple[int, float, float, float, str, int]
"""Job priority, -its namespace's usage in its queue, -admitted, -created, name, -the rank of
a victim above a minimum (0 for a workload: its parts come first, the newest first)."""
Listed = tuple[tuple[tuple[int, int, float], Order], JobInfo, tuple[str, ...]]
"""A victim of a domain: its place in the candidates' order (the level of the common
ancestor with the job, its queue's priority, minus that queue's usage per weight, its victim
order), itself, and the queues on its path below the common ancestor."""
Part = dict[str, tuple[int, list[Listed]]]
"""Domain value -> the lowest priority of the victims on it of one queue's subtree the walk
yields, and those victims (``InLevel._subtree``)."""
Subtrees = dict[tuple[object, ...], tuple[int, Part]]
"""(level, queue, the level of the common ancestor, path, the queues on it not above their
share, resources) -> the queue's ``version`` and its ``Part``."""
Shape = tuple[object, ...]
"""What a victim freeing a domain alone depends on besides the domain's room: the pod sets
that go in it, what the cluster lacks and what each limit is over by."""
Alone = dict[Shape, dict[str, tuple[int, dict[str, bool]]]]
"""Shape -> domain -> the domain's room version (``Domains.version``), and victim -> whether
it alone frees the domain for that shape: kept from one job to the next while the domain's
room is as it was (a victim goes only by giving room back there)."""


def victim_order(job: JobInfo, used: float = 0.0) -> Order:
    """Lower job priority first, then the job of the namespace that used more in its queue
    (``used``: its dominant usage, the usage plugin), then the most recently admitted, then
    the most recently created, then by name; a workload's victims above its minimum
    (growth_victims.py) in its place, just before it, the newest first."""
    admitted = (job.admitted_at or EPOCH).timestamp()
    created = job.view.creation_timestamp.timestamp()
    return (job.priority, -used, -admitted, -created, job.view.key, -job.part[2])


@dataclass(slots=True)
class Supply:
    """What the leaves above their deserved share could give back at most
    (``ReclaimRules.count_excess``)."""

    excess: dict[str, dict[str, int]] = field(default_factory=dict)
    """Leaf -> its amounts above max(deserved, guarantee)."""
    gives: dict[str, tuple[dict[str, int], dict[str, int]]] = field(default_factory=dict)
    """Leaf -> what it gives asked for one resource, and asked for several."""
    alone: dict[str, int] = field(default_factory=dict)  # short of one resource: all leaves'
    together: dict[str, int] = field(default_factory=dict)  # short of several


@dataclass(slots=True)
class ByDomain:
    """What the search by domain (reclaim_domain.py) keeps from one job to the next."""

    alone: Alone = field(default_factory=dict)
    subtrees: Subtrees = field(default_factory=dict)
    jobs_on: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    """Level -> ``on_domains``."""
    held_on: dict[str, dict[str, Footprint]] = field(default_factory=dict)
    """Level -> domain value -> the room every job that may still be a victim holds on
    its nodes (``on_domains``'s jobs, less those taken since)."""
    freeable: dict[object, dict[str, tuple[int, bool]]] = field(default_factory=dict)
    """Pod sets -> domain -> ``may_free``'s answer for them, and the domain's version then."""
    of_node: dict[str, dict[int, str]] = field(default_factory=dict)
    """Level -> node -> its domain's value."""


class ReclaimRules:
    """The conditions of reclaim over one cycle's session, and their answers kept."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.min_runtime: timedelta = session.config.arguments("reclaim").min_runtime
        self.now: datetime = session.now
        self.victims: dict[str, list[JobInfo]] = {}
        self.victims_using: dict[str, dict[frozenset[str], list[JobInfo]]] = {}
        self.version: dict[str, int] = {}  # bumped on every queue whose subtree lost victims
        self.orders: dict[str, Order] = {}
        self.owed: dict[tuple[str, str], bool] = {}  # (job, queue) -> asks_owed
        self.usage: dict[str, float] = {}  # leaf -> -its usage per weight, at first sight
        self.supply = Supply()
        self.by_domain = ByDomain()
        for name, info in session.queues.items():
            if not info.children and info.admitted_jobs and info.queue.spec.reclaimable:
                self.count_excess(name, +1)

    @property
    def excess(self) -> dict[str, dict[str, int]]:
        """Leaf above its share -> its amounts above max(deserved, guarantee)."""
        return self.supply.excess

    def eligible(self, job: JobInfo) -> bool:
        if not job.view.preemptable or job.fresh or not job.admitted:
            return False
        return job.admitted_at is None or self.now - job.admitted_at >= self.min_runtime

    # The deserved share counts only the resources it names (docs/scheduler.md): one that
    # deserved leaves out neither stops a queue from taking room back nor puts it over its
    # share, and a job that asks for none of the named ones is best-effort in that queue.

    def asks_owed(self, job: JobInfo, name: str) -> bool:
        """Whether the job requests a resource the queue's deserved names (neither changes
        during the cycle: asked once per job and queue)."""
        key = (job.key, name)
        found = self.owed.get(key)
        if found is None:
            owed = self.session.queues[name].deserved
            found = self.owed[key] = any(a > 0 and r in owed for r, a in job.request.items())
        return found

    def within_deserved(self, job: JobInfo, name: str) -> bool:
        """The queue holding the job stays within its deserved share in every resource the
        job requests that deserved names, and the job asks for at least one of them."""
        info = self.session.queues[name]
        owed = info.deserved
        return self.asks_owed(job, name) and all(
            info.allocated.get(r, 0) + a <= owed[r]
            for r, a in job.request.items()
            if a > 0 and r in owed
        )

    def above_deserved(self, name: str, taken: PerQueue, short: Collection[str]) -> bool:
        """Above its deserved share in a resource the job lacks that deserved names."""
        info = self.session.queues[name]
        owed, held = info.deserved, info.allocated
        gone = taken.get(name)
        for r in short:  # a plain loop: reclaim by domain asks this millions of times a cycle
            if r in owed and held.get(r, 0) - (gone.get(r, 0) if gone else 0) > owed[r]:
                return True
        return False

    def may_give(self, name: str, taken: PerQueue, short: Collection[str]) -> bool:
        """Whether anything below the queue may still qualify: it is above its share, or the
        job lacks a resource its deserved leaves out (a job below asking for none of the
        named ones is best-effort in it)."""
        owed = self.session.queues[name].deserved
        return self.above_deserved(name, taken, short) or any(r not in owed for r in short)

    def gives_up(self, name: str, victim: JobInfo, taken: PerQueue, short: dict[str, int]) -> bool:
        """The queue, on the victim's path, lets it go: it is above its share in what the job
        lacks, or the victim is best-effort in it."""
        return not self.asks_owed(victim, name) or self.above_deserved(name, taken, short)

    def count_excess(self, name: str, sign: int) -> None:
        """Add (or with sign -1, remove) what a leaf above its share could give back at most.

        ``excess`` is its amounts above max(deserved, guarantee). A victim qualifies while its
        queue is above its share *before* it goes, so the last one may take the queue below
        its share, never below its guarantee: asked for one resource r, a leaf gives at most
        its excess in r plus its largest victim's r; asked for several, a leaf above its share
        in one of them may give the others down to its guarantee.
        """
        supply = self.supply
        if sign > 0:
            info = self.session.queues[name]
            supply.excess[name] = excess = {
                r: over
                for r, used in info.allocated.items()
                if (over := used - max(info.deserved.get_amount(r), info.guarantee.get_amount(r)))
                > 0
            }
            largest: dict[str, int] = {}
            for victim in self.sorted_victims(name) if excess else ():
                for r, a in victim.held.items():
                    largest[r] = max(largest.get(r, 0), a)
            floor = {
                r: max(used - info.guarantee.get_amount(r), 0) for r, used in info.allocated.items()
            }
            supply.gives[name] = (
                {r: min(over + largest.get(r, 0), floor[r]) for r, over in excess.items()},
                floor if excess else {},
            )
        alone, together = supply.gives.get(name, ({}, {}))
        for r, amount in alone.items():
            supply.alone[r] = supply.alone.get(r, 0) + sign * amount
        for r, amount in together.items():
            supply.together[r] = supply.together.get(r, 0) + sign * amount

    def enough_supply(self, short: dict[str, int]) -> bool:
        """Could all queues above their deserved share, together, give back enough?"""
        room = self.supply.alone if len(short) == 1 else self.supply.together
        return all(room.get(r, 0) >= need for r, need in short.items())

    def sorted_victims(self, name: str) -> list[JobInfo]:
        """The queue's admitted jobs that may be victims at all, in victim order, once a
        cycle. Nothing becomes eligible during reclaim (jobs it admits are fresh), so jobs
        that are not eligible now never need to be looked at again."""
        if name not in self.victims:
            eligible = [j for j in self.session.queues[name].admitted_jobs if self.eligible(j)]
            # A workload's pods above its minimum are victims of their own, just before it.
            self.victims[name] = sorted(with_parts(self.session, eligible), key=self.order)
        return self.victims[name]

    def victims_for(self, name: str, short: frozenset[str]) -> list[JobInfo]:
        """The queue's victims that give back at least one resource the job is short of."""
        by_short = self.victims_using.setdefault(name, {})
        if short not in by_short:
            by_short[short] = [
                v for v in self.sorted_victims(name) if any(v.held.get(r, 0) > 0 for r in short)
            ]
        return by_short[short]

    def order(self, job: JobInfo) -> Order:
        key = self.orders.get(job.key)
        if key is None:
            used = self.session.namespace_key(job.queue, job.view.namespace)
            key = self.orders[job.key] = victim_order(job, used)
        return key

    def used(self, leaf: str) -> float:
        """Minus the leaf's usage per weight (the queue that used more gives first), as the
        reclaim first saw it: admissions since add their entry penalty, but a victim's key
        must not move while the search holds it."""
        if leaf not in self.usage:
            self.usage[leaf] = -self.session.usage_key(leaf)
        return self.usage[leaf]

    def on_domains(self, level: str) -> dict[str, tuple[str, ...]]:
        """Job -> the domains of a level it holds room on, for every job that may be a
        victim (eligible, in a leaf reclaim takes from), as first asked."""
        kept = self.by_domain
        found = kept.jobs_on.get(level)
        if found is None:
            of_node = {i: d.value for d in self.session.domains.domains(level) for i in d.nodes}
            found = kept.jobs_on[level] = {
                job.key: tuple(sorted({of_node[i] for i in job.footprint if i in of_node}))
                for name in self.excess
                for job in self.sorted_victims(name)
            }
            held: dict[str, Footprint] = {}
            for name in self.excess:
                for job in self.session.queues[name].admitted_jobs:
                    if job.key in found:
                        hold_on(held, of_node, job.footprint, 1)
            kept.held_on[level], kept.of_node[level] = held, of_node
        return found

    def may_free(
        self, known: dict[str, tuple[int, bool]], inside: WorkloadView, domain: Domain
    ) -> bool:
        """Whether what goes in the domain (set_domains.Search's ``inside``) could fit there
        were every job that may be a victim on it gone (``held_on``): when not, no victims
        the walk yields for any job do, so the domain is not looked at. Kept per shape and
        domain: a no for good (a victim taken moves its room from ``held_on`` to the free
        room, an admission takes room: neither adds any), a yes while the domain's room is
        as it was (``known``: ``freeable``'s for the pod sets of ``inside``)."""
        kept = known.get(domain.text)
        if kept is not None and not kept[1]:
            return False
        domains = self.session.domains
        version = domains.version(domain)
        if kept is None or kept[0] != version:
            held = self.by_domain.held_on[domain.level].get(domain.value, {})
            kept = known[domain.text] = (version, domains.could_hold(inside, domain, held))
        return kept[1]


def hold_on(
    held: dict[str, Footprint], of_node: dict[int, str], footprint: Footprint, sign: int
) -> None:
    """Add (or with sign -1, take away) a job's room to that of the domains its nodes are in."""
    for i, room in footprint.items():
        value = of_node.get(i)
        if value is not None:
            target = held.setdefault(value, {}).setdefault(i, {})
            for r, a in room.items():
                target[r] = target.get(r, 0) + sign * a
