"""The Lease holder's Queue writes: cascades, subtree deletion, the reserved queues, statuses.

Level-triggered, as a controller reconciles: a queue is due when a watch event names it (or
its child), when this replica takes the Lease (every queue) and when a pass changes what its
status shows; each due queue is reconciled from the tree as watched, so a new leader repairs
whatever it finds, whatever it missed:

- Closing a queue by hand closes its open descendants, each marked with the queue whose close
  closed it; reopening that queue reopens them (the rule: ``sluice.queues.lifecycle``).
- Deleting a queue deletes its subtree first: the finalizer ``sluice.dev/subtree``, put on
  every queue, holds it until no child queue is left.
- A queue's status follows the passes: it is written when a decision pass or a full pass
  changed what a reader sees.
- The reserved queues (root, default) are created whenever they are missing: root first,
  default once root is stored, each retried until it exists (a refusal included: the webhooks
  may refuse default while root is new to them).

These are not Kopf change handlers, daemons or Kopf finalizers: Kopf runs those on every
replica that registers them (it records its progress on the object, adds its finalizer where a
handler needs it and removes it where none does), and only the Lease holder may write. The
scheduling loop writes workloads; these write Queues; they share the cluster state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from sluice.api.constants import (
    CLOSED_BY_PARENT_ANNOTATION,
    GROUP,
    QUEUE_FINALIZER,
    RESERVED_QUEUES,
    ROOT_QUEUE,
    VERSION,
)
from sluice.api.errors import InvalidObject
from sluice.api.objects import Obj
from sluice.api.queue import Queue
from sluice.kube.errors import Failure
from sluice.kube.writer import WRITERS
from sluice.operator.custom_writer import QUEUES, CustomWriter, Retry
from sluice.operator.events import EventSink
from sluice.operator.state import ClusterState
from sluice.operator.status import USAGE_WRITE_SECONDS, over_capability_event, status_patch
from sluice.operator.writes import EventSpec
from sluice.queues.lifecycle import (
    RESERVED_ORDER,
    QueueAction,
    lifecycle_actions,
    reserved_parent,
    reserved_waits_for,
)
from sluice.queues.tree import QueueTree
from sluice.scheduler.model import CycleResult, QueueResult

log = logging.getLogger("sluice.operator.queues")

RETRY_SECONDS = 1.0


def _version(obj: Obj | None) -> object:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


class TreeReader:
    """The queue tree as watched, with the queue being reconciled as last stored, and its
    lifecycle actions, worked out once per state of the tree: after a cycle every queue is
    reconciled, and a thousand queues must not mean a thousand walks of the tree."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._last: tuple[object, QueueTree, list[QueueAction]] | None = None

    def __call__(self, current: Obj | None = None) -> tuple[QueueTree, list[QueueAction]]:
        version, views = self.state.queue_reads()
        key: object = version
        if current is not None:
            name = str((current.get("metadata") or {}).get("name"))
            stored = self.state.queue(name)
            if name not in views or _version(stored) != _version(current):
                try:  # newer than the watch has brought so far
                    mine: Queue | None = Queue.from_object(current)
                except InvalidObject:
                    mine = None  # the loop reports it; not a queue to cascade to
                views = {n: v for n, v in views.items() if n != name}
                if mine is not None:
                    views[name] = mine
                key = (version, tuple(id(view) for view in views.values()))
        if self._last is None or self._last[0] != key:
            tree = QueueTree(dict(views))
            self._last = (key, tree, lifecycle_actions(tree))
        return self._last[1], self._last[2]


