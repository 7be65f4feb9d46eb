"""Admission warnings that need the cluster's current capacity: kubectl prints them, nothing
is refused.

Root's children may be guaranteed more than the cluster holds now (nodes come and go; the
queue rules know no cluster), but not all of it can be honoured. A guarantee larger than the
queue's weighted share is legal too (the proportion plugin raises deserved to the
guarantee), but it quietly takes quota from the siblings beyond what their weights promise,
and it usually means the weights or the guarantee were mistyped.
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.api.constants import ROOT_QUEUE
from sluice.api.quantity import BYTE_RESOURCES
from sluice.api.queue import Queue
from sluice.api.resources import Resources, describe_amount
from sluice.queues.limits import guarantees_of_children
from sluice.queues.tree import QueueTree


def root_guarantee_warnings(
    new: Queue, tree: QueueTree, capacity: Resources | None
) -> tuple[str, ...]:
    """When the queue is a child of root: its siblings' guarantees and its own, over the
    cluster."""
    if new.parent != ROOT_QUEUE or capacity is None:
        return ()
    total = Resources(guarantees_of_children(tree, ROOT_QUEUE))
    over = total.exceeding(capacity, absent_is_unlimited=False)
    return tuple(
        f"the guarantees of root's children add up to {describe_amount(r, amount)}, more than"
        f" the cluster's current {describe_amount(r, cap)}; they cannot all be honoured"
        for r, amount, cap in over
    )


def weighted_share(tree: QueueTree, name: str, capacity: Resources) -> dict[str, int] | None:
    """The queue's share of ``capacity`` by weight alone, level by level from root (milli-units);
    None when the queue's chain to root is broken."""
    chain = (name, *tree.ancestors(name))
    if chain[-1] != ROOT_QUEUE:
        return None
    share = {r: int(capacity[r]) for r in capacity}
    for queue in reversed(chain[:-1]):  # from root's child down to the queue itself
        parent = tree.parent(queue)
        if parent is None:
            return None
        siblings = [tree.queues[c].spec.weight for c in tree.children(parent)]
        weight, total = tree.queues[queue].spec.weight, sum(siblings)
        share = {r: amount * weight // total for r, amount in share.items()}
    return share


def _shown(resource: str, milli: int) -> str:
    """A computed share as Kubernetes would write it: byte-valued resources in whole bytes
    (64Gi / 5 is ``13743895347``, never ``13743895347200m``), others to the milli-unit
    (``2400m``)."""
    if resource in BYTE_RESOURCES or resource.startswith("hugepages-"):
        milli -= milli % 1000
    return describe_amount(resource, milli)


def share_warnings(
    new: Queue, existing: Mapping[str, Queue], capacity: Resources | None
) -> tuple[str, ...]:
    """Each resource the queue is guaranteed beyond its weighted share of ``capacity``."""
    if capacity is None or not new.spec.guarantee.resource:
        return ()
    queues = dict(existing)
    queues[new.name] = new
    tree = QueueTree.build(queues)
    share = weighted_share(tree, new.name, capacity)
    if share is None:
        return ()
    parent = tree.parent(new.name)
    siblings = sum(tree.queues[c].spec.weight for c in tree.children(parent or ROOT_QUEUE))
    warnings = []
    guarantee = new.spec.guarantee.resource
    for resource in sorted(guarantee):
        if resource in share and guarantee[resource] > share[resource]:
            warnings.append(
                f"queue {new.name}: guarantee {describe_amount(resource, guarantee[resource])} is"
                f" more than its weighted share of the cluster's current capacity,"
                f" {_shown(resource, share[resource])} (weight {new.spec.weight} of"
                f" {siblings} under {parent}); its siblings get less than their weights promise"
            )
    return tuple(warnings)
