"""Kopf handlers that run each Queue's lifecycle: cascades, subtree deletion and status.

They run in the Lease holder only (``run.py`` starts this registry when the replica takes the
Lease and stops it when the replica loses it) and write Queues only; the scheduling loop
writes Jobs only. What they share is the cluster state: the queues as watched, and the latest
cycle's results (``state.published``).

- Closing a queue by hand closes its open descendants, each marked with the queue whose close
  closed it; reopening that queue reopens them (the rule: ``sluice.queues.lifecycle``). On
  create, on every change of a spec and on resume, so a new leader repairs what it missed.
- Deleting a queue deletes its subtree first: Kopf's finalizer (``sluice.dev/subtree``) holds
  the queue until no child queue is left.
- Each queue's status follows the cycles: a daemon per queue writes it when a cycle changed
  what a reader would see.
- The reserved queues (root, default) are created whenever they are missing.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import kopf
from kubernetes import client

from sluice.api.constants import (
    CLOSED_BY_PARENT_ANNOTATION,
    GROUP,
    PLURAL,
    QUEUE_FINALIZER,
    RESERVED_QUEUES,
    ROOT_QUEUE,
    VERSION,
)
from sluice.api.errors import InvalidObject
from sluice.api.queue import Queue
from sluice.operator import metrics
from sluice.operator.events import EventSink
from sluice.operator.executor import (
    API_ERRORS,
    MERGE_PATCH,
    WRITERS,
    Failure,
    classify,
    message,
    post_event,
)
from sluice.operator.handlers import configure_settings, connection_info
from sluice.operator.plan import EventSpec
from sluice.operator.state import ClusterState, Obj
from sluice.operator.status import over_capability_event, status_patch
from sluice.queues.lifecycle import QueueAction, lifecycle_actions
from sluice.queues.tree import QueueTree

log = logging.getLogger("sluice.operator.queues")

RETRY_SECONDS = 1.0


def _version(obj: Obj | None) -> object:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


class TreeReader:
    """The queue tree as watched, with the handler's own object as Kopf just delivered it,
    and its lifecycle actions, worked out once per state of the tree: at start-up every queue's
    resume handler asks, and a thousand queues must not mean a thousand walks of the tree."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._last: tuple[tuple[int, ...], QueueTree, list[QueueAction]] | None = None

    def __call__(self, current: Obj | None = None) -> tuple[QueueTree, list[QueueAction]]:
        stored = self.state.queue_views()
        views = {name: view for name, (_, view) in stored.items()}
        if current is not None:
            name = str((current.get("metadata") or {}).get("name"))
            if name not in stored or _version(stored[name][0]) != _version(current):
                try:  # newer than the watch has brought so far
                    views[name] = Queue.from_object(current)
                except InvalidObject:
                    views.pop(name, None)  # the loop reports it; not a queue to cascade to
        key = tuple(id(view) for view in views.values())
        if self._last is None or self._last[0] != key:
            tree = QueueTree(views)
            self._last = (key, tree, lifecycle_actions(tree))
        return self._last[1], self._last[2]


