"""The bounded search of reclaim and preempt by domain (docs/scheduler.md, *Reclaim and
preempt by domain*): which domains of a level are searched exactly for a job's victims, in
which order, and which result is taken. The callers say how a domain's bound is made
tighter and how a domain is searched; this module only orders and counts."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence

from sluice.scheduler.actions.victims import Victims, domain_rank
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.records import JobInfo

Bound = tuple[int, int, str]
"""What no choice of victims in a domain comes before, by victims.domain_rank: the fewest
victims, the lowest priorities in total, the domain's name."""
Searched = tuple[bool, "Victims | None"]
"""A domain's search: whether the victims there could make room at all (else it does not
count against ``maxDomains``), and the victims that do, or None."""


def floor(low: int, domain: Domain) -> Bound:
    """A domain's first bound, from the lowest priority of a victim on it: one victim at
    least, of that priority at least."""
    return (1, low, domain.value)


def refined(bound: Bound, victims: Sequence[JobInfo], frees: Callable[[JobInfo], bool]) -> Bound:
    """A bound of one victim (``floor``) made tighter from the job's own victims on the
    domain: one victim of the lowest priority of one that alone frees it (``frees``:
    victims.frees_alone), or, none does, two victims of their lowest priority at least."""
    if bound[0] != 1:
        return bound
    for victim in sorted(victims, key=lambda v: v.priority):
        if victim.priority >= bound[1] and frees(victim):
            return (1, victim.priority, bound[2])
    low = min(v.priority for v in victims)
    return (2, 2 * low, bound[2])


def best_domain(
    ranked: Iterable[tuple[Bound, Domain]],
    refine: Callable[[Bound, Domain], Bound],
    search: Callable[[Domain], Searched],
    limit: int,
) -> tuple[Victims | None, bool]:
    """The domains are taken by bound (``floor``), a bound of one victim made tighter
    (``refine``) before the domain is searched; at most ``limit`` are searched, and of those
    whose victims make the job fit, the first by domain_rank is the one. Once the best found
    comes before the next bound, no domain left can do better: the search stops. A domain
    whose victims could not make room even all gone (``search`` says so) is not counted.
    Also returns whether some domain's victims could make room at all (when not, every
    domain was looked at)."""
    heap = [(bound, 0, domain.value, domain) for bound, domain in ranked]
    heapq.heapify(heap)
    best: tuple[tuple[int, int, str], Victims] | None = None
    searched, could = 0, False
    while heap:
        bound, stage, value, domain = heapq.heappop(heap)
        if best is not None and best[0] < bound:
            break  # they come by bound: no result of this domain, nor of one after it, is better
        if stage == 0 and bound[0] == 1:
            heapq.heappush(heap, (refine(bound, domain), 1, value, domain))
            continue
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
