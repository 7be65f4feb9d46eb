"""Reclaim inside one domain: the domain of a level whose victims make a job fit with the
fewest of them, then the lowest priorities in total, then by name (victims.domain_rank).

What a domain's search takes is what a search of the job's candidates (reclaim's
``candidates``, in their order) would take were it limited to the victims on that domain's
nodes: each victim taken when it still qualifies after what was taken before it in the same
domain, until the job fits. So a domain's victims are worked out alone, without walking the
candidates of all the others: which of the jobs on its nodes the walk yields (``_Leaf``) and
in which order (nearest relatives, then queue priority, then victim order) is known from each
one's queue.

Domains are searched from the one whose result could come first: none comes before
(1, the lowest priority among its victims, its name), as every search keeps at least one
victim. Bounds are first taken over every job on the domain, then over those the walk yields
there (dropping a domain whose pods would not fit even were all of them gone), and the
searches stop as soon as the best found comes before every bound left.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, NamedTuple

from sluice.scheduler.actions.victims import Victims, cluster_need, domain_rank, frees_alone
from sluice.scheduler.placement import Footprint
from sluice.scheduler.session import JobInfo
from sluice.scheduler.set_domains import Placed, Search
from sluice.scheduler.topology import Domain

if TYPE_CHECKING:
    from sluice.scheduler.actions.reclaim import Order, Taken, _Reclaim

Bound = tuple[int, int, str]
SCAN, SEARCH = 0, 1  # what a domain on the heap stands for (``InLevel.best``)
Found = tuple[Victims, Placed]
Listed = tuple[tuple[tuple[int, int, float], "Order"], JobInfo, tuple[str, ...]]
"""A victim of a domain: its place in the candidates' order, itself, and the queues on its
path below the common ancestor with the job."""


class _Leaf(NamedTuple):
    rank: tuple[int, int, float]
    """Where its victims come among the candidates: the level of the common ancestor, the
    queue's priority, minus its usage per weight (reclaim's ``used``)."""
    path: tuple[str, ...]
    """The leaf and its ancestors below the common one."""
    strict: tuple[str, ...]
    """The queues of ``path`` not above their share, where a victim that asks what their
    deserved names is not yielded."""


Shape = tuple[object, ...]
"""What a victim freeing a domain alone depends on besides the domain's room: the pod sets
that go in it, what the cluster lacks and what each limit is over by."""
Alone = dict[tuple[str, str, Shape], tuple[int, bool]]
"""(victim, domain, shape) -> the domain's room version (``Domains.version``) and whether
the victim alone frees the domain for that shape: kept from one job to the next while the
domain's room is as it was (a victim goes only by giving room back there)."""


