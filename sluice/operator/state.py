"""The operator's in-memory view of the cluster, fed by watch events, read by the loop.

Watch handlers only store objects here and wake the loop; the loop writes its own results
back (``remember``) as soon as the API server has accepted them, so the next cycle never acts
on a view older than its own writes. Those writes come from worker threads while watch events
arrive on the event loop, hence the lock and the thread-safe wake-up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sluice.api.config import DEFAULT_CONFIG, SchedulerConfig
from sluice.api.errors import InvalidObject
from sluice.api.queue import Queue
from sluice.api.views import (
    JobView,
    NamespaceView,
    NodeView,
    PodView,
    PriorityClassView,
    job_from_object,
    namespace_from_object,
    node_from_object,
    pod_from_object,
    priority_class_from_object,
)
from sluice.operator.published import Published
from sluice.scheduler.model import Snapshot

log = logging.getLogger("sluice.operator")

Obj = Mapping[str, Any]


def job_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _version(obj: Obj | None) -> int | None:
    """resourceVersions are opaque, but the API server's are integers."""
    try:
        return int(str(((obj or {}).get("metadata") or {}).get("resourceVersion")))
    except (TypeError, ValueError):
        return None


def _newer(current: Obj | None, incoming: Obj) -> bool:
    """Whether an event's object is not older than what is stored (an older event must not
    undo our write)."""
    have, got = _version(current), _version(incoming)
    return have is None or got is None or got >= have


TOMBSTONES = 10_000
"""Deleted objects remembered, so a late answer to our own write cannot bring one back."""


def _same_pod(before: Obj, after: Obj) -> bool:
    return bool(before["view"] == after["view"] and before["error"] == after["error"])


def _gone(obj: Obj) -> bool:
    """A write answered with a deleting object that has no finalizer left: it is gone."""
    meta = obj.get("metadata") or {}
    return meta.get("deletionTimestamp") is not None and not meta.get("finalizers")


