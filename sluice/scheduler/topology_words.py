"""The words of a workload no domain holds (docs/scheduler.md, *Topology*): the level, the
domain with the most room free in what it asks (ties by name) and what that is."""

from __future__ import annotations

from sluice.api.quantity import format_quantity
from sluice.api.resources import describe_amount
from sluice.api.topology import TopologyRequest
from sluice.api.views import WorkloadView
from sluice.scheduler.domain_room import Domain, DomainRoom, TopologyLevels


def why_not(
    levels: TopologyLevels, domains: DomainRoom, view: WorkloadView, request: TopologyRequest
) -> str:
    """Why a workload that requires a domain is not placed (``Domains.explain``)."""
    level = request.level
    if level not in levels.widening:
        return f"no Topology has the level {level}"
    if level in levels.broken:
        return levels.broken[level]
    what = " + ".join(
        f"{s.pod_count} x {s.pod.request.describe()}" for s in view.pod_sets if s.pod_count
    )
    found = domains.domains(level)
    if not found:
        return f"no node has the label {level}, so no {level} holds {what}"
    best, most = found[0], _share(domains, view, found[0])
    for domain in found[1:]:
        share = _share(domains, view, domain)
        if share > most or (share == most and _backwards(domain.value) > _backwards(best.value)):
            best, most = domain, share
    free, total = domains.free(best), domains.total(best)
    room = ", ".join(
        f"{describe_amount(r, max(free.get(r, 0), 0))} free of"
        f" {format_quantity(total.get(r, 0), r)}"
        for r, a in sorted(view.request.items())
        if a > 0
    )
    names = [domains.placement.nodes[i].name for i in best.nodes]
    nodes = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
    return f"no {level} holds {what}: best {best.short} has {room} (nodes {nodes})"


def _share(domains: DomainRoom, view: WorkloadView, domain: Domain) -> float:
    """The domain's free room in what the workload asks, a share of the cluster's."""
    free, total = domains.free(domain), domains.placement.total
    return sum(free.get(r, 0) / total[r] for r, a in view.request.items() if a > 0 and total.get(r))


def _backwards(name: str) -> str:
    """The name with every character turned around: on a tie of room, the greatest of these
    is the best domain (the first by name; of two where one begins the other, the longer)."""
    return "".join(chr(0x10FFFF - ord(c)) for c in name)
