"""reclaim: a queue owed its deserved share takes it back from queues above theirs.

The rules are docs/scheduler.md's "Reclaim": a pending job takes quota back, nearest
relatives first, from reclaimable queues above their deserved share, never below a victim
queue's guarantee, never from a job younger than minRuntime, and only when all its victims
together make it fit. What this module adds is keeping the search cheap on big clusters: a
job is only considered when its own queue is below its deserved share and the queues above
theirs could, together, give back enough; candidate queues are visited group by group from
the nearest relatives outwards by a best-first search down the tree (a subtree is entered
only when no victim outside it comes first, and skipped when its root is not above its
deserved share), its victims are sorted once per cycle, and the search stops as soon as the
job fits.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterator, Mapping
from datetime import datetime, timedelta

from sluice.api.views import EPOCH, WorkloadView
from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.reclaim_domain import Alone, InLevel, Subtrees
from sluice.scheduler.actions.victims import Victims
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.fit import (
    as_hard,
    lacking,
    over_capability_failure,
    placeable,
    queue_overage,
    short_resources,
)
from sluice.scheduler.order import leaf_order
from sluice.scheduler.placement import Footprint
from sluice.scheduler.session import JobInfo, Session
from sluice.scheduler.set_domains import Placed, Search, Where, victim_search

Taken = dict[str, dict[str, int]]
Order = tuple[int, float, float, float, str]
"""Job priority, -its namespace's usage in its queue, -admitted, -created, name."""
Key = tuple[int, float, Order]  # queue priority, -the queue's usage per weight, victim order
LAST: Key = (2**63, 0.0, (0, 0.0, 0.0, 0.0, ""))  # no victim at all
RANKED, SUBTREE, VICTIM = 0, 1, 2  # what a search entry stands for


def victim_order(job: JobInfo, used: float = 0.0) -> Order:
    """Lower job priority first, then the job of the namespace that used more in its queue
    (``used``: its dominant usage, the usage plugin), then the most recently admitted, then
    the most recently created, then by name."""
    admitted = (job.admitted_at or EPOCH).timestamp()
    created = job.view.creation_timestamp.timestamp()
    return (job.priority, -used, -admitted, -created, job.key)


