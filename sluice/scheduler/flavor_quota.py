"""What a workload holds in each flavor (docs/flavors.md, *Counting per flavor*).

Each pod set counts in the flavor it was given, whole; a claim its pods name directly counts
once per workload, as it does in the workload's request, in the flavor of the first pod set
that names it. The amounts are kept whole per flavor: a queue's quota in a flavor compares
only the resources its entry names, so one figure per queue and flavor serves every level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sluice.api.config import PluginConfig
from sluice.api.constants import ROOT_QUEUE
from sluice.api.flavor import FlavorView
from sluice.api.resources import Resources
from sluice.api.views import NodeView, PodSet
from sluice.queues.flavors import flavor_tree, flavors_named
from sluice.queues.limits import child_real_capability, guarantees_of_children
from sluice.queues.tree import QueueTree
from sluice.scheduler.plugins.deserved import Claim, split

FlavorAmounts = dict[str, dict[str, int]]
"""Flavor -> resource -> milli-units."""


def add_in(target: FlavorAmounts, amounts: Mapping[str, Mapping[str, int]], sign: int = 1) -> None:
    """Add ``amounts`` (times ``sign``) to ``target``, flavor by flavor and resource by
    resource; a flavor left holding nothing is dropped, so what holds nothing shows nothing."""
    for flavor, resources in amounts.items():
        into = target.setdefault(flavor, {})
        for r, a in resources.items():
            into[r] = into.get(r, 0) + sign * a
        if not any(into.values()):
            del target[flavor]


def counted(pod_sets: Sequence[PodSet], chosen: Mapping[str, str]) -> FlavorAmounts:
    """What the pod sets hold per flavor, each pod set in the flavor ``chosen`` for it (by
    name; a pod set given none counts in no flavor)."""
    out: FlavorAmounts = {}
    claims: set[str] = set()
    for pod_set in pod_sets:
        flavor = chosen.get(pod_set.name)
        if flavor is None:
            continue
        into = out.setdefault(flavor, {})
        amounts = [pod_set.request]
        for key, amount in pod_set.named_claims:
            if key not in claims:
                claims.add(key)
                amounts.append(amount)
        for amount in amounts:
            for r, a in amount.items():
                into[r] = into.get(r, 0) + a
    return out


def flavor_capabilities(
    tree: QueueTree, totals: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, dict[str, int]]]:
    """realCapability in each flavor some queue names: flavor -> queue -> resource -> limit,
    for root and the queues naming the flavor. The one formula (queues.limits) over the
    flavor's own tree (``flavor_tree``), root's being the flavor's total (``totals``: the
    allocatable of its nodes) capped by root's own capability in the flavor; a resource
    absent is 0, as in the scheduler's realCapability."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for flavor in flavors_named(tree):
        own = flavor_tree(tree, flavor)
        total = dict(totals.get(flavor, {}))
        cap = own.queues[ROOT_QUEUE].spec.capability
        real = {ROOT_QUEUE: {r: min(a, cap[r]) if r in cap else a for r, a in total.items()}}
        stack = [ROOT_QUEUE]
        while stack:
            parent = stack.pop()
            taken = guarantees_of_children(own, parent)
            for child in own.children(parent):
                spec = own.queues[child].spec
                real[child] = child_real_capability(
                    real[parent],
                    taken,
                    spec.guarantee.resource,
                    spec.capability,
                    absent_is_unlimited=False,
                )
                stack.append(child)
        out[flavor] = real
    return out


def flavor_totals(
    flavors: Iterable[FlavorView], nodes: Iterable[NodeView], named: Iterable[str]
) -> FlavorAmounts:
    """Each flavor of ``named``'s total: the allocatable of the Ready, schedulable nodes it
    matches, summed as the cluster's total is (a node in two flavors counts in both); a flavor
    that does not exist, or matches no node, has none."""
    wanted = set(named)
    out: FlavorAmounts = {}
    usable = [node for node in nodes if node.usable]
    for flavor in flavors:
        if flavor.name not in wanted or flavor.name in out:
            continue
        into = out[flavor.name] = {}
        for node in usable:
            if flavor.matches(node.labels):
                for r, a in node.allocatable.items():
                    into[r] = into.get(r, 0) + a
    return out


def flavor_deserved(
    tree: QueueTree,
    plugin: PluginConfig | None,
    real: Mapping[str, Mapping[str, Mapping[str, int]]],
    requests: Mapping[str, Mapping[str, Mapping[str, int]]],
) -> dict[str, dict[str, Resources]]:
    """Deserved in each flavor: flavor -> queue -> amounts, over the flavor's own tree, as
    the queue's own deserved is worked out (docs/scheduler.md): with capacity (or no plugin
    computing deserved) the entry's deserved capped by its realCapability in the flavor and
    raised to its guarantee; with proportion, root's realCapability in the flavor split by
    weight, each queue capped by min(its request in the flavor, its realCapability there).
    ``real``: ``flavor_capabilities``; ``requests``: flavor -> queue -> what it holds in the
    flavor plus what its waiting pod sets that may be given the flavor ask."""
    out: dict[str, dict[str, Resources]] = {}
    for flavor, caps in real.items():
        own = flavor_tree(tree, flavor)
        asked = requests.get(flavor, {})
        given = out[flavor] = {ROOT_QUEUE: Resources(caps.get(ROOT_QUEUE, {}))}
        stack = [ROOT_QUEUE]
        while stack:
            parent = stack.pop()
            children = own.children(parent)
            stack.extend(children)
            if plugin is None or plugin.name == "capacity":
                for child in children:
                    spec = own.queues[child].spec
                    cap = caps.get(child, {})
                    capped = {r: min(a, cap.get(r, 0)) for r, a in spec.deserved.items()}
                    given[child] = Resources(capped).maximum(spec.guarantee.resource)
                continue
            claims = [
                Claim(
                    name=child,
                    weight=tree.queues[child].spec.weight,
                    cap=Resources(asked.get(child, {})).minimum(Resources(caps.get(child, {}))),
                    guarantee=own.queues[child].spec.guarantee.resource,
                )
                for child in children
            ]
            if claims:
                given.update(split(plugin, given[parent], claims))
    return out
