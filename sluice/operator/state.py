"""The operator's in-memory view of the cluster, fed by watch events, read by the loop.

Watch handlers store objects here and wake the loop. Each object is read into its view as it
arrives (``sluice.scheduler.snapshot``: one reader per kind) and kept beside the object, so a
cycle's Snapshot is a copy of the lists of views, cheap enough to take off the event loop;
views are immutable, so cycles share them; the decision pass does not even copy the
workloads, only those whose read changed since it last looked (``decision_snapshot``). The
loop writes its own results back (``remember``) as soon as the API server has accepted them,
so the next cycle never acts on a view older than its own writes. Those writes come from
worker threads while watch events arrive on the event loop (Kopf's) and on the workloads'
and pods' watch threads (``watches.py``), hence the lock and the thread-safe wake-up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from sluice.api.config import DEFAULT_CONFIG, SchedulerConfig
from sluice.api.constants import CLOSED_BY_PARENT_ANNOTATION, TOPOLOGY_KIND
from sluice.api.errors import InvalidObject
from sluice.api.objects import Obj
from sluice.api.pod_defaults import (
    PodDefaultsTable,
    limit_range_from_object,
    runtime_class_from_object,
)
from sluice.api.pod_views import gated
from sluice.api.queue import Queue
from sluice.api.topology import TopologyView
from sluice.api.views import JOB_KIND, NodeView, PodView, WorkloadView
from sluice.api.workloads.pods import PodMember, PodWorkload
from sluice.dashboard.domains import ClusterViews
from sluice.operator.stored import Stored, version_of
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
    read_members,
)

log = logging.getLogger("sluice.operator")


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _kind(obj: Obj) -> str:
    return str(obj.get("kind") or JOB_KIND)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


Table = dict[str, Obj] | Stored


def _newer(have: int | None, incoming: Obj) -> bool:
    """Whether an event's object is not older than what is stored (its resourceVersion,
    ``have``): an older event must not undo our write."""
    got = version_of(incoming)
    return have is None or got is None or got >= have


def _stored_version(table: Table, key: str) -> int | None:
    return table.version(key) if isinstance(table, Stored) else version_of(table.get(key))


def _status_only(before: Obj, after: Obj) -> bool:
    """A Queue change no cycle looks at: its status (written from the cycles' results), its
    finalizers or other annotations, while its spec, labels, deletion and the queue that
    closed it stay as they were."""
    was, now = before.get("metadata") or {}, after.get("metadata") or {}
    closer = CLOSED_BY_PARENT_ANNOTATION
    return (
        before.get("spec") == after.get("spec")
        and was.get("labels") == now.get("labels")
        and was.get("deletionTimestamp") == now.get("deletionTimestamp")
        and (was.get("annotations") or {}).get(closer) == (now.get("annotations") or {}).get(closer)
    )


def _job_only_runs(before: Read | None, after: Read) -> bool:
    """An admitted job whose pods started (or stopped) running, and nothing else changed:
    what a Queue's status shows, never a reason to admit or evict anything."""
    was, now = before and before.view, after.view
    return (
        isinstance(was, WorkloadView)
        and isinstance(now, WorkloadView)
        and was.phase.admitted
        and now.phase.admitted
        and dataclasses.replace(was, phase=now.phase) == now
    )


def _job_only_explained(before: Read | None, after: Read) -> bool:
    """A workload whose pending reason changed, and nothing else: sluice's own annotation,
    which no decision reads. The watch often brings the full pass's reason write before
    its writer thread has the answer (then it is not yet known as the operator's own), and
    each of 40,000 such events woke a decision pass."""
    was, now = before and before.view, after.view
    return (
        isinstance(was, WorkloadView)
        and isinstance(now, WorkloadView)
        and dataclasses.replace(was, pending_reason=now.pending_reason) == now
    )


def _job_decides_nothing(before: Read | None, after: Read) -> bool:
    """What a change to a workload that lets no job in and frees nothing looks like."""
    return _job_only_runs(before, after) or _job_only_explained(before, after)


def _pod_only_takes(before: Read | None, after: Read) -> bool:
    """A pod that takes room (created, bound to a node) and frees none: no waiting job can
    fit because of it, whoever owns it."""
    now = after.view
    if not isinstance(now, PodView) or now.finished or now.terminating:
        return False
    if before is None:
        return True
    was = before.view
    return (
        isinstance(was, PodView)
        and not was.finished
        and not was.terminating
        and was.request == now.request
        and was.node in (None, now.node)
    )


def _same_spec_kept(before: Read | None, after: Read) -> Read:
    """A Queue read again whose spec reads as before keeps the very spec object it had: the
    decision pass compares every queue's spec each pass, by identity first, and each full
    pass writes every Queue's status (10,000 specs compared field by field a pass, two
    fifths of a decision pass at that size, when each status write brought a new spec)."""
    was, now = before and before.view, after.view
    if (
        isinstance(was, Queue)
        and isinstance(now, Queue)
        and was.spec is not now.spec
        and was.spec == now.spec
    ):
        return dataclasses.replace(after, view=now.model_copy(update={"spec": was.spec}))
    return after


def _own_write(before: Read | None, after: Read) -> bool:
    """The answer to the operator's own write: the cycle that made it has counted it."""
    return True


CHANGES = 100_000
"""Workload keys the change log holds at most between two decision passes (``changed``);
past that, the next decision pass takes every workload again."""

TOMBSTONES = 10_000
"""Deleted objects remembered, so a late answer to our own write cannot bring one back."""

ECHOES = 10_000
"""The most of the operator's own writes awaited on the watches at once (the oldest is
forgotten first)."""


def _bare(obj: Obj) -> Obj:
    """The object without ``metadata.managedFields``: the API server's record of which client
    wrote which field, which nothing here reads or writes, and about half of what a stored
    Job takes in memory (every writer of the object adds to it)."""
    meta = obj.get("metadata")
    if not meta or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _gone(obj: Obj) -> bool:
    """A write answered with a deleting object that has no finalizer left: it is gone."""
    meta = obj.get("metadata") or {}
    return meta.get("deletionTimestamp") is not None and not meta.get("finalizers")


_V = TypeVar("_V")


def _read_or_none(
    kind: str, key: str, event: str, obj: Obj, reader: Callable[[Obj], _V]
) -> _V | None:
    """What an object of a kind the readers do not keep reads as; None when it is gone, or
    does not read (logged: it then adds nothing)."""
    if event == "DELETED" or _gone(obj):
        return None
    try:
        return reader(obj)
    except InvalidObject as err:
        log.warning("event=unreadable-object object=%s/%s error=%r", kind, key, str(err))
        return None


@dataclass
class ClusterState:
    queues: dict[str, Obj] = field(default_factory=dict)
    workloads: Stored = field(default_factory=Stored)
    """Every managed workload, of whatever kind (docs/workloads.md), by namespace/name, kept
    as its JSON text (``stored.py``): what the passes read of it is its view in ``reads``."""
    nodes: dict[str, Obj] = field(default_factory=dict)
    priority_classes: dict[str, Obj] = field(default_factory=dict)
    topologies: dict[str, Obj] = field(default_factory=dict)
    namespaces: dict[str, Obj] = field(default_factory=dict)
    pods: dict[str, Obj] = field(default_factory=dict)
    """Every pod, with only the metadata that orders its events (its view is in ``reads``)."""
    reads: dict[str, dict[str, Read]] = field(default_factory=lambda: {k: {} for k in KINDS})
    """Kind -> key -> the stored object as read, kept beside the object itself."""
    config: SchedulerConfig = DEFAULT_CONFIG
    config_error: str = ""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by any change a cycle looks at."""
    urgent: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by a change that may let a job be admitted or must be acted on (a new job, room
    given back, a queue or node changed); the others (a job's pods starting, a pod taking
    room) only update what the next cycle shows, so the loop waits a little to batch them."""
    urgent_since: float = float("-inf")
    """When ``urgent`` was last set (monotonic)."""
    read_versions: dict[str, int] = field(default_factory=dict)
    """Kind -> how many times one of its reads changed other than as ``unseen`` allows (for
    a Queue: other than in its status, finalizers or other annotations): ``queue_reads``."""
    _queue_reads: tuple[int, Mapping[str, Queue]] = (-1, {})
    lock: threading.Lock = field(default_factory=threading.Lock)
    deleted: dict[str, int] = field(default_factory=dict)  # table/key -> resourceVersion
    loop: asyncio.AbstractEventLoop | None = None
    """The event loop that waits on ``wake``; set by the operator, None in tests."""
    pod_members: dict[str, PodMember] = field(default_factory=dict)
    """Managed plain pods (docs/workloads.md), by pod key, read as their events arrive."""
    readers: Mapping[str, Reader] = field(default_factory=lambda: READERS)
    """How each kind is read: the operator's, with the workload kinds it gates and
    ``pod_defaults.of`` for what namespaces add to their pods."""
    pod_defaults: PodDefaultsTable = field(default_factory=PodDefaultsTable)
    """The LimitRanges and RuntimeClasses seen: what each namespace adds to a pod's request
    (docs/workloads.md, "The request sluice counts")."""
    echo: Callable[[float], None] = lambda seconds: None
    """Told, for each of the operator's own writes to a workload or Queue, how long the watch
    took to bring it back (``sluice_watch_echo_seconds``): how far behind the watches run."""
    clock: Callable[[], float] = time.monotonic
    """What ``echo``'s times are measured by."""
    awaited: dict[str, tuple[int, float]] = field(default_factory=dict)
    """kind/key -> the resourceVersion of the operator's last write to it and when it landed
    (monotonic), until the watch brings that version or a newer one."""
    listed_at: float = float("-inf")
    """When the last listing of everything began (monotonic, ``run.prime``): a replica whose
    listing began after it took the Lease has seen every write of the leader before it."""
    changed: dict[str, None] | None = field(default_factory=dict)
    """The keys of the workloads whose read changed since the decision pass last took them
    (``decision_snapshot``), in no order that matters; None when more changed than
    ``CHANGES``: the next decision pass then takes every workload."""

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

    def _store(
        self,
        kind: str,
        table: Table,
        key: str,
        event: str,
        obj: Obj,
        kept: Obj | None = None,
        unseen: Callable[[Obj, Obj], bool] | None = None,
        minor: Callable[[Read | None, Read], bool] | None = None,
        also: Callable[[str, Obj | None], None] | None = None,
        keep: Callable[[Read | None, Read], Read] | None = None,
    ) -> None:
        """Keep ``kept`` (the object itself, bare, unless told) and how ``obj`` reads, or forget
        them, unless an event already told something newer; wake the loop unless the object
        reads as it did, or ``unseen(before, after)`` says the change is nothing a cycle
        looks at. The wake is urgent unless ``minor(read before, read now)`` says the change
        cannot let a job in. ``also(key, obj or None)``, under the lock, keeps what else is
        read of an object stored (None: forgotten). ``keep(read before, read now)`` gives
        the read to store, which may share parts of the one before."""
        tomb = f"{id(table)}/{key}"  # tables are per kind, so are their tombstones
        version = version_of(obj)
        reads = self.reads[kind]
        deleting = event == "DELETED" or _gone(obj)
        if not deleting and version is not None and _stored_version(table, key) == version:
            return  # the same object again (a watch echoing the operator's own write)
        seen = None if deleting else read(kind, f"{kind.lower()}/{key}", obj, self.readers)
        with self.lock:
            if seen is None:
                if key in table:
                    del table[key]
                if reads.pop(key, None) is not None:
                    self.read_versions[kind] = self.read_versions.get(kind, 0) + 1
                    self._log(kind, key)
                if also is not None:
                    also(key, None)
                if version is not None:
                    self.deleted[tomb] = version
                    while len(self.deleted) > TOMBSTONES:
                        del self.deleted[next(iter(self.deleted))]
            else:
                if not _newer(_stored_version(table, key), obj):
                    return
                buried = self.deleted.get(tomb)
                if buried is not None and version is not None and version <= buried:
                    return  # an answer older than the deletion: the object is gone
                self.deleted.pop(tomb, None)
                current = table.get(key) if unseen is not None else None
                table[key] = _bare(obj) if kept is None else kept
                before = reads.get(key)
                if keep is not None:
                    seen = keep(before, seen)
                reads[key] = seen
                if also is not None:
                    also(key, obj)
                if before == seen:
                    return
                self._log(kind, key)
                if unseen is not None and current is not None and unseen(current, obj):
                    return
                self.read_versions[kind] = self.read_versions.get(kind, 0) + 1
                if minor is not None and minor(before, seen):
                    self.notify(urgent=False)
                    return
        self.notify()

    def _log(self, kind: str, key: str) -> None:
        """Note that a workload's read changed (the lock is held)."""
        changed = self.changed
        if kind not in WORKLOAD_KINDS or changed is None:
            return
        changed[key] = None
        if len(changed) > CHANGES:
            self.changed = None

    def queue_reads(self) -> tuple[int, Mapping[str, Queue]]:
        """Each readable queue as read, and a number that changes whenever one of them changes
        other than in its status, finalizers or other annotations: the same mapping, not to be
        modified, until then (its statuses as they were when it was taken). The queue tree and
        the lifecycle follow from it; after a cycle every queue's status is written, and a
        new tree for each of them would be quadratic in the queues."""
        with self.lock:
            version = self.read_versions.get("Queue", 0)
            if self._queue_reads[0] != version:
                views = {n: one.view for n, one in self.reads["Queue"].items()}
                self._queue_reads = (
                    version,
                    {n: view for n, view in views.items() if isinstance(view, Queue)},
                )
            return self._queue_reads

    def on_queue(self, event: str, obj: Obj) -> None:
        self._store_queue(event, obj)
        self._echoed("Queue", _name(obj), obj)

    def _store_queue(self, event: str, obj: Obj) -> None:
        """A Queue, from its watch or from the answer to a write."""
        self._store(
            "Queue", self.queues, _name(obj), event, obj, unseen=_status_only, keep=_same_spec_kept
        )

    def on_workload(self, event: str, obj: Obj) -> None:
        """A workload of any kind (a batch/v1 Job when the object names none)."""
        kind, key = _kind(obj), object_key(obj)
        self._store(kind, self.workloads, key, event, obj, minor=_job_decides_nothing)
        self._echoed(kind, key, obj)

    def _await(self, kind: str, table: Table, key: str, obj: Obj) -> None:
        """The operator wrote this object: note when, to time its way back on the watch.
        Called before the answer is stored, and a watch event is stored before it is
        timed (``_echoed``): so a watch that brought the write back before its answer was
        stored (the watches run on threads of their own) is told here, as no wait."""
        version = version_of(obj)
        if version is None:
            return
        at = f"{kind}/{key}"
        with self.lock:
            back = (_stored_version(table, key) or 0) >= version
            if not back:
                self.awaited.pop(at, None)  # re-inserted last: the oldest stay first
                self.awaited[at] = (version, self.clock())
                while len(self.awaited) > ECHOES:
                    del self.awaited[next(iter(self.awaited))]
        if back:
            self.echo(0.0)

    def _echoed(self, kind: str, key: str, obj: Obj) -> None:
        """A watch event: when it brings back (or passes) the operator's last write to the
        object, tell ``echo`` how long that took."""
        at = f"{kind}/{key}"
        if self.awaited.get(at) is None:  # most events: no lock taken (the watch waits on it)
            return
        version = version_of(obj)
        with self.lock:
            waited = self.awaited.get(at)
            if waited is None or version is None or version < waited[0]:
                return
            del self.awaited[at]
        self.echo(self.clock() - waited[1])

    def on_node(self, event: str, obj: Obj) -> None:
        self._store("Node", self.nodes, _name(obj), event, obj)

    def on_priority_class(self, event: str, obj: Obj) -> None:
        self._store("PriorityClass", self.priority_classes, _name(obj), event, obj)

    def on_topology(self, event: str, obj: Obj) -> None:
        self._store(TOPOLOGY_KIND, self.topologies, _name(obj), event, obj)

    def topology_views(self) -> tuple[list[tuple[Obj, TopologyView]], list[NodeView]]:
        """Each readable Topology as stored and as read, by name, and every node as read."""
        with self.lock:
            topologies = [
                (self.topologies[name], one.view)
                for name, one in sorted(self.reads[TOPOLOGY_KIND].items())
                if isinstance(one.view, TopologyView) and name in self.topologies
            ]
            nodes = [one.view for one in self.reads["Node"].values()]
        return topologies, [n for n in nodes if isinstance(n, NodeView)]

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

    def on_namespace(self, event: str, obj: Obj) -> None:
        self._store("Namespace", self.namespaces, _name(obj), event, obj)

    def on_pod(self, event: str, obj: Obj) -> None:
        """Only the pod's view is kept (a cluster holds many pods); a change placement does
        not see (a pod starting to run) does not wake the loop."""
        meta = obj.get("metadata") or {}
        order = {k: meta.get(k) for k in ("resourceVersion", "deletionTimestamp", "finalizers")}
        self._store(
            "Pod",
            self.pods,
            object_key(obj),
            event,
            obj,
            {"metadata": order},
            # A pod sluice holds may be admitted at once: none of its changes is minor.
            minor=None if gated(obj.get("spec") or {}) else _pod_only_takes,
            also=self._member,
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

    def _read_workloads_again(self, namespace: str | None) -> None:
        """Read the stored workloads (of one namespace, or all) anew: what their pods will ask
        changed while the objects did not."""
        workloads = self.workloads
        with self.lock:
            stored = [
                (key, kept)
                for key in workloads
                if namespace is None or key.partition("/")[0] == namespace
                if (kept := workloads.packed(key)) is not None
            ]
        if not stored:
            return
        for key, kept in stored:
            obj = kept.parsed()
            kind = _kind(obj)
            seen = read(kind, f"{kind.lower()}/{key}", obj, self.readers)
            with self.lock:
                if workloads.packed(key) is kept:  # unless a newer event replaced it meanwhile
                    self.reads[kind][key] = seen
                    self._log(kind, key)
        self.notify()

    def _member(self, key: str, obj: Obj | None) -> None:
        """A managed plain pod as a member of its workload (the lock is held)."""
        members, unreadable = read_members([(key, obj)] if obj is not None else [])
        for one in unreadable:
            log.warning("event=unreadable-pod pod=%s error=%r", key, one.error)
        if members:
            self.pod_members[key] = members[0]
        else:
            self.pod_members.pop(key, None)

    def remember_workload(self, obj: Obj) -> None:
        """The object the API server returned for our own write."""
        kind, key = _kind(obj), object_key(obj)
        self._await(kind, self.workloads, key, obj)
        self._store(kind, self.workloads, key, "MODIFIED", obj, minor=_own_write)

    def remember_queue(self, obj: Obj) -> None:
        self._await("Queue", self.queues, _name(obj), obj)
        self._store_queue("MODIFIED", obj)

    def unlisted(self, kind: str, listed: Collection[str], version: int | None) -> list[str]:
        """The keys stored of a kind (a workload kind, or Pod) that a listing at ``version``
        did not hold, though stored at or before it: deleted while no watch was there to
        say so. One stored after the listing is newer than it, and stays."""
        table: Table = self.pods if kind == "Pod" else self.workloads
        with self.lock:
            return [
                key
                for key in self.reads[kind]
                if key not in listed
                if version is None or (_stored_version(table, key) or 0) <= version
            ]

    def queue(self, name: str) -> Obj | None:
        with self.lock:
            return self.queues.get(name)

    def snapshot(self, now: datetime, max_queue_depth: int) -> Taken:
        """A Snapshot of the views read as the objects arrived (a copy of the lists, the
        views shared: they are immutable), and what it derives; nothing here changes."""
        with self.lock:
            reads = [one for kind in KINDS for one in self.reads[kind].values()]
            members = list(self.pod_members.values())
        return self._built(reads, members, now, max_queue_depth)

    def _built(
        self, reads: list[Read], members: list[PodMember], now: datetime, max_queue_depth: int
    ) -> Taken:
        # Plain pods join the cycle as the workloads they form (docs/workloads.md).
        pod_workloads, formed = plain_pod_workloads(members)
        built = build_snapshot(
            reads + formed, now, strict=False, config=self.config, max_queue_depth=max_queue_depth
        )
        return Taken(built.snapshot, pod_workloads, built.unreadable)

    def decision_snapshot(
        self, now: datetime, max_queue_depth: int, whole: bool
    ) -> tuple[Taken, dict[str, WorkloadView | None] | None]:
        """What the decision pass decides on: a Snapshot of every kind but the workloads of
        the kinds read from their own objects (those of plain pods are formed anew each
        time), and those workloads' views by key, each one whose read changed since the
        last call (None: it is gone, or left out as ``snapshot`` leaves it out). With
        ``whole``, or when the log overflowed, the Snapshot is ``snapshot``'s, every
        workload in it, and the mapping None. Either way the log starts afresh. What is
        unreadable among the workloads is said by the whole snapshots only."""
        with self.lock:
            changed, self.changed = self.changed, {}
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
                views = {key: self._workload(key) for key in changed}
            members = list(self.pod_members.values())
        return self._built(reads, members, now, max_queue_depth), views

    @property
    def workload_views(self) -> Mapping[str, WorkloadView]:
        """Each stored workload's latest view, as ``_workload`` finds it (under the lock)."""
        return LatestViews(self)

    def _workload(self, key: str) -> WorkloadView | None:
        """The workload of this key as ``snapshot`` would list it (the lock is held): its one
        readable view among the kinds; None when none, or when several kinds share the name
        (``build_snapshot`` leaves them all out)."""
        found: WorkloadView | None = None
        for kind in WORKLOAD_KINDS:
            one = self.reads[kind].get(key)
            if one is None or one.error or not isinstance(one.view, WorkloadView):
                continue
            if found is not None:
                return None
            found = one.view
        return found


class LatestViews(Mapping[str, WorkloadView]):
    """``ClusterState.workload_views``: each lookup takes the lock once."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    def __getitem__(self, key: str) -> WorkloadView:
        state = self._state
        with state.lock:
            found = state._workload(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        """The keys that have a view (a stored workload may have none: unreadable, or its
        name shared by several kinds), so that each key iterated is one ``[]`` answers."""
        state = self._state
        with state.lock:
            return iter([key for key in state.workloads if state._workload(key) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class Taken:
    """What ``ClusterState.snapshot`` returns."""

    snapshot: Snapshot
    pod_workloads: Mapping[str, PodWorkload]
    """Its workloads of plain pods, by workload key: what decisions about them are written to."""
    unreadable: Mapping[str, str]
    """The objects left out, and why (object -> error)."""
