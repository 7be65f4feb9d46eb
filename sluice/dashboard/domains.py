"""The dashboard's view of the Topologies (docs/scheduler.md, *Topology*): per Topology and
level, each domain with its nodes, the free room and the total of each resource of its usable
nodes, and the jobs admitted into it.

Free room is a node's allocatable less what the unfinished pods bound to it request, as
kube-scheduler counts it (the operator's cycles also keep room for an admitted job's pods not
bound yet). A job counts in the domain it was admitted into (sluice.dev/topology-assignment)
and in each wider domain that holds that one whole. It reads the views the operator's watches
keep (``sluice dashboard`` keeps its own: ``Watched``); nothing here asks the API server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.api.errors import InvalidObject
from sluice.api.quantity import format_quantity
from sluice.api.topology import Assignment, TopologyView, not_nested
from sluice.api.views import NodeView, PodView, PublishedJob
from sluice.scheduler.snapshot import READERS

JOBS_LISTED = 20
"""The jobs named per domain (all are counted)."""
DOMAINS_LISTED = 100
"""The domains of a level sent unless more are asked for."""


@dataclass(frozen=True, slots=True)
class ClusterViews:
    """What the domain view is made of: the Topologies, the nodes and the pods as read."""

    topologies: Sequence[TopologyView] = ()
    nodes: Sequence[NodeView] = ()
    pods: Sequence[PodView] = ()


Source = Callable[[], ClusterViews]


def amounts_json(milli: Mapping[str, int] | None) -> dict[str, dict[str, Any]]:
    """Resource amounts as the page shows them: milli-units (``m``, to scale bars by) and as
    written (``s``); {} for None."""
    if milli is None:
        return {}
    return {r: {"m": m, "s": format_quantity(m, r)} for r, m in sorted(milli.items())}


def _used(nodes: Sequence[NodeView], pods: Iterable[PodView]) -> dict[str, dict[str, int]]:
    """Node name -> what the unfinished pods bound to it request."""
    used: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
    for pod in pods:  # every pod of the cluster: the loop does its own adding
        if pod.finished or not pod.node:
            continue
        room = used.get(pod.node)
        if room is not None:
            for r, a in pod.request.items():
                room[r] = room.get(r, 0) + a
    return used


def _jobs_by_domain(
    topology: TopologyView,
    members: Mapping[str, Mapping[str, list[NodeView]]],
    jobs: Iterable[PublishedJob],
) -> dict[tuple[str, str], list[str]]:
    """(level, value) -> the jobs in that domain: admitted into it, or into a narrower domain
    whose nodes all lie in it."""
    assigned: dict[tuple[str, str], list[str]] = {}
    for job in jobs:
        where = Assignment.parse(job.domain)
        if where is not None and where.level in members:
            assigned.setdefault((where.level, where.value), []).append(job.key)
    out: dict[tuple[str, str], list[str]] = {}
    for (level, value), keys in assigned.items():
        nodes = members[level].get(value, [])
        for wider in topology.levels[: topology.levels.index(level) + 1]:
            values = {n.labels.get(wider) for n in nodes}
            if len(values) == 1 and None not in values:
                out.setdefault((wider, str(values.pop())), []).extend(keys)
    return out


@dataclass(frozen=True, slots=True)
class DomainRoom:
    value: str
    nodes: int
    unusable: int
    """Of its nodes, those not ready or cordoned: they count in neither free nor total."""
    free: Mapping[str, int]
    total: Mapping[str, int]
    jobs: Sequence[str]
    """The jobs in it, by key."""


@dataclass(frozen=True, slots=True)
class TopologyRoom:
    name: str
    not_nested: str
    """Why its levels do not nest on the nodes ("" while they do)."""
    levels: Sequence[tuple[str, Sequence[DomainRoom]]]
    """(level, its domains by name), widest first."""


def domain_rooms(views: ClusterViews, jobs: Iterable[PublishedJob]) -> list[TopologyRoom]:
    """Per Topology (by name) and level, each domain's room and jobs."""
    if not views.topologies:
        return []
    used = _used(views.nodes, views.pods)
    free_of: dict[str, dict[str, int]] = {}
    for node in views.nodes:
        if node.usable:
            taken = used[node.name]
            free_of[node.name] = {
                r: max(a - taken.get(r, 0), 0) for r, a in node.allocatable.items()
            }
    admitted = list(jobs)
    out: list[TopologyRoom] = []
    for topology in sorted(views.topologies, key=lambda t: t.name):
        members: dict[str, dict[str, list[NodeView]]] = {}
        for level in topology.levels:
            by_value = members[level] = {}
            for node in views.nodes:
                value = node.labels.get(level)
                if value is not None:
                    by_value.setdefault(value, []).append(node)
        in_domain = _jobs_by_domain(topology, members, admitted)
        levels: list[tuple[str, Sequence[DomainRoom]]] = []
        for level in topology.levels:
            domains = []
            for value, nodes in sorted(members[level].items()):
                free: dict[str, int] = {}
                total: dict[str, int] = {}
                for node in nodes:
                    room = free_of.get(node.name)
                    if room is None:
                        continue
                    for r, a in node.allocatable.items():
                        total[r] = total.get(r, 0) + a
                    for r, a in room.items():
                        free[r] = free.get(r, 0) + a
                unusable = sum(1 for n in nodes if n.name not in free_of)
                keys = sorted(in_domain.get((level, value), []))
                domains.append(DomainRoom(value, len(nodes), unusable, free, total, keys))
            levels.append((level, domains))
        out.append(TopologyRoom(topology.name, not_nested(topology, views.nodes) or "", levels))
    return out