class QueueWriter:
    """The Queue writes, through the custom objects' writer (``custom_writer``): a refusal
    is logged and not repeated, but a reserved queue's create, which is retried until the
    queue exists."""

    def __init__(self, custom: CustomWriter) -> None:
        self.custom = custom

    @property
    def events(self) -> EventSink:
        return self.custom.events

    async def patch(self, name: str, body: dict[str, Any], what: str) -> None:
        await self.custom.patch(QUEUES, name, body, what)

    async def patch_status(self, name: str, status: dict[str, Any]) -> None:
        await self.custom.patch_status(QUEUES, name, status)

    async def hold(self, obj: Obj, held: bool) -> None:
        """Put the subtree finalizer on a queue, or take it off; the resourceVersion read
        goes with the list, so no finalizer written meanwhile is lost."""
        meta = obj.get("metadata") or {}
        others = [f for f in meta.get("finalizers") or () if f != QUEUE_FINALIZER]
        finalizers = [*others, QUEUE_FINALIZER] if held else others
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": _version(obj)}}
        await self.patch(str(meta.get("name")), body, "finalizer")

    async def create(self, name: str) -> None:
        """A reserved queue, under its reserved parent. Any failure but "it exists already"
        raises ``Retry``, a refusal included: one may come from a webhook that has not seen
        the parent yet, and the queue must exist in the end."""
        parent = reserved_parent(name)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Queue",
            "metadata": {"name": name, "finalizers": [QUEUE_FINALIZER]},
            "spec": {} if parent is None else {"parent": parent},
        }
        obj = await self.custom.create(
            QUEUES,
            name,
            body,
            done=frozenset({Failure.CONFLICT}),  # it exists already (the previous leader's)
            retry_refused=True,
        )
        if obj is not None:
            log.info("event=queue-created queue=%s", name)

    async def delete(self, name: str) -> None:
        await self.custom.delete(QUEUES, name)

    async def act(self, action: QueueAction) -> None:
        if action.action == "create":
            await self.create(action.queue)
        elif action.action == "delete":
            await self.delete(action.queue)
        elif action.action == "close":
            body = {
                "metadata": {"annotations": {CLOSED_BY_PARENT_ANNOTATION: action.reason}},
                "spec": {"state": "Closed"},
            }
            await self.patch(action.queue, body, "close")
        else:
            body = {
                "metadata": {"annotations": {CLOSED_BY_PARENT_ANNOTATION: None}},
                "spec": {"state": "Open"},
            }
            await self.patch(action.queue, body, "reopen")


def _alike(before: QueueResult | None, after: QueueResult) -> bool:
    """Whether a queue's status shows the same after a pass, its usage aside: the usage
    plugin samples it anew at every pass, and it is written at most every
    USAGE_WRITE_SECONDS (``QueueReconciler.publish``)."""
    if before is None:
        return False
    if before.usage is None and after.usage is None:
        return before == after
    return replace(before, usage=None, usage_key=0.0) == replace(after, usage=None, usage_key=0.0)


def cascades_of(actions: list[QueueAction], name: str) -> list[QueueAction]:
    """The closes and reopens that concern one queue: its own (it sits under a queue closed by
    hand, or that queue reopened) and those it causes in its subtree."""
    return [a for a in actions if a.action in ("close", "reopen") and name in (a.queue, a.reason)]


def subtree_deletions(tree: QueueTree, actions: list[QueueAction], name: str) -> list[QueueAction]:
    """The deletions a queue being deleted causes: its descendants, deepest first."""
    below = set(tree.descendants(name))
    return [a for a in actions if a.action == "delete" and a.queue in below]


