"""The operator's in-memory view of the cluster, fed by watch events, read by the loop.

Watch handlers only store objects here and wake the loop; the loop writes its own results
back (``remember``) as soon as the API server has accepted them, so the next cycle never acts
on a view older than its own writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sluice.api.config import DEFAULT_CONFIG, SchedulerConfig
from sluice.api.errors import InvalidObject
from sluice.api.queue import Queue
from sluice.api.views import (
    JobView,
    NodeView,
    PriorityClassView,
    job_from_object,
    node_from_object,
    priority_class_from_object,
)
from sluice.scheduler.model import Snapshot

log = logging.getLogger("sluice.operator")

Obj = Mapping[str, Any]


def job_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _newer(current: Obj | None, incoming: Obj) -> bool:
    """Whether an event's object is not older than what is stored (resourceVersions are
    opaque, but the API server's are integers; an older event must not undo our write)."""
    if current is None:
        return True
    try:
        have = int((current.get("metadata") or {}).get("resourceVersion", 0))
        got = int((incoming.get("metadata") or {}).get("resourceVersion", 0))
    except (TypeError, ValueError):
        return True
    return got >= have


@dataclass
class ClusterState:
    queues: dict[str, Obj] = field(default_factory=dict)
    jobs: dict[str, Obj] = field(default_factory=dict)
    nodes: dict[str, Obj] = field(default_factory=dict)
    priority_classes: dict[str, Obj] = field(default_factory=dict)
    config: SchedulerConfig = DEFAULT_CONFIG
    config_error: str = ""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    bad_objects: dict[str, str] = field(default_factory=dict)

    def _store(self, table: dict[str, Obj], key: str, event: str, obj: Obj) -> None:
        if event == "DELETED":
            table.pop(key, None)
        elif _newer(table.get(key), obj):
            table[key] = obj
        self.wake.set()

    def on_queue(self, event: str, obj: Obj) -> None:
        self._store(self.queues, _name(obj), event, obj)

    def on_job(self, event: str, obj: Obj) -> None:
        self._store(self.jobs, job_key(obj), event, obj)

    def on_node(self, event: str, obj: Obj) -> None:
        self._store(self.nodes, _name(obj), event, obj)

    def on_priority_class(self, event: str, obj: Obj) -> None:
        self._store(self.priority_classes, _name(obj), event, obj)

    def remember_job(self, obj: Obj) -> None:
        """The object the API server returned for our own write."""
        self._store(self.jobs, job_key(obj), "MODIFIED", obj)

    def remember_queue(self, obj: Obj) -> None:
        self._store(self.queues, _name(obj), "MODIFIED", obj)

    def snapshot(self, now: datetime, max_queue_depth: int) -> Snapshot:
        """A Snapshot of the stored objects; unreadable ones are left out and reported."""
        bad: dict[str, str] = {}
        queues: list[Queue] = []
        for name, obj in self.queues.items():
            try:
                queues.append(Queue.from_object(obj))
            except InvalidObject as err:
                bad[f"queue/{name}"] = str(err)
        jobs: list[JobView] = []
        for key, obj in self.jobs.items():
            try:
                view = job_from_object(obj)
            except InvalidObject as err:
                bad[f"job/{key}"] = str(err)
                continue
            if view is not None:
                jobs.append(view)
        nodes: list[NodeView] = []
        for name, obj in self.nodes.items():
            try:
                nodes.append(node_from_object(obj))
            except InvalidObject as err:
                bad[f"node/{name}"] = str(err)
        classes: list[PriorityClassView] = []
        for name, obj in self.priority_classes.items():
            try:
                classes.append(priority_class_from_object(obj))
            except InvalidObject as err:
                bad[f"priorityclass/{name}"] = str(err)
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
        )
