"""realCapability: the most a queue can ever hold, given the capabilities above it and the
guarantees of the queues beside it (docs/scheduler.md, *Numbers*).

One formula for two uses. The scheduler starts root at the cluster total, so a resource
absent from a limit is 0. The queue rules know no cluster (nodes come and go; a tree must not
turn invalid because one went away), so they start root unlimited and a resource absent from a
limit is unlimited: only capabilities bound it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluice.api.constants import ROOT_QUEUE
from sluice.queues.tree import QueueTree


def child_real_capability(
    parent: Mapping[str, int],
    children_guarantee: Mapping[str, int],
    guarantee: Mapping[str, int],
    capability: Mapping[str, int],
    *,
    absent_is_unlimited: bool,
) -> dict[str, int]:
    """Per resource, min(capability, max(parent's realCapability - the guarantees of all the
    parent's children, 0) + the queue's own guarantee); an absent capability caps nothing.

    With ``absent_is_unlimited`` a resource absent from ``parent`` is unlimited there, and the
    result holds only the resources that something limits (a 0 is kept: it is a limit)."""
    out: dict[str, int] = {}
    names = set(parent) | set(capability if absent_is_unlimited else guarantee)
    for r in names:
        if r not in parent and absent_is_unlimited:
            out[r] = capability[r]
            continue
        amount = max(parent.get(r, 0) - children_guarantee.get(r, 0), 0) + guarantee.get(r, 0)
        if r in capability:
            amount = min(amount, capability[r])
        out[r] = amount
    return out


def guarantees_of_children(tree: QueueTree, parent: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for child in tree.children(parent):
        for r, amount in tree.queues[child].spec.guarantee.resource.items():
            total[r] = total.get(r, 0) + amount
    return total


def real_capabilities(tree: QueueTree, tops: Iterable[str]) -> dict[str, dict[str, int]]:
    """realCapability, root unlimited, of every queue in the subtrees of ``tops``: resource ->
    limit, a resource absent being unlimited. Queues cut off from root (a missing parent, a
    cycle) are left out: nothing is known to limit them."""
    out: dict[str, dict[str, int]] = {}
    for top in tops:
        if top in out or (own := _along_the_chain(tree, top)) is None:
            continue
        out[top] = own
        stack = [top]
        while stack:
            parent = stack.pop()
            children = [c for c in tree.children(parent) if c not in out]  # never round a cycle
            if not children:
                continue
            taken = guarantees_of_children(tree, parent)
            for child in children:
                spec = tree.queues[child].spec
                out[child] = child_real_capability(
                    out[parent],
                    taken,
                    spec.guarantee.resource,
                    spec.capability,
                    absent_is_unlimited=True,
                )
                stack.append(child)
    return out


def _along_the_chain(tree: QueueTree, name: str) -> dict[str, int] | None:
    chain = (name, *tree.ancestors(name))
    if chain[-1] != ROOT_QUEUE or name not in tree:
        return None
    limit: dict[str, int] = {}
    for queue in reversed(chain[:-1]):  # from root's child down to the queue itself
        parent = tree.parent(queue)
        assert parent is not None  # the chain ends at root
        spec = tree.queues[queue].spec
        limit = child_real_capability(
            limit,
            guarantees_of_children(tree, parent),
            spec.guarantee.resource,
            spec.capability,
            absent_is_unlimited=True,
        )
    return limit


def over_capability(
    allocated: Mapping[str, int], capability: Mapping[str, int]
) -> dict[str, tuple[int, int]]:
    """Resource -> (allocated, capability) for each resource a queue holds more of than its
    capability allows (a resource capability leaves out is unlimited): what its workloads'
    pods ask beyond what they were admitted with can put it there."""
    return {r: (used, cap) for r, cap in capability.items() if (used := allocated.get(r, 0)) > cap}
