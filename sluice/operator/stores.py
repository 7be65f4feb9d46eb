"""The store of each kind the operator keeps (``store.py``), with that kind's policy: what
it keeps of an object, and which changes the scheduling loop need not see, or may batch.

A kind added to the state is a store here (a ``Store``, with the overrides its policy
needs) and a field of ``Stores``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sluice.api.constants import CLOSED_BY_PARENT_ANNOTATION, FLAVOR_KIND, TOPOLOGY_KIND
from sluice.api.objects import Obj
from sluice.api.pod_defaults import DefaultsOf, no_defaults
from sluice.api.pod_views import gated
from sluice.api.queue import Queue
from sluice.api.views import PodView, WorkloadView
from sluice.api.workloads.pods import PodMember
from sluice.api.workloads.ray_cluster import RAY_CLUSTER_KIND
from sluice.operator.store import Store
from sluice.operator.stored import Packed, Stored
from sluice.operator.tombstones import Tombstones
from sluice.scheduler.snapshot import WORKLOAD_KINDS, Read, read_members

log = logging.getLogger("sluice.operator")


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


class QueueStore(Store[dict[str, Obj]]):
    """The Queues by name. A change to a Queue's status, finalizers or other annotations
    wakes nothing: each full pass writes every Queue's status."""

    def __init__(self, tombstones: Tombstones) -> None:
        super().__init__("Queue", ("Queue",), {}, tombstones)
        self._views: tuple[int, Mapping[str, Queue]] = (-1, {})

    def unseen(self, key: str, obj: Obj) -> bool:
        was = self.objects.get(key)
        return was is not None and _status_only(was, obj)

    def keep(self, before: Read | None, seen: Read) -> Read:
        """A Queue read again whose spec reads as before keeps the very spec object it had:
        the decision pass compares every queue's spec each pass, by identity first, and each
        full pass writes every Queue's status, which would otherwise bring a new spec to
        compare field by field."""
        was, now = before and before.view, seen.view
        if (
            isinstance(was, Queue)
            and isinstance(now, Queue)
            and was.spec is not now.spec
            and was.spec == now.spec
        ):
            return dataclasses.replace(seen, view=now.model_copy(update={"spec": was.spec}))
        return seen

    def views(self) -> tuple[int, Mapping[str, Queue]]:
        """Each readable queue as read, and ``revision`` they were read at: the same mapping,
        not to be modified, until the revision changes."""
        if self._views[0] != self.revision:
            views = {n: one.view for n, one in self.reads["Queue"].items()}
            queues = {n: view for n, view in views.items() if isinstance(view, Queue)}
            self._views = (self.revision, queues)
        return self._views


CHANGES = 100_000
"""Workload keys the change log holds at most between two decision passes; past that, the
next decision pass takes every workload again."""


