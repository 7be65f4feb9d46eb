"""The rules a Queue must pass at the door (README, "Queues"), as pure functions.

Every denial names the queue, the rule and the numbers, with quantities as Kubernetes writes
them. Comparisons between two resource maps follow one convention: a map that is not set
(empty) does not constrain; a map that is set counts an absent resource as 0, except
``capability``, where an absent resource is unlimited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice.api.constants import (
    DEFAULT_MAX_QUEUE_DEPTH,
    DEFAULT_QUEUE,
    RESERVED_QUEUES,
    ROOT_QUEUE,
)
from sluice.api.queue import Queue, QueueSpec
from sluice.api.resources import EMPTY, Resources, describe_amount
from sluice.queues.limits import guarantees_of_children, real_capabilities
from sluice.queues.tree import QueueTree
from sluice.queues.verdict import ALLOW, Verdict, deny


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the rules need to know beyond the Queues themselves."""

    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH
    cluster_capacity: Resources | None = None
    """For the warning on root's children's guarantees; None when unknown."""
    queues_holding_jobs: frozenset[str] = frozenset()
    """Queues known to hold pending or unfinished jobs (only those job_facts_needed named)."""


def _with(existing: Mapping[str, Queue], queue: Queue) -> dict[str, Queue]:
    merged = dict(existing)
    merged[queue.name] = queue
    return merged


def job_facts_needed(
    old: Queue | None, new: Queue, existing: Mapping[str, Queue]
) -> frozenset[str]:
    """The queues whose "holds jobs" fact the rules need for this create or update."""
    needed: set[str] = set()
    parent = new.parent
    if parent is not None and (old is None or old.parent != parent):
        siblings = [q for q in existing.values() if q.parent == parent and q.name != new.name]
        if not siblings and parent != ROOT_QUEUE:
            needed.add(parent)
    if old is not None and old.parent != new.parent:
        tree = QueueTree(existing)
        needed.add(new.name)
        needed.update(tree.descendants(new.name))
    return frozenset(needed)


# Queue create / update --------------------------------------------------------------------


def check_queue_create(new: Queue, existing: Mapping[str, Queue], facts: ClusterFacts) -> Verdict:
    if new.name in existing:
        return deny("exists", f"queue {new.name} already exists")
    return _check_queue(None, new, existing, facts)


def check_queue_update(
    old: Queue, new: Queue, existing: Mapping[str, Queue], facts: ClusterFacts
) -> Verdict:
    if old.spec == new.spec:
        return ALLOW  # metadata only (annotations, finalizers, labels): never blocked
    return _check_queue(old, new, existing, facts)


def _check_queue(
    old: Queue | None, new: Queue, existing: Mapping[str, Queue], facts: ClusterFacts
) -> Verdict:
    name = new.name
    spec = new.spec
    if name == ROOT_QUEUE and spec.state == "Closed":
        return deny("root-closed", "queue root cannot be closed")
    if name == ROOT_QUEUE and spec.parent:
        return deny("reserved-parent", f"queue root cannot have a parent (got {spec.parent})")
    if name == DEFAULT_QUEUE and new.parent != ROOT_QUEUE:
        return deny("reserved-parent", f"queue default must stay under root (got {new.parent})")
    if (verdict := _check_amounts(new)) is not None:
        return verdict
    if (
        old is not None
        and old.spec.state != spec.state
        and old.spec.model_copy(update={"state": spec.state}) == spec
    ):
        return _check_state_change(new, existing)
    queues = _with(existing, new)
    if (verdict := _check_parent(old, new, queues, facts)) is not None:
        return verdict
    opening = old is None or old.spec.state != "Open" or old.parent != new.parent
    if opening and (verdict := _check_state_under_parent(new, queues)) is not None:
        return verdict
    tree = QueueTree(queues)
    before = dict(existing)
    if old is None:
        before.pop(name, None)
    else:
        before[name] = old
    candidates = (new.parent, name, old.parent if old is not None else None)
    parents = tuple(dict.fromkeys(p for p in candidates if p is not None))
    if (verdict := _new_breach(name, parents, QueueTree(before), tree, facts)) is not None:
        return verdict
    return Verdict(True, warnings=_guarantee_warnings(new, tree, facts))


@dataclass(frozen=True, slots=True)
class _Breach:
    """A rule between queues that the tree breaks: which relation, by how much, and the
    refusal to give when this request breaks it (further)."""

    key: tuple[str, ...]
    excess: int
    verdict: Verdict


def _new_breach(
    name: str, parents: tuple[str, ...], before: QueueTree, after: QueueTree, facts: ClusterFacts
) -> Verdict | None:
    """The first rule between queues that the request breaks or breaks further.

    A tree may already break these rules (edited around the webhooks, or --max-queue-depth
    lowered): a request that leaves such a breach as it was, or shrinks it, is not refused for
    it, or no one could change a weight or a label-like field anywhere near it.
    """
    was = {b.key: b.excess for b in _breaches(name, parents, before, facts)}
    for breach in _breaches(name, parents, after, facts):
        if breach.excess > was.get(breach.key, 0):
            return breach.verdict
    return None


