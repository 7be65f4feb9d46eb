"""The victims reclaim or preempt has chosen for one job, and what they free together: in the
cluster, below each queue whose limit stops the job, and on each node. The job may take their
room when all three are enough; victims it turns out not to need are then let go."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluice.api.views import WorkloadView
from sluice.scheduler.actions.growth_victims import remainder
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.fit import place, place_where
from sluice.scheduler.placement import Footprint
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import Placed, Where, confined
from sluice.scheduler.topology import Missing

PerQueue = dict[str, dict[str, int]]
"""Queue -> resource -> an amount: what victims take from it, or what admitting a job takes
it past its limit."""


class Victims:
    def __init__(
        self, session: Session, job: JobInfo, over: PerQueue, domain: Where | None = None
    ) -> None:
        """``over``: queue -> resource -> how far admitting the job takes it past its limit
        (fit.queue_overage), freed only by victims below that queue; ``domain``: the
        Topology domains its pods must go in (they are then placed there alone)."""
        self.session = session
        self.job = job
        self.over = over
        self.domain = domain
        self.need = cluster_need(session, job)
        self.chosen: list[JobInfo] = []
        self.freed: dict[str, int] = {}
        self.below: PerQueue = {q: {} for q in over}
        self.room: Footprint = {}
        # Pods alike fit first fit exactly when what fits on each node adds up to their count:
        # ``base`` is how many fit with no victim gone (counted when first asked), ``gain``
        # how many more fit on the victims' nodes, ``fits_on`` how many fit on each of those.
        # A workload of several pod sets is placed whole instead (``alike`` None).
        sets = confined(session.domains, job.view, domain)
        one = len(sets) == 1 and (job.view.topology is None or domain is not None)
        self.alike = sets[0] if one else None
        self.pods = [p.pod for p in sets]
        self.base: int | None = None
        self.gain = 0
        self.fits_on: dict[int, int] = {}
        self.for_pods: set[str] = set()  # chosen once the total was enough: for the nodes
        self.where: Placed | None = None  # where ``let_go`` found the job goes, all kept

    def counted(self) -> bool:
        """Whether they free what the cluster lacks and each limit is over by, in total."""
        return all(self.freed.get(r, 0) >= a for r, a in self.need.items()) and all(
            self.below[q].get(r, 0) >= a
            for q, limits in self.over.items()
            for r, a in limits.items()
        )

    def helps_pods(self, victim: JobInfo) -> bool:
        """Whether the victim holds something the job's pods ask for on a node that may take
        them and could hold one."""
        placement = self.session.placement
        for pod in self.pods:
            wanted = [r for r, a in pod.request.items() if a > 0]
            if any(
                (not wanted or any(room.get(r, 0) > 0 for r in wanted))
                and placement.could_hold(pod, i)
                for i, room in victim.footprint.items()
            ):
                return True
        return False

    def adds(self, victim: JobInfo, taken: PerQueue, over: PerQueue) -> bool:
        """Whether the victim helps and its queue keeps its guarantee without it (reclaim's
        rules; ``over``: the limits that stop the job, as given). Then it is chosen, and
        what it holds is counted in ``taken`` for its queue and each ancestor. A workload
        some of whose parts above its minimum are chosen counts what they leave of it."""
        victim = remainder(victim, self.chosen)
        if self.counted():
            # Enough in total: only room on a node its pods may use still helps.
            if not self.helps_pods(victim):
                return False
        elif over and not _frees_below(self.session, victim, self.need, over):
            return False
        if not keeps_guarantee(self.session, victim, taken):
            return False
        self.add(victim)
        for q in self.session.chain(victim.queue):
            _add(taken.setdefault(q, {}), victim.held, 1)
        return True

    def add(self, victim: JobInfo) -> None:
        victim = remainder(victim, self.chosen)
        if self.counted():
            self.for_pods.add(victim.key)
        self.chosen.append(victim)
        self._count(victim, 1)

    def _count(self, victim: JobInfo, sign: int) -> None:
        _add(self.freed, victim.held, sign)
        for q in self.session.chain(victim.queue):
            if q in self.below:
                _add(self.below[q], victim.held, sign)
        placement, alike = self.session.placement, self.alike
        for i, room in victim.footprint.items():
            slot = self.room.setdefault(i, {})
            _add(slot, room, sign)
            if alike is not None and placement.could_hold(alike.pod, i):
                pod, count = alike.pod, alike.pod_count
                before = self.fits_on.get(i)
                if before is None:
                    before = placement.fit(pod, i, None, count)
                self.fits_on[i] = placement.fit(pod, i, slot, count)
                self.gain += self.fits_on[i] - before

    def placeable(self) -> bool:
        """Whether every pod of the job fits once the chosen victims are gone."""
        if not self.counted():
            return False
        alike = self.alike
        if alike is None:
            return place(self.session, self.job, self.room, self.domain) is not None
        count = alike.pod_count
        if self.base is None:
            placed = self.session.placement.place(alike.pod, count, partial=True) or []
            self.base = sum(n for _, n in placed)
        return self.base + self.gain >= count

    def prune(self) -> Placed:
        """``let_go``, then where the job's pods go."""
        self.let_go()
        return self.placed()

    def let_go(self) -> None:
        """Let go the victims the job does not need after all, the last chosen first. Only
        two kinds may go: one chosen for the nodes alone (the total was enough already),
        and one whose room the pods do not use; the others free what the cluster or a limit
        lacks, and go in the order they were chosen."""
        where = place_where(self.session, self.job, self.room, self.domain)
        assert where is not None  # placeable() said so
        used = set(where[0])
        # The last chosen stays when there are others: without it, the job did not fit (the
        # search asked after each one it chose).
        kept = self.chosen[:-1] if len(self.chosen) > 1 else list(self.chosen)
        for victim in reversed(kept):
            if victim.key not in self.for_pods and used.intersection(victim.footprint):
                continue
            self._count(victim, -1)
            if self.placeable():
                self.chosen.remove(victim)
                where = None
            else:
                self._count(victim, 1)
        self.where = where

    def placed(self) -> Placed:
        """Where the job's pods go once the chosen victims are gone (they fit: ``placeable``):
        where ``let_go`` placed them when it let none go, as the room is the same."""
        if self.where is not None:
            return self.where
        placed = place_where(self.session, self.job, self.room, self.domain)
        assert placed is not None  # pruning keeps it placeable
        return placed


