"""From Kubernetes objects to a Snapshot: how each kind becomes a view, and what becomes of an
object that cannot be read.

The operator reads each object once, as its watch event arrives, and builds every cycle's
Snapshot from the reads it keeps; ``sluice simulate`` reads a dump's objects and builds one.
Both read through ``readers``, form the workloads of plain pods through
``plain_pod_workloads``, and build through ``build_snapshot``. They differ only in the
policy for an unreadable object: in a file it is an error naming it (strict), on a live
cluster it is left out and reported (tolerant), so one bad object does not stop every queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from sluice.api.config import DEFAULT_CONFIG, SchedulerConfig
from sluice.api.constants import DEFAULT_MAX_QUEUE_DEPTH, FLAVOR_KIND, TOPOLOGY_KIND
from sluice.api.device_claims import (
    ResourceClaim,
    ResourceClaimTemplate,
    read_claim_template,
    read_resource_claim,
)
from sluice.api.devices import DeviceClass, ResourceSlice, read_device_class, read_resource_slice
from sluice.api.errors import InvalidObject
from sluice.api.flavor import FlavorView, flavor_from_object
from sluice.api.pod_defaults import DefaultsOf, no_defaults
from sluice.api.pod_views import pod_from_object
from sluice.api.queue import Queue
from sluice.api.topology import TopologyView, topology_from_object
from sluice.api.views import (
    JOB_KIND,
    NamespaceView,
    NodeView,
    PodView,
    PriorityClassView,
    WorkloadView,
    namespace_from_object,
    node_from_object,
    priority_class_from_object,
)
from sluice.api.workloads import ADAPTERS, POD_LABELS, controlled_by
from sluice.api.workloads.pods import PodMember, PodWorkload, pod_member, pod_workloads
from sluice.api.workloads.ray_cluster import RAY_CLUSTER_KIND, ClusterSizes, cluster_sizes
from sluice.scheduler.device_nodes import DeviceObjects, with_devices
from sluice.scheduler.model import Snapshot

View = (
    Queue
    | WorkloadView
    | NodeView
    | PodView
    | PriorityClassView
    | NamespaceView
    | TopologyView
    | DeviceClass
    | ResourceSlice
    | ResourceClaim
    | ResourceClaimTemplate
    | FlavorView
    | ClusterSizes
)
Reader = Callable[[Mapping[str, Any]], View | None]

WORKLOAD_KINDS = tuple(adapter.kind for adapter in ADAPTERS)
"""The kinds of workload a Snapshot's jobs are read from (docs/workloads.md), Job first."""
OTHER_WORKLOAD_KINDS = frozenset(WORKLOAD_KINDS) - {JOB_KIND}
PLAIN_PODS = "PlainPods"
"""The kind of the reads of workloads formed of plain pods (``plain_pod_workloads``)."""
DEVICE_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
"""The kinds of Dynamic Resource Allocation (docs/scheduler.md, *Devices (DRA)*)."""
KINDS = (
    "Namespace",
    "Queue",
    *WORKLOAD_KINDS,
    "Node",
    "Pod",
    "PriorityClass",
    TOPOLOGY_KIND,
    *DEVICE_KINDS,
    FLAVOR_KIND,
)
"""The kinds a Snapshot is built from, in the order a strict build reports the first error."""


def readers(
    namespace_default_queue: Mapping[str, str] | None = None,
    workload_kinds: Iterable[str] = WORKLOAD_KINDS,
    defaults_of: DefaultsOf = no_defaults,
) -> Mapping[str, Reader]:
    """How each kind becomes a view (a workload no queue manages becomes None).

    With ``namespace_default_queue``, a workload without a queue label takes its namespace's
    default queue, as the admission webhook would have labelled it (a dump's Jobs); the
    operator watches only labelled workloads and reads them as labelled. ``workload_kinds``:
    the kinds of workload gated (the operator's enabled kinds); an object another of them
    controls (a JobSet's Jobs) is part of that workload, not one of its own.
    ``defaults_of``: what each namespace adds to its pods' requests (its LimitRanges, the
    RuntimeClasses): a workload's pod sets ask what its pods will (docs/workloads.md).
    """
    kinds = frozenset(workload_kinds)
    out: dict[str, Reader] = {
        "Namespace": namespace_from_object,
        "Queue": Queue.from_object,
        "Node": node_from_object,
        "Pod": partial(pod_from_object, workload_labels=POD_LABELS),
        "PriorityClass": priority_class_from_object,
        TOPOLOGY_KIND: topology_from_object,
        FLAVOR_KIND: flavor_from_object,
        "DeviceClass": read_device_class,
        "ResourceSlice": read_resource_slice,
        "ResourceClaim": read_resource_claim,
        "ResourceClaimTemplate": read_claim_template,
        # Where a running RayJob's worker groups are sized (docs/elastic.md); the operator
        # reads each RayJob at its cluster's sizes, and a Snapshot holds no RayCluster.
        RAY_CLUSTER_KIND: cluster_sizes,
    }
    for adapter in ADAPTERS:
        if adapter.kind in kinds:
            out[adapter.kind] = _own_workload(
                partial(
                    adapter.view,
                    namespace_default_queue=namespace_default_queue,
                    defaults_of=defaults_of,
                ),
                kinds,
            )
    return out


def _own_workload(reader: Reader, kinds: frozenset[str]) -> Reader:
    def read_unless_controlled(obj: Mapping[str, Any]) -> View | None:
        return None if controlled_by(obj, kinds) else reader(obj)

    return read_unless_controlled