@dataclass
class ClusterState:
    queues: dict[str, Obj] = field(default_factory=dict)
    jobs: dict[str, Obj] = field(default_factory=dict)
    nodes: dict[str, Obj] = field(default_factory=dict)
    priority_classes: dict[str, Obj] = field(default_factory=dict)
    namespaces: dict[str, Obj] = field(default_factory=dict)
    pods: dict[str, Obj] = field(default_factory=dict)
    """Every pod, kept as read (``view``), with only the metadata that orders its events."""
    config: SchedulerConfig = DEFAULT_CONFIG
    config_error: str = ""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    bad_objects: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    deleted: dict[str, int] = field(default_factory=dict)  # table/key -> resourceVersion
    loop: asyncio.AbstractEventLoop | None = None
    """The event loop that waits on ``wake``; set by the operator, None in tests."""
    published: Published = field(default_factory=Published)
    """The latest cycle's results, from the scheduling loop to the Queue handlers."""

    def notify(self) -> None:
        """Wake the scheduling loop, from its own thread or from a writer thread."""
        if self.loop is None:
            self.wake.set()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.wake.set()
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.wake.set)

    def _store(
        self,
        table: dict[str, Obj],
        key: str,
        event: str,
        obj: Obj,
        same: Callable[[Obj, Obj], bool] | None = None,
    ) -> None:
        """Keep ``obj`` (or forget it) unless an event already told something newer; wake
        the loop unless ``same`` says the change is nothing it looks at."""
        tomb = f"{id(table)}/{key}"  # tables are per kind, so are their tombstones
        version = _version(obj)
        with self.lock:
            if event == "DELETED" or _gone(obj):
                table.pop(key, None)
                if version is not None:
                    self.deleted[tomb] = version
                    while len(self.deleted) > TOMBSTONES:
                        del self.deleted[next(iter(self.deleted))]
            else:
                current = table.get(key)
                if not _newer(current, obj):
                    return
                buried = self.deleted.get(tomb)
                if buried is not None and version is not None and version <= buried:
                    return  # an answer older than the deletion: the object is gone
                self.deleted.pop(tomb, None)
                table[key] = obj
                if current is not None and same is not None and same(current, obj):
                    return
        self.notify()

    def queue_objects(self) -> list[tuple[str, Obj]]:
        """A copy that stays valid while watch events keep arriving."""
        with self.lock:
            return list(self.queues.items())

    def on_queue(self, event: str, obj: Obj) -> None:
        self._store(self.queues, _name(obj), event, obj)

    def on_job(self, event: str, obj: Obj) -> None:
        self._store(self.jobs, job_key(obj), event, obj)

    def on_node(self, event: str, obj: Obj) -> None:
        self._store(self.nodes, _name(obj), event, obj)

    def on_priority_class(self, event: str, obj: Obj) -> None:
        self._store(self.priority_classes, _name(obj), event, obj)

    def on_namespace(self, event: str, obj: Obj) -> None:
        self._store(self.namespaces, _name(obj), event, obj)

    def on_pod(self, event: str, obj: Obj) -> None:
        """Read once as it arrives (a cluster holds many pods, and a cycle reads them all);
        a change placement does not see (a pod starting to run) does not wake the loop."""
        meta = obj.get("metadata") or {}
        try:
            view: PodView | None = pod_from_object(obj)
            error = ""
        except InvalidObject as err:
            view, error = None, str(err)
        order = {k: meta.get(k) for k in ("resourceVersion", "deletionTimestamp", "finalizers")}
        kept = {"metadata": order, "view": view, "error": error}
        self._store(self.pods, job_key(obj), event, kept, _same_pod)

    def remember_job(self, obj: Obj) -> None:
        """The object the API server returned for our own write."""
        self._store(self.jobs, job_key(obj), "MODIFIED", obj)

    def remember_queue(self, obj: Obj) -> None:
        self._store(self.queues, _name(obj), "MODIFIED", obj)

    def snapshot(self, now: datetime, max_queue_depth: int) -> Snapshot:
        """A Snapshot of the stored objects; unreadable ones are left out and reported."""
        bad: dict[str, str] = {}
        with self.lock:
            queue_objs = list(self.queues.items())
            job_objs = list(self.jobs.items())
            node_objs = list(self.nodes.items())
            class_objs = list(self.priority_classes.items())
            namespace_objs = list(self.namespaces.items())
            pod_objs = list(self.pods.items())
        queues: list[Queue] = []
        for name, obj in queue_objs:
            try:
                queues.append(Queue.from_object(obj))
            except InvalidObject as err:
                bad[f"queue/{name}"] = str(err)
        jobs: list[JobView] = []
        for key, obj in job_objs:
            try:
                view = job_from_object(obj)
            except InvalidObject as err:
                bad[f"job/{key}"] = str(err)
                continue
            if view is not None:
                jobs.append(view)
        nodes: list[NodeView] = []
        for name, obj in node_objs:
            try:
                nodes.append(node_from_object(obj))
            except InvalidObject as err:
                bad[f"node/{name}"] = str(err)
        classes: list[PriorityClassView] = []
        for name, obj in class_objs:
            try:
                classes.append(priority_class_from_object(obj))
            except InvalidObject as err:
                bad[f"priorityclass/{name}"] = str(err)
        namespaces: list[NamespaceView] = []
        for name, obj in namespace_objs:
            try:
                namespaces.append(namespace_from_object(obj))
            except InvalidObject as err:
                bad[f"namespace/{name}"] = str(err)
        pods: list[PodView] = []
        for key, obj in pod_objs:
            if obj["view"] is None:
                bad[f"pod/{key}"] = obj["error"]
            else:
                pods.append(obj["view"])
        for key in set(bad) - set(self.bad_objects):
            log.warning("event=unreadable-object object=%s error=%r", key, bad[key])
        self.bad_objects = bad
        return Snapshot(
            queues=queues,
            jobs=jobs,
            nodes=nodes,
            now=now,
            priority_classes=classes,
            config=self.config,
            max_queue_depth=max_queue_depth,
            namespaces=namespaces,
            pods=pods,
        )