class QueueReconciler:
    """Reconciles each due queue (``due``), from the moment this replica holds the Lease."""

    def __init__(
        self, api: client.ApiClient, state: ClusterState, may_write: Callable[[], bool]
    ) -> None:
        self.state = state
        self.writer = QueueWriter(CustomWriter(api, state, may_write))
        self.tree = TreeReader(state)
        self.due: set[str] = set()
        self.wake = asyncio.Event()
        self.cycle: tuple[CycleResult, datetime] | None = None
        """The latest cycle's results, which the statuses show."""
        self.usage_at = datetime.min.replace(tzinfo=UTC)
        """When the queues were last made due for their usage alone (``publish``)."""
        self.retrying: dict[str, str] = {}
        """Why each queue being retried was retried last: a reason is logged once, not every
        ``RETRY_SECONDS``."""

    def enqueue(self, *names: str) -> None:
        self.due.update(name for name in names if name)
        self.wake.set()

    def on_queue(self, obj: Obj) -> None:
        """A watch event: the queue, and its parent (whose subtree it belongs to)."""
        spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
        self.enqueue(str(meta.get("name") or ""), str(spec.get("parent") or ROOT_QUEUE))

    def publish(self, result: CycleResult, now: datetime) -> None:
        """A pass decided (``now``: when its snapshot was taken): the queues whose status it
        changes are due. A result older than the one shown is dropped: a full pass that began
        before the last decision pass must not bring back what that pass already moved on
        from."""
        shown = self.cycle
        if shown is not None and now < shown[1]:
            return
        before = shown[0].queues if shown is not None else {}
        self.cycle = (result, now)
        usage_due = (now - self.usage_at).total_seconds() >= USAGE_WRITE_SECONDS
        if usage_due:
            self.usage_at = now
        self.enqueue(
            *(
                name
                for name, q in result.queues.items()
                if (usage_due and q.usage is not None) or not _alike(before.get(name), q)
            )
        )

    async def run(self) -> None:
        """For as long as the process runs, from when the manager starts it (once the Lease
        is held): a replica that loses the Lease ends."""
        self.enqueue(*RESERVED_QUEUES, *self.state.queue_reads()[1])
        limit = asyncio.Semaphore(WRITERS)
        while True:
            await self.wake.wait()
            self.wake.clear()
            due, self.due = self.due, set()
            await asyncio.gather(*(self._one(name, limit) for name in sorted(due)))

    async def _one(self, name: str, limit: asyncio.Semaphore) -> None:
        async with limit:
            try:
                await self.reconcile(name)
                self.retrying.pop(name, None)
                return
            except Retry as err:
                if self.retrying.get(name) != str(err):
                    log.info("event=queue-retry queue=%s reason=%s", name, err)
                self.retrying[name] = str(err)
            except Exception:  # one queue's failure must not stop the others
                log.exception("event=queue-reconcile-failed queue=%s", name)
        asyncio.get_running_loop().call_later(RETRY_SECONDS, self.enqueue, name)

    async def reconcile(self, name: str) -> None:
        stored = self.state.queue(name)
        if stored is None:
            if name in RESERVED_QUEUES:
                await self.create_reserved(name)
            return
        queues, actions = self.tree(stored)
        meta = stored.get("metadata") or {}
        held = QUEUE_FINALIZER in (meta.get("finalizers") or ())
        if meta.get("deletionTimestamp"):
            for action in subtree_deletions(queues, actions, name):
                await self.writer.act(action)
            left = [c for c in queues.children(name) if self.state.queue(c) is not None]
            if left:
                raise Retry(f"waiting for its child queues to be deleted: {', '.join(left)}")
            if held:
                await self.writer.hold(stored, False)
            return
        if not held:
            await self.writer.hold(stored, True)
        for action in cascades_of(actions, name):
            await self.writer.act(action)
        await self.write_status(name, stored)

    async def create_reserved(self, name: str) -> None:
        """A missing reserved queue, once its parent is stored (``reserved_waits_for``); the
        reserved queues waiting for this one are due at once after it."""
        stored = [q for q in RESERVED_ORDER if self.state.queue(q) is not None]
        parent = reserved_waits_for(name, stored)
        if parent is not None:
            raise Retry(f"created once its parent {parent} is stored")
        await self.writer.create(name)
        self.enqueue(*(q for q in RESERVED_ORDER if reserved_parent(q) == name))

    async def write_status(self, name: str, stored: Obj) -> None:
        if self.cycle is None:
            return
        patch = status_patch(stored, name, *self.cycle)
        if patch is None:
            return
        told = over_capability_event(stored.get("status") or {}, patch)
        await self.writer.patch_status(name, patch)
        if told is not None:
            self.writer.events.post(stored, EventSpec(*told), "Queue")
