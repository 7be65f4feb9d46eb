"""The bounded search of reclaim and preempt by domain (docs/scheduler.md, *Reclaim and
preempt by domain*): which domains of a level are searched exactly for a job's victims, in
which order, and which result is taken.

A domain is ranked by room arithmetic alone, before anything is placed (``room_rank``): per
resource, what the pods that go in it ask beyond the free room of the nodes they may go on,
against what the job's victims there hold on those nodes, and what the cluster lacks
against what they hold in all. A domain where even all of them together fall short is never
searched; for the others, the fewest victims whose holdings, the largest first, cover each
shortfall is a lower bound on the victims a search takes there. The domains are searched by
that bound, then the lowest priorities that many victims could have, then by name
(``Rank``, the order of victims.domain_rank's keys), at most ``limit`` of them
(``best_domain``); the callers say how a domain is searched. A domain the arithmetic ranks at
one victim is ranked again when its turn comes (``refined``) by whether one victim alone,
gone, lets the pods fit node by node (``one_victim_rank``): one victim's holdings may cover
a shortfall on the domain and leave no node with room for a pod.

The arithmetic never counts less room than placement finds (it leaves out how pods split
over nodes), so a domain it rules out has no choice of victims that frees it, and the
victims it counts are never more than a search takes. It works on what the victims of a
domain hold together, at most and each (``Held``), added up once per domain (reclaim keeps
what each queue subtree's victims there hold from one job to the next, and merges them).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

from sluice.api.views import WorkloadView
from sluice.scheduler.actions.victims import Victims, domain_rank
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Footprint, Placement
from sluice.scheduler.records import JobInfo

Rank = tuple[int, int, str]
"""A domain's place in the search: the fewest victims room arithmetic says it needs, the
lowest job priorities that many of its victims could have in total, its name. The first
two are bounds, so no choice of victims there comes before its rank by victims.domain_rank,
whose last key is the name too: once the best found comes before the next rank, no domain
left can do better."""
Searched = tuple[bool, "Victims | None"]
"""A domain's search: whether the victims there could make room at all (else it does not
count against ``maxDomains``), and the victims that do, or None."""


class Held:
    """What some victims on a domain hold: on its nodes and in all, per resource, added up,
    the most one of them holds and what each of them holds; and the lowest priority among
    them."""

    __slots__ = ("each", "each_on", "low", "most", "most_on", "on", "total")

    def __init__(self) -> None:
        self.on: dict[str, int] = {}
        self.most_on: dict[str, int] = {}
        self.each_on: dict[str, list[int]] = {}
        self.total: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.each: dict[str, list[int]] = {}
        self.low: int | None = None

    def add(self, victim: JobInfo, on: Footprint, allowed: Collection[int]) -> None:
        """One victim, and the room it holds on the domain's nodes, of which those the pods
        may go on (``allowed``) count."""
        self.add_on(victim, on, allowed)
        _count(self.total, self.most, self.each, victim.held)

    def add_on(self, victim: JobInfo, on: Footprint, allowed: Collection[int]) -> None:
        """As ``add``, but for the room on the domain's nodes alone (what the victim holds in
        all left out: for a rank asked without what the cluster lacks)."""
        _count(self.on, self.most_on, self.each_on, _on_allowed(on, allowed))
        if self.low is None or victim.priority < self.low:
            self.low = victim.priority

    def remove_on(
        self, on: Footprint, allowed: Collection[int], part: Footprint | None = None
    ) -> None:
        """Take off the room on the domain's nodes of a victim ``add_on`` counted, now taken;
        or, given the room of one of its parts above its minimum (``part``), only that, the
        victim counted with the rest. The lowest priority stays: no lower than the victims'
        left, it is still a bound."""
        room = _on_allowed(on, allowed)
        less = room if part is None else _on_allowed(part, allowed)
        for r, a in less.items():
            if a > 0:
                self.on[r] -= a
                listed = self.each_on[r]
                listed.remove(room[r])
                if room[r] > a:
                    listed.append(room[r] - a)
                if room[r] == self.most_on[r]:
                    self.most_on[r] = max(listed, default=0)

    def merge(self, other: Held) -> None:
        """Another set of victims on the same domain, none of them among these: the same as
        adding each of them."""
        for total, most, each, amounts, their_most, theirs in (
            (self.on, self.most_on, self.each_on, other.on, other.most_on, other.each_on),
            (self.total, self.most, self.each, other.total, other.most, other.each),
        ):
            for r, a in amounts.items():
                total[r] = total.get(r, 0) + a
            for r, a in their_most.items():
                if a > most.get(r, 0):
                    most[r] = a
            for r, listed in theirs.items():
                each.setdefault(r, []).extend(listed)
        if other.low is not None and (self.low is None or other.low < self.low):
            self.low = other.low


def _on_allowed(on: Footprint, allowed: Collection[int]) -> dict[str, int]:
    """What a footprint holds on the nodes of ``allowed``, per resource."""
    room: dict[str, int] = {}
    for i, held in on.items():
        if i in allowed:
            for r, a in held.items():
                room[r] = room.get(r, 0) + a
    return room


def _count(
    total: dict[str, int], most: dict[str, int], each: dict[str, list[int]],
    amounts: Mapping[str, int],
) -> None:  # fmt: skip
    for r, a in amounts.items():
        if a > 0:
            total[r] = total.get(r, 0) + a
            each.setdefault(r, []).append(a)
            if a > most.get(r, 0):
                most[r] = a


def fewest(lacking: int, most: int, each: list[int]) -> int:
    """The fewest of these victims (``each``: what each holds, ``most`` the largest) whose
    holdings cover ``lacking``, more than 0 and no more than they hold in all: the largest
    first."""
    if most >= lacking:
        return 1
    count = 0
    for a in sorted(each, reverse=True):
        count += 1
        lacking -= a
        if lacking <= 0:
            break
    return count


def asked(view: WorkloadView) -> dict[str, int]:
    """What the pods that go in a domain ask, in total, per resource."""
    total: dict[str, int] = {}
    for pod_set in view.pod_sets:
        for r, a in pod_set.pod.request.items():
            if a > 0 and pod_set.pod_count > 0:
                total[r] = total.get(r, 0) + a * pod_set.pod_count
    return total


def held_on(footprint: Footprint, of_node: Mapping[int, str]) -> dict[str, Footprint]:
    """A victim's room on the nodes of each domain it is on (``of_node``: node -> domain
    value)."""
    out: dict[str, Footprint] = {}
    for i, room in footprint.items():
        value = of_node.get(i)
        if value is not None:
            out.setdefault(value, {})[i] = room
    return out


def room_rank(
    domain: Domain,
    free: Mapping[str, int],
    ask: Mapping[str, int],
    need: Mapping[str, int],
    held: Held,
) -> Rank | None:
    """The domain's rank (``Rank``), or None when its victims (``held``) could not free it
    even all gone: in some resource, the free room (``free``: of the nodes the pods may go
    on, each node's from zero) and what they hold on its nodes fall short of what the pods
    ask, or what they hold in all falls short of what the cluster lacks (``need``). Victims
    go whole and give back no more than they hold, so no fewer of them cover a shortfall in
    a resource than the fewest whose holdings there, the largest first, add up to it
    (``fewest``); the bound is the most over the shortfalls, 1 when there is none."""
    if held.low is None:
        return None
    count = 1
    for r, a in ask.items():
        lacking = a - free.get(r, 0)
        if lacking > 0:
            if held.on.get(r, 0) < lacking:
                return None  # not even every victim there gives back enough
            count = max(count, fewest(lacking, held.most_on[r], held.each_on[r]))
    for r, lacking in need.items():
        if lacking > 0:
            if held.total.get(r, 0) < lacking:
                return None
            count = max(count, fewest(lacking, held.most[r], held.each[r]))
    return (count, count * held.low, domain.value)


def best_domain(
    ranked: Iterable[tuple[Rank, Domain]], search: Callable[[Domain], Searched], limit: int
) -> tuple[Victims | None, bool]:
    """The domains, given in rank order (``room_rank``), are searched in that order, at most
    ``limit`` of them; of those whose victims make the job fit, the first by
    victims.domain_rank is the one. Once the best found comes before the next rank, no
    domain left can do better (``Rank``): the search stops, so a domain whose victims match
    its bound ends it when the next ranks no lower. A domain whose victims could not make
    room even all gone (``search`` says so, asking no more than that) is not counted. Also
    returns whether some domain's victims could make room at all (when not, every domain
    was looked at)."""
    best: tuple[tuple[int, int, str], Victims] | None = None
    searched, could = 0, False
    for rank, domain in ranked:
        if best is not None and best[0] < rank:
            break  # by rank: no result of this domain, nor of one after it, is better
        if searched == limit:
            could = True  # a domain was left unsearched: not known, taken as could
            break
        room, found = search(domain)
        if not room:
            continue
        could = True
        searched += 1
        if found is not None:
            key = domain_rank(found.chosen, domain)
            if best is None or key < best[0]:
                best = (key, found)
    return (None if best is None else best[1]), could


def one_victim_rank(
    placement: Placement,
    inside: WorkloadView,
    domain: Domain,
    allowed: Collection[int],
    victims: Iterable[JobInfo],
    need: Mapping[str, int],
    rank: Rank,
) -> Rank:
    """The domain's rank (``room_rank``'s, given) made exact where it says one victim: the
    lowest priority of a victim that alone frees the domain (``one_victim``); when none
    does, two victims at the least. A workload of several pod sets keeps its rank."""
    if rank[0] != 1 or len(inside.pod_sets) != 1:
        return rank
    low = one_victim(placement, inside, domain, allowed, victims, need)
    if low is None:
        return (2, 2 * rank[1], rank[2])
    return (1, low, rank[2])


Fits = tuple[dict[int, int], int]
"""Node -> how many of a workload's pods (of one pod set) it takes now, and their sum."""


