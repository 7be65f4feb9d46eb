"""Reclaim inside one domain: the domain of a level whose victims make a job fit with the
fewest of them, then the lowest priorities in total, then by name (victims.domain_rank).

What a domain's search takes is what a search of the job's candidates (reclaim's
``candidates``, in their order) would take were it limited to the victims on that domain's
nodes: each victim taken when it still qualifies after what was taken before it in the same
domain, until the job fits. So each domain is searched alone, over its share of the victims
the walk yields (``InLevel._gather``: the leaves the walk opens; in a domain's search, in
the walk's order: nearest relatives, then queue priority, then victim order), without
walking the others'.

First, whether freeing could help at all, by room arithmetic alone (domain_search.room_rank):
what the pods that go in a domain ask against the free room of the nodes there they may go on
plus what this job's victims there hold on those nodes, and what the victims hold in all
against what the cluster lacks. Every domain with victims of the job is first ranked by what
every victim reclaim may take holds there (``InLevel._anyone``, kept for the cycle, a victim's
room taken off as it is taken): a domain that falls short even so is ruled out for every job
of those pods without adding its victims up, and the others' fewest victims so counted is no
more than the job's own. The job's own rank of a domain is worked out only once no domain's
first rank comes before it (``InLevel._ranked``): where the first rank says one victim, by
whether one of the job's victims there alone lets the pods fit node by node
(domain_search.one_victim: the rank is then one victim of that lowest priority, with no sum
of the job's victims made); otherwise by the arithmetic over the job's own victims
(``InLevel._held``), two victims at the least where it says one. At most ``maxDomains``
domains, in that order, are then searched exactly; a domain where this job's victims all gone
would not make room (victims.frees_together, the one placement asked before a search) is not
counted. The best found is taken: the fewest victims, then the lowest priorities, then by
name; the searches stop early once it comes before the next domain's rank. A job for which
no domain passes takes nothing, and its reason says so (``InLevel.hopeless``). With
``maxDomains`` at least the number of domains this is the exact choice over every domain.

What does not change from one job to the next is kept: for each queue the walk enters, the
victims of its subtree spread over the domains with each domain's lowest priority, until a
victim below it is taken or an admission puts a queue below it over its share
(``Subtrees``): a job then puts together only the subtrees of its common ancestors'
children, and a domain's victims only when the domain is looked at (``InLevel._on``); what
a subtree's victims hold on a domain is added up once while the subtree is kept
(``InLevel._held``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from sluice.scheduler.actions.domain_search import (
    Fits,
    Held,
    Rank,
    Searched,
    asked,
    best_domain,
    fits_now,
    held_on,
    one_victim,
    room_rank,
)
from sluice.scheduler.actions.reclaim_rules import Listed, Part, ReclaimRules
from sluice.scheduler.actions.victims import PerQueue, Victims, cluster_need, frees_together
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Footprint
from sluice.scheduler.records import JobInfo
from sluice.scheduler.set_domains import Placed, Search

Found = tuple[Victims, Placed]


class InLevel:
    """The search of one level's domains for one job (nothing is taken while it runs)."""

    def __init__(
        self, reclaim: ReclaimRules, job: JobInfo, short: dict[str, int], over: PerQueue,
        search: Search, level: str,
    ) -> None:  # fmt: skip
        self.reclaim, self.job, self.short, self.over = reclaim, job, short, over
        self.search = search
        self.need = cluster_need(reclaim.session, job)
        self.low: dict[str, int] = {}  # domain value -> the lowest priority of a victim on it
        self.level, self.of_job = level, reclaim.on_domains(level)
        self.parts: list[Part] = []  # ``_gather``'s subtrees
        self.on: dict[str, list[Listed]] = {}  # domain value -> its victims (``_on``)
        self.hopeless = False
        """Set by ``best``: no domain could hold the job even with every victim it may take
        on it gone, so no victim was searched for."""

    def best(self) -> Found | None:
        """The best of at most ``maxDomains`` domains searched in rank order
        (domain_search.best_domain, domain_search.room_rank) among those with victims of the
        job; None when none is freed. The ranks are worked out lazily (``_ranked``)."""
        reclaim, inside = self.reclaim, self.search.inside
        self._gather()

        def search(domain: Domain) -> Searched:
            victims = self._on(domain.value)
            session = reclaim.session
            if not frees_together(session, inside, domain, (v for _, v, _ in victims)):
                return False, None  # not even every victim of this job on it gone makes room
            return True, self._search(domain, sorted(victims, key=lambda entry: entry[0]))

        found_, could = best_domain(self._ranked(), search, reclaim.max_domains)
        self.hopeless = not could
        return None if found_ is None else (found_, found_.placed())

    def _ranked(self) -> Iterator[tuple[Rank, Domain]]:
        """The domains with victims of the job, in rank order (domain_search.room_rank), each
        ranked only when its turn may have come: first by what every victim reclaim may take
        there holds (``_anyone``, kept from one job to the next), whose fewest victims is a
        lower bound on this job's there; then, when no domain's first rank comes before it,
        by this job's own victims: one victim of the lowest priority that alone frees it
        (domain_search.one_victim, for pods all alike, asked where the first rank says one),
        else what they hold (``_held``), two at the least where that says one. A domain that
        falls short even with every victim gone is never ranked by the job's own."""
        room = self.reclaim.session.domains.room
        by_value, ask, low = room.by_value(self.level), asked(self.search.inside), self.low
        pods = [p.pod for p in self.search.inside.pod_sets]
        allowed = room.allowed(pods)
        constraints = tuple(sorted({p.constraints for p in pods}, key=repr))
        heap: list[tuple[Rank, bool, Domain, dict[str, int]]] = []
        for value, priority in low.items():
            domain = by_value[value]
            free = room.free_for(domain, pods)
            first = room_rank(domain, free, ask, {}, self._anyone(domain, allowed, constraints))
            if first is not None:  # else every victim reclaim may take there gone, still short
                heap.append(((first[0], first[0] * priority, value), False, domain, free))
        heapq.heapify(heap)
        placement, inside, need = self.reclaim.session.placement, self.search.inside, self.need
        alike = len(inside.pod_sets) == 1
        while heap:
            rank, own, domain, free = heapq.heappop(heap)
            if own:
                yield rank, domain
                continue
            if alike and rank[0] == 1:
                victims = (v for _, v, _ in self._on(domain.value))
                now = self._fits_now(domain, allowed)
                one = one_victim(placement, inside, domain, allowed, victims, need, now)
                if one is not None:  # the arithmetic would say one victim too
                    heapq.heappush(heap, ((1, one, domain.value), True, domain, free))
                    continue
            held = self._held(domain.value, allowed, constraints)
            found = room_rank(domain, free, ask, need, held)
            if found is not None:
                if alike and found[0] == 1:  # no one victim alone frees it (asked above)
                    found = (2, 2 * found[1], found[2])
                heapq.heappush(heap, (found, True, domain, free))

    def _fits_now(self, domain: Domain, allowed: set[int]) -> Fits:
        """domain_search.fits_now for the job's pods, kept from one job to the next while no
        room is held or given back on the domain's nodes (its version): jobs of pods alike
        ask it of the same domains."""
        pod_set = self.search.inside.pod_sets[0]
        key = (domain.text, pod_set.pod, pod_set.pod_count)
        version = self.reclaim.session.domains.room.version(domain)
        kept = self.reclaim.by_domain.fits
        found = kept.get(key)
        if found is None or found[0] != version:
            now = fits_now(self.reclaim.session.placement, self.search.inside, domain, allowed)
            found = kept[key] = (version, now)
        return found[1]

    def _held(self, value: str, allowed: set[int], constraints: object) -> Held:
        """What this job's victims on a domain hold there (``Held``), on the nodes the pods
        may go on (``allowed``, the nodes of these ``constraints``): each part's
        (``_gather``) kept from one job to the next while the part is the one kept for its
        subtree, merged, so that a job adds up only the victims of parts no job before it
        asked about that domain."""
        kept_helds = self.reclaim.by_domain.helds
        out: Held | None = None
        merged = False
        for part in self.parts:
            got = part.get(value)
            if got is None:
                continue
            key = (id(part), constraints)
            kept = kept_helds.get(key)
            if kept is None or kept[0] is not part:
                kept = kept_helds[key] = (part, {})
            held = kept[1].get(value)
            if held is None:
                held = kept[1][value] = Held()
                for _, victim, _ in got[1]:
                    held.add(victim, self._on_domain(victim, value), allowed)
            if out is None:
                out = held  # kept: merged into a copy only
            else:
                if not merged:
                    out, merged = _copy(out), True
                out.merge(held)
        return Held() if out is None else out

    def _anyone(self, domain: Domain, allowed: set[int], constraints: object) -> Held:
        """What every victim reclaim may take (``on_domains``, not taken since) holds on the
        domain's nodes the pods may go on (``allowed``, the nodes of these
        ``constraints``): no job's victims there hold more, nor does any one of them (what
        they hold in all is not counted: the first rank asks the domain only). Kept for the
        cycle, each victim's room there taken off as it is taken (ByDomain.taken; a job
        admitted since is no victim)."""
        by_domain = self.reclaim.by_domain
        key = (self.level, domain.value, constraints)
        kept = by_domain.anyone.get(key)
        if kept is None:
            held, gone = Held(), by_domain.gone
            for victim in by_domain.on_value[self.level].get(domain.value, ()):
                if victim.key not in gone:
                    held.add_on(victim, self._on_domain(victim, domain.value), allowed)
            kept = by_domain.anyone[key] = (held, allowed)
            by_domain.constraints_on.setdefault(key[:2], []).append(constraints)
        return kept[0]

    def _on_domain(self, victim: JobInfo, value: str) -> Footprint:
        """The room the victim holds on a domain of the level (its footprint does not change
        while it is admitted: worked out once a cycle)."""
        kept = self.reclaim.by_domain.held_on
        key = (self.level, victim.key)
        found = kept.get(key)
        if found is None:
            of_node = self.reclaim.by_domain.of_node[self.level]
            found = kept[key] = held_on(victim.footprint, of_node)
        return found.get(value, {})

    def _search(self, domain: Domain, victims: list[Listed]) -> Victims | None:
        """The victims, in the candidates' order, that make the job fit in the domain (those
        it does not need let go; where its pods go is worked out for the best domain only)."""
        reclaim, short, over = self.reclaim, self.short, self.over
        chosen = Victims(reclaim.session, self.job, over, self.search.where(domain))
        taken: PerQueue = {}
        gives_up = reclaim.gives_up
        for _, victim, path in victims:
            for q in path:
                if not gives_up(q, victim, taken, short):
                    break  # this domain's victims so far brought that queue back
            else:
                if chosen.adds(victim, taken, over) and chosen.placeable():
                    chosen.let_go()
                    return chosen
        return None

    def _on(self, value: str) -> list[Listed]:
        """The victims on a domain the walk yields (``_gather``), put together when asked."""
        found = self.on.get(value)
        if found is None:
            found = self.on[value] = []
            for part in self.parts:
                got = part.get(value)
                if got is not None:
                    found.extend(got[1])
        return found

    def _gather(self) -> None:
        """The parts of the candidates' walk (nothing taken): for each level (common
        ancestor) up to the first where the job's own queue is not within its deserved
        share, the subtrees of its children but the job's own (``_subtree``); and each
        domain's lowest victim priority among them (``low``)."""
        reclaim = self.reclaim
        queues, chain = reclaim.session.queues, reclaim.session.chain(self.job.queue)
        resources = frozenset(self.short)
        for level in range(1, len(chain)):
            own = chain[level - 1]
            if not reclaim.within_deserved(self.job, own):
                break  # every further group has a higher common ancestor: still not within
            for child in queues[chain[level]].children:
                if child != own:
                    part = self._subtree(child, level, (child,), (), resources)
                    if part:
                        self.parts.append(part)
        low = self.low
        for part in self.parts:
            for value, (priority, _) in part.items():
                if priority < low.get(value, priority + 1):
                    low[value] = priority

    def _subtree(
        self, name: str, level: int, path: tuple[str, ...], strict: tuple[str, ...],
        resources: frozenset[str],
    ) -> Part:  # fmt: skip
        """Domain value -> the lowest priority and the victims on it of the queue's subtree
        the walk yields, given the queues on its path not above their share (``strict``).
        The walk's rules (reclaim's ``candidates`` and ``bound``): into a queue only when it
        may give (``may_give``) and, above a leaf, is above its deserved share in something
        the job lacks; from a leaf above its share in such a resource, its victims holding
        one of them, but for one that asks what a queue on its path not above its share
        names. Kept while nothing below the queue is taken and no admission puts a queue
        below it over its share (its ``version``)."""
        reclaim = self.reclaim
        key = (self.level, name, level, path, strict, resources)
        version = reclaim.version.get(name, 0)
        kept = reclaim.by_domain.subtrees.get(key)
        if kept is not None and kept[0] == version:
            return kept[1]
        out: Part = {}
        info = reclaim.session.queues[name]
        if info.children:
            if any(info.allocated.get(r, 0) > info.deserved.get_amount(r) for r in resources):
                above = reclaim.above_deserved(name, {}, resources)
                if above or reclaim.may_give(name, {}, resources):
                    below = strict if above else (*strict, name)
                    for child in info.children:
                        part = self._subtree(child, level, (*path, child), below, resources)
                        for value, (priority, victims) in part.items():
                            got = out.get(value)
                            if got is None:
                                out[value] = (priority, list(victims))
                            else:
                                got[1].extend(victims)
                                if priority < got[0]:
                                    out[value] = (priority, got[1])
        else:
            self._leaf(out, name, level, path, strict, resources)
        reclaim.by_domain.subtrees[key] = (version, out)
        return out

    def _leaf(
        self, out: Part, leaf: str, level: int, path: tuple[str, ...], strict: tuple[str, ...],
        resources: frozenset[str],
    ) -> None:  # fmt: skip
        """The leaf's victims the walk yields, each once per domain it is on (``_subtree``)."""
        reclaim = self.reclaim
        excess = reclaim.excess.get(leaf)
        if not excess or not any(r in excess for r in resources):
            return
        if not reclaim.above_deserved(leaf, {}, resources):
            if not reclaim.may_give(leaf, {}, resources):
                return
            strict = (*strict, leaf)
        rank = (level, reclaim.session.queues[leaf].priority, reclaim.used(leaf))
        for victim in reclaim.victims_for(leaf, resources):
            if strict and any(reclaim.asks_owed(victim, q) for q in strict):
                continue
            entry = ((rank, reclaim.order(victim)), victim, path)
            for value in self.of_job.get(victim.key, ()):
                got = out.get(value)
                if got is None:
                    out[value] = (victim.priority, [entry])
                else:
                    got[1].append(entry)
                    if victim.priority < got[0]:
                        out[value] = (victim.priority, got[1])


def _copy(held: Held) -> Held:
    out = Held()
    out.merge(held)
    return out