class ChangeLog:
    """The keys of the workloads whose read changed since the decision pass last took them,
    in no order that matters; None once more changed than ``CHANGES``."""

    def __init__(self) -> None:
        self._keys: dict[str, None] | None = {}

    def note(self, key: str) -> None:
        keys = self._keys
        if keys is None:
            return
        keys[key] = None
        if len(keys) > CHANGES:
            self._keys = None

    def take(self) -> dict[str, None] | None:
        """The keys noted since the last take (None: too many to list), and a fresh log."""
        keys, self._keys = self._keys, {}
        return keys


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
    which no decision reads. The watch often brings the full pass's reason write before its
    writer thread has the answer (then it is not yet known as the operator's own)."""
    was, now = before and before.view, after.view
    return (
        isinstance(was, WorkloadView)
        and isinstance(now, WorkloadView)
        and dataclasses.replace(was, pending_reason=now.pending_reason) == now
    )


class WorkloadStore(Store[Stored]):
    """Every managed workload, of whatever kind (docs/workloads.md), by namespace/name, kept
    as its JSON text (``stored.py``); its reads are by kind. The answer to the operator's own
    write, and a change that lets no job in and frees nothing, are minor: the cycle that
    wrote counted it."""

    def __init__(self, tombstones: Tombstones) -> None:
        super().__init__("workloads", WORKLOAD_KINDS, Stored(), tombstones)
        self.changes = ChangeLog()
        """What the decision pass has not yet taken (``ClusterState.decision_snapshot``)."""

    def version(self, key: str) -> int | None:
        return self.objects.version(key)  # without parsing the stored text

    def minor(self, before: Read | None, seen: Read, obj: Obj, own: bool) -> bool:
        return own or _job_only_runs(before, seen) or _job_only_explained(before, seen)

    def read_changed(self, key: str) -> None:
        self.changes.note(key)

    def packed_in(self, namespace: str | None) -> list[tuple[str, Packed]]:
        """The stored workloads of one namespace (or all), as packed."""
        objects = self.objects
        return [
            (key, packed)
            for key in objects
            if namespace is None or key.partition("/")[0] == namespace
            if (packed := objects.packed(key)) is not None
        ]

    def read_again(self, kind: str, key: str, packed: Packed, seen: Read) -> None:
        """``packed`` read anew as ``seen``, unless a newer event replaced it meanwhile."""
        if self.objects.packed(key) is packed:
            self.reads[kind][key] = seen
            self.read_changed(key)

    def view(self, key: str) -> WorkloadView | None:
        """The workload of this key as a Snapshot lists it: its one readable view among the
        kinds; None when none, or when several kinds share the name (``build_snapshot``
        leaves them all out)."""
        found: WorkloadView | None = None
        for reads in self.reads.values():
            one = reads.get(key)
            if one is None or one.error or not isinstance(one.view, WorkloadView):
                continue
            if found is not None:
                return None
            found = one.view
        return found


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


class PodStore(Store[dict[str, Obj]]):
    """Every pod, by namespace/name, with only the metadata that orders its events (a cluster
    holds many pods; its view is in ``reads``), and the managed plain pods among them as
    members of their workloads (docs/workloads.md)."""

    def __init__(self, tombstones: Tombstones, defaults_of: DefaultsOf) -> None:
        super().__init__("Pod", ("Pod",), {}, tombstones)
        self.members: dict[str, PodMember] = {}
        self.defaults_of = defaults_of
        """What a namespace's pods' claims count as (``PodDefaultsTable.of``)."""

    def kept(self, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        order = {k: meta.get(k) for k in ("resourceVersion", "deletionTimestamp", "finalizers")}
        return {"metadata": order}

    def minor(self, before: Read | None, seen: Read, obj: Obj, own: bool) -> bool:
        # A pod sluice holds may be admitted at once: none of its changes is minor.
        return not gated(obj.get("spec") or {}) and _pod_only_takes(before, seen)

    def stored(self, key: str, obj: Obj | None) -> None:
        members, unreadable = read_members(
            [(key, obj)] if obj is not None else [], self.defaults_of
        )
        for one in unreadable:
            log.warning("event=unreadable-pod pod=%s error=%r", key, one.error)
        if members:
            self.members[key] = members[0]
        else:
            self.members.pop(key, None)


def _plain(kind: str, tombstones: Tombstones) -> Store[dict[str, Obj]]:
    """The store of a kind whose every change a cycle may look at, by name."""
    return Store(kind, (kind,), {}, tombstones)


@dataclass(frozen=True)
class Stores:
    """The store of each kind, with one set of tombstones among them."""

    queues: QueueStore
    workloads: WorkloadStore
    pods: PodStore
    nodes: Store[dict[str, Obj]]
    priority_classes: Store[dict[str, Obj]]
    topologies: Store[dict[str, Obj]]
    namespaces: Store[dict[str, Obj]]
    device_classes: Store[dict[str, Obj]]
    resource_slices: Store[dict[str, Obj]]
    resource_claims: Store[dict[str, Obj]]
    claim_templates: Store[dict[str, Obj]]
    flavors: Store[dict[str, Obj]]
    ray_clusters: Store[dict[str, Obj]]
    """The RayClusters of managed RayJobs, each read as its sizes (``ClusterSizes``)."""

    @classmethod
    def new(cls, defaults_of: DefaultsOf = no_defaults) -> Stores:
        """``defaults_of``: what each namespace adds to its pods (``PodDefaultsTable.of``)."""
        tombstones = Tombstones()
        return cls(
            queues=QueueStore(tombstones),
            workloads=WorkloadStore(tombstones),
            pods=PodStore(tombstones, defaults_of),
            nodes=_plain("Node", tombstones),
            priority_classes=_plain("PriorityClass", tombstones),
            topologies=_plain(TOPOLOGY_KIND, tombstones),
            namespaces=_plain("Namespace", tombstones),
            device_classes=_plain("DeviceClass", tombstones),
            resource_slices=_plain("ResourceSlice", tombstones),
            resource_claims=_plain("ResourceClaim", tombstones),
            claim_templates=_plain("ResourceClaimTemplate", tombstones),
            flavors=_plain(FLAVOR_KIND, tombstones),
            ray_clusters=_plain(RAY_CLUSTER_KIND, tombstones),
        )

    def __iter__(self) -> Iterator[Store[Any]]:
        """Every store, in the order of the fields."""
        return (getattr(self, one.name) for one in dataclasses.fields(self))

    def of(self, kind: str) -> Store[Any]:
        """The store that holds ``kind``."""
        return next(store for store in self if kind in store.kinds)

    def reads(self) -> dict[str, dict[str, Read]]:
        """Kind -> key -> read, for every kind stored (the stores' own mappings)."""
        return {kind: store.reads[kind] for store in self for kind in store.kinds}
