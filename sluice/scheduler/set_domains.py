"""Topology per pod set: a workload whose pod templates each ask a domain of their own
(docs/scheduler.md, *Topology*), placed around topology.py's domains.

Each pod set whose template asks a level goes whole into one domain of it by the one rule of
topology.py (among the domains that hold it, the one left with the least room free, ties by
name; a preferred level widens level by level, then to anywhere). The pod sets go one after
another, the largest first, each on the room the ones before it hold; then the pod sets that
ask nothing, and a preferred one no domain held, anywhere on the room left. All of it fits at
once, or the workload is not placed.

Reclaim and preempt take victims inside one domain only: that of the first pod set (in that
order) that no domain holds, the pod sets before it keeping the domains they got; when every
pod set that asks a domain finds one and only the rest does not fit, the victims are taken
as for any workload, the pod sets keeping their domains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from sluice.api.memo import Memo
from sluice.api.topology import TopologyRequest
from sluice.api.views import JobPhase, PodSet, WorkloadView
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Footprint, add_room
from sluice.scheduler.topology import Domains


@dataclass(frozen=True, slots=True)
class SetDomains:
    """Where the pod sets that ask a domain of their own go."""

    domains: tuple[tuple[str, Domain | None], ...]
    """Each such pod set by name (once placed: in the workload's order), and its domain: None
    for one to be chosen as it is placed (once placed: a preferred one placed anywhere)."""

    @property
    def text(self) -> str:
        """As sluice.dev/topology-assignment writes it: ``<pod set>: <level>=<value>, ...``."""
        return ", ".join(f"{name}: {d.text}" for name, d in self.domains if d is not None)

    def of(self, pod_set: str) -> Domain | None:
        return next((d for name, d in self.domains if name == pod_set), None)

    def fixing(self, pod_set: str, domain: Domain) -> SetDomains:
        """The same, with ``pod_set`` in ``domain``."""
        kept = tuple(entry for entry in self.domains if entry[0] != pod_set)
        return SetDomains((*kept, (pod_set, domain)))


Where = Domain | SetDomains
"""Where a workload that asks a Topology goes: one domain for all its pod sets, or one per pod
set that asks one."""
Placed = tuple[Footprint, Where | None]
"""Where a workload's pods go, and the domains they go in (None: anywhere)."""


def asks_per_set(view: WorkloadView) -> bool:
    """Whether some of the workload's pod sets ask a domain of their own."""
    return view.topology is None and any(s.topology is not None for s in view.pod_sets)


def _alone(pod_set: PodSet) -> WorkloadView:
    return WorkloadView(
        "",
        pod_set.name,
        "",
        pod_set.request,
        JobPhase.PENDING,
        pod_sets=(pod_set,),
        topology=pod_set.topology,
    )


_ALONE: Memo[PodSet, WorkloadView] = Memo(_alone, 4096)


def alone(pod_set: PodSet) -> WorkloadView:
    """A pod set as a workload of its own, as topology.py places a workload: remembered per
    pod set (a memo table, off under ``memo.uncached``), as placing asks for it again and
    again."""
    return _ALONE.lookup(pod_set)


def confined(domains: Domains, view: WorkloadView, where: Where | None) -> tuple[PodSet, ...]:
    """The workload's pod sets, each one with a domain limited to that domain's nodes."""
    sets = view.pod_sets
    if isinstance(where, Domain):
        return tuple(replace(s, pod=domains.pod_in(s.pod, where)) for s in sets)
    if isinstance(where, SetDomains):
        return tuple(
            s if (d := where.of(s.name)) is None else replace(s, pod=domains.pod_in(s.pod, d))
            for s in sets
        )
    return sets


@dataclass(slots=True)
class _Walk:
    footprint: Footprint | None
    """Where all its pods go; None when they do not all fit."""
    chosen: list[tuple[str, Domain | None]]
    """The pod sets that ask a domain, placed so far, and their domains."""
    failed: PodSet | None = None
    """The pod set no domain held (required); None when it is the rest that did not fit."""
    rest: tuple[PodSet, ...] = ()


def _order(domains: Domains, view: WorkloadView) -> list[PodSet]:
    """The pod sets that ask a domain, the largest (dominant share of all their pods) first."""
    size = domains.placement.size
    asked = [s for s in view.pod_sets if s.topology is not None]
    return sorted(asked, key=lambda s: -size(s.pod) * s.pod_count)


def _walk(
    domains: Domains, view: WorkloadView, freed: Footprint | None, where: SetDomains | None
) -> _Walk:
    placement = domains.placement
    extra: Footprint = {i: dict(room) for i, room in (freed or {}).items()}
    held: Footprint = {}
    chosen: list[tuple[str, Domain | None]] = []
    rest = [s for s in view.pod_sets if s.topology is None]
    for pod_set in _order(domains, view):
        got: tuple[Footprint, Domain | None] | None
        fixed = where.of(pod_set.name) if where is not None else None
        if fixed is not None:
            pod = domains.pod_in(pod_set.pod, fixed)
            inside = placement.place_all([(pod, pod_set.pod_count)], extra or None)
            got = None if inside is None else (inside, fixed)
        elif not held:  # the room is as the caller gave it: topology.py's own search
            got = domains.place(alone(pod_set), freed)
        else:
            got = _best(domains, pod_set, extra)
        request = pod_set.topology
        assert request is not None
        if got is None:
            if request.required:
                return _Walk(None, chosen, pod_set)
            rest.append(pod_set)  # preferred: anywhere
            chosen.append((pod_set.name, None))
            continue
        footprint, domain = got
        chosen.append((pod_set.name, domain))
        for i, room in footprint.items():
            add_room(extra.setdefault(i, {}), room, -1)
            add_room(held.setdefault(i, {}), room, 1)
    if rest:
        anywhere = placement.place_all([(s.pod, s.pod_count) for s in rest], extra or None)
        if anywhere is None:
            return _Walk(None, chosen, None, tuple(rest))
        for i, room in anywhere.items():
            add_room(held.setdefault(i, {}), room, 1)
    return _Walk(held, chosen)


def _best(domains: Domains, pod_set: PodSet, extra: Footprint) -> tuple[Footprint, Domain] | None:
    """topology.py's choice for one pod set, on room others hold (``extra``, below zero
    where they hold it): the domains of its level left with the least room free first. Placed
    by ``place_all``, which remembers nothing (what ``place`` remembers holds only for room
    that was there)."""
    view, request = alone(pod_set), pod_set.topology
    assert request is not None
    for level in domains.levels(request):
        for domain in domains.by_room_left(view, level, extra):
            pod = domains.pod_in(pod_set.pod, domain)
            inside = domains.placement.place_all([(pod, pod_set.pod_count)], extra)
            if inside is not None:
                return inside, domain
    return None


def place_sets(
    domains: Domains,
    view: WorkloadView,
    freed: Footprint | None = None,
    where: SetDomains | None = None,
) -> Placed | None:
    """Where every pod of a workload whose pod sets ask domains of their own goes (with
    ``freed`` given back; ``where``: the domains some of them must go in), or None."""
    walk = _walk(domains, view, freed, where)
    if walk.footprint is None:
        return None
    listed = {s.name: i for i, s in enumerate(view.pod_sets)}
    chosen = sorted(walk.chosen, key=lambda entry: listed[entry[0]])
    return walk.footprint, SetDomains(tuple(chosen))


def explain_sets(domains: Domains, view: WorkloadView) -> str:
    """Why such a workload is not placed: the pod set no domain holds, its level, the best
    domain and what it lacks; or, all of those placed, that the others do not fit with them."""
    walk = _walk(domains, view, None, None)
    placed = SetDomains(tuple(walk.chosen)).text
    failed = walk.failed
    if failed is None:
        rest = ", ".join(
            f"{s.pod_count} x {s.pod.request.describe()} ({s.name})" for s in walk.rest
        )
        return f"its pod sets fit in their domains ({placed}), not the others with them: {rest}"
    request = failed.topology
    assert request is not None
    if placed and domains.place(alone(failed)) is not None:
        return (
            f"pod set {failed.name}: no {request.level} holds {failed.pod_count} x"
            f" {failed.pod.request.describe()} beside the pod sets placed before it ({placed})"
        )
    return f"pod set {failed.name}: {domains.explain(alone(failed))}"


@dataclass(frozen=True, slots=True)
class Search:
    """Where reclaim or preempt takes victims for a workload that asks a Topology: inside one
    domain of ``request``'s levels (the workload then goes at ``where(domain)``), or, with
    ``request`` None or a preferred one no domain can be freed for, anywhere (it then goes
    at ``anywhere``)."""

    request: TopologyRequest | None
    inside: WorkloadView
    """What goes in the domain searched: the whole workload, or the one pod set no domain
    held (``alone``). Its pods fitting there, with the victims' room given back, is what
    any choice of victims for that domain needs (the pod sets placed before it hold room
    too, so it is needed, not enough)."""
    where: Callable[[Domain], Where]
    anywhere: Where | None = None


def _itself(domain: Domain) -> Where:
    return domain


def victim_search(domains: Domains, view: WorkloadView) -> Search | None:
    """How victims are looked for (the rule at the top); None for a workload that asks no
    Topology."""
    if view.topology is not None:
        return Search(view.topology, view, _itself)
    if not asks_per_set(view):
        return None
    walk = _walk(domains, view, None, None)
    base = SetDomains(tuple(walk.chosen))
    failed = walk.failed
    if failed is None:
        return Search(None, view, _itself, base)
    name = failed.name
    return Search(failed.topology, alone(failed), lambda domain: base.fixing(name, domain))
