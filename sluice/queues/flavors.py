"""Flavors at the door, and the queue tree seen one flavor at a time for the hierarchy rules.

A queue's quota in a flavor (``spec.flavors[]``) is bounded by the nearest ancestor that
names the same flavor, and bounds the nearest descendants that name it: the queues in between
that name it not are transparent, and a flavor no ancestor names is bounded by nothing but
root's quota in it (none: unlimited). So each flavor's quotas make a tree of their own, root
on top, where the plain rules (rules.py) apply unchanged (docs/scheduler.md, *Flavors*).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from sluice.api.constants import FLAVOR_KIND, ROOT_QUEUE
from sluice.api.flavor import flavor_problems
from sluice.api.queue import Queue, QueueSpec
from sluice.queues.tree import QueueTree
from sluice.queues.verdict import ALLOW, Verdict, deny


def check_flavor(obj: Mapping[str, Any]) -> Verdict:
    """A Flavor at the door: valid label keys and values, taints of a known effect each named
    once, a Topology's name that can be one."""
    problems = flavor_problems(obj.get("spec"))
    if not problems:
        return ALLOW
    name = (obj.get("metadata") or {}).get("name") or "?"
    return deny("flavor-invalid", f"{FLAVOR_KIND.lower()} {name}: " + "; ".join(problems))


def flavors_named(tree: QueueTree) -> tuple[str, ...]:
    """Every flavor some queue of the tree holds quota in, sorted."""
    return tuple(sorted({f.name for q in tree.queues.values() for f in q.spec.flavors}))


def flavor_list(tree: QueueTree, name: str) -> tuple[str, ...]:
    """The flavors a workload of queue ``name`` may be given, in the order tried: the queue's
    own ``spec.flavors``, else those of its nearest ancestor that lists some, else none (it
    is admitted as a queue without flavors admits, on any node). A child without flavors so
    never escapes its parent's quota in them (docs/scheduler.md, *Flavors*)."""
    for queue_name in (name, *tree.ancestors(name)):
        queue = tree.queues.get(queue_name)
        if queue is not None and queue.spec.flavors:
            return tuple(dict.fromkeys(f.name for f in queue.spec.flavors))
    return ()


def flavor_tree(tree: QueueTree, flavor: str) -> QueueTree:
    """Root and the queues naming ``flavor``, each with its quota in it as its spec, under the
    nearest ancestor that names it too (else root). Queues whose place in the tree is broken
    are left out: the tree's own problems already name them."""
    problems = tree.problems()
    queues = {ROOT_QUEUE: quota_as_queue(ROOT_QUEUE, None, tree.queues.get(ROOT_QUEUE), flavor)}
    for name, queue in tree.queues.items():
        if name == ROOT_QUEUE or name in problems or queue.spec.flavor(flavor) is None:
            continue
        parent = next(_naming(tree, name, flavor), ROOT_QUEUE)
        queues[name] = quota_as_queue(name, parent, queue, flavor)
    return QueueTree(queues)


def _naming(tree: QueueTree, name: str, flavor: str) -> Iterator[str]:
    for ancestor in tree.ancestors(name):
        queue = tree.queues.get(ancestor)
        if ancestor != ROOT_QUEUE and queue is not None and queue.spec.flavor(flavor):
            yield ancestor


def quota_as_queue(name: str, parent: str | None, queue: Queue | None, flavor: str) -> Queue:
    """The queue's quota in ``flavor`` as a queue of that name (none: an unlimited one)."""
    entry = queue.spec.flavor(flavor) if queue is not None else None
    if entry is None:
        return Queue(name=name, spec=QueueSpec(parent=parent))
    spec = QueueSpec(
        parent=parent,
        guarantee=entry.guarantee,
        deserved=entry.deserved,
        capability=entry.capability,
    )
    return Queue(name=name, spec=spec)


def named_twice(queue: Queue) -> tuple[str, ...]:
    """The flavors the queue lists more than once, in the order of their second mention."""
    seen: set[str] = set()
    twice: list[str] = []
    for entry in queue.spec.flavors:
        if entry.name in seen and entry.name not in twice:
            twice.append(entry.name)
        seen.add(entry.name)
    return tuple(twice)
