"""What goes into a scheduling cycle and what comes out of it.

These types are the contract between the pure scheduler and its callers (the operator's loop,
``sluice simulate``, the benchmarks): a cycle reads a Snapshot and returns a CycleResult, and
nothing else crosses the boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sluice.api.config import DEFAULT_CONFIG, SchedulerConfig
from sluice.api.constants import DEFAULT_MAX_QUEUE_DEPTH
from sluice.api.flavor import FlavorView
from sluice.api.quantity import format_quantity
from sluice.api.queue import Queue, QueueState, QueueUsage
from sluice.api.resources import EMPTY, Resources
from sluice.api.topology import TopologyView
from sluice.api.views import (
    NamespaceView,
    NodeView,
    PodView,
    PriorityClassView,
    WorkloadView,
    pending_reason,
)
from sluice.scheduler.device_nodes import NO_NOTES, DeviceNotes

__all__ = [
    "CycleResult",
    "Decision",
    "DecisionAction",
    "PendingJob",
    "QueueResult",
    "Snapshot",
]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster as one cycle sees it. Workloads (of every kind) are the managed ones only."""

    queues: Sequence[Queue]
    workloads: Sequence[WorkloadView]
    nodes: Sequence[NodeView]
    now: datetime
    priority_classes: Sequence[PriorityClassView] = ()
    config: SchedulerConfig = DEFAULT_CONFIG
    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH
    namespaces: Sequence[NamespaceView] = ()
    """For queues with a namespaceSelector; a namespace not listed has only its name label."""
    pods: Sequence[PodView] | None = None
    """Every pod of the cluster; None when not known (a dump without pods): nodes then hold
    only admitted jobs, and no job is requeued for pods that were not scheduled."""
    usage: Mapping[str, QueueUsage] = field(default_factory=dict)
    """Queue -> its usage as the previous cycle sampled it (the usage plugin); a queue not
    here starts from its status.usage, else from zero."""
    topologies: Sequence[TopologyView] = ()
    """The cluster's Topologies: the levels workloads may ask to be placed in one domain of."""
    unlisted: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Leaf queue -> the summed request of its waiting workloads left out of ``workloads``
    (the decision pass lists only those it may decide about,
    sluice/scheduler/decision_pass.py): they count in what the queue asks for, as if listed."""
    unlisted_jobs: Mapping[str, int] = field(default_factory=dict)
    """Leaf queue -> how many waiting workloads ``unlisted`` sums: they count in its pending."""
    unlisted_finished: Mapping[str, int] = field(default_factory=dict)
    """Leaf queue -> how many finished workloads are left out of ``workloads``: they count in
    its completed."""
    devices: DeviceNotes = NO_NOTES
    """Which resources are devices asked through claims, and of which DeviceClasses: the
    nodes' and pods' devices are already counted in their views (``device_nodes``)."""
    flavors: Sequence[FlavorView] = ()
    """The cluster's Flavors: the named sets of nodes queues hold quota in (docs/scheduler.md,
    *Flavors*)."""


DecisionAction = Literal["admit", "reclaim", "preempt", "requeue"]


@dataclass(frozen=True, slots=True)
class Decision:
    """A decision about one job.

    ``for_job`` names the job that a reclaim or preempt victim makes room for; a requeue
    carries how many times the job has been requeued, this time included.
    """

    action: DecisionAction
    job: str  # namespace/name
    queue: str
    reason: str = ""
    for_job: str | None = None
    requeues: int = 0
    domain: str = ""
    """An admission into one domain of a Topology: ``<level>=<value>`` (its pods' nodeSelector)."""
    flavors: tuple[tuple[str, str], ...] = ()
    """An admission into flavors: (pod set, flavor) for each pod set, in the workload's order;
    () when its queue has no flavors."""
    sizes: tuple[tuple[str, int, int], ...] = ()
    """The admission of a resizable workload: per pod set that may shrink, (its name, pods
    asked, pods admitted) (docs/elastic.md, *Admitted smaller*), equal where admitted whole;
    of a growth entry, per pod set of its workload's record, the record raised by it; of a
    reclaim or preempt that shrinks a workload (``shrinks``), its record lowered; empty for
    any other workload."""

    @property
    def shrinks(self) -> bool:
        """Whether a reclaim or preempt takes pods above the workload's minimum only: it
        stays admitted at ``sizes`` (docs/scheduler.md, *Victims above a minimum*)."""
        return self.action in ("reclaim", "preempt") and bool(self.sizes)

    @property
    def smaller(self) -> bool:
        """Whether it admits a pod set at fewer pods than asked."""
        return any(admitted < asked for _, asked, admitted in self.sizes)


@dataclass(frozen=True, slots=True)
class FlavorFigures:
    """A queue's figures in one flavor after the cycle: what its subtree holds there, its
    deserved and its realCapability there (docs/scheduler.md, *Counting per flavor*)."""

    name: str
    allocated: Resources = EMPTY
    deserved: Resources = EMPTY
    real_capability: Resources = EMPTY
    resources: tuple[str, ...] = ()
    """The resources its entry counts in the flavor (``FlavorQuota.names``), sorted."""
    named: bool = True
    """Whether its own entries name the flavor (False: it only holds there, counted in the
    quota of the ancestor whose list its workloads use)."""

    def summary(self) -> str:
        """``h100 nvidia.com/gpu 4/8``, for a printer column and the queue tree: per resource,
        allocated over deserved for each resource its entry counts, allocated alone where it
        only holds there."""
        if not self.named:
            return f"{self.name} {self.allocated.describe()}"
        if not self.resources:
            return f"{self.name} nothing"
        parts = [
            f"{n} {_quantity(self.allocated, n)}/{_quantity(self.deserved, n)}"
            for n in self.resources
        ]
        return f"{self.name} " + ", ".join(parts)

    def to_kube(self) -> dict[str, Any]:
        """An item of a Queue's ``status.flavors``: its allocated, and its deserved and
        realCapability where its own entries name the flavor."""
        item: dict[str, Any] = {"name": self.name, "allocated": self.allocated.to_kube()}
        if self.named:
            item["deserved"] = self.deserved.to_kube()
            item["realCapability"] = self.real_capability.to_kube()
        return item


def _quantity(amounts: Resources, name: str) -> str:
    return format_quantity(amounts.get_amount(name), name)


@dataclass(frozen=True, slots=True)
class QueueResult:
    """A queue's derived status after the cycle."""

    state: QueueState
    parent: str | None
    weight: int
    priority: int
    deserved: Resources = EMPTY
    allocated: Resources = EMPTY
    guarantee: Resources = EMPTY
    real_capability: Resources | None = None  # None: unlimited in every resource
    share: float = 0.0
    pending: int = 0
    inqueue: int = 0
    running: int = 0
    completed: int = 0
    valid: bool = True
    invalid_reason: str = ""
    children: tuple[str, ...] = ()
    over_capability: str = ""
    """What puts it over its capability (its workloads' pods ask more than they were
    admitted with); "" while it is within it."""
    usage: QueueUsage | None = None
    """Its usage sampled by this cycle; None when the usage plugin is off."""
    usage_key: float = 0.0
    """Its dominant weighted usage per unit of weight, in seconds: what orders it."""
    flavors: tuple[FlavorFigures, ...] = ()
    """Its figures per flavor: those its list names, in order, then any other its subtree
    holds in; () for a queue without flavors."""


@dataclass(frozen=True, slots=True)
class PendingJob:
    """Why a job waits, as data: where it stands in its queue and what stops it."""

    job: str  # namespace/name
    queue: str
    position: int  # 1-based position in its queue's job order
    cause: str

    @property
    def reason(self) -> str:
        """The text of its sluice.dev/pending-reason annotation."""
        return pending_reason(self.position, self.queue, self.cause)


@dataclass(frozen=True, slots=True)
class CycleResult:
    queue_order: Sequence[str]
    queues: Mapping[str, QueueResult]
    decisions: Sequence[Decision] = ()
    pending: Sequence[PendingJob] = ()
    cluster_total: Resources = EMPTY
    notes: Sequence[str] = field(default_factory=tuple)
    releases: Sequence[tuple[str, Sequence[PodView]]] = ()
    """Per admitted workload with a size record, by key: its gated pods whose gate is to be
    removed, up to its recorded size (``growth.gates_to_release``)."""
    domains_free: Mapping[str, Resources] = field(default_factory=dict)
    """The free room left in each domain of each Topology's widest level, by
    ``<level>=<value>`` (docs/scheduler.md, *Topology*); empty without Topologies."""
