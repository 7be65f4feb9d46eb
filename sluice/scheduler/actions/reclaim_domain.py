"""Reclaim inside one domain: the domain of a level whose victims make a job fit with the
fewest of them, then the lowest priorities in total, then by name (victims.domain_rank).

What a domain's search takes is what a search of the job's candidates (reclaim's
``candidates``, in their order) would take were it limited to the victims on that domain's
nodes: each victim taken when it still qualifies after what was taken before it in the same
domain, until the job fits. So each domain is searched alone, over its share of the victims
the walk yields (``InLevel._gather``: the leaves the walk opens; in a domain's search, in
the walk's order: nearest relatives, then queue priority, then victim order), without
walking the others'.

Domains are searched from the one whose result could come first. A search keeps at least
one victim, and the last it takes always stays (without it, the search had not been done): a
domain freed by one victim is freed by one that alone frees it, so none comes before (1, the
lowest priority of such a victim on it, its name), nor, when it has none, before (2, twice
the lowest priority of a victim on it, its name): two victims at least, none of them lower.
Those victims are looked for a priority at a time, lowest first, only while the domain could
still come first (a domain already known to be freed by one victim is searched without
asking whether all of them together would: they would); the searches stop as soon as the
best found comes before every bound left.

A domain that would not hold what goes in it even were every job that may be a victim on it
gone, whoever asks, is not looked at (reclaim_rules' ``may_free``, kept across jobs). What does
not change from one job to the next is kept: for each queue the walk enters, the victims of
its subtree spread over the domains with each domain's lowest priority, until a victim below
it is taken or an admission puts a queue below it over its share (``Subtrees``): a job then
puts together only the subtrees of its common ancestors' children, and a domain's victims
only when the domain is looked at (``InLevel._on``); whether a victim alone frees a domain for
pods of one shape, while the domain's room is as it was (``Alone``). Before that is asked of
each victim of a priority, it is asked of all of them together: when not even they could,
none of them alone does.
"""

from __future__ import annotations

import heapq

from sluice.scheduler.actions.reclaim_rules import Listed, Part, ReclaimRules, Shape
from sluice.scheduler.actions.victims import (
    PerQueue,
    Victims,
    cluster_need,
    domain_rank,
    frees_alone,
    frees_together,
    gives_too_little,
)
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.records import JobInfo
from sluice.scheduler.set_domains import Placed, Search

Bound = tuple[int, int, str]
SCAN, SEARCH = 0, 1  # what a domain on the heap stands for (``InLevel.best``)
Found = tuple[Victims, Placed]


class InLevel:
    """The search of one level's domains for one job (nothing is taken while it runs)."""

    def __init__(
        self, reclaim: ReclaimRules, job: JobInfo, short: dict[str, int], over: PerQueue,
        search: Search, level: str,
    ) -> None:  # fmt: skip
        self.reclaim, self.job, self.short, self.over = reclaim, job, short, over
        self.search = search
        self.domains = {d.value: d for d in reclaim.session.domains.domains(level)}
        self.need = cluster_need(reclaim.session, job)
        self.shape: Shape = (
            search.inside.pod_sets,
            tuple(sorted(self.need.items())),
            tuple((q, tuple(sorted(limits.items()))) for q, limits in sorted(over.items())),
        )
        self.alone = reclaim.by_domain.alone.setdefault(self.shape, {})  # this shape's, by domain
        self.freeable = reclaim.by_domain.freeable.setdefault(search.inside.pod_sets, {})
        self.low: dict[str, int] = {}  # domain value -> the lowest priority of a victim on it
        self.level, self.of_job = level, reclaim.on_domains(level)
        self.parts: list[Part] = []  # ``_gather``'s subtrees
        self.on: dict[str, list[Listed]] = {}  # domain value -> its victims (``_on``)
        self._gather()

    def best(self) -> Found | None:
        """Domains are taken from a heap by bound: first (stage SCAN) the lowest priority
        of a victim on it not yet looked at; when one of that priority alone frees it, the
        domain is searched at that bound (stage SEARCH); once none is left, at (2, twice
        its lowest priority): two victims or more, none of a lower one."""
        heap = [((1, low, value), SCAN, value) for value, low in self.low.items()]
        heapq.heapify(heap)
        best: tuple[Bound, Victims] | None = None
        may_free, freeable, inside = self.reclaim.may_free, self.freeable, self.search.inside
        while heap:
            bound, stage, value = heapq.heappop(heap)
            if best is not None and best[0] < bound:
                break
            domain = self.domains[value]
            if stage == SCAN:
                low = self.low[value]
                if bound[1] == low and not may_free(freeable, inside, domain):
                    continue  # not even every victim on it gone makes room: none does
                frees, after = self._scan(domain, bound[1])
                if frees:
                    heapq.heappush(heap, (bound, SEARCH, value))
                elif after is not None:
                    heapq.heappush(heap, ((1, after, value), SCAN, value))
                else:
                    heapq.heappush(heap, ((2, 2 * low, value), SEARCH, value))
                continue
            victims = sorted(self._on(value), key=lambda entry: entry[0])
            # One of them alone frees it (bound (1, ...)): all of them together do.
            session = self.reclaim.session
            if bound[0] == 1 or frees_together(session, inside, domain, (v for _, v, _ in victims)):
                found = self._search(domain, victims)
                if found is not None:
                    key = domain_rank(found.chosen, domain)
                    if best is None or key < best[0]:
                        best = (key, found)
        return None if best is None else (best[1], best[1].placed())

    def _scan(self, domain: Domain, priority: int) -> tuple[bool, int | None]:
        """Look at the victims on the domain of the priority given: whether one alone frees
        the domain, and the next priority of a victim on it (None: none higher). Which of
        them is asked first does not matter: each answer is kept, and any yes ends the look."""
        value = domain.value
        version = self.reclaim.session.domains.version(domain)
        kept = self.alone.get(domain.text)
        if kept is None or kept[0] != version:
            kept = self.alone[domain.text] = (version, {})
        known = kept[1]
        unknown: list[JobInfo] = []
        after: int | None = None
        for part in self.parts:  # the victims on it (``_on``), without putting them together
            got = part.get(value)
            if got is None:
                continue
            for _, victim, _ in got[1]:
                other = victim.priority
                if other == priority:
                    frees = known.get(victim.key)
                    if frees:
                        return True, None
                    if frees is None:
                        unknown.append(victim)
                elif other > priority and (after is None or other < after):
                    after = other
        session, inside = self.reclaim.session, self.search.inside
        if unknown:
            missing, maybe = session.domains.missing(inside, domain), []
            for victim in unknown:  # too little room on it for what the domain lacks: no
                if gives_too_little(missing, victim.footprint):
                    known[victim.key] = False
                else:
                    maybe.append(victim)
            unknown = maybe
        if len(unknown) > 2 and not frees_together(session, inside, domain, unknown):
            for victim in unknown:  # not even all of them together could
                known[victim.key] = False
            return False, after
        for victim in unknown:
            frees = known[victim.key] = self._frees(victim, domain)
            if frees:
                return True, None
        return False, after

    def _frees(self, victim: JobInfo, domain: Domain) -> bool:
        session = self.reclaim.session  # victims.frees_alone, for this job
        return frees_alone(session, self.need, self.over, victim, self.search.inside, domain)

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