def _domain_json(domain: DomainRoom) -> dict[str, Any]:
    return {
        "value": domain.value,
        "nodes": domain.nodes,
        "unusable": domain.unusable,
        "free": amounts_json(domain.free),
        "total": amounts_json(domain.total),
        "jobCount": len(domain.jobs),
        "jobs": list(domain.jobs[:JOBS_LISTED]),
    }


def rooms_json(
    rooms: Sequence[TopologyRoom], shown: Mapping[str, str], limit: int = DOMAINS_LISTED
) -> dict[str, Any]:
    """The page's data: per Topology each level and how many domains it has, and the domains
    of one level (``shown``: Topology -> level; its widest unless told), the first ``limit``
    of them (a level of hosts may have thousands)."""
    out: list[dict[str, Any]] = []
    for topology in rooms:
        labels = [level for level, _ in topology.levels]
        pick = shown.get(topology.name)
        pick = pick if pick in labels else labels[0]
        levels = []
        for level, domains in topology.levels:
            entry: dict[str, Any] = {"nodeLabel": level, "domainCount": len(domains)}
            if level == pick:
                entry["domains"] = [_domain_json(d) for d in domains[: max(limit, 0)]]
            levels.append(entry)
        out.append(
            {
                "name": topology.name,
                "notNested": topology.not_nested,
                "shown": pick,
                "levels": levels,
            }
        )
    return {"topologies": out}


def topology_json(
    views: ClusterViews,
    jobs: Iterable[PublishedJob],
    shown: Mapping[str, str] | None = None,
    limit: int = DOMAINS_LISTED,
) -> dict[str, Any]:
    """``rooms_json`` of ``domain_rooms``."""
    return rooms_json(domain_rooms(views, jobs), shown or {}, limit)


class Watched:
    """The Topologies, nodes and bound pods ``sluice dashboard`` watches, kept as read (the
    operator's dashboard reads its watches' own views instead). Thread-safe."""

    KINDS = ("Topology", "Node", "Pod")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._views: dict[str, dict[str, Any]] = {kind: {} for kind in self.KINDS}

    def on_event(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        key, view = self._read(kind, obj) if event != "DELETED" else (self._key(obj), None)
        with self._lock:
            if view is None:
                self._views[kind].pop(key, None)
            else:
                self._views[kind][key] = view

    def on_listing(self, kind: str, items: Iterable[Mapping[str, Any]]) -> None:
        """A listing: what it lists, and nothing else, is there."""
        read = (self._read(kind, obj) for obj in items)
        views = {key: view for key, view in read if view is not None}
        with self._lock:
            self._views[kind] = views

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace') or ''}/{meta.get('name')}"

    def _read(self, kind: str, obj: Mapping[str, Any]) -> tuple[str, Any]:
        try:
            return self._key(obj), READERS[kind](obj)
        except InvalidObject:
            return self._key(obj), None  # the operator reports what it cannot read

    def __call__(self) -> ClusterViews:
        with self._lock:
            return ClusterViews(
                topologies=list(self._views["Topology"].values()),
                nodes=list(self._views["Node"].values()),
                pods=list(self._views["Pod"].values()),
            )
