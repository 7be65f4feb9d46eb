"""Counting per flavor in a Session (docs/flavors.md, *Counting per flavor*).

Done only when some queue of the tree holds quota in a flavor: a cluster without flavors
pays nothing for it. Per queue and flavor, what the admitted workloads of its subtree hold
(their recorded flavors), its realCapability over the flavor's own tree (root's being the
flavor's nodes) and its deserved there. A workload admitted before its queue had flavors
records none and counts in the queue's own fields only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from sluice.api.queue import DEFAULT_FUNGIBILITY, FlavorFungibility
from sluice.api.resources import EMPTY, Resources
from sluice.api.views import WorkloadView
from sluice.queues.flavors import flavor_list
from sluice.queues.limits import over_capability
from sluice.scheduler.flavor_fit import flavor_refusal
from sluice.scheduler.flavor_limits import bounds, levels_naming
from sluice.scheduler.flavor_quota import (
    FlavorAmounts,
    add_in,
    counted,
    flavor_capabilities,
    flavor_deserved,
    flavor_totals,
)
from sluice.scheduler.records import QueueInfo

if TYPE_CHECKING:
    from sluice.scheduler.session import Session


def has_flavors(queues: Iterable[QueueInfo]) -> bool:
    """Whether some queue holds quota in a flavor: only then is anything counted per flavor."""
    return any(info.queue.spec.flavors for info in queues)


def recorded(view: WorkloadView) -> tuple[tuple[str, str], ...]:
    """(pod set, flavor) as the workload's record says, in its pod sets' order."""
    given = {a.pod_set: a.flavor for a in view.flavors}
    return tuple((p.name, given[p.name]) for p in view.pod_sets if p.name in given)


def count_flavors(session: Session) -> None:
    """Fill every queue's flavor list, allocated, over-capability, realCapability,
    deserved and bounds per flavor, the levels of its chain naming each flavor of its list,
    its fungibility, and every admitted workload's ``flavors`` and ``held_in`` from its
    record."""
    tree, queues = session.tree, session.queues
    for name, info in queues.items():
        info.flavor_list = flavor_list(tree, name)
    for info in queues.values():
        for job in info.admitted_jobs:
            if job.view.flavors:
                job.flavors = recorded(job.view)
                job.held_in = counted(job.view.pod_sets, dict(job.flavors))
                for name in session.chain(job.queue):
                    add_in(queues[name].flavor_allocated, job.held_in)
    for info in queues.values():
        for entry in info.queue.spec.flavors:
            held = info.flavor_allocated.get(entry.name)
            if held and (over := over_capability(held, entry.capability)):
                info.flavor_over_capability[entry.name] = over
    totals = flavor_totals(session.snapshot.flavors, session.snapshot.nodes, _named(queues))
    real = flavor_capabilities(tree, totals)
    deserved = flavor_deserved(tree, session.config.deserved_plugin(), real, _requests(session))
    for flavor, caps in real.items():
        for name, amounts in caps.items():
            queues[name].flavor_real_capability[flavor] = Resources(amounts)
            queues[name].flavor_deserved[flavor] = deserved[flavor].get(name, EMPTY)
    for info in queues.values():
        for entry in info.queue.spec.flavors:
            if entry.name not in info.flavor_bounds:  # the first entry of a name counts
                info.flavor_bounds[entry.name] = bounds(info, entry, session.elastic)
    for name, info in queues.items():
        info.flavor_levels = {f: levels_naming(session, name, f) for f in info.flavor_list}
        info.fungibility = _fungibility(session, name)


def _fungibility(session: Session, queue: str) -> FlavorFungibility:
    """Where the search among the queue's flavors stops: as the queue whose flavor list is
    used says."""
    for name in session.chain(queue):
        spec = session.queues[name].queue.spec
        if spec.flavors:
            return spec.fungibility()
    return DEFAULT_FUNGIBILITY


def _named(queues: Mapping[str, QueueInfo]) -> set[str]:
    return {f.name for info in queues.values() for f in info.queue.spec.flavors}


def _requests(session: Session) -> dict[str, dict[str, dict[str, int]]]:
    """Flavor -> queue -> what proportion splits by: what the subtree holds in the flavor,
    plus each waiting pod set in every flavor of its queue's list it may be given (one that
    may go to two flavors asks in both: either may be where it goes)."""
    views = {f.name: f for f in session.snapshot.flavors}
    per_queue: dict[str, FlavorAmounts] = {}
    for name, info in session.queues.items():
        mine: FlavorAmounts = {f: dict(a) for f, a in info.flavor_allocated.items()}
        per_queue[name] = mine
    for name, info in session.queues.items():
        if not info.flavor_list or not info.pending_jobs or info.blocked_by:
            continue
        wanted: FlavorAmounts = {}
        for job in info.pending_jobs:
            for pods in job.view.pod_sets:
                asked = pods.request.amounts
                for flavor in info.flavor_list:
                    view = views.get(flavor)
                    if view is not None and flavor_refusal(pods.pod, view) is None:
                        add_in(wanted, {flavor: asked})
        for above in session.chain(name):
            add_in(per_queue[above], wanted)
    out: dict[str, dict[str, dict[str, int]]] = {}
    for name, amounts in per_queue.items():
        for flavor, resources in amounts.items():
            out.setdefault(flavor, {})[name] = resources
    return out