def _breaches(
    name: str, parents: tuple[str, ...], tree: QueueTree, facts: ClusterFacts
) -> list[_Breach]:
    """Breaches touching the queue; ``parents`` are the queues whose children's sums the
    request can change (the queue itself, its parent, its old parent when it moves). What a
    parent can ever hold depends on the capabilities and guarantees above and beside it, so
    the guarantee sums are checked for every parent below those too. Root is unlimited here:
    what changes beside a child of root limits no other queue, and root's own sum is only
    warned about."""
    out: list[_Breach] = []
    tops = [p for p in parents if p in tree.queues and p != ROOT_QUEUE]
    limits = real_capabilities(tree, tops)
    scope: dict[str, None] = {}
    for parent in tops:
        scope[parent] = None
        scope.update(dict.fromkeys(tree.descendants(parent)))
    for parent in scope:
        if tree.children(parent):
            out.extend(_sum_breaches(parent, name, tree, limits))
    if name not in tree.queues:
        return out
    if (depth := _depth_breach(name, tree, facts)) is not None:
        out.insert(0, depth)
    out.extend(_capability_breaches(name, tree))
    return out


def _depth_breach(name: str, tree: QueueTree, facts: ClusterFacts) -> _Breach | None:
    depth = max((tree.depth(d) for d in tree.descendants(name)), default=tree.depth(name))
    if depth <= facts.max_queue_depth:
        return None
    return _Breach(
        ("max-depth", name),
        depth - facts.max_queue_depth,
        deny(
            "max-depth",
            f"queue {name}: the tree would be {depth} levels deep under root"
            f" (maximum {facts.max_queue_depth}, set by --max-queue-depth)",
        ),
    )


def _check_state_change(new: Queue, existing: Mapping[str, Queue]) -> Verdict:
    verdict = _check_state_under_parent(new, _with(existing, new))
    return verdict if verdict is not None else ALLOW


def _check_amounts(new: Queue) -> Verdict | None:
    spec = new.spec
    fields = {
        "capability": spec.capability,
        "deserved": spec.deserved,
        "guarantee.resource": spec.guarantee.resource,
    }
    for field_name, amounts in fields.items():
        for resource in sorted(amounts):
            if amounts[resource] < 0:
                return deny(
                    "negative-quantity",
                    f"queue {new.name}: {field_name} {describe_amount(resource, amounts[resource])}"
                    " is negative; quantities must be >= 0",
                )
    guarantee = spec.guarantee.resource
    for lower_name, lower, upper_name, upper in (
        ("guarantee", guarantee, "deserved", spec.deserved),
        ("deserved", spec.deserved, "capability", spec.capability),
        ("guarantee", guarantee, "capability", spec.capability),
    ):
        for resource in sorted(lower):
            if resource in upper and lower[resource] > upper[resource]:
                return deny(
                    f"{lower_name}-over-{upper_name}",
                    f"queue {new.name}: {lower_name} {describe_amount(resource, lower[resource])}"
                    f" exceeds its {upper_name} {describe_amount(resource, upper[resource])};"
                    f" {lower_name} must be <= {upper_name}",
                )
    return None


def _check_parent(
    old: Queue | None, new: Queue, queues: Mapping[str, Queue], facts: ClusterFacts
) -> Verdict | None:
    name = new.name
    parent = new.parent
    if parent is None:
        return None
    if parent == name:
        return deny("parent-self", f"queue {name} cannot be its own parent")
    if parent not in queues:
        return deny("parent-missing", f"queue {name}: parent queue {parent} does not exist")
    parent_changed = old is not None and old.parent != parent
    if old is not None and parent_changed and name in RESERVED_QUEUES:
        return deny("reserved-parent", f"queue {name} keeps its parent {old.parent}")
    tree = QueueTree(queues)
    if name in tree.ancestors(parent) or "cycle" in tree.problems().get(name, ""):
        return deny(
            "parent-cycle",
            f"queue {name}: parent {parent} is one of its own descendants; that makes a cycle",
        )
    gains_first_child = (old is None or parent_changed) and not [
        q for q in tree.children(parent) if q != name
    ]
    if gains_first_child and parent in facts.queues_holding_jobs:
        return deny(
            "parent-holds-jobs",
            f"queue {name}: parent {parent} holds jobs; a queue that holds jobs cannot get"
            " children (jobs run only in leaf queues); move or finish its jobs first",
        )
    if parent_changed:
        holding = sorted(
            q for q in (name, *tree.descendants(name)) if q in facts.queues_holding_jobs
        )
        if holding:
            return deny(
                "parent-change-with-jobs",
                f"queue {name}: parent can change only while the queue holds no unfinished"
                f" jobs ({', '.join(holding)} still holds some)",
            )
    return None


