"""The bounded search of reclaim and preempt by domain (docs/scheduler.md, *Reclaim and
preempt by domain*): which domains of a level are searched exactly for a job's victims, in
which order, and which result is taken.

A domain is ranked by room arithmetic alone, before anything is placed (``room_rank``): its
free room on the nodes the pods may go on plus what the job's victims there hold on those
nodes, per resource, against what the pods that go in it ask; and what those victims hold
in all against what the cluster lacks. A domain where even all of them together fall short
is never searched. The others are searched in rank order, at most ``limit`` of them
(``best_domain``); the callers say how a domain is searched.

The arithmetic never counts less room than placement finds (it leaves out how pods split
over nodes), so a domain it rules out has no choice of victims that frees it, and the
victims it counts are never more than a search takes. It works on what the victims of a
domain hold together and at most (``Held``), added up once per domain (reclaim keeps
what each queue subtree's victims there hold from one job to the next, and merges them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from sluice.api.views import WorkloadView
from sluice.scheduler.actions.victims import Victims, domain_rank
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Footprint
from sluice.scheduler.records import JobInfo

Rank = tuple[int, int, float, str]
"""A domain's place in the search: the fewest victims room arithmetic says it needs, the
lowest job priorities that many of its victims could have in total, the room it would have
left (a share of what the pods ask, added up over the resources they ask), its name. The
first two are bounds: no choice of victims there comes before them by victims.domain_rank."""
Searched = tuple[bool, "Victims | None"]
"""A domain's search: whether the victims there could make room at all (else it does not
count against ``maxDomains``), and the victims that do, or None."""


class Held:
    """What some victims on a domain hold: on its nodes and in all, per resource, added up
    and the most one of them holds; and the lowest priority among them."""

    __slots__ = ("low", "most", "most_on", "on", "total")

    def __init__(self) -> None:
        self.on: dict[str, int] = {}
        self.most_on: dict[str, int] = {}
        self.total: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.low: int | None = None

    def add(self, victim: JobInfo, on: Footprint, allowed: Collection[int]) -> None:
        """One victim, and the room it holds on the domain's nodes, of which those the pods
        may go on (``allowed``) count."""
        room: dict[str, int] = {}
        for i, held in on.items():
            if i in allowed:
                for r, a in held.items():
                    room[r] = room.get(r, 0) + a
        _count(self.on, self.most_on, room)
        _count(self.total, self.most, victim.held)
        if self.low is None or victim.priority < self.low:
            self.low = victim.priority

    def merge(self, other: Held) -> None:
        """Another set of victims on the same domain, none of them among these: the same as
        adding each of them."""
        for total, most, amounts, their_most in (
            (self.on, self.most_on, other.on, other.most_on),
            (self.total, self.most, other.total, other.most),
        ):
            for r, a in amounts.items():
                total[r] = total.get(r, 0) + a
            for r, a in their_most.items():
                if a > most.get(r, 0):
                    most[r] = a
        if other.low is not None and (self.low is None or other.low < self.low):
            self.low = other.low


def _count(total: dict[str, int], most: dict[str, int], amounts: Mapping[str, int]) -> None:
    for r, a in amounts.items():
        total[r] = total.get(r, 0) + a
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


def falls_short(ask: Mapping[str, int], free: Mapping[str, int], held: Mapping[str, int]) -> bool:
    """Whether, in some resource the pods ask (``ask``), the free room (``free``, as
    ``room_rank`` takes it) and what some victims hold on the nodes the pods may go on
    (``held``) fall short: ``room_rank``'s first test, asked of any victims. Asked of more
    victims than a job may take (all a reclaim could take there), it rules a domain out for
    every job of those pods at once, before that job's own victims are added up."""
    return any(a - free.get(r, 0) > held.get(r, 0) for r, a in ask.items())


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
    go whole and give back no more than they hold, so no fewer of them cover a shortfall
    than it takes of the most one holds, and one covers them all only when the most one
    holds covers each."""
    if held.low is None:
        return None
    count = 1
    for lacking, total, most in (
        *((a - free.get(r, 0), held.on.get(r, 0), held.most_on.get(r, 0)) for r, a in ask.items()),
        *((a, held.total.get(r, 0), held.most.get(r, 0)) for r, a in need.items()),
    ):
        if lacking <= 0:
            continue
        if total < lacking:
            return None  # not even every victim there gives back enough
        count = max(count, -(-lacking // most))
    left = 0.0
    for r, a in ask.items():
        left += (free.get(r, 0) + min(held.on.get(r, 0), count * held.most_on.get(r, 0)) - a) / a
    return (count, count * held.low, left, domain.value)


def best_domain(
    ranked: Iterable[tuple[Rank, Domain]], search: Callable[[Domain], Searched], limit: int
) -> tuple[Victims | None, bool]:
    """The domains are searched by rank (``room_rank``), at most ``limit`` of them; of those
    whose victims make the job fit, the first by victims.domain_rank is the one. Once the
    best found comes before the next rank's bounds, no domain left can do better: the
    search stops. A domain whose victims could not make room even all gone (``search``
    says so, asking no more than that) is not counted. Also returns whether some domain's
    victims could make room at all (when not, every domain was looked at)."""
    best: tuple[tuple[int, int, str], Victims] | None = None
    searched, could = 0, False
    for rank, domain in sorted(ranked, key=lambda entry: entry[0]):
        if best is not None and best[0][:2] < rank[:2]:
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
