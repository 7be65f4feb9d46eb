"""The operator's in-memory view of the cluster, fed by watch events, read by the loop.

Watch handlers store objects here and wake the loop. Each object is read into its view as it
arrives (``sluice.scheduler.snapshot``: one reader per kind) and kept beside the object, in
the store of its kind (``stores.py``: each kind's policy says which changes wake the loop),
so a cycle's Snapshot is a copy of the lists of views, cheap enough to take off the event
loop; views are immutable, so cycles share them; the decision pass does not even copy the
workloads, only those whose read changed since it last looked (``decision_snapshot``). The
loop writes its own results back (``remember_*``) as soon as the API server has accepted
them, so the next cycle never acts on a view older than its own writes. Those writes come
from worker threads while watch events arrive on the event loop (Kopf's) and on the
workloads' and pods' watch threads (``watches.py``), hence the lock and the thread-safe
wake-up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sluice.api.config import DEFAULT_CONFIG, SchedulerConfig
from sluice.api.constants import FLAVOR_KIND, TOPOLOGY_KIND
from sluice.api.device_claims import ResourceClaim, ResourceClaimTemplate
from sluice.api.device_context import device_contexts
from sluice.api.devices import DeviceClass
from sluice.api.errors import InvalidObject
from sluice.api.flavor import FlavorView
from sluice.api.objects import Obj
from sluice.api.pod_defaults import (
    PodDefaultsTable,
    limit_range_from_object,
    runtime_class_from_object,
)
from sluice.api.queue import Queue
from sluice.api.topology import TopologyView
from sluice.api.views import JOB_KIND, NodeView, PodView, WorkloadView
from sluice.api.workloads.model import dig
from sluice.api.workloads.pods import PodMember, PodWorkload
from sluice.api.workloads.ray_cluster import (
    RAY_CLUSTER_KIND,
    ClusterSizes,
    as_its_cluster_asks,
)
from sluice.api.workloads.rayjob import KIND as RAY_JOB_KIND
from sluice.dashboard.domains import ClusterViews
from sluice.operator.echoes import Echoes
from sluice.operator.store import Store, Wake, gone
from sluice.operator.stored import Stored, version_of
from sluice.operator.stores import Stores
from sluice.scheduler.model import Snapshot
from sluice.scheduler.snapshot import (
    KINDS,
    READERS,
    WORKLOAD_KINDS,
    Read,
    Reader,
    build_snapshot,
    plain_pod_workloads,
    read,
)

log = logging.getLogger("sluice.operator")


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _kind(obj: Obj) -> str:
    return str(obj.get("kind") or JOB_KIND)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


_V = TypeVar("_V")


def _read_or_none(
    kind: str, key: str, event: str, obj: Obj, reader: Callable[[Obj], _V]
) -> _V | None:
    """What an object of a kind the readers do not keep reads as; None when it is gone, or
    does not read (logged: it then adds nothing)."""
    if event == "DELETED" or gone(obj):
        return None
    try:
        return reader(obj)
    except InvalidObject as err:
        log.warning("event=unreadable-object object=%s/%s error=%r", kind, key, str(err))
        return None


class ClusterState:
    """Every stored kind (``stores``), how each kind is read (``readers``), and the wake-up
    of the scheduling loop (``wake``, ``urgent``), under one lock."""

    def __init__(
        self,
        *,
        config: SchedulerConfig = DEFAULT_CONFIG,
        loop: asyncio.AbstractEventLoop | None = None,
        readers: Mapping[str, Reader] = READERS,
        echo: Callable[[float], None] = lambda seconds: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lock = threading.Lock()
        self.pod_defaults = PodDefaultsTable()
        """The LimitRanges and RuntimeClasses seen, and what the DRA objects make of each
        namespace's claims: what a namespace adds to a pod's request (docs/workloads.md,
        "The request sluice counts"; docs/scheduler.md, *Devices (DRA)*)."""
        self.stores = Stores.new(self.pod_defaults.of)
        self.reads = self.stores.reads()
        """Kind -> key -> the stored object as read (the stores' own mappings)."""
        self.config = config
        self.config_error = ""
        self.wake = asyncio.Event()
        """Set by any change a cycle looks at."""
        self.urgent = asyncio.Event()
        """Set by a change that may let a job be admitted or must be acted on (a new job,
        room given back, a queue or node changed); the others (a job's pods starting, a pod
        taking room) only update what the next cycle shows, so the loop waits a little to
        batch them."""
        self.urgent_since = float("-inf")
        """When ``urgent`` was last set (monotonic)."""
        self.loop = loop
        """The event loop that waits on ``wake``; set by the operator, None in tests."""
        self.readers = readers
        """How each kind is read: the operator's, with the workload kinds it gates and
        ``pod_defaults.of`` for what namespaces add to their pods."""
        self.echoes = Echoes(self.lock, echo, clock)
        """The operator's own writes to workloads and Queues, timed until the watch brings
        each back (``echo``, ``sluice_watch_echo_seconds``): how far behind the watches run."""
        self.listed_at = float("-inf")
        """When the last listing of everything began (monotonic, ``run.prime``): a replica
        whose listing began after it took the Lease has seen every write of the leader
        before it."""

    @property
    def queues(self) -> dict[str, Obj]:
        """The Queues as stored, by name."""
        return self.stores.queues.objects

    @property
    def workloads(self) -> Stored:
        """Every managed workload as stored, by namespace/name (``stores.WorkloadStore``)."""
        return self.stores.workloads.objects

    def notify(self, urgent: bool = True) -> None:
        """Wake the scheduling loop, from its own thread or from a writer thread."""
        if self.loop is None:
            self._wake(urgent)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._wake(urgent)
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._wake, urgent)

    def _wake(self, urgent: bool) -> None:
        self.wake.set()
        if urgent and not self.urgent.is_set():
            self.urgent.set()
            self.urgent_since = time.monotonic()

    def _put(
        self, store: Store[Any], kind: str, key: str, event: str, obj: Obj, own: bool = False
    ) -> None:
        """An event (or the answer to the operator's own write, ``own``) into its kind's
        store, read before the lock is taken; the loop woken as the store's policy says. A
        deletion always wakes it at once."""
        deleting = event == "DELETED" or gone(obj)
        version = version_of(obj)
        if not deleting and version is not None and store.version(key) == version:
            return  # the same object again (a watch echoing the operator's own write)
        ref = f"{kind.lower()}/{key}"
        seen = None if deleting else read(kind, ref, self._as_asked(kind, obj), self.readers)
        with self.lock:
            if seen is None:
                store.forget(kind, key, version)
                wake = Wake.NOW
            else:
                wake = store.put(kind, key, obj, seen, own)
        if wake is not Wake.NOTHING:
            self.notify(urgent=wake is Wake.NOW)

    def queue_reads(self) -> tuple[int, Mapping[str, Queue]]:
        """Each readable queue as read, and a number that changes whenever one of them changes
        other than in its status, finalizers or other annotations: the same mapping, not to be
        modified, until then (its statuses as they were when it was taken). The queue tree and
        the lifecycle follow from it; after a cycle every queue's status is written, and a
        new tree for each of them would be quadratic in the queues."""
        with self.lock:
            return self.stores.queues.views()

    def on_queue(self, event: str, obj: Obj) -> None:
        name = _name(obj)
        self._put(self.stores.queues, "Queue", name, event, obj)
        self.echoes.seen(f"Queue/{name}", obj)

    def on_workload(self, event: str, obj: Obj) -> None:
        """A workload of any kind (a batch/v1 Job when the object names none)."""
        kind, key = _kind(obj), object_key(obj)
        cluster = self._cluster_of(kind, obj)
        self._put(self.stores.workloads, kind, key, event, obj)
        self.echoes.seen(f"{kind}/{key}", obj)
        if self._cluster_of(kind, obj) is not cluster:  # its cluster changed meanwhile
            self._read_workloads_again(None, {key})

    def on_ray_cluster(self, event: str, obj: Obj) -> None:
        """A RayCluster a managed RayJob may control, stored as its sizes; its RayJob is read
        anew when they change (docs/elastic.md, *Grown through the queue*)."""
        key = object_key(obj)
        reads = self.reads[RAY_CLUSTER_KIND]
        before = reads.get(key)
        self._put(self.stores.ray_clusters, RAY_CLUSTER_KIND, key, event, obj)
        after = reads.get(key)
        if after == before:
            return
        jobs = {
            one.view.job
            for one in (before, after)
            if one is not None and isinstance(one.view, ClusterSizes)
        }
        if jobs:
            self._read_workloads_again(None, jobs)

    def _cluster_of(self, kind: str, obj: Obj) -> Read | None:
        """The stored read of the RayCluster a RayJob's status names (None: none, or not a
        RayJob)."""
        if kind != RAY_JOB_KIND:
            return None
        name = dig(obj, ("status", "rayClusterName"))
        if not name:
            return None
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        return self.reads[RAY_CLUSTER_KIND].get(f"{namespace}/{name}")

    def _as_asked(self, kind: str, obj: Obj) -> Obj:
        """The object as its workload is read: a running RayJob at the worker group sizes of
        the cluster it runs (``as_its_cluster_asks``); any other object as it is."""
        one = self._cluster_of(kind, obj)
        if one is None or not isinstance(one.view, ClusterSizes):
            return obj
        return as_its_cluster_asks(obj, one.view)

    def on_node(self, event: str, obj: Obj) -> None:
        self._put(self.stores.nodes, "Node", _name(obj), event, obj)

    def on_priority_class(self, event: str, obj: Obj) -> None:
        self._put(self.stores.priority_classes, "PriorityClass", _name(obj), event, obj)

    def on_topology(self, event: str, obj: Obj) -> None:
        self._put(self.stores.topologies, TOPOLOGY_KIND, _name(obj), event, obj)

    def on_flavor(self, event: str, obj: Obj) -> None:
        """A Flavor: the nodes that queues' quotas in it are counted against."""
        self._put(self.stores.flavors, FLAVOR_KIND, _name(obj), event, obj)

    def on_namespace(self, event: str, obj: Obj) -> None:
        self._put(self.stores.namespaces, "Namespace", _name(obj), event, obj)

    def on_device_class(self, event: str, obj: Obj) -> None:
        """A DeviceClass: what its devices count as, and which are free, may change."""
        self._put(self.stores.device_classes, "DeviceClass", _name(obj), event, obj)
        self._devices_changed()

    def on_resource_slice(self, event: str, obj: Obj) -> None:
        """A ResourceSlice: the devices of its pool (node room)."""
        self._put(self.stores.resource_slices, "ResourceSlice", _name(obj), event, obj)

    def on_resource_claim(self, event: str, obj: Obj) -> None:
        """A ResourceClaim: what it holds on the nodes; one no template made is what the
        workloads that name it count."""
        self._put(self.stores.resource_claims, "ResourceClaim", object_key(obj), event, obj)
        meta = obj.get("metadata") or {}
        owned = any(
            isinstance(o, Mapping) and o.get("controller")
            for o in meta.get("ownerReferences") or ()
        )
        if not owned:
            self._devices_changed()

    def on_claim_template(self, event: str, obj: Obj) -> None:
        """A ResourceClaimTemplate: what the pods made from it ask."""
        key = object_key(obj)
        self._put(self.stores.claim_templates, "ResourceClaimTemplate", key, event, obj)
        self._devices_changed()

    def set_config(self, config: SchedulerConfig) -> None:
        """A new scheduler configuration; a new device mapping changes what every workload's
        devices count as."""
        mapping = self.config.device_mapping
        self.config = config
        if config.device_mapping != mapping:
            self._devices_changed()

    def _devices_changed(self) -> None:
        """What the DRA objects make of each namespace's pods, worked out anew; the workloads
        of the namespaces where it changed are read again."""
        with self.lock:
            views = {
                kind: [one.view for one in self.reads[kind].values() if one.view is not None]
                for kind in ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim")
            }
            contexts = device_contexts(
                [v for v in views["DeviceClass"] if isinstance(v, DeviceClass)],
                [v for v in views["ResourceClaimTemplate"] if isinstance(v, ResourceClaimTemplate)],
                [v for v in views["ResourceClaim"] if isinstance(v, ResourceClaim)],
                self.config.device_mapping,
            )
            changed = self.pod_defaults.set_devices(contexts)
        if changed is None:
            self._read_workloads_again(None)
        for namespace in changed or ():
            self._read_workloads_again(namespace)

    def on_pod(self, event: str, obj: Obj) -> None:
        """Only the pod's view is kept (a cluster holds many pods); a change placement does
        not see (a pod starting to run) does not wake the loop."""
        self._put(self.stores.pods, "Pod", object_key(obj), event, obj)

    def topology_views(self) -> tuple[list[tuple[Obj, TopologyView]], list[NodeView]]:
        """Each readable Topology as stored and as read, by name, and every node as read."""
        stored = self.stores.topologies.objects
        with self.lock:
            topologies = [
                (stored[name], one.view)
                for name, one in sorted(self.reads[TOPOLOGY_KIND].items())
                if isinstance(one.view, TopologyView) and name in stored
            ]
            nodes = [one.view for one in self.reads["Node"].values()]
        return topologies, [n for n in nodes if isinstance(n, NodeView)]

    def flavor_views(self) -> tuple[list[tuple[Obj, FlavorView]], list[NodeView]]:
        """Each readable Flavor as stored and as read, by name, and every node as read."""
        stored = self.stores.flavors.objects
        with self.lock:
            flavors = [
                (stored[name], one.view)
                for name, one in sorted(self.reads[FLAVOR_KIND].items())
                if isinstance(one.view, FlavorView) and name in stored
            ]
            nodes = [one.view for one in self.reads["Node"].values()]
        return flavors, [n for n in nodes if isinstance(n, NodeView)]

    def cluster_views(self) -> ClusterViews:
        """The Topologies, nodes and pods as read: the dashboard's domain view."""
        with self.lock:
            topologies = [one.view for one in self.reads[TOPOLOGY_KIND].values()]
            nodes = [one.view for one in self.reads["Node"].values()]
            pods = [one.view for one in self.reads["Pod"].values()]
        return ClusterViews(
            [t for t in topologies if isinstance(t, TopologyView)],
            [n for n in nodes if isinstance(n, NodeView)],
            [p for p in pods if isinstance(p, PodView)],
        )

    def on_limit_range(self, event: str, obj: Obj) -> None:
        """A LimitRange: when its namespace's default requests change, the workloads of that
        namespace are read again (their pods will ask differently)."""
        key = object_key(obj)
        view = _read_or_none("limitrange", key, event, obj, limit_range_from_object)
        with self.lock:
            changed = self.pod_defaults.set_limit_range(key, view)
        if changed:
            self._read_workloads_again(key.partition("/")[0])

    def on_runtime_class(self, event: str, obj: Obj) -> None:
        """A RuntimeClass: when its overhead changes, every workload is read again."""
        name = _name(obj)
        view = _read_or_none("runtimeclass", name, event, obj, runtime_class_from_object)
        with self.lock:
            changed = self.pod_defaults.set_runtime_class(name, view)
        if changed:
            self._read_workloads_again(None)

    def _read_workloads_again(
        self, namespace: str | None, keys: Collection[str] | None = None
    ) -> None:
        """Read the stored workloads (of one namespace, or all; only ``keys`` when given)
        anew: what their pods will ask changed while the objects did not."""
        workloads = self.stores.workloads
        with self.lock:
            if keys is None:
                stored = workloads.packed_in(namespace)
            else:
                found = ((key, workloads.objects.packed(key)) for key in keys)
                stored = [(key, packed) for key, packed in found if packed is not None]
        if not stored:
            return
        for key, packed in stored:
            obj = packed.parsed()
            kind = _kind(obj)
            seen = read(kind, f"{kind.lower()}/{key}", self._as_asked(kind, obj), self.readers)
            with self.lock:
                workloads.read_again(kind, key, packed, seen)
        self.notify()

    def remember_workload(self, obj: Obj) -> None:
        """The object the API server returned for our own write."""
        kind, key = _kind(obj), object_key(obj)
        workloads = self.stores.workloads
        self.echoes.sent(f"{kind}/{key}", version_of(obj), lambda: workloads.version(key))
        self._put(workloads, kind, key, "MODIFIED", obj, own=True)

    def remember_queue(self, obj: Obj) -> None:
        name, queues = _name(obj), self.stores.queues
        self.echoes.sent(f"Queue/{name}", version_of(obj), lambda: queues.version(name))
        self._put(queues, "Queue", name, "MODIFIED", obj, own=True)

    def unlisted(self, kind: str, listed: Collection[str], version: int | None) -> list[str]:
        """The keys stored of a kind (a workload kind, or Pod) that a listing at ``version``
        did not hold, though stored at or before it: deleted while no watch was there to
        say so. One stored after the listing is newer than it, and stays."""
        store = self.stores.of(kind)
        with self.lock:
            return [
                key
                for key in store.reads[kind]
                if key not in listed
                if version is None or (store.version(key) or 0) <= version
            ]

    def queue(self, name: str) -> Obj | None:
        with self.lock:
            return self.queues.get(name)

    def snapshot(self, now: datetime, max_queue_depth: int) -> ClusterSnapshot:
        """A Snapshot of the views read as the objects arrived (a copy of the lists, the
        views shared: they are immutable), and what it derives; nothing here changes."""
        with self.lock:
            reads = [one for kind in KINDS for one in self.reads[kind].values()]
            members = list(self.stores.pods.members.values())
        return self._built(reads, members, now, max_queue_depth)

    def _built(
        self, reads: list[Read], members: list[PodMember], now: datetime, max_queue_depth: int
    ) -> ClusterSnapshot:
        # Plain pods join the cycle as the workloads they form (docs/workloads.md).
        pod_workloads, formed = plain_pod_workloads(members)
        built = build_snapshot(
            reads + formed, now, strict=False, config=self.config, max_queue_depth=max_queue_depth
        )
        return ClusterSnapshot(built.snapshot, pod_workloads, built.unreadable)

    def decision_snapshot(
        self, now: datetime, max_queue_depth: int, whole: bool
    ) -> tuple[ClusterSnapshot, dict[str, WorkloadView | None] | None]:
        """What the decision pass decides on: a Snapshot of every kind but the workloads of
        the kinds read from their own objects (those of plain pods are formed anew each
        time), and those workloads' views by key, each one whose read changed since the
        last call (None: it is gone, or left out as ``snapshot`` leaves it out). With
        ``whole``, or when the log overflowed, the Snapshot is ``snapshot``'s, every
        workload in it, and the mapping None. Either way the log starts afresh. What is
        unreadable among the workloads is said by the whole snapshots only."""
        workloads = self.stores.workloads
        with self.lock:
            changed = workloads.changes.take()
            if whole or changed is None:
                reads = [one for kind in KINDS for one in self.reads[kind].values()]
                views = None
            else:
                reads = [
                    one
                    for kind in KINDS
                    if kind not in WORKLOAD_KINDS
                    for one in self.reads[kind].values()
                ]
                views = {key: workloads.view(key) for key in changed}
            members = list(self.stores.pods.members.values())
        return self._built(reads, members, now, max_queue_depth), views

    @property
    def workload_views(self) -> Mapping[str, WorkloadView]:
        """Each stored workload's latest view, as a Snapshot would list it (under the lock)."""
        return LatestViews(self)


class LatestViews(Mapping[str, WorkloadView]):
    """``ClusterState.workload_views``: each lookup takes the lock once."""

    def __init__(self, state: ClusterState) -> None:
        self._lock = state.lock
        self._store = state.stores.workloads

    def __getitem__(self, key: str) -> WorkloadView:
        with self._lock:
            found = self._store.view(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        """The keys that have a view (a stored workload may have none: unreadable, or its
        name shared by several kinds), so that each key iterated is one ``[]`` answers."""
        store = self._store
        with self._lock:
            return iter([key for key in store.objects if store.view(key) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class ClusterSnapshot:
    """What ``ClusterState.snapshot`` returns: the Snapshot a cycle decides on, and what
    the writes of its decisions need beside it."""

    snapshot: Snapshot
    pod_workloads: Mapping[str, PodWorkload]
    """Its workloads of plain pods, by workload key: what decisions about them are written to."""
    unreadable: Mapping[str, str]
    """The objects left out, and why (object -> error)."""
