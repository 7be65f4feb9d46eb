"""The rules a Queue must pass at the door (README, "Queues"), as pure functions.

Every denial names the queue, the rule and the numbers, with quantities as Kubernetes writes
them. The rules a tree keeps (depth, amounts, capabilities, children's sums) are rules.py's,
shared with the operator; here are the request's own (its parent, its state, its place) and
the comparison of the tree before and after it.
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
from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.queues import rules
from sluice.queues.tree import QueueTree, missing_parent, parent_cycle, self_parent
from sluice.queues.verdict import ALLOW, Verdict, deny
from sluice.queues.warnings import root_guarantee_warnings, share_warnings


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the rules need to know beyond the Queues themselves."""

    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH
    cluster_capacity: Resources | None = None
    """For the warning on root's children's guarantees; None when unknown."""
    queues_holding_jobs: frozenset[str] = frozenset()
    """Queues known to hold pending or unfinished jobs (only those job_facts_needed named)."""
    flavors: frozenset[str] | None = None
    """The Flavors that exist, read for a queue that names some; None when not read."""


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
    return _warned(new, existing, facts, _check_queue(None, new, existing, facts))


def check_queue_update(
    old: Queue, new: Queue, existing: Mapping[str, Queue], facts: ClusterFacts
) -> Verdict:
    if old.spec == new.spec:
        # Metadata only (annotations, finalizers, labels): never blocked.
        return _warned(new, existing, facts, ALLOW)
    return _warned(new, existing, facts, _check_queue(old, new, existing, facts))


def _warned(
    new: Queue, existing: Mapping[str, Queue], facts: ClusterFacts, verdict: Verdict
) -> Verdict:
    if not verdict.allowed:
        return verdict
    return verdict.with_warnings(share_warnings(new, existing, facts.cluster_capacity))


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
    if (verdict := _check_flavors_exist(old, new, facts.flavors)) is not None:
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
    depth = facts.max_queue_depth
    if (verdict := _new_breach(name, QueueTree(before), tree, depth)) is not None:
        return verdict
    return Verdict(True, warnings=root_guarantee_warnings(new, tree, facts.cluster_capacity))


def _new_breach(subject: str, before: QueueTree, after: QueueTree, depth: int) -> Verdict | None:
    """The first rule between queues (rules.py) that the request breaks or breaks further.

    A tree may already break these rules (edited around the webhooks, or --max-queue-depth
    lowered): a request that leaves such a breach as it was, or shrinks it, is not refused for
    it, or no one could change a weight or a label-like field anywhere near it.
    """
    was = {b.key: b.excess for b in rules.breaches(before, depth)}
    for breach in rules.breaches(after, depth):
        if breach.excess > was.get(breach.key, 0):
            return breach.refusal(subject)
    return None


def _check_state_change(new: Queue, existing: Mapping[str, Queue]) -> Verdict:
    verdict = _check_state_under_parent(new, _with(existing, new))
    return verdict if verdict is not None else ALLOW


def _check_amounts(new: Queue) -> Verdict | None:
    breach = next(rules.own(new), None)
    return breach.refusal() if breach is not None else None


def _check_flavors_exist(
    old: Queue | None, new: Queue, flavors: frozenset[str] | None
) -> Verdict | None:
    """Each flavor the queue names exists. One it named already is let be: a Flavor deleted
    since must not stop every other change to the queue."""
    if flavors is None:
        return None
    before = {entry.name for entry in old.spec.flavors} if old is not None else set()
    for entry in new.spec.flavors:
        if entry.name not in flavors and entry.name not in before:
            known = ", ".join(sorted(flavors)) or "none exists"
            return deny(
                "flavor-missing",
                f"queue {new.name}: flavor {entry.name} does not exist (flavors: {known});"
                " create the Flavor first",
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
        return deny("parent-self", self_parent(name))
    if parent not in queues:
        return deny("parent-missing", missing_parent(name, parent))
    parent_changed = old is not None and old.parent != parent
    if old is not None and parent_changed and name in RESERVED_QUEUES:
        return deny("reserved-parent", f"queue {name} keeps its parent {old.parent}")
    tree = QueueTree(queues)
    if name in tree.ancestors(parent) or "cycle" in tree.problems().get(name, ""):
        return deny("parent-cycle", parent_cycle(name, parent))
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


# Queue delete -----------------------------------------------------------------------------


def check_queue_delete(queue: Queue) -> Verdict:
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