def fits_now(
    placement: Placement, inside: WorkloadView, domain: Domain, allowed: Collection[int]
) -> Fits:
    """How many of the pods (of a workload of one pod set) each node of the domain they may
    go on (``allowed``) takes now, and their sum: what ``one_victim`` starts from, the same
    until room is held or given back on the domain's nodes."""
    pod_set = inside.pod_sets[0]
    pod, count = pod_set.pod, pod_set.pod_count
    nodes = {i: placement.fit(pod, i, None, count) for i in domain.nodes if i in allowed}
    return nodes, sum(nodes.values())


def one_victim(
    placement: Placement,
    inside: WorkloadView,
    domain: Domain,
    allowed: Collection[int],
    victims: Iterable[JobInfo],
    need: Mapping[str, int],
    now: Fits | None = None,
) -> int | None:
    """The lowest priority of a victim that alone, gone, lets the pods (of a workload of one
    pod set) fit on the domain's nodes they may go on (``allowed``) and frees what the
    cluster lacks (``need``); None when none does. For pods all alike, first fit places as
    many as fit node by node (Victims.placeable counts them so), so this is the test a
    search that took that one victim would make, without the rules of whether it may be
    taken: no search there takes one victim of a lower priority, and a domain where one
    victim frees room only on paper (its room spread over nodes, none with room enough for
    a pod) no longer ties with those where one really does. ``now``: ``fits_now``'s answer,
    where the caller keeps it."""
    pod_set = inside.pod_sets[0]
    pod, count = pod_set.pod, pod_set.pod_count
    nodes, base = now or fits_now(placement, inside, domain, allowed)
    low: int | None = None
    for victim in victims:
        if low is not None and victim.priority >= low:
            continue
        held = victim.held
        if any(held.get(r, 0) < a for r, a in need.items() if a > 0):
            continue
        fit = base
        for i, room in victim.footprint.items():
            before = nodes.get(i)
            if before is not None:
                fit += placement.fit(pod, i, room, count) - before
        if fit >= count:
            low = victim.priority
    return low


def refined(
    ranked: Iterator[tuple[Rank, Domain]], refine: Callable[[Rank, Domain], Rank]
) -> Iterator[tuple[Rank, Domain]]:
    """The domains given in rank order, each ranked again by ``refine`` (never lower) only
    when its turn may have come, yielded in the order of the new ranks."""
    heap: list[tuple[Rank, int, Domain]] = []
    sequence = 0
    upcoming = next(ranked, None)
    while heap or upcoming is not None:
        if heap and (upcoming is None or heap[0][0] <= upcoming[0]):
            rank, _, domain = heapq.heappop(heap)
            yield rank, domain
            continue
        assert upcoming is not None
        rank, domain = upcoming
        heapq.heappush(heap, (refine(rank, domain), sequence, domain))
        sequence += 1
        upcoming = next(ranked, None)