class QueueWriter:
    """The Queue writes, each failure read by the one classifier: what may succeed later is
    retried by Kopf (TemporaryError), a refusal is not (PermanentError)."""

    def __init__(self, api: client.ApiClient, state: ClusterState) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.state = state
        # Their own threads: a thousand queues' statuses after a cycle must not queue ahead
        # of the loop's work (its snapshot, its cycle) in the event loop's shared pool.
        self.pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="sluice-queues")
        core = client.CoreV1Api(api)
        self.events = EventSink(lambda namespace, body: post_event(core, namespace, body))

    async def _call(
        self, what: str, queue: str, call: Any, done: frozenset[Failure] = frozenset({Failure.GONE})
    ) -> Obj | None:
        """``done``: the failures that leave nothing to do (by default, the queue is gone)."""
        try:
            answer = await asyncio.get_running_loop().run_in_executor(self.pool, call)
        except API_ERRORS as err:
            failure = classify(err)
            if failure in done:
                return None
            if failure is Failure.REFUSED:
                raise kopf.PermanentError(
                    f"{what} of queue {queue} refused: {message(err)}"
                ) from err
            raise kopf.TemporaryError(
                f"{what} of queue {queue}: {failure.value} ({message(err)})", delay=RETRY_SECONDS
            ) from err
        metrics.API_WRITES.labels(what).inc()
        return cast(Obj, answer)

    async def patch(self, name: str, body: dict[str, Any], what: str) -> None:
        obj = await self._call(
            what,
            name,
            lambda: self.objects.patch_cluster_custom_object(
                GROUP, VERSION, PLURAL, name, body, _content_type=MERGE_PATCH
            ),
        )
        if obj is not None:
            self.state.remember_queue(obj)

    async def patch_status(self, name: str, status: dict[str, Any]) -> None:
        obj = await self._call(
            "status",
            name,
            lambda: self.objects.patch_cluster_custom_object_status(
                GROUP, VERSION, PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
            ),
        )
        if obj is not None:
            self.state.remember_queue(obj)

    async def create(self, name: str) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {} if name == ROOT_QUEUE else {"parent": ROOT_QUEUE},
        }
        obj = await self._call(
            "create",
            name,
            lambda: self.objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, body),
            done=frozenset({Failure.CONFLICT}),  # it exists already (the previous leader's)
        )
        if obj is not None:
            self.state.remember_queue(obj)
            log.info("event=queue-created queue=%s", name)

    async def delete(self, name: str) -> None:
        await self._call(
            "delete",
            name,
            lambda: self.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name),
        )

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


def cascades_of(actions: list[QueueAction], name: str) -> list[QueueAction]:
    """The closes and reopens that concern one queue: its own (it sits under a queue closed by
    hand, or that queue reopened) and those it causes in its subtree."""
    return [a for a in actions if a.action in ("close", "reopen") and name in (a.queue, a.reason)]


def subtree_deletions(tree: QueueTree, actions: list[QueueAction], name: str) -> list[QueueAction]:
    """The deletions a queue being deleted causes: its descendants, deepest first."""
    below = set(tree.descendants(name))
    return [a for a in actions if a.action == "delete" and a.queue in below]


def build_queue_registry(state: ClusterState, api: client.ApiClient) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    writer = QueueWriter(api, state)
    tree = TreeReader(state)

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_settings(settings)
        # Kopf's own finalizer is the subtree finalizer: a queue stays until its children go.
        settings.persistence.finalizer = QUEUE_FINALIZER

    @kopf.on.startup(registry=registry)
    async def reserved_queues(**_: Any) -> None:
        for action in tree()[1]:
            if action.action == "create":
                await writer.act(action)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(api)

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="cascade-on-resume")
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="cascade-on-create")
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="cascade", field="spec")
    async def cascade(name: str, body: kopf.Body, **_: Any) -> None:
        for action in cascades_of(tree(body)[1], name):
            await writer.act(action)

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry, id="subtree")
    async def delete_subtree(name: str, body: kopf.Body, **_: Any) -> None:
        queues, actions = tree(body)
        for action in subtree_deletions(queues, actions, name):
            await writer.act(action)
        left = [child for child in queues.children(name) if child in state.queues]
        if left:
            raise kopf.TemporaryError(
                f"waiting for its child queues to be deleted: {', '.join(left)}",
                delay=RETRY_SECONDS,
            )

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def reserved_deleted(type: str | None, name: str, **_: Any) -> None:
        if type == "DELETED" and name in RESERVED_QUEUES:
            await writer.create(name)

    @kopf.daemon(GROUP, VERSION, PLURAL, registry=registry, cancellation_timeout=1.0)
    async def status(name: str, **_: Any) -> None:
        seen = 0
        while True:
            seen = await state.published.newer_than(seen)
            published = state.published
            if published.result is None or published.now is None:
                continue
            stored = state.queues.get(name)
            patch = status_patch(stored, name, published.result, published.now)
            if patch is None or stored is None:
                continue
            told = over_capability_event(stored.get("status") or {}, patch)
            try:
                await writer.patch_status(name, patch)
                if told is not None:
                    writer.events.post(stored, EventSpec(*told), "Queue")
            except kopf.TemporaryError as err:
                log.warning("event=status-write-failed queue=%s error=%s", name, err)
            except kopf.PermanentError as err:
                log.warning("event=status-write-refused queue=%s error=%s", name, err)

    return registry