READERS = readers()


@dataclass(frozen=True, slots=True)
class Read:
    """One object as read: its view (None: a Job no queue manages), or why it cannot be read.

    ``ref`` is how reports name the object: ``job/ns/name`` in the operator, where it sits in
    the file for simulate."""

    kind: str
    ref: str
    view: View | None
    error: str = ""


def read(
    kind: str, ref: str, obj: Mapping[str, Any], using: Mapping[str, Reader] = READERS
) -> Read:
    try:
        return Read(kind, ref, using[kind](obj))
    except InvalidObject as err:
        return Read(kind, ref, None, str(err))


def read_members(
    pods: Iterable[tuple[str, Mapping[str, Any]]], defaults_of: DefaultsOf = no_defaults
) -> tuple[list[PodMember], list[Read]]:
    """The managed plain pods among these (ref, pod), and a Read saying why for each one
    that cannot be read; ``defaults_of``: what their claims count as, by namespace."""
    members: list[PodMember] = []
    unreadable: list[Read] = []
    for ref, obj in pods:
        try:
            namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
            member = pod_member(obj, defaults_of(namespace).devices)
        except InvalidObject as err:
            unreadable.append(Read("Pod", ref, None, str(err)))
            continue
        if member is not None:
            members.append(member)
    return members, unreadable


def plain_pod_workloads(
    members: Iterable[PodMember],
) -> tuple[dict[str, PodWorkload], list[Read]]:
    """The workloads managed plain pods form (docs/workloads.md, "Plain pods and pod
    groups"), by key, and the read of each that is a workload yet, to join a Snapshot's
    workloads; the others (a group not complete) say what they wait for
    (``PodWorkload.waiting``)."""
    found = pod_workloads(members)
    reads = [
        Read(PLAIN_PODS, f"pods/{key}", workload.view)
        for key, workload in found.items()
        if workload.view is not None
    ]
    return found, reads


class UnreadableObject(ValueError):
    """An object a strict build cannot read; the message names it, then the field."""

    def __init__(self, ref: str, error: str) -> None:
        self.ref = ref
        self.error = error
        super().__init__(f"{ref}: {error}")


@dataclass(frozen=True, slots=True)
class Built:
    snapshot: Snapshot
    unreadable: dict[str, str]
    """ref -> why, for the objects a tolerant build left out."""


def build_snapshot(
    reads: Iterable[Read],
    now: datetime,
    *,
    strict: bool,
    config: SchedulerConfig = DEFAULT_CONFIG,
    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH,
    pods_known: bool = True,
) -> Built:
    """The Snapshot of these reads, each kind's views in the order read.

    Strict: the first unreadable object raises UnreadableObject. Tolerant: it is left out
    and listed in ``unreadable``. ``pods_known`` False: the pods are not known (a dump
    without any), and the Snapshot says so rather than that there are none.
    """
    views: dict[str, list[Any]] = {kind: [] for kind in (*KINDS, PLAIN_PODS)}
    unreadable: dict[str, str] = {}
    others: list[Read] = []  # workloads of the kinds other than Job
    for one in reads:
        if one.error:
            if strict:
                raise UnreadableObject(one.ref, one.error)
            unreadable[one.ref] = one.error
        elif one.view is not None:
            views[one.kind].append(one.view)
            if one.kind in OTHER_WORKLOAD_KINDS:
                others.append(one)
    # Keys of Jobs and of plain pods never meet (pods/..., pod-group/...): only the other
    # kinds can share a name with another workload.
    jobs: list[WorkloadView] = [*views[JOB_KIND], *views[PLAIN_PODS]]
    if others:
        jobs = _one_per_name(jobs, others, strict, unreadable)
    devices = DeviceObjects(views["DeviceClass"], views["ResourceSlice"], views["ResourceClaim"])
    nodes, pods, notes = with_devices(
        views["Node"], views["Pod"] if pods_known else None, devices, config.device_mapping
    )
    snapshot = Snapshot(
        queues=views["Queue"],
        workloads=jobs,
        nodes=nodes,
        now=now,
        priority_classes=views["PriorityClass"],
        config=config,
        max_queue_depth=max_queue_depth,
        namespaces=views["Namespace"],
        pods=pods,
        topologies=views[TOPOLOGY_KIND],
        devices=notes,
        flavors=views[FLAVOR_KIND],
    )
    return Built(snapshot, unreadable)


def _one_per_name(
    jobs: list[WorkloadView], others: list[Read], strict: bool, unreadable: dict[str, str]
) -> list[WorkloadView]:
    """Every workload, but those of one namespace and name across kinds (docs/workloads.md,
    *Names*): sluice does not tell them apart, so it leaves them all out and says why."""
    kinds: dict[str, list[str]] = {}
    for view in jobs:
        kinds.setdefault(view.key, []).append(view.kind)
    for one in others:
        assert isinstance(one.view, WorkloadView)
        kinds.setdefault(one.view.key, []).append(one.view.kind)
    shared = {key for key, named in kinds.items() if len(named) > 1}
    out = [view for view in jobs if view.key not in shared]
    for one in others:
        assert isinstance(one.view, WorkloadView)
        key = one.view.key
        if key not in shared:
            out.append(one.view)
            continue
        error = (
            f"workloads of kinds {', '.join(sorted(kinds[key]))} are all named {key}: sluice"
            " does not tell them apart and leaves them out; give them different names"
        )
        if strict:
            raise UnreadableObject(one.ref, error)
        unreadable[one.ref] = error
    return out