def closed_ancestor(name: str, queues: Mapping[str, Queue]) -> str | None:
    """The nearest ancestor whose spec.state is Closed: below it nothing is Open, whatever
    the cascade has written so far."""
    seen = {name}
    current = queues[name].parent if name in queues else None
    while current is not None and current not in seen and current in queues:
        if queues[current].spec.state == "Closed":
            return current
        seen.add(current)
        current = queues[current].parent
    return None


def _check_state_under_parent(new: Queue, queues: Mapping[str, Queue]) -> Verdict | None:
    """A queue is Open only under Open ancestors; checked when it is created, opened or moved
    (one already Open under a parent closed since then is for the cascade to close)."""
    if new.spec.state != "Open":
        return None
    closer = closed_ancestor(new.name, queues)
    if closer is None:
        return None
    relation = "parent" if closer == new.parent else "ancestor"
    return deny(
        "parent-closed",
        f"queue {new.name} cannot be Open while its {relation} {closer} is Closed;"
        f" open {closer} first",
    )


def _sum(queues: list[Queue], pick: str) -> Resources:
    total = EMPTY
    for queue in queues:
        total = total + (
            queue.spec.guarantee.resource if pick == "guarantee" else queue.spec.deserved
        )
    return total


def _sum_breaches(
    parent: str, subject: str, tree: QueueTree, limits: Mapping[str, Mapping[str, int]]
) -> list[_Breach]:
    """Children's guarantees and deserved over what their parent allows, per resource.

    Guarantees must fit in the parent's guarantee where it names the resource, else in what
    the parent can ever hold (its realCapability, root unlimited): a guarantee beyond that can
    never be honoured. Deserved must fit in the parent's deserved when it sets one (absent 0).
    """
    children = [tree.queues[c] for c in tree.children(parent)]
    if not children:
        return []
    spec = tree.queues[parent].spec
    out: list[_Breach] = []
    for resource, amount in sorted(guarantees_of_children(tree, parent).items()):
        bound = _guarantee_bound(parent, resource, spec, limits.get(parent, {}))
        if bound is not None and amount > bound[0]:
            out.append(_over_sum("guarantee", parent, subject, resource, amount, *bound))
    if spec.deserved:
        for resource, amount in sorted(_sum(children, "deserved").items()):
            cap = spec.deserved.get_amount(resource)
            if amount > cap:
                shown = f"{parent}'s deserved {describe_amount(resource, cap)}"
                out.append(_over_sum("deserved", parent, subject, resource, amount, cap, shown))
    return out


def _guarantee_bound(
    parent: str, resource: str, spec: QueueSpec, real: Mapping[str, int]
) -> tuple[int, str] | None:
    """What the children's guarantees of a resource must fit in, and how to name it."""
    if resource in spec.guarantee.resource:
        limit = spec.guarantee.resource[resource]
        return limit, f"{parent}'s guarantee {describe_amount(resource, limit)}"
    if resource not in real:
        return None  # nothing limits the parent in it
    limit = real[resource]
    if spec.capability.get(resource) == limit:
        return (
            limit,
            f"all {parent} can ever hold, its capability {describe_amount(resource, limit)}",
        )
    return limit, (
        f"all {parent} can ever hold, its realCapability {describe_amount(resource, limit)}"
        " (the capabilities above it less the guarantees beside it)"
    )


def _over_sum(
    pick: str, parent: str, subject: str, resource: str, amount: int, limit: int, shown: str
) -> _Breach:
    return _Breach(
        (f"{pick}-sum", parent, resource),
        amount - limit,
        deny(
            f"{pick}-sum",
            f"queue {subject}: the children of {parent} would have {pick}"
            f" {describe_amount(resource, amount)} in total, more than {shown}",
        ),
    )


def _check_sums_of(
    parent: str, subject: str, tree: QueueTree, limits: Mapping[str, Mapping[str, int]]
) -> Verdict | None:
    breaches = _sum_breaches(parent, subject, tree, limits)
    return breaches[0].verdict if breaches else None


def _nearest_cap(name: str, resource: str, tree: QueueTree) -> tuple[str, int] | None:
    """The nearest ancestor of ``name`` that caps ``resource``, and its cap."""
    for ancestor in tree.ancestors(name):
        queue = tree.queues.get(ancestor)
        if queue is not None and resource in queue.spec.capability:
            return ancestor, queue.spec.capability[resource]
    return None


