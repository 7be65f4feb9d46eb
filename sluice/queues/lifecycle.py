"""Queue lifecycle: derived status.state, and the cascade steps the operator must write.

status.state is never set by hand: spec.state Open gives Open; spec.state Closed gives Closing
while the queue or a descendant still has unfinished jobs or a descendant is not yet Closed,
and Closed after. Finished jobs do not hold a queue open.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Literal

from sluice.api.constants import (
    CLOSED_BY_PARENT_ANNOTATION,
    DEFAULT_QUEUE,
    ROOT_QUEUE,
)
from sluice.api.queue import Queue, QueueState
from sluice.queues.tree import QueueTree

QueueActionKind = Literal["create", "close", "reopen", "delete"]

RESERVED_ORDER = (ROOT_QUEUE, DEFAULT_QUEUE)
"""The reserved queues in the order they are created: a parent before its child."""


def reserved_parent(name: str) -> str | None:
    """The parent a reserved queue is created under: none for root, root for default."""
    return None if name == ROOT_QUEUE else ROOT_QUEUE


def reserved_waits_for(name: str, stored: Container[str]) -> str | None:
    """The queue a missing reserved queue must wait for before it is created: its parent,
    while that is not stored yet. The webhooks refuse a queue whose parent does not exist, so
    default created in the same moment as root may be refused; created after, it is not."""
    parent = reserved_parent(name)
    return parent if parent is not None and parent not in stored else None


@dataclass(frozen=True, slots=True)
class QueueAction:
    """A lifecycle step: create root/default, cascade close/reopen/delete.

    For ``close`` the reason is the name of the ancestor whose close cascades (the operator
    writes it into the closed-by-parent annotation).
    """

    action: QueueActionKind
    queue: str
    reason: str = ""


def _spec_closed(queue: Queue) -> bool:
    return queue.name != ROOT_QUEUE and queue.spec.state == "Closed"


def closed_by(queue: Queue) -> str | None:
    """The ancestor whose close closed this queue, if it was closed that way."""
    value = queue.annotations.get(CLOSED_BY_PARENT_ANNOTATION)
    return value or None


def derive_states(tree: QueueTree, unfinished_jobs: Mapping[str, int]) -> dict[str, QueueState]:
    """status.state of every queue in the tree.

    A queue whose spec is still Open under a Closed ancestor counts as closing: its own close
    is about to be written by the cascade, and it must not look Open meanwhile.
    """
    states: dict[str, QueueState] = {}
    order = sorted(tree.queues, key=lambda n: (-tree.depth(n), n))
    for name in order:
        queue = tree.queues[name]
        closing = _spec_closed(queue) or any(
            a in tree.queues and _spec_closed(tree.queues[a]) for a in tree.ancestors(name)
        )
        if name == ROOT_QUEUE or not closing:
            states[name] = "Open"
            continue
        busy = unfinished_jobs.get(name, 0) > 0 or any(
            states.get(child, "Open") != "Closed" for child in tree.children(name)
        )
        states[name] = "Closing" if busy else "Closed"
    return states


def lifecycle_actions(tree: QueueTree) -> list[QueueAction]:
    """What the operator must write, in the order it must write it."""
    queues = tree.queues
    actions: list[QueueAction] = []
    for reserved in RESERVED_ORDER:
        if reserved not in queues:
            actions.append(QueueAction("create", reserved, f"queue {reserved} is missing"))

    by_depth = sorted(queues, key=lambda n: (tree.depth(n), n))

    # Cascade close: every Open descendant of a queue closed by hand (not itself closed by an
    # ancestor) is closed, naming that queue.
    closing: set[str] = set()
    for name in by_depth:
        queue = queues[name]
        if not _spec_closed(queue) or closed_by(queue) or queue.deletion_timestamp is not None:
            continue
        for child in tree.descendants(name):
            if child in closing or child not in queues:
                continue
            if queues[child].spec.state == "Open":
                closing.add(child)
                actions.append(QueueAction("close", child, name))

    # Reopen, top-down: a queue closed by an ancestor comes back when that ancestor is Open
    # again and nothing between them is still closed by hand.
    reopening: set[str] = set()
    for name in by_depth:
        queue = queues[name]
        closer = closed_by(queue)
        if closer is None or queue.spec.state != "Closed" or queue.deletion_timestamp is not None:
            continue
        closer_queue = queues.get(closer)
        if closer_queue is not None and _spec_closed(closer_queue):
            continue
        if all(
            a not in queues or not _spec_closed(queues[a]) or a in reopening
            for a in tree.ancestors(name)
        ):
            reopening.add(name)
            actions.append(QueueAction("reopen", name, closer))

    # Cascade delete, deepest first, of the subtree of every queue being deleted.
    deleting: set[str] = set()
    for name in by_depth:
        if queues[name].deletion_timestamp is None:
            continue
        for child in reversed(tree.descendants(name)):
            if child in deleting or queues[child].deletion_timestamp is not None:
                continue
            deleting.add(child)
            actions.append(QueueAction("delete", child, f"parent {name} is being deleted"))
    return actions
