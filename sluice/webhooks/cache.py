"""What the webhooks know about the cluster: a watch-fed Queue cache, and the few facts that
need the API server (does a queue hold jobs, a namespace's default queue, cluster capacity, a
queue the cache has not seen yet).

Job admission must not wait on the API server, so Queues come from a list-and-watch kept in
memory (``sluice.kube.watch``, in a thread: the kubernetes client is synchronous). A queue
created a moment ago may not have reached the watch yet: a request naming a queue the cache
does not hold reads that one queue from the API server before it is refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from kubernetes import client

from sluice.api.constants import (
    FLAVOR_PLURAL,
    GROUP,
    PLURAL,
    QUEUE_LABEL,
    TOPOLOGY_PLURAL,
    VERSION,
)
from sluice.api.errors import InvalidObject
from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.api.views import (
    NamespaceView,
    namespace_from_object,
    node_from_object,
)
from sluice.api.workloads import Adapter
from sluice.api.workloads.job import JOB
from sluice.kube.errors import API_ERRORS, Failure, classify
from sluice.kube.watch import ListWatch, drain, pages
from sluice.queues.tree import QueueSet

log = logging.getLogger("sluice.webhooks.cache")


class QueueCache:
    """Queues by name. Fed either by a watch (``QueueWatcher``) or directly (tests)."""

    def __init__(self) -> None:
        self._queues = QueueSet({})
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self.broken: dict[str, str] = {}  # queue -> why its stored object could not be read

    @property
    def queues(self) -> Mapping[str, Queue]:
        return self._queues

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def replace(self, objects: Sequence[Mapping[str, Any]]) -> None:
        queues: dict[str, Queue] = {}
        broken: dict[str, str] = {}
        for obj in objects:
            try:
                queue = Queue.from_object(obj)
            except InvalidObject as err:
                broken[err.name] = str(err)
                continue
            queues[queue.name] = queue
        with self._lock:
            self._queues = QueueSet(queues)
            self.broken = broken
        self._synced.set()

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str):
            return
        with self._lock:
            queues = dict(self._queues)
            if event_type == "DELETED":
                queues.pop(name, None)
            else:
                try:
                    queues[name] = Queue.from_object(obj)
                except InvalidObject as err:
                    self.broken[name] = str(err)
                    return
            self.broken.pop(name, None)
            self._queues = QueueSet(queues)  # readers see the old or the new set, never half


class QueueWatcher:
    """The list-and-watch of Queues (``sluice.kube.watch``) into a QueueCache."""

    def __init__(self, api: client.ApiClient, cache: QueueCache, resync_seconds: int = 300):
        objects = client.CustomObjectsApi(api)
        self.watch = ListWatch(
            "queues",
            partial(objects.list_cluster_custom_object, GROUP, VERSION, PLURAL),
            cache.replace,
            cache.apply,
            timeout_seconds=resync_seconds,
        )

    def start(self) -> None:
        self.watch.start()

    def stop(self) -> None:
        self.watch.stop.set()


class ClusterFactsSource(Protocol):
    """The facts the rules need that are not Queues."""

    async def queue_holds_jobs(self, queue: str) -> bool: ...

    async def namespace_default_queue(self, namespace: str) -> str | None: ...

    async def namespace_labels(self, namespace: str) -> Mapping[str, str]: ...

    def cluster_capacity(self) -> Resources | None: ...

    async def topology_levels(self) -> frozenset[str]: ...

    async def flavor_names(self) -> frozenset[str]: ...

    async def stored_queue(self, name: str) -> Mapping[str, Any] | None:
        """The Queue object as the API server holds it now, or None when it holds none."""
        ...

    async def stored_workload(
        self, adapter: Adapter, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        """The workload as the API server holds it now, or None when it holds none."""
        ...


READ_TIMEOUT_SECONDS = 3.0
"""A read the webhooks make during a review: short, for the answer to come within the
webhooks' timeoutSeconds (5 by default)."""