class _Reclaim:
    def __init__(self, session: Session, outcome: Outcome) -> None:
        self.session = session
        self.outcome = outcome
        self.min_runtime: timedelta = session.config.arguments("reclaim").min_runtime
        self.now: datetime = session.now
        self.victims: dict[str, list[JobInfo]] = {}
        self.victims_using: dict[str, dict[frozenset[str], list[JobInfo]]] = {}
        self.version: dict[str, int] = {}  # bumped on every queue whose subtree lost victims
        self.bounds: dict[tuple[str, frozenset[str]], tuple[int, Key]] = {}
        self.ranked: dict[str, dict[frozenset[str], tuple[int, list[tuple[Key, str]]]]] = {}
        self.orders: dict[str, Order] = {}
        self.owed: dict[tuple[str, str], bool] = {}  # (job, queue) -> asks_owed
        self.usage: dict[str, float] = {}  # leaf -> -its usage per weight, at first sight
        self.excess: dict[str, dict[str, int]] = {}
        self.gives: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        self.room_alone: dict[str, int] = {}  # short of one resource: what all leaves could give
        self.room_together: dict[str, int] = {}  # short of several
        for name, info in session.queues.items():
            if not info.children and info.admitted_jobs and info.queue.spec.reclaimable:
                self._count_excess(name, +1)
        self.alone: Alone = {}  # reclaim_domain.py's, kept from one job to the next
        self.subtrees: Subtrees = {}  # likewise
        self.by_domain: dict[str, dict[str, tuple[str, ...]]] = {}  # level -> ``on_domains``
        self.held_on: dict[str, dict[str, Footprint]] = {}
        """Level -> domain value -> the room every job that may still be a victim holds on
        its nodes (``on_domains``'s jobs, less those taken since)."""
        self.freeable: dict[object, dict[str, tuple[int, bool]]] = {}
        """Pod sets -> domain -> ``may_free``'s answer for them, and the domain's version then."""
        self.of_node: dict[str, dict[int, str]] = {}  # level -> node -> its domain's value

    # Conditions ------------------------------------------------------------------------------
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

    def above_deserved(self, name: str, taken: Taken, short: Collection[str]) -> bool:
        """Above its deserved share in a resource the job lacks that deserved names."""
        info = self.session.queues[name]
        owed, held = info.deserved, info.allocated
        gone = taken.get(name)
        for r in short:  # a plain loop: reclaim by domain asks this millions of times a cycle
            if r in owed and held.get(r, 0) - (gone.get(r, 0) if gone else 0) > owed[r]:
                return True
        return False

    def may_give(self, name: str, taken: Taken, short: Collection[str]) -> bool:
        """Whether anything below the queue may still qualify: it is above its share, or the
        job lacks a resource its deserved leaves out (a job below asking for none of the
        named ones is best-effort in it)."""
        owed = self.session.queues[name].deserved
        return self.above_deserved(name, taken, short) or any(r not in owed for r in short)

    def gives_up(self, name: str, victim: JobInfo, taken: Taken, short: dict[str, int]) -> bool:
        """The queue, on the victim's path, lets it go: it is above its share in what the job
        lacks, or the victim is best-effort in it."""
        return not self.asks_owed(victim, name) or self.above_deserved(name, taken, short)

    def keeps_guarantee(self, name: str, victim: JobInfo, taken: Taken) -> bool:
        info = self.session.queues[name]
        gone = taken.get(name, {})
        for r, g in info.guarantee.items():
            used = victim.held.get(r, 0)
            if g > 0 and used > 0 and info.allocated.get(r, 0) - gone.get(r, 0) - used < g:
                return False
        return True

    def _count_excess(self, name: str, sign: int) -> None:
        """Add (or with sign -1, remove) what a leaf above its share could give back at most.

        ``excess`` is its amounts above max(deserved, guarantee). A victim qualifies while its
        queue is above its share *before* it goes, so the last one may take the queue below
        its share, never below its guarantee: asked for one resource r, a leaf gives at most
        its excess in r plus its largest victim's r; asked for several, a leaf above its share
        in one of them may give the others down to its guarantee.
        """
        if sign > 0:
            info = self.session.queues[name]
            self.excess[name] = excess = {
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
            self.gives[name] = (
                {r: min(over + largest.get(r, 0), floor[r]) for r, over in excess.items()},
                floor if excess else {},
            )
        alone, together = self.gives.get(name, ({}, {}))
        for r, amount in alone.items():
            self.room_alone[r] = self.room_alone.get(r, 0) + sign * amount
        for r, amount in together.items():
            self.room_together[r] = self.room_together.get(r, 0) + sign * amount

    def supply(self, short: dict[str, int]) -> bool:
        """Could all queues above their deserved share, together, give back enough?"""
        room = self.room_alone if len(short) == 1 else self.room_together
        return all(room.get(r, 0) >= need for r, need in short.items())

    # Search ------------------------------------------------------------------------------------
    def sorted_victims(self, name: str) -> list[JobInfo]:
        """The queue's admitted jobs that may be victims at all, in victim order, once a
        cycle. Nothing becomes eligible during reclaim (jobs it admits are fresh), so jobs
        that are not eligible now never need to be looked at again."""
        if name not in self.victims:
            eligible = [j for j in self.session.queues[name].admitted_jobs if self.eligible(j)]
            self.victims[name] = sorted(eligible, key=self.order)
        return self.victims[name]

    def victims_for(self, name: str, short: frozenset[str]) -> list[JobInfo]:
        """The queue's victims that give back at least one resource the job is short of."""
        by_short = self.victims_using.setdefault(name, {})
        if short not in by_short:
            by_short[short] = [
                v for v in self.sorted_victims(name) if any(v.held.get(r, 0) > 0 for r in short)
            ]
        return by_short[short]

    def bound(self, name: str, short: frozenset[str]) -> Key:
        """No victim in the subtree of ``name`` comes before this key (queue priority, victim
        order). Kept per subtree and recomputed only where reclaim took something since."""
        info = self.session.queues[name]
        if not info.children:
            excess = self.excess.get(name)
            if not excess or not any(r in excess for r in short):
                return LAST
            victims = self.victims_for(name, short)
            return (info.priority, self.used(name), self.order(victims[0])) if victims else LAST
        version = self.version.get(name, 0)
        cached = self.bounds.get((name, short))
        if cached is not None and cached[0] == version:
            return cached[1]
        best = LAST
        if any(info.allocated.get(r, 0) > info.deserved.get_amount(r) for r in short):
            # A queue at or below its share in every resource the job lacks gives nothing.
            for child in info.children:
                best = min(best, self.bound(child, short))
        self.bounds[(name, short)] = (version, best)
        return best

    def ranked_children(self, name: str, short: frozenset[str]) -> list[tuple[Key, str]]:
        """The children of ``name`` that may hold victims, by bound, smallest first.

        Bounds only rise as victims are taken, so an old ranking still gives every child a
        key no larger than its true one; it is redone once enough has been taken below (and
        at once when an admission may have lowered one, see ``admitted``).
        """
        version = self.version.get(name, 0)
        children = self.session.queues[name].children
        by_short = self.ranked.setdefault(name, {})
        cached = by_short.get(short)
        if cached is None or version - cached[0] > len(children) // 8 + 2:
            ranked = sorted((self.bound(child, short), child) for child in children)
            cached = by_short[short] = (version, [entry for entry in ranked if entry[0] != LAST])
        return cached[1]

    def admitted(self, job: JobInfo) -> None:
        """The job's queue and ancestors hold more now. One that went above its share where
        it was not may now hold victims: its bound and those above it, and the rankings that
        list them, are redone."""
        chain = self.session.chain(job.queue)
        for depth, name in enumerate(chain):
            held, owed = self.session.queues[name].allocated, self.session.queues[name].deserved
            if any(
                held.get(r, 0) - a <= owed.get_amount(r) < held.get(r, 0)
                for r, a in job.request.items()
            ):
                for above in chain[depth:]:
                    self.version[above] = self.version.get(above, 0) + 1
                    self.ranked.pop(above, None)
                return

    def candidates(
        self,
        job: JobInfo,
        short: dict[str, int],
        taken: Taken,
        paths: list[tuple[str, ...]] | None = None,
    ) -> Iterator[JobInfo]:
        """Victims in order: nearest relatives first, then lower queue priority, then lower
        job priority, then victim order (the most recently admitted, then created, first).
        With ``paths``, each victim's path below its common ancestor with the job is appended
        to it as the victim is yielded.

        Each level (common ancestor) is a best-first search down its subtrees: every heap entry
        carries a key no larger than that of any victim it stands for, so victims come out in
        order while only the branches that can hold the next ones are opened. A subtree whose
        root is back at its deserved share is dropped whole: nothing below it qualifies.
        Children are visited through their cached ranking, one at a time, so a queue with
        hundreds of children costs a few steps, not hundreds. Which victims come out, and in
        which order, is what reclaim_domain.py gathers for each domain without the walk.
        """
        session = self.session

        def may_give(name: str) -> bool:
            return self.may_give(name, taken, short)

        def gives_up(name: str, victim: JobInfo) -> bool:
            return self.gives_up(name, victim, taken, short)

        resources = frozenset(short)
        chain = session.chain(job.queue)
        sequence = itertools.count()
        for level in range(1, len(chain)):
            own = chain[level - 1]
            if not self.within_deserved(job, own):
                return  # every further group has a higher common ancestor: still not within
            common = chain[level]
            rankings: dict[str, list[tuple[Key, str]]] = {}
            # (key, tie, kind, queue, index, path below common); kinds: RANKED = the index-th
            # child of the queue in its ranking, SUBTREE = a queue not yet opened, VICTIM = the
            # index-th victim of a leaf.
            heap: list[tuple[Key, int, int, str, int, tuple[str, ...]]] = []
            rankings[common] = self.ranked_children(common, resources)
            if rankings[common]:
                heap.append((rankings[common][0][0], 0, RANKED, common, 0, ()))
            while heap:
                _, _, kind, name, index, path = heapq.heappop(heap)
                if kind == RANKED:
                    ranked = rankings[name]
                    if index + 1 < len(ranked):
                        entry = (ranked[index + 1][0], next(sequence), RANKED)
                        heapq.heappush(heap, (*entry, name, index + 1, path))
                    child = ranked[index][1]
                    key = self.bound(child, resources)
                    if key != LAST and child != own:
                        entry = (key, next(sequence), SUBTREE)
                        heapq.heappush(heap, (*entry, child, 0, (*path, child)))
                    continue
                if not may_give(name):
                    continue  # nothing below a queue back at its share qualifies
                if kind == SUBTREE and session.queues[name].children:
                    rankings[name] = ranked = self.ranked_children(name, resources)
                    if ranked:
                        entry = (ranked[0][0], next(sequence), RANKED)
                        heapq.heappush(heap, (*entry, name, 0, path))
                    continue
                if not all(may_give(q) for q in path[:-1]):
                    continue  # its branch is back at its share: nothing more from it
                victims = self.victims_for(name, resources)
                if index >= len(victims):
                    continue
                if index + 1 < len(victims):
                    key = (
                        session.queues[name].priority,
                        self.used(name),
                        self.order(victims[index + 1]),
                    )
                    heapq.heappush(heap, (key, next(sequence), VICTIM, name, index + 1, path))
                victim = victims[index]
                if all(gives_up(q, victim) for q in path):
                    if paths is not None:
                        paths.append(path)
                    yield victim

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

    def reclaim_where(
        self, job: JobInfo, short: dict[str, int], over: Taken | None = None
    ) -> Placed | None:
        """Take victims until the job fits: the cluster, each ancestor in ``over`` (what
        admitting it would take that queue past its limit, freed only by victims below it),
        and the nodes its pods would go on. A job that asks a Topology takes them inside one
        domain only (``_in_one_domain``). Returns where it goes, or None (nothing taken)."""
        over = over or {}
        search = victim_search(self.session.domains, job.view)
        if search is None or search.request is None:
            found = self._choose(job, short, over, search.anywhere if search else None)
        else:
            found = self._in_one_domain(job, short, over, search)
        if found is None:
            return None
        chosen, placed = found
        self._take(job, chosen.chosen)
        return placed

    def _choose(
        self, job: JobInfo, short: dict[str, int], over: Taken, domain: Where | None
    ) -> tuple[Victims, Placed] | None:
        """The victims that make the job fit, and where it then goes; None when they cannot.
        Nothing is taken yet."""
        taken: Taken = {}
        chosen = Victims(self.session, job, over, domain)
        for victim in self.candidates(job, short, taken):
            if self._adds(chosen, taken, victim, over) and chosen.placeable():
                return chosen, chosen.prune()
        return None

    def _adds(self, chosen: Victims, taken: Taken, victim: JobInfo, over: Taken) -> bool:
        """Whether the victim helps and may go (then it is chosen, and counted in ``taken``)."""
        if chosen.counted():
            # Enough in total: only room on a node its pods may use still helps.
            if not chosen.helps_pods(victim):
                return False
        elif over and not self._helps(victim, chosen.need, over):
            return False
        if not self.keeps_guarantee(victim.queue, victim, taken):
            return False
        chosen.add(victim)
        for q in self.session.chain(victim.queue):
            slot = taken.setdefault(q, {})
            for r, a in victim.held.items():
                slot[r] = slot.get(r, 0) + a
        return True

    def _in_one_domain(
        self, job: JobInfo, short: dict[str, int], over: Taken, search: Search
    ) -> tuple[Victims, Placed] | None:
        """For a job that asks a Topology: the domain of the level searched
        (set_domains.Search) whose victims make it fit with the fewest of them, then the
        lowest priorities in total, then by name (reclaim_domain.py); a preferred level
        widens level by level, then to anywhere."""
        request = search.request
        assert request is not None
        for level in self.session.domains.levels(request):
            found = InLevel(self, job, short, over, search, level).best()
            if found is not None:
                return found
        return None if request.required else self._choose(job, short, over, search.anywhere)

    def on_domains(self, level: str) -> dict[str, tuple[str, ...]]:
        """Job -> the domains of a level it holds room on, for every job that may be a
        victim (eligible, in a leaf reclaim takes from), as first asked."""
        found = self.by_domain.get(level)
        if found is None:
            of_node = {i: d.value for d in self.session.domains.domains(level) for i in d.nodes}
            found = self.by_domain[level] = {
                job.key: tuple(sorted({of_node[i] for i in job.footprint if i in of_node}))
                for name in self.excess
                for job in self.session.queues[name].admitted_jobs
                if self.eligible(job)
            }
            held: dict[str, Footprint] = {}
            for name in self.excess:
                for job in self.session.queues[name].admitted_jobs:
                    if job.key in found:
                        _hold_on(held, of_node, job.footprint, 1)
            self.held_on[level], self.of_node[level] = held, of_node
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
            held = self.held_on[domain.level].get(domain.value, {})
            kept = known[domain.text] = (version, domains.could_hold(inside, domain, held))
        return kept[1]

    def _helps(self, victim: JobInfo, need: dict[str, int], over: Taken) -> bool:
        """Whether the victim frees something the cluster lacks, or frees room below an
        ancestor whose limit stops the job (a victim outside it does not)."""
        if any(victim.held.get(r, 0) > 0 for r in need):
            return True
        chain = self.session.chain(victim.queue)
        return any(
            victim.held.get(r, 0) > 0 for q, limits in over.items() if q in chain for r in limits
        )

    def _take(self, job: JobInfo, chosen: list[JobInfo]) -> None:
        touched = {v.queue for v in chosen}
        for name in touched:
            self._count_excess(name, -1)
        for level, held in self.held_on.items():
            for v in chosen:  # before they go: eviction forgets where they were
                _hold_on(held, self.of_node[level], v.footprint, -1)
        for v in chosen:
            self.outcome.evict(self.session, "reclaim", v, job)
            self.victims[v.queue].remove(v)
            for listed in self.victims_using.get(v.queue, {}).values():
                if v in listed:
                    listed.remove(v)
        for name in touched:
            self._count_excess(name, +1)
            for node in self.session.chain(name):
                self.version[node] = self.version.get(node, 0) + 1

    def run(self) -> None:
        session = self.session
        leaves = leaf_order(session, admissible_leaves(session, self.outcome))
        for leaf in leaves:
            # Jobs of this queue that found no room, with the resources they lacked (None: a
            # failure that does not depend on them). A job at least as hard to admit
            # (fit.as_hard) that lacks no other resource fails too.
            failed: list[tuple[JobInfo, frozenset[str] | None]] = []
            fifo = session.queues[leaf].queue.spec.dequeue_strategy == "fifo"
            first: JobInfo | None = None
            for job in session.queues[leaf].pending_jobs:
                if job.admitted:
                    continue
                if fifo and first is not None and not first.admitted:
                    break  # a fifo queue's later jobs wait behind its first that does not fit
                first = job
                if held_back := over_capability_failure(session, job):
                    # Held back until its queues fit again: no victim is taken for it.
                    self.outcome.reasons[job.key] = held_back
                    failed.append((job, None))
                    continue
                if job.never_preempts:
                    self.outcome.waits_for_room(job)
                    continue  # and the next job that may reclaim still does
                if any(lacked is None and as_hard(job, other) for other, lacked in failed):
                    continue
                # Cheapest tests first.
                if not self.asks_owed(job, leaf):
                    # Best-effort here. Not remembered: a larger job may ask for what is owed.
                    continue
                if not self.within_deserved(job, leaf):
                    failed.append((job, None))
                    continue
                # An ancestor's limit that stops the job is freed by victims below it, so the
                # resources over it count as lacking too; the job's own queue's is not.
                over = queue_overage(session, job)
                if leaf in over:
                    failed.append((job, None))
                    continue
                short = short_resources(session, job)
                for limits in over.values():
                    for r, amount in limits.items():
                        short[r] = max(short.get(r, 0), amount)
                if not short:
                    if placeable(session, job):
                        continue  # it fits; what keeps it waiting is not room
                    # It fits in total, not on the nodes: it lacks what they were short of.
                    short = dict.fromkeys(lacking(session, job), 1)
                    if not short:
                        continue  # no node may take its pods at all: no victim helps
                if any(
                    lacked is not None and lacked >= short.keys() and as_hard(job, other)
                    for other, lacked in failed
                ):
                    continue
                placed = self.reclaim_where(job, short, over) if self.supply(short) else None
                if placed is not None:
                    footprint, domain = placed
                    reason = f"reclaim: room taken back for queue {leaf}"
                    if domain is not None:
                        reason += f", in {domain.text}"
                    self.outcome.admit(session, job, reason, footprint, domain)
                    self.admitted(job)
                else:
                    failed.append((job, frozenset(short)))
            info = session.queues[leaf]
            info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]


def reclaim(session: Session, outcome: Outcome) -> None:
    _Reclaim(session, outcome).run()


def _add(target: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for r, a in amounts.items():
        target[r] = target.get(r, 0) + sign * a


def _hold_on(
    held: dict[str, Footprint], of_node: dict[int, str], footprint: Footprint, sign: int
) -> None:
    """Add (or with sign -1, take away) a job's room to that of the domains its nodes are in."""
    for i, room in footprint.items():
        value = of_node.get(i)
        if value is not None:
            _add(held.setdefault(value, {}).setdefault(i, {}), room, sign)
