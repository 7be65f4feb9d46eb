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
from collections.abc import Iterator

from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.flavor_victims import (
    Memo,
    nearest_first,
    owes_back,
    reclaiming,
    take_in_flavor,
)
from sluice.scheduler.actions.growth_victims import forget
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.reclaim_domain import InLevel
from sluice.scheduler.actions.reclaim_rules import Order, ReclaimRules, hold_on
from sluice.scheduler.actions.victims import PerQueue, Victims
from sluice.scheduler.fit import (
    as_hard,
    lacking,
    over_capability_failure,
    placeable,
    queue_overage,
    short_resources,
)
from sluice.scheduler.order import leaf_order
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import Placed, Search, Where, victim_search

Key = tuple[int, float, Order]  # queue priority, -the queue's usage per weight, victim order
LAST: Key = (2**63, 0.0, (0, 0.0, 0.0, 0.0, "", 0))  # no victim at all
RANKED, SUBTREE, VICTIM = 0, 1, 2  # what a search entry stands for
Entry = tuple[Key, int, int, str, int, tuple[str, ...]]
"""(key, tie, kind, queue, index, path below the common ancestor); kinds: RANKED = the
index-th child of the queue in its ranking, SUBTREE = a queue not yet opened, VICTIM = the
index-th victim of a leaf."""


class _Walk:
    """One level's best-first search (``_Reclaim.candidates``): its heap, and the rankings of
    the queues opened."""

    def __init__(self) -> None:
        self.heap: list[Entry] = []
        self.sequence = itertools.count()
        self.rankings: dict[str, list[tuple[Key, str]]] = {}

    def push(self, key: Key, kind: int, name: str, index: int, path: tuple[str, ...]) -> None:
        heapq.heappush(self.heap, (key, next(self.sequence), kind, name, index, path))

    def open(self, name: str, ranked: list[tuple[Key, str]], path: tuple[str, ...]) -> None:
        self.rankings[name] = ranked
        if ranked:
            self.push(ranked[0][0], RANKED, name, 0, path)