class KubeFacts:
    """ClusterFactsSource backed by the API server, with short caches where staleness is fine."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace_ttl: float = 30.0,
        workloads: Sequence[Adapter] = (),
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.workloads = tuple(workloads)
        """The kinds of workload besides Job that sluice gates: a queue holds those too."""
        self.namespace_ttl = namespace_ttl
        self._namespaces: dict[str, tuple[float, NamespaceView]] = {}
        self._capacity: tuple[float, Resources | None] = (0.0, None)

    async def queue_holds_jobs(self, queue: str) -> bool:
        return await asyncio.to_thread(self._holds_jobs, queue)

    def _holds_jobs(self, queue: str) -> bool:
        """Whether an unfinished workload of any gated kind names the queue."""
        return any(self._holds(adapter, queue) for adapter in (JOB, *self.workloads))

    def _holds(self, adapter: Adapter, queue: str) -> bool:
        lister = partial(
            self.custom.list_cluster_custom_object, adapter.group, adapter.version, adapter.plural
        )
        selector = f"{QUEUE_LABEL}={queue}"
        return any(
            not adapter.finished(item)
            for items, _ in pages(lister, label_selector=selector)
            for item in items
        )

    async def namespace_default_queue(self, namespace: str) -> str | None:
        # Only a default queue found is remembered: remembering its absence would let jobs
        # created just after the namespace is labelled run outside every quota.
        view = await self._namespace(namespace, need=lambda v: v.default_queue is not None)
        return view.default_queue if view is not None else None

    async def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """For queues with a namespaceSelector; a relabelled namespace is seen within the
        cache's time to live (the operator, which watches namespaces, checks again)."""
        view = await self._namespace(namespace, need=lambda v: True)
        return view.labels if view is not None else {}

    async def _namespace(
        self, namespace: str, need: Callable[[NamespaceView], bool]
    ) -> NamespaceView | None:
        now = time.monotonic()
        cached = self._namespaces.get(namespace)
        if cached is not None and now - cached[0] < self.namespace_ttl and need(cached[1]):
            return cached[1]
        view = await asyncio.to_thread(self._read_namespace, namespace)
        if view is not None:
            self._namespaces[namespace] = (now, view)
        return view

    def _read_namespace(self, namespace: str) -> NamespaceView | None:
        try:
            raw: Any = self.core.read_namespace(namespace, _preload_content=False)
        except API_ERRORS as err:
            if classify(err) is Failure.GONE:
                return None
            raise
        return namespace_from_object(json.loads(drain(raw)))

    def cluster_capacity(self) -> Resources | None:
        return self._capacity[1]

    async def stored_queue(self, name: str) -> Mapping[str, Any] | None:
        """Asked only for a queue the watch-fed cache does not hold (``handlers``), so never
        cached: a cache miss is rare, and a cached absence would refuse the queue created a
        moment later."""
        return await asyncio.to_thread(self._read_queue, name)

    def _read_queue(self, name: str) -> Mapping[str, Any] | None:
        try:
            raw: Any = self.custom.get_cluster_custom_object(
                GROUP,
                VERSION,
                PLURAL,
                name,
                _preload_content=False,
                _request_timeout=READ_TIMEOUT_SECONDS,
            )
        except API_ERRORS as err:
            if classify(err) is Failure.GONE:
                return None
            raise
        obj: Mapping[str, Any] = json.loads(drain(raw))
        return obj

    async def stored_workload(
        self, adapter: Adapter, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        """Asked only for a write of a workload's /scale subresource (``handlers``): rare,
        and never cached, as the rules judge the workload as it is."""
        return await asyncio.to_thread(self._read_workload, adapter, namespace, name)

    def _read_workload(
        self, adapter: Adapter, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        try:
            raw: Any = self.custom.get_namespaced_custom_object(
                adapter.group,
                adapter.version,
                namespace,
                adapter.plural,
                name,
                _preload_content=False,
                _request_timeout=READ_TIMEOUT_SECONDS,
            )
        except API_ERRORS as err:
            if classify(err) is Failure.GONE:
                return None
            raise
        obj: Mapping[str, Any] = json.loads(drain(raw))
        return obj

    async def topology_levels(self) -> frozenset[str]:
        """The node labels of every Topology's levels, read when a workload asks one (rare:
        not cached, so a Topology just created or deleted counts at once)."""
        return await asyncio.to_thread(self._topology_levels)

    def _topology_levels(self) -> frozenset[str]:
        raw: Any = self.custom.list_cluster_custom_object(
            GROUP, VERSION, TOPOLOGY_PLURAL, _preload_content=False
        )
        levels: set[str] = set()
        for item in json.loads(raw.data).get("items") or ():
            for level in (item.get("spec") or {}).get("levels") or ():
                if isinstance(level, Mapping) and isinstance(level.get("nodeLabel"), str):
                    levels.add(level["nodeLabel"])
        return frozenset(levels)

    async def flavor_names(self) -> frozenset[str]:
        """The names of every Flavor, read when a queue names some (rare: not cached, so a
        Flavor created just before the queue that names it counts at once)."""
        return await asyncio.to_thread(self._flavor_names)

    def _flavor_names(self) -> frozenset[str]:
        raw: Any = self.custom.list_cluster_custom_object(
            GROUP, VERSION, FLAVOR_PLURAL, _preload_content=False
        )
        items = json.loads(raw.data).get("items") or ()
        return frozenset(str((item.get("metadata") or {}).get("name")) for item in items)

    async def refresh_capacity(self) -> None:
        nodes = await asyncio.to_thread(self.core.list_node)
        total = Resources()
        for item in nodes.items:
            view = node_from_object(self.core.api_client.sanitize_for_serialization(item))
            if view.usable:
                total = total + view.allocatable
        self._capacity = (time.monotonic(), total)