def _check_capability_upwards(new: Queue, tree: QueueTree) -> Verdict | None:
    """Each resource the queue caps is within the cap of its nearest ancestor capping it."""
    for resource, amount in sorted(new.spec.capability.items()):
        nearest = _nearest_cap(new.name, resource, tree)
        if nearest is not None and amount > nearest[1]:
            return _over_ancestor(new.name, resource, amount, *nearest).verdict
    return None


def _over_ancestor(name: str, resource: str, amount: int, ancestor: str, limit: int) -> _Breach:
    return _Breach(
        ("capability", name, ancestor, resource),
        amount - limit,
        deny(
            "capability-over-ancestor",
            f"queue {name}: capability {describe_amount(resource, amount)} exceeds"
            f" the capability {describe_amount(resource, limit)} of its ancestor {ancestor}",
        ),
    )


def _capability_breaches(name: str, tree: QueueTree) -> list[_Breach]:
    """Capabilities across the queue: its own against its ancestors', its descendants'
    against its own, and its descendants' against the ancestors above it for what nothing in
    between caps (a subtree moved under a capped parent)."""
    queue = tree.queues[name]
    caps = queue.spec.capability
    out: list[_Breach] = []
    for resource, amount in sorted(caps.items()):
        nearest = _nearest_cap(name, resource, tree)
        if nearest is not None and amount > nearest[1]:
            out.append(_over_ancestor(name, resource, amount, *nearest))
    above = set(tree.ancestors(name))
    for descendant in tree.descendants(name):
        theirs = tree.queues[descendant].spec.capability
        for resource, limit in sorted(caps.items()):
            if theirs.get_amount(resource) > limit:
                out.append(
                    _Breach(
                        ("capability", descendant, name, resource),
                        theirs[resource] - limit,
                        deny(
                            "capability-under-descendant",
                            f"queue {name}: capability {describe_amount(resource, limit)} is"
                            f" below the capability {describe_amount(resource, theirs[resource])}"
                            f" of its descendant {descendant}",
                        ),
                    )
                )
        for resource, amount in sorted(theirs.items()):
            nearest = _nearest_cap(descendant, resource, tree)
            if nearest is None or nearest[0] not in above or amount <= nearest[1]:
                continue
            ancestor, limit = nearest
            out.append(
                _Breach(
                    ("capability", descendant, ancestor, resource),
                    amount - limit,
                    deny(
                        "capability-over-ancestor",
                        f"queue {name}: its descendant {descendant} has capability"
                        f" {describe_amount(resource, amount)}, more than the capability"
                        f" {describe_amount(resource, limit)} of {ancestor}",
                    ),
                )
            )
    return out


def _guarantee_warnings(new: Queue, tree: QueueTree, facts: ClusterFacts) -> tuple[str, ...]:
    if new.parent != ROOT_QUEUE or facts.cluster_capacity is None:
        return ()
    children = [tree.queues[c] for c in tree.children(ROOT_QUEUE)]
    total = _sum(children, "guarantee")
    over = total.exceeding(facts.cluster_capacity, absent_is_unlimited=False)
    return tuple(
        f"the guarantees of root's children add up to {describe_amount(r, amount)}, more than"
        f" the cluster's current {describe_amount(r, cap)}; they cannot all be honoured"
        for r, amount, cap in over
    )


# Queue delete -----------------------------------------------------------------------------


def check_queue_delete(queue: Queue, existing: Mapping[str, Queue]) -> Verdict:
    if queue.name in RESERVED_QUEUES:
        return deny("reserved-delete", f"queue {queue.name} cannot be deleted")
    state = queue.status.state
    if state != "Closed":
        shown = state or "not yet reconciled"
        return deny(
            "delete-not-closed",
            f"queue {queue.name} is {shown}; only a Closed queue can be deleted"
            f" (close it with spec.state: Closed and wait until its jobs finish)",
        )
    return ALLOW


# A whole tree, for the operator ---------------------------------------------------------


def tree_violations(tree: QueueTree, max_queue_depth: int) -> dict[str, str]:
    """Queue -> why it breaks the rules, for a tree that got past the webhooks anyway.

    The offending queue is the one to fix: the queue with a broken parent link, the queue too
    deep, the queue whose own amounts or capability are wrong, and the parent whose children's
    guarantees or deserved add up to more than its own.
    """
    out: dict[str, str] = dict(tree.problems())
    limits = real_capabilities(tree, [ROOT_QUEUE])
    for name in sorted(tree.queues):
        if name in out:
            continue
        queue = tree.queues[name]
        if tree.depth(name) > max_queue_depth:
            out[name] = (
                f"queue {name} is {tree.depth(name)} levels deep under root"
                f" (maximum {max_queue_depth})"
            )
            continue
        verdict = _check_amounts(queue) or _check_capability_upwards(queue, tree)
        if verdict is None and tree.children(name) and name != ROOT_QUEUE:
            verdict = _check_sums_of(name, name, tree, limits)
        if verdict is not None:
            out[name] = verdict.message
    return out