def domain_rank(chosen: list[JobInfo], domain: Domain) -> tuple[int, int, str]:
    """Of the domains whose victims make a job fit, the first by this key is taken: the
    fewest victims, then the lowest job priorities in total, then the domain's name."""
    return (len(chosen), sum(v.priority for v in chosen), domain.value)


def cluster_need(session: Session, job: JobInfo) -> dict[str, int]:
    """What victims must free in the cluster for the job; more than it lacks where free room
    is below zero."""
    total, used = session.total, session.used
    return {
        r: a - total.get_amount(r) + used.get(r, 0)
        for r, a in job.request.items()
        if a > total.get_amount(r) - used.get(r, 0)
    }


def keeps_guarantee(session: Session, victim: JobInfo, taken: PerQueue) -> bool:
    """Whether the victim's queue stays at or above its guarantee without it, besides what
    is ``taken`` from it already."""
    info = session.queues[victim.queue]
    gone = taken.get(victim.queue, {})
    for r, g in info.guarantee.items():
        used = victim.held.get(r, 0)
        if g > 0 and used > 0 and info.allocated.get(r, 0) - gone.get(r, 0) - used < g:
            return False
    return True


def _frees_below(session: Session, victim: JobInfo, need: dict[str, int], over: PerQueue) -> bool:
    """Whether the victim frees something the cluster lacks, or frees room below an
    ancestor whose limit stops the job (a victim outside it does not)."""
    if any(victim.held.get(r, 0) > 0 for r in need):
        return True
    chain = session.chain(victim.queue)
    return any(
        victim.held.get(r, 0) > 0 for q, limits in over.items() if q in chain for r in limits
    )


def frees_alone(
    session: Session,
    need: Mapping[str, int],
    over: PerQueue,
    victim: JobInfo,
    inside: WorkloadView,
    domain: Domain,
) -> bool:
    """Whether the victim alone could make the job fit in the domain: it frees what the
    cluster lacks (``need``) and each limit is over by, and the pods that go in the domain
    (``inside``: set_domains.Search's) would fit there with its room given back. Victims
    whose search ends with this victim alone are only ever such victims."""
    held = victim.held
    if any(held.get(r, 0) < a for r, a in need.items()):
        return False
    chain = session.chain(victim.queue)
    for q, limits in over.items():
        if q not in chain or any(held.get(r, 0) < a for r, a in limits.items()):
            return False
    return session.domains.could_hold(inside, domain, victim.footprint)


def gives_too_little(missing: list[Missing], footprint: Footprint) -> bool:
    """Whether room given back on these nodes (a victim's) is too little to fit what a
    domain lacks (``Domains.missing``), whatever room is free there already: a node takes
    at most ceil(x / a) more pods asking a of a resource whose room grows by x for the
    resource that stopped the next pod, so at most the largest such count over the
    resources. A cheap no before ``frees_alone``'s, never a different answer."""
    for fits, items, lacking in missing:
        more = 0
        for i, room in footprint.items():
            if i in fits:
                more += max(-(-room.get(r, 0) // a) for r, a in items)
        if more < lacking:
            return True
    return False


def frees_together(
    session: Session, inside: WorkloadView, domain: Domain, victims: Iterable[JobInfo]
) -> bool:
    """Whether what goes in the domain (``inside``) could fit there were all these victims
    gone: when not, no choice among them makes it fit, and none of them alone does."""
    room: Footprint = {}
    for victim in victims:
        for i, held in victim.footprint.items():
            _add(room.setdefault(i, {}), held, 1)
    return session.domains.could_hold(inside, domain, room)


def _add(target: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for r, a in amounts.items():
        target[r] = target.get(r, 0) + sign * a