class InLevel:
    """The search of one level's domains for one job (nothing is taken while it runs)."""

    def __init__(
        self, reclaim: _Reclaim, job: JobInfo, short: dict[str, int], over: Taken, search: Search,
        level: str,
    ) -> None:  # fmt: skip
        self.reclaim, self.job, self.short, self.over = reclaim, job, short, over
        self.search = search
        self.domains = {d.value: d for d in reclaim.session.domains.domains(level)}
        self.on = reclaim.on_domains(level)
        self.leaves: dict[str, _Leaf | None] = {}
        self.within: dict[int, bool] = {}
        self.need = cluster_need(reclaim.session, job)
        self.shape: Shape = (
            search.inside.pod_sets,
            tuple(sorted(self.need.items())),
            tuple((q, tuple(sorted(limits.items()))) for q, limits in sorted(over.items())),
        )

    def best(self) -> Found | None:
        """Domains are taken from a heap by bound. A domain first stands for the lowest
        priority among the jobs on it not yet looked at (stage SCAN): popped, those of that
        priority are looked at, and when one of them alone frees the domain, the domain's
        search has that bound (stage SEARCH); else it stands for the next priority, and
        once none is left, for (2, ...): its search keeps two victims or more."""
        heap = [((1, jobs[0].priority, value), SCAN, value, 0) for value, jobs in self.on.items()]
        heapq.heapify(heap)
        best: tuple[Bound, Found] | None = None
        while heap:
            bound, stage, value, k = heapq.heappop(heap)
            if best is not None and best[0] < bound:
                break
            domain = self.domains[value]
            if stage == SCAN:
                k = self._scan(domain, k, bound[1])
                jobs = self.on[value]
                if k < 0:
                    heapq.heappush(heap, (bound, SEARCH, value, 0))
                elif k < len(jobs):
                    heapq.heappush(heap, ((1, jobs[k].priority, value), SCAN, value, k))
                else:
                    heapq.heappush(heap, ((2, -(2**63), value), SEARCH, value, 0))
                continue
            victims = self._victims(value)
            if victims and self._could_hold(domain, victims):
                found = self._search(domain, victims)
                if found is not None:
                    key = domain_rank(found[0].chosen, domain)
                    if best is None or key < best[0]:
                        best = (key, found)
        return None if best is None else best[1]

    def _scan(self, domain: Domain, k: int, priority: int) -> int:
        """Look at the jobs on the domain of this priority from ``k`` on: -1 when the walk
        yields one that alone frees the domain (a search that ends with one victim ends
        with such a one: the last victim a search takes stays), else where the next
        priority's begin."""
        jobs = self.on[domain.value]
        reachable = self.reclaim.reachable
        assert reachable is not None
        known = self.reclaim.alone
        version = self.reclaim.session.domains.version(domain)
        while k < len(jobs):
            victim = jobs[k]
            if victim.priority != priority:
                break
            k += 1
            if victim.key not in reachable or not self._yielded(victim):
                continue
            key = (victim.key, domain.text, self.shape)
            found = known.get(key)
            if found is None or found[0] != version:
                found = known[key] = (version, self._frees(victim, domain))
            if found[1]:
                return -1
        return k

    def _frees(self, victim: JobInfo, domain: Domain) -> bool:
        session = self.reclaim.session
        return frees_alone(session, self.need, self.over, victim, self.search.inside, domain)

    def _search(self, domain: Domain, victims: list[Listed]) -> Found | None:
        """The victims, in the candidates' order, that make the job fit in the domain."""
        reclaim, short, over = self.reclaim, self.short, self.over
        chosen = Victims(reclaim.session, self.job, over, self.search.where(domain))
        taken: Taken = {}
        for _, victim, path in victims:
            if not all(reclaim.gives_up(q, victim, taken, short) for q in path):
                continue  # this domain's victims so far brought that queue back
            if reclaim._adds(chosen, taken, victim, over) and chosen.placeable():
                return chosen, chosen.prune()
        return None

    def _victims(self, value: str) -> list[Listed]:
        """The jobs on the domain's nodes the candidates' walk yields, in its order."""
        reclaim = self.reclaim
        reachable = reclaim.reachable
        assert reachable is not None
        out: list[Listed] = []
        for victim in self.on.get(value, ()):
            if victim.key in reachable and self._yielded(victim):
                leaf = self.leaves[victim.queue]
                assert leaf is not None
                out.append(((leaf.rank, reclaim.order(victim)), victim, leaf.path))
        out.sort(key=lambda entry: entry[0])
        return out

    def _yielded(self, victim: JobInfo) -> bool:
        """Whether the candidates' walk yields the victim (it may still be one)."""
        leaves, queue = self.leaves, victim.queue
        leaf = leaves[queue] if queue in leaves else self._leaf(victim)
        if leaf is None:
            return False
        held = victim.held
        if not any(held.get(r, 0) > 0 for r in self.short):
            return False
        return not leaf.strict or not any(self.reclaim.asks_owed(victim, q) for q in leaf.strict)

    def _could_hold(self, domain: Domain, victims: list[Listed]) -> bool:
        """Whether what goes in the domain would fit there were all these victims gone."""
        room: Footprint = {}
        for _, victim, _ in victims:
            for i, held in victim.footprint.items():
                slot = room.setdefault(i, {})
                for r, a in held.items():
                    slot[r] = slot.get(r, 0) + a
        return self.reclaim.session.domains.could_hold(self.search.inside, domain, room)

    def _leaf(self, victim: JobInfo) -> _Leaf | None:
        """What the candidates' walk asks of a victim's leaf and the queues between it and
        the common ancestor with the job (nothing taken): None when it yields no victim of
        it (reclaim's ``candidates`` and ``bound``)."""
        self.leaves[victim.queue] = found = self._open(victim.queue)
        return found

    def _open(self, leaf: str) -> _Leaf | None:
        reclaim, short = self.reclaim, self.short
        session = reclaim.session
        excess = reclaim.excess.get(leaf)
        if not excess or not any(r in excess for r in short):
            return None
        mine = session.chain(self.job.queue)
        path: list[str] = []
        for q in session.chain(leaf):
            if q in mine:
                level = mine.index(q)
                break
            path.append(q)
        else:
            return None
        if level == 0 or not self._within(level):
            return None
        for q in path:
            if not reclaim.may_give(q, {}, short):
                return None
            info = session.queues[q]
            if info.children and not any(
                info.allocated.get(r, 0) > info.deserved.get_amount(r) for r in short
            ):
                return None  # its bound is LAST: the walk never enters it
        strict = tuple(q for q in path if not reclaim.above_deserved(q, {}, short))
        rank = (level, session.queues[leaf].priority, reclaim.used(leaf))
        return _Leaf(rank, tuple(path), strict)

    def _within(self, level: int) -> bool:
        """The job's queues below the level are within their deserved share."""
        found = self.within.get(level)
        if found is None:
            reclaim = self.reclaim
            mine = reclaim.session.chain(self.job.queue)
            found = self.within[level] = all(
                reclaim.within_deserved(self.job, own) for own in mine[:level]
            )
        return found