class _Reclaim(ReclaimRules):
    """Reclaim over one cycle: the walk of each job's candidates, and the victims taken."""

    def __init__(self, session: Session, outcome: Outcome) -> None:
        super().__init__(session)
        self.outcome = outcome
        self.bounds: dict[tuple[str, frozenset[str]], tuple[int, Key]] = {}
        self.ranked: dict[str, dict[frozenset[str], tuple[int, list[tuple[Key, str]]]]] = {}
        self.in_flavor: dict[tuple[str, str], list[JobInfo]] = {}
        """(leaf, flavor) -> victims for a job of the leaf; ("", flavor) -> all (_holding_in)."""
        self.not_reclaiming: Memo = {}  # flavor_victims.reclaiming

    # Search ------------------------------------------------------------------------------------
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
        taken: PerQueue,
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
        resources = frozenset(short)
        chain = self.session.chain(job.queue)
        for level in range(1, len(chain)):
            own = chain[level - 1]
            if not self.within_deserved(job, own):
                return  # every further group has a higher common ancestor: still not within
            yield from self._below(chain[level], own, resources, taken, short, paths)

    def _below(
        self,
        common: str,
        own: str,
        resources: frozenset[str],
        taken: PerQueue,
        short: dict[str, int],
        paths: list[tuple[str, ...]] | None,
    ) -> Iterator[JobInfo]:
        """The victims below one common ancestor but in the job's own subtree (``own``), in
        order (``candidates``)."""
        walk = _Walk()
        walk.open(common, self.ranked_children(common, resources), ())
        while walk.heap:
            _, _, kind, name, index, path = heapq.heappop(walk.heap)
            if kind == RANKED:
                self._next_child(walk, name, index, path, own, resources)
            elif not self.may_give(name, taken, short):
                continue  # nothing below a queue back at its share qualifies
            elif kind == SUBTREE and self.session.queues[name].children:
                walk.open(name, self.ranked_children(name, resources), path)
            elif all(self.may_give(q, taken, short) for q in path[:-1]):
                # (else its branch is back at its share: nothing more from it)
                victim = self._next_victim(walk, name, index, path, resources)
                if victim is not None and all(self.gives_up(q, victim, taken, short) for q in path):
                    if paths is not None:
                        paths.append(path)
                    yield victim

    def _next_child(
        self, walk: _Walk, name: str, index: int, path: tuple[str, ...], own: str,
        resources: frozenset[str],
    ) -> None:  # fmt: skip
        """Open the index-th child in the queue's ranking, and queue the one after it."""
        ranked = walk.rankings[name]
        if index + 1 < len(ranked):
            walk.push(ranked[index + 1][0], RANKED, name, index + 1, path)
        child = ranked[index][1]
        key = self.bound(child, resources)
        if key != LAST and child != own:
            walk.push(key, SUBTREE, child, 0, (*path, child))

    def _next_victim(
        self, walk: _Walk, name: str, index: int, path: tuple[str, ...], resources: frozenset[str]
    ) -> JobInfo | None:
        """The index-th victim of a leaf, with the one after it queued; None past its last."""
        victims = self.victims_for(name, resources)
        if index >= len(victims):
            return None
        if index + 1 < len(victims):
            key = (
                self.session.queues[name].priority,
                self.used(name),
                self.order(victims[index + 1]),
            )
            walk.push(key, VICTIM, name, index + 1, path)
        return victims[index]

    def reclaim_where(
        self, job: JobInfo, short: dict[str, int], over: PerQueue | None = None
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
        self, job: JobInfo, short: dict[str, int], over: PerQueue, domain: Where | None
    ) -> tuple[Victims, Placed] | None:
        """The victims that make the job fit, and where it then goes; None when they cannot.
        Nothing is taken yet."""
        taken: PerQueue = {}
        chosen = Victims(self.session, job, over, domain)
        for victim in self.candidates(job, short, taken):
            if self._adds(chosen, taken, victim, over) and chosen.placeable():
                return chosen, chosen.prune()
        return None

    def _adds(self, chosen: Victims, taken: PerQueue, victim: JobInfo, over: PerQueue) -> bool:
        """Whether the victim helps and may go (then it is chosen, and counted in ``taken``)."""
        return chosen.adds(victim, taken, over)

    def _in_one_domain(
        self, job: JobInfo, short: dict[str, int], over: PerQueue, search: Search
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

    def _take(self, job: JobInfo, chosen: list[JobInfo]) -> None:
        touched = {v.queue for v in chosen}
        for name in touched:
            self.count_excess(name, -1)
        kept = self.by_domain
        for level, held in kept.held_on.items():
            for v in chosen:  # before they go: eviction forgets where they were
                hold_on(held, kept.of_node[level], v.footprint, -1)
        for v in chosen:
            self.outcome.evict(self.session, "reclaim", v, job)
            for listed in (self.victims[v.queue], *self.victims_using.get(v.queue, {}).values()):
                forget(listed, (v,))  # a workload goes with its parts above its minimum
        for name in touched:
            self.count_excess(name, +1)
            for node in self.session.chain(name):
                self.version[node] = self.version.get(node, 0) + 1

    def run(self) -> None:
        session = self.session
        for leaf in leaf_order(session, admissible_leaves(session, self.outcome)):
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
                self._for_job(job, leaf, failed)
            info = session.queues[leaf]
            info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]

    def _for_job(
        self, job: JobInfo, leaf: str, failed: list[tuple[JobInfo, frozenset[str] | None]]
    ) -> None:
        """Take room back for one pending job of the leaf, cheapest tests first; when it
        finds none, it joins ``failed``."""
        session = self.session
        if held_back := over_capability_failure(session, job):
            # Held back until its queues fit again: no victim is taken for it.
            self.outcome.reasons[job.key] = held_back
            failed.append((job, None))
            return
        if job.never_preempts:
            self.outcome.waits_for_room(job)
            return  # and the next job that may reclaim still does
        if any(lacked is None and as_hard(job, other) for other, lacked in failed):
            return
        if session.queues[leaf].flavor_list:
            if not self._in_flavor(job, leaf):
                failed.append((job, None))
            return
        if not self.asks_owed(job, leaf):
            # Best-effort here. Not remembered: a larger job may ask for what is owed.
            return
        if not self.within_deserved(job, leaf):
            failed.append((job, None))
            return
        # An ancestor's limit that stops the job is freed by victims below it, so the
        # resources over it count as lacking too; the job's own queue's is not.
        over = queue_overage(session, job)
        if leaf in over:
            failed.append((job, None))
            return
        short = self._short(job, over)
        if not short or any(
            lacked is not None and lacked >= short.keys() and as_hard(job, other)
            for other, lacked in failed
        ):
            return
        placed = self.reclaim_where(job, short, over) if self.enough_supply(short) else None
        if placed is None:
            failed.append((job, frozenset(short)))
            return
        footprint, domain = placed
        reason = f"reclaim: room taken back for queue {leaf}"
        if domain is not None:
            reason += f", in {domain.text}"
        self.outcome.admit(session, job, reason, footprint, domain)
        self.admitted(job)

    def _in_flavor(self, job: JobInfo, leaf: str) -> bool:
        """Reclaim for a job of a queue with flavors, in the flavor it reclaims in only
        (flavor_victims.py): victims nearest relatives first, then by queue priority, then
        in victim order."""
        session = self.session
        chosen = reclaiming(session, job, self.not_reclaiming)
        if chosen is None:
            return False
        victims = self._holding_in(leaf, chosen.reclaims_in)
        found = take_in_flavor(
            session,
            job,
            chosen,
            victims,
            lambda v: owes_back(session, v, leaf, chosen),
            self.not_reclaiming,
        )
        if found is None:
            return False
        taken, given, (footprint, domain) = found
        self._take(job, taken)
        reason = f"reclaim: room taken back for queue {leaf}, in {given.text}"
        if domain is not None:
            reason += f", in {domain.text}"
        self.outcome.admit(session, job, reason, footprint, domain, given)
        self.admitted(job)
        return True

    def _holding_in(self, leaf: str, flavor: str) -> list[JobInfo]:
        """The workloads of other reclaimable leaves that may be victims and hold in the
        flavor, nearest relatives of ``leaf`` first: gathered once a cycle per flavor and
        sorted once per leaf and flavor (those evicted since are passed over as no longer
        admitted)."""
        key = (leaf, flavor)
        found = self.in_flavor.get(key)
        if found is None:
            session = self.session
            every = self.in_flavor.get(("", flavor))
            if every is None:
                every = self.in_flavor[("", flavor)] = [
                    v
                    for name, info in session.queues.items()
                    if not info.children and info.queue.spec.reclaimable
                    for v in (self.sorted_victims(name) if info.admitted_jobs else ())
                    if flavor in v.held_in
                ]
            others = [v for v in every if v.queue != leaf]
            found = self.in_flavor[key] = nearest_first(session, leaf, others, self.order)
        return found

    def _short(self, job: JobInfo, over: PerQueue) -> dict[str, int]:
        """What victims must free for the job: what the cluster lacks and what each limit
        that stops it is over by; when it fits in total but not on the nodes, what they were
        short of; {} when it fits, or no node may take its pods at all (no victim helps)."""
        short = short_resources(self.session, job)
        for limits in over.values():
            for r, amount in limits.items():
                short[r] = max(short.get(r, 0), amount)
        if short or placeable(self.session, job):
            return short  # {}: it fits; what keeps it waiting is not room
        return dict.fromkeys(lacking(self.session, job), 1)


def reclaim(session: Session, outcome: Outcome) -> None:
    _Reclaim(session, outcome).run()
