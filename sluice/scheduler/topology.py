"""Topology: placing a workload whole into one domain of a level (docs/scheduler.md, *Topology*).

A domain of a level is the nodes that carry one value of its label. Placing a workload in a
domain is placing its pods as any pods (placement.py) with that label added to their
nodeSelector: the very constraint kube-scheduler is given once it is admitted. Among the
domains that hold all its pods, the one left with the least room free is chosen (big domains
stay whole for big jobs), ties by name; a preferred level widens level by level, then to the
whole cluster. What stops a required one is said with the level, the best domain and what it
lacks.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence

from sluice.api.constraints import PodSpecView, interned
from sluice.api.resources import Resources
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import PodSet, WorkloadView
from sluice.scheduler.domain_room import Domain, DomainRoom, TopologyLevels
from sluice.scheduler.placement import Footprint, Placement, fits_in
from sluice.scheduler.topology_words import why_not

MANY = 1 << 62  # more pods than any node takes: how many fit, uncapped

InDomain = tuple[Footprint, Domain | None]
"""Where a workload's pods go, and the domain they go in (None: anywhere)."""
Missing = tuple[dict[int, int], list[tuple[str, int]], int]  # ``Domains.missing``'s


class Domains:
    """Placing workloads into the domains of the cluster's Topology levels over one cycle's
    nodes (``DomainRoom`` keeps the domains' room)."""

    def __init__(self, topologies: Sequence[TopologyView], placement: Placement) -> None:
        self.placement = placement
        self.topology_levels = TopologyLevels(topologies, placement)
        self.room = DomainRoom(placement)
        self._pods: dict[tuple[PodSpecView, str, str], PodSpecView] = {}
        self._seeded: set[tuple[object, ...]] = set()
        """The constraints of the pods in a domain (``pod_in``) whose nodes are seeded."""
        self._allowed: dict[tuple[object, ...], set[int]] = {}
        """A pod's constraints -> the nodes that may take it, as a set."""
        self._explained: dict[tuple[object, ...], str] = {}
        self._failed: dict[tuple[object, ...], int] = {}
        """(pod sets, level) -> how much room had been given back (``Placement.grown``) when
        no domain of the level held them: none will until more is."""
        self._fitting: dict[tuple[PodSpecView, str], tuple[int, dict[int, int], int]] = {}
        """(Pod (a domain's ``pod_in``), the domain's text) -> the domain's ``version``, how
        many each node takes, their sum."""
        self._holds: dict[tuple[PodSpecView, str], tuple[list[int], dict[str, int]]] = {}
        """(pod, level) -> how far into the level's ``DomainRoom.changes`` it is up to date,
        and domain value -> how many such pods its nodes the pod may go on hold at once now
        (what first fit inside it adds up to), for the domains asked since their room last
        changed."""
        self._last: dict[tuple[PodSet, ...], Domain] = {}
        """Pod sets -> the domain ``place`` last put them in, without room given back."""
        if self.topology_levels.widening:
            placement.watchers.append(self.room.changed)

    # Domains -------------------------------------------------------------------------------
    def domains(self, level: str) -> list[Domain]:
        """The domains of a level, by name."""
        return self.room.domains(level)

    def version(self, domain: Domain) -> int:
        """Changed whenever room is held or given back on the domain's nodes."""
        return self.room.version(domain)

    def levels(self, request: TopologyRequest) -> tuple[str, ...]:
        """The levels a request may be placed at, narrowest first (``TopologyLevels``)."""
        return self.topology_levels.levels(request)

    def free(self, domain: Domain) -> dict[str, int]:
        """The free room of a domain's usable nodes now."""
        return self.room.free(domain)

    def widest_free(self) -> dict[str, Resources]:
        """The free room of each domain of each Topology's widest level, by its text."""
        return self.room.widest_free(self.topology_levels.widest())

    # Placing -------------------------------------------------------------------------------
    def pod_in(self, pod: PodSpecView, domain: Domain) -> PodSpecView:
        """The pod with the domain's label added to its nodeSelector; its nodes are those of
        the domain the pod may go on."""
        key = (pod, domain.level, domain.value)
        found = self._pods.get(key)
        if found is None:
            clash = dict(pod.node_selector).get(domain.level, domain.value) != domain.value
            # A pod that selects another domain keeps that too: no node has both, nor is it
            # the pod of the same request that selects nothing.
            selector = {*pod.node_selector, (domain.level, domain.value)}
            found = self._pods[key] = interned(
                PodSpecView(
                    request=pod.request,
                    node_selector=tuple(sorted(selector)),
                    affinity=pod.affinity,
                    tolerations=pod.tolerations,
                )
            )
            if found.constraints not in self._seeded:  # pods of other requests seeded it
                self._seeded.add(found.constraints)
                allowed = self._allowed.get(pod.constraints)
                if allowed is None:
                    allowed = self._allowed[pod.constraints] = set(self.placement.eligible(pod))
                nodes = [] if clash else [i for i in domain.nodes if i in allowed]
                self.placement.seed(found, nodes)
        return found

    def place_in(
        self,
        view: WorkloadView,
        domain: Domain,
        freed: Mapping[int, Mapping[str, int]] | None = None,
    ) -> Footprint | None:
        """Where every pod of the workload goes inside the domain, or None."""
        placement = self.placement
        sets = [(self.pod_in(s.pod, domain), s.pod_count) for s in view.pod_sets]
        if len(sets) == 1:
            pod, count = sets[0]
            assignment = placement.place(pod, count, freed)
            return None if assignment is None else placement.footprint(pod, assignment)
        return placement.place_all(sets, freed)

    def left(self, view: WorkloadView, domain: Domain, freed: Footprint | None) -> float | None:
        """What the choice minimises: the room a domain has free in the resources the
        workload asks, each as a share of the cluster's, added up (the room it would have
        left differs from it by the workload's own request, the same for every domain);
        None when the domain has not as much free in total as the workload asks."""
        room = self.free(domain)
        total = self.placement.total
        extra: dict[str, int] = {}
        if freed:
            for i in domain.nodes:
                for r, a in freed.get(i, {}).items():
                    extra[r] = extra.get(r, 0) + a
        out = 0.0
        for r, a in sorted(view.request.items()):
            if a <= 0:
                continue
            have = room.get(r, 0) + extra.get(r, 0)
            if have < a:
                return None
            if total.get(r):
                out += have / total[r]
        return out

    def best_at(
        self, view: WorkloadView, level: str, freed: Footprint | None = None
    ) -> InDomain | None:
        """Among the domains of a level that hold the workload, the one left with the least
        room free, ties by name; None when none holds it. Domains are tried from the least
        room left, so the first whose nodes take every pod is the one."""
        if freed:
            return self._best_freed(view, level, freed)
        grown = len(self.placement.grown)
        memo = (view.pod_sets, level)
        if self._failed.get(memo) == grown:
            return None
        total = self.placement.total
        need = [(r, a) for r, a in view.request.items() if a > 0]
        asked = tuple(sorted(r for r, _ in need if total.get(r)))
        ranking = self.room.ranking(level, asked)
        by_value, sums, pods = self.room.by_value(level), self.room.sums, self._pods
        sets = view.pod_sets
        only = sets[0] if len(sets) == 1 else None
        placement = self.placement
        # A domain with less free than asked in some resource ranks below this: skipped.
        asks = dict(need)
        start = bisect.bisect_left(ranking, (sum(asks[r] / total[r] for r in asked), ""))
        holds: dict[str, int] = {}
        count = 0
        if only is not None:
            holds, count = self._holding_now(only.pod, level), only.pod_count
        for _, value in itertools.islice(ranking, start, None):
            if holds and holds.get(value, count) < count:
                continue  # known to hold too few of its pods
            domain = by_value[value]
            room = sums[domain.text]
            if any(room.get(r, 0) < a for r, a in need):
                continue
            if only is not None:  # the common case, without building anything
                pod = pods.get((only.pod, level, value)) or self.pod_in(only.pod, domain)
                held = holds.get(value)
                if held is None:
                    held = holds[value] = self._holding(pod, domain)
                if held < only.pod_count:
                    continue
                where = placement.place(pod, only.pod_count)
                if where is not None:
                    return placement.footprint(pod, where), domain
                continue
            footprint = self.place_in(view, domain)
            if footprint is not None:
                return footprint, domain
        self._failed[memo] = grown
        return None

    def _holding_now(self, pod: PodSpecView, level: str) -> dict[str, int]:
        """Domain value -> how many of the pods its nodes hold now, for the domains whose
        room has not changed since it was worked out (``_holds``)."""
        changes = self.room.changes(level)
        seen, holds = self._holds.setdefault((pod, level), ([len(changes)], {}))
        if seen[0] < len(changes):
            for value in changes[seen[0] :]:
                holds.pop(value, None)
            seen[0] = len(changes)
        return holds

    def _holding(self, pod: PodSpecView, domain: Domain) -> int:
        """How many pods alike (the domain's ``pod_in``) its nodes hold at once now: first
        fit places exactly as many as each node takes, added up."""
        items = [(r, a) for r, a in pod.request.items() if a > 0]
        return self._fits(pod, items, domain)[1] if items else MANY

    def missing(self, view: WorkloadView, domain: Domain) -> list[Missing]:
        """For each pod set the domain does not hold now (alone, on its nodes the pods may go
        on): node -> how many pods it takes now, what a pod asks, how many more must fit."""
        out: list[Missing] = []
        for pod_set in view.pod_sets:
            pod = self.pod_in(pod_set.pod, domain)
            items = [(r, a) for r, a in pod.request.items() if a > 0]
            if not items or pod_set.pod_count <= 0:
                continue
            fits, n = self._fits(pod, items, domain)
            if n < pod_set.pod_count:
                out.append((fits, items, pod_set.pod_count - n))
        return out

    def could_hold(
        self, view: WorkloadView, domain: Domain, more: Mapping[int, Mapping[str, int]]
    ) -> bool:
        """Whether the domain could hold every pod of the workload were ``more`` room given
        back on some nodes (what some victims hold there): each pod set alone fits on the
        nodes of the domain it may go on. When not, no choice among those victims makes it
        fit there."""
        free = self.placement.free
        for fits, items, lacking in self.missing(view, domain):
            n = 0
            nodes = more if len(more) < len(fits) else fits
            for i in nodes:  # how many more each node takes with its room
                before, extra = fits.get(i), more.get(i)
                if before is not None and extra:
                    n += fits_in(free[i], items, MANY, extra) - before
            if n < lacking:
                return False
        return True

    def _fits(
        self, pod: PodSpecView, items: list[tuple[str, int]], domain: Domain
    ) -> tuple[dict[int, int], int]:
        """Node -> how many of the pods (the domain's ``pod_in``) each node they may go on
        takes now, and their sum: kept while the domain's room is as it was (the nodes
        they may go on are usable nodes of the domain, whose changes ``version`` counts)."""
        key = (pod, domain.text)
        version = self.room.versions.get(domain.text, 0)
        known = self._fitting.get(key)
        if known is None or known[0] != version:
            free = self.placement.free
            fits = {i: fits_in(free[i], items, MANY) for i in self.placement.eligible(pod)}
            known = self._fitting[key] = (version, fits, sum(fits.values()))
        return known[1], known[2]

    def by_room_left(self, view: WorkloadView, level: str, freed: Footprint) -> list[Domain]:
        """The domains of a level that have as much free as the workload asks in total (with
        ``freed`` added: victims' room given back, or below zero, room others hold), from the
        least room left, ties by name: each one's room worked out anew."""
        ranked: list[tuple[float, str, Domain]] = []
        for domain in self.domains(level):
            left = self.left(view, domain, freed)
            if left is not None:
                ranked.append((left, domain.value, domain))
        ranked.sort(key=lambda entry: (entry[0], entry[1]))
        return [domain for _, _, domain in ranked]

    def _best_freed(self, view: WorkloadView, level: str, freed: Footprint) -> InDomain | None:
        """``best_at`` with victims' room given back (reclaim, preempt)."""
        for domain in self.by_room_left(view, level, freed):
            footprint = self.place_in(view, domain, freed)
            if footprint is not None:
                return footprint, domain
        return None

    def place(self, view: WorkloadView, freed: Footprint | None = None) -> InDomain | None:
        """Where a workload that asks a Topology goes: one domain of its level (preferred:
        of the narrowest level that holds it), else, preferred only, anywhere (``None``
        domain, the caller places it as any workload)."""
        request = view.topology
        assert request is not None
        for level in self.levels(request):
            found = self.best_at(view, level, freed)
            if found is not None:
                if not freed and found[1] is not None:
                    self._last[view.pod_sets] = found[1]
                return found
        return None

    def still_holds(self, view: WorkloadView) -> bool:
        """Whether the domain ``place`` last put pod sets like the workload's in holds them
        now: then some domain does (which one ``place`` would choose is not asked). False
        when it does not, or none did: not known."""
        last = self._last.get(view.pod_sets)
        request = view.topology
        if last is None or request is None or last.level not in self.levels(request):
            return False
        return self.place_in(view, last) is not None

    # Words ---------------------------------------------------------------------------------
    def explain(self, view: WorkloadView) -> str:
        """Why a workload that requires a domain is not placed: the level, the domain with
        the most room free in what it asks (ties by name) and what that is."""
        request = view.topology
        assert request is not None
        key = (view.pod_sets, request, self.placement.version)
        said = self._explained.get(key)
        if said is None:
            said = why_not(self.topology_levels, self.room, view, request)
            self._explained[key] = said
        return said
