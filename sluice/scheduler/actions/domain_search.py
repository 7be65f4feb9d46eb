"""The bounded search of reclaim and preempt by domain (docs/scheduler.md, *Reclaim and
preempt by domain*): which domains of a level are searched exactly for a job's victims, in
which order, and which result is taken.

A domain is ranked by room arithmetic alone, before anything is placed (``room_rank``): per
resource, what the pods that go in it ask beyond the free room of the nodes they may go on,
against what victims there hold on those nodes (and, where the caller gives it, what the
cluster lacks against what they hold in all). A domain where even all of them together fall
short is never searched; for the others, the fewest victims whose holdings, the largest
first, cover each shortfall, and the lowest priorities that many could have, are a bound
(``Bound``) no search there beats. The domains are searched by that bound, then the most
free room for the pods (``rank``), then by name, at most ``limit`` of them
(``best_domain``); the callers say how a domain is searched and which victims the bound
counts.

The arithmetic never counts less room than placement finds (it leaves out how pods split
over nodes), so a domain it rules out has no choice of victims that frees it, and the
victims it counts are never more than a search takes. It works on what the victims of a
domain hold together, at most and each (``Held``), each resource's holdings kept sorted, the
largest first, with their running sums, until one of them changes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Mapping, Sequence
from itertools import accumulate

from sluice.api.views import WorkloadView
from sluice.scheduler.actions.victims import Victims, domain_rank
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Footprint
from sluice.scheduler.records import JobInfo

Bound = tuple[int, int]
"""The fewest victims room arithmetic says a domain needs, and the lowest job priorities
that many of its victims could have in total: the first two keys of victims.domain_rank,
and no choice of victims there comes before them."""
Rank = tuple[int, int, float, str]
"""A domain's place in the search: its ``Bound``, then minus its free room for the pods (a
share of the cluster's, added up over what they ask: the most room first), then its name."""
Searched = tuple[bool, "Victims | None"]
"""A domain's search: whether the victims there could make room at all (else it does not
count against ``maxDomains``), and the victims that do, or None."""


class Held:
    """What some victims on a domain hold: on its nodes and in all, per resource, added up,
    the most one of them holds and what each of them holds; and the lowest priority among
    them."""

    __slots__ = ("each", "each_on", "low", "most", "most_on", "on", "sums", "total")

    def __init__(self) -> None:
        self.sums: dict[tuple[bool, str], list[int]] = {}
        """(On the domain, resource) -> the running sums of the holdings, the largest first
        (``fewest``): made when first asked, dropped when a holding changes."""
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
        self.sums.clear()

    def add_on(self, victim: JobInfo, on: Footprint, allowed: Collection[int]) -> None:
        """As ``add``, but for the room on the domain's nodes alone (what the victim holds in
        all left out: for a rank asked without what the cluster lacks)."""
        _count(self.on, self.most_on, self.each_on, _on_allowed(on, allowed))
        self.sums.clear()
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
        self.sums.clear()
        for r, a in less.items():
            if a > 0:
                self.on[r] -= a
                listed = self.each_on[r]
                listed.remove(room[r])
                if room[r] > a:
                    listed.append(room[r] - a)
                if room[r] == self.most_on[r]:
                    self.most_on[r] = max(listed, default=0)

    def fewest(self, on: bool, r: str, lacking: int) -> int:
        """The fewest of these victims whose holdings in ``r`` (on the domain's nodes, else in
        all) cover ``lacking``, more than 0 and no more than they hold in all: the largest
        first."""
        if (self.most_on if on else self.most)[r] >= lacking:
            return 1
        sums = self.sums.get((on, r))
        if sums is None:
            each = (self.each_on if on else self.each)[r]
            sums = self.sums[(on, r)] = list(accumulate(sorted(each, reverse=True)))
        return bisect_left(sums, lacking) + 1


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
    free: Mapping[str, int], ask: Mapping[str, int], need: Mapping[str, int], held: Held
) -> Bound | None:
    """The domain's bound (``Bound``), or None when its victims (``held``) could not free it
    even all gone: in some resource, the free room (``free``: of the nodes the pods may go
    on, each node's from zero) and what they hold on its nodes fall short of what the pods
    ask, or what they hold in all falls short of what the cluster lacks (``need``). Victims
    go whole and give back no more than they hold, so no fewer of them cover a shortfall in
    a resource than the fewest whose holdings there, the largest first, add up to it
    (``Held.fewest``); the bound is the most over the shortfalls, 1 when there is none."""
    if held.low is None:
        return None
    count = 1
    for r, a in ask.items():
        lacking = a - free.get(r, 0)
        if lacking > 0:
            if held.on.get(r, 0) < lacking:
                return None  # not even every victim there gives back enough
            count = max(count, held.fewest(True, r, lacking))
    for r, lacking in need.items():
        if lacking > 0:
            if held.total.get(r, 0) < lacking:
                return None
            count = max(count, held.fewest(False, r, lacking))
    return (count, count * held.low)


def rank(
    domain: Domain, bound: Bound, free: Mapping[str, int], ask: Mapping[str, int],
    total: Mapping[str, int],
) -> Rank:  # fmt: skip
    """The domain's place in the search (``Rank``): its bound, then the most free room for
    the pods (``free``) as a share of the cluster's (``total``) over what they ask, then by
    name. Among domains of the same bound, the one with the most room free needs its victims
    to give back the least, and its search is the likeliest to take no more than the bound."""
    share = 0.0
    for r in ask:
        whole = total.get(r, 0)
        if whole > 0:
            share += free.get(r, 0) / whole
    return (bound[0], bound[1], -share, domain.value)


def best_domain(
    ranked: Sequence[tuple[Rank, Domain]], search: Callable[[Domain], Searched], limit: int
) -> tuple[Victims | None, bool]:
    """The domains, given in rank order (``rank``), are searched in that order, at most
    ``limit`` of them; of those whose victims make the job fit, the first by
    victims.domain_rank (the fewest victims, then the lowest priorities, then by name) is the
    one. Once the best found has fewer victims or lower priorities than the next domain's
    bound, no domain left can do better: the search stops. So does it, while fewer than all
    the domains may be searched, once the best found matches the next domain's bound: none
    left beats it but by name, and the one with more room free is taken. When ``limit``
    lets every domain be searched, ties go by name, as for the exact choice over every
    domain. A domain whose victims could not make room even all gone (``search`` says so,
    asking no more than that) is not counted. Also returns whether some domain's victims
    could make room at all (when not, every domain was looked at)."""
    every = limit >= len(ranked)
    best: tuple[tuple[int, int, str], Victims] | None = None
    searched, could = 0, False
    for place, domain in ranked:
        if best is not None:
            found = best[0][:2]
            if found < place[:2] or (found == place[:2] and not every):
                break  # by the bound: no result of this domain, nor of one after it, is better
        if searched == limit:
            could = True  # a domain was left unsearched: not known, taken as could
            break
        room, found_ = search(domain)
        if not room:
            continue
        could = True
        searched += 1
        if found_ is not None:
            key = domain_rank(found_.chosen, domain)
            if best is None or key < best[0]:
                best = (key, found_)
    return (None if best is None else best[1]), could
