"""Read-only views of the Kubernetes objects the scheduler looks at: Jobs, Pods, Nodes,
PriorityClasses, Namespaces (how a Pod is read, and whose it is, is in ``pod_views.py``).

These are plain slotted dataclasses rather than pydantic models: a cycle reads tens of thousands
of Jobs, and each view is built once from an object whose shape the API server has already
validated. What sluice itself must check (the queue label, quantities) raises InvalidObject
naming the object and the field.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from sluice.api.admitted_size import SizeRecord, asked_size, size_records_of
from sluice.api.constants import (
    ADMITTED_AT_ANNOTATION,
    DEFAULT_QUEUE_LABEL,
    PENDING_REASON_ANNOTATION,
    PREEMPTABLE_ANNOTATION,
    QUEUE_LABEL,
    RECLAIMED_BY_ANNOTATION,
    REQUEUE_REASON_ANNOTATION,
    REQUEUED_AT_ANNOTATION,
    REQUEUES_ANNOTATION,
)
from sluice.api.constraints import PodSpecView, Taint, taints_of
from sluice.api.errors import InvalidObject
from sluice.api.flavor_assignment import (
    FlavorAssignment,
    flavor_assignments_of,
    flavors_listed,
    flavors_text,
)
from sluice.api.memo import Memo
from sluice.api.quantity import QuantityError
from sluice.api.resources import EMPTY, Resources
from sluice.api.topology import Assignment, TopologyRequest, assignment_text, assignments_of
from sluice.api.workload_sizes import sizes_text, sizes_words

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NEVER = "Never"
"""The ``preemptionPolicy`` of pods that wait for room rather than take it (Kubernetes')."""
JOB_KIND = "Job"
"""The kind of a batch/v1 Job: the workload kind a WorkloadView is unless it says otherwise."""
MAIN_POD_SET = "main"
"""The name of a Job's one pod set (docs/workloads.md)."""


class JobPhase(enum.Enum):
    """A job's phase as sluice sees it."""

    PENDING = "pending"  # suspended and not finished
    INQUEUE = "inqueue"  # admitted, no active pod yet
    RUNNING = "running"  # admitted, at least one active pod
    COMPLETED = "completed"  # condition Complete or Failed

    @property
    def admitted(self) -> bool:
        return self in (JobPhase.INQUEUE, JobPhase.RUNNING)

    @property
    def finished(self) -> bool:
        return self is JobPhase.COMPLETED


NamedClaims = tuple[tuple[str, Resources], ...]
"""The ResourceClaims a pod names directly: each (namespace/name, what it counts as)."""


@dataclass(frozen=True, slots=True)
class PodSet:
    """Pods of one template that a workload runs together (docs/workloads.md)."""

    name: str
    count: int
    """How many pods of this template run at once: what the workload holds quota for."""
    pod: PodSpecView
    """One pod: its request and the nodes it may go on."""
    pod_count: int = -1
    """How many of them it still starts: ``count`` less the pods that are done for good (a
    Job's completions reached); ``count`` when not given."""
    priority_class_name: str | None = None
    never_preempts: bool = False
    """The template says ``preemptionPolicy: Never``."""
    pods_by: tuple[str, str] | None = field(default=None, compare=False)
    """(label, value) its controller puts on the pods of this set and no other of the
    workload (a replica type, a worker group): how its own pods are told apart by set
    (docs/workloads.md). None: the workload's only set, or a set of plain pods formed from
    the pods' own shapes. Not part of what makes two workloads alike."""
    topology: TopologyRequest | None = None
    """What its own pod template asks of a Topology: its pods in one domain of a level, apart
    from the workload's other pod sets (docs/scheduler.md, *Topology*); None when it asks
    nothing of its own, or the workload asks for all its pod sets together."""
    named_claims: NamedClaims = ()
    """The ResourceClaims its pods name directly, each with what it counts as: counted once
    per workload, not per pod (docs/scheduler.md, *Devices (DRA)*)."""
    devices_unknown: str = ""
    """Why what its pods ask through claims cannot be known before allocation; "" when it
    can."""
    min_count: int = -1
    """The fewest of its pods it may be admitted with (docs/elastic.md, *The minimum*);
    ``count`` when not given: admitted whole or not at all."""
    count_step: int = 1
    """The pods it grows and shrinks by: one unit of its kind's size (a Ray worker group's
    replica of numOfHosts pods)."""
    min_declared: bool = False
    """Whether its workload writes its minimum, even one equal to ``count``: its pods are
    gated, and its admission records its size, which they are released up to and its
    growth is counted from (docs/elastic.md)."""
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        if self.pod_count < 0:
            object.__setattr__(self, "pod_count", self.count)
        if self.min_count < 0:
            object.__setattr__(self, "min_count", self.count)
        # A cycle looks alike jobs up by their pod sets thousands of times.
        fields = (self.name, self.count, self.pod, self.pod_count, self.priority_class_name)
        more = (self.never_preempts, self.topology, self.named_claims, self.devices_unknown)
        sizes = (self.min_count, self.count_step, self.min_declared)
        object.__setattr__(self, "_hash", hash((*fields, *more, *sizes)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def request(self) -> Resources:
        return self.pod.request.scale(self.count)

    @property
    def resizable(self) -> bool:
        """Whether it may be admitted with fewer pods than it asks (docs/elastic.md)."""
        return self.min_count < self.count


PodSetFields = tuple[
    str,
    int,
    PodSpecView,
    int,
    str | None,
    bool,
    tuple[str, str] | None,
    TopologyRequest | None,
    NamedClaims,
    str,
    int,
    int,
]
"""A PodSet's fields, in order."""


def pod_set(
    name: str,
    count: int,
    pod: PodSpecView,
    pod_count: int = -1,
    priority_class_name: str | None = None,
    never_preempts: bool = False,
    pods_by: tuple[str, str] | None = None,
    topology: TopologyRequest | None = None,
    *,
    named_claims: NamedClaims = (),
    devices_unknown: str = "",
    min_count: int = -1,
    count_step: int = 1,
) -> PodSet:
    """The PodSet of these fields, one object for all equal ones while it is remembered: the
    thousands of workloads of a cluster have a few hundred pod sets between them."""
    fields = (
        name,
        count,
        pod,
        pod_count,
        priority_class_name,
        never_preempts,
        pods_by,
        topology,
        named_claims,
        devices_unknown,
        min_count,
        count_step,
    )
    return _POD_SETS.lookup(fields)


def _pod_set_of(fields: PodSetFields) -> PodSet:
    return PodSet(*fields)


_POD_SETS: Final = Memo(_pod_set_of, 4096)


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """A managed workload as the scheduler sees it, of any kind (docs/workloads.md): its
    pod sets, its queue, its phase, and what sluice wrote on it."""

    namespace: str
    name: str
    queue: str
    request: Resources
    phase: JobPhase
    creation_timestamp: datetime = EPOCH
    uid: str = ""
    priority_class_name: str | None = None
    admitted_at: datetime | None = None
    preemptable: bool = True
    pending_reason: str | None = None
    queue_from_namespace: bool = False
    never_preempts: bool = False
    """The pod template says ``preemptionPolicy: Never``."""
    generation: int = 0
    """metadata.generation when read (it changes with the spec, not the status): a decision
    about the job is written only if its spec and queue are still what the cycle saw."""
    kind: str = JOB_KIND
    pod_sets: tuple[PodSet, ...] = ()
    """Its pods, one set per template; a Job has one. Left empty (views built by hand, in
    tests and benchmarks), one pod of its whole request, placeable on any node."""
    requeues: int = 0
    """How many times it was suspended again because its pods were not scheduled in time."""
    requeued_at: datetime | None = None
    requeue_reason: str | None = None
    pods_by: tuple[tuple[str, str], ...] = ()
    """Each (label, value) that marks a pod as its own, for a kind whose pods are found by
    label (docs/workloads.md): its controller's label, and a label on the pods of what it
    owns (a RayJob's submitter Job); empty for a Job, whose pods name its uid as their
    controller."""
    topology: TopologyRequest | None = None
    """What it asks of a Topology for all its pod sets together: all its pods in one domain of
    a level (docs/scheduler.md, *Topology*); None: its pod sets are placed as each asks."""
    assignment: tuple[Assignment, ...] = ()
    """The domains it was admitted into (sluice.dev/topology-assignment), while admitted."""
    flavors: tuple[FlavorAssignment, ...] = ()
    """The flavors its pod sets were admitted into and what that added to their templates
    (sluice.dev/flavor-assignment), while admitted."""
    sized: tuple[SizeRecord, ...] = ()
    """Its pod sets admitted smaller (sluice.dev/admitted-size; docs/elastic.md, *Admitted
    smaller*): what the operator puts back once it waits again."""
    claimed: Resources = EMPTY
    """What the ResourceClaims its pods name directly count as, each claim once however many
    pods name it (docs/scheduler.md, *Devices (DRA)*); part of ``request``."""
    devices_unknown: str = ""
    """Why what its pods ask through claims cannot be known before allocation: it waits with
    this as its reason; "" when it can."""
    key: str = field(init=False, repr=False, compare=False)
    """namespace/name: formed once, as a cycle asks for it hundreds of thousands of times."""
    pod_count: int = field(init=False, repr=False, compare=False)
    """How many pods it still starts, over its pod sets."""

    def __post_init__(self) -> None:
        if not self.pod_sets:
            whole = (PodSet(MAIN_POD_SET, 1, PodSpecView(self.request)),)
            object.__setattr__(self, "pod_sets", whole)
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "pod_count", sum(s.pod_count for s in self.pod_sets))

    @property
    def pending_cause(self) -> str | None:
        """Why its stored pending reason says it waits, without its position."""
        return split_pending_reason(self.pending_reason)[1]

    @property
    def queued_at(self) -> datetime:
        """Its place among jobs of its priority: created, or requeued, at (a requeued job
        goes behind the jobs of its priority already waiting)."""
        return self.requeued_at or self.creation_timestamp


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    allocatable: Resources
    ready: bool = True
    schedulable: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()

    @property
    def usable(self) -> bool:
        return self.ready and self.schedulable


@dataclass(frozen=True, slots=True)
class PodView:
    """A pod as placement sees it. Bound (``node``) and not finished, it holds its request on
    that node, whoever owns it; ``job_uid`` names the Job that controls it, if any."""

    namespace: str
    name: str
    request: Resources
    node: str | None = None
    finished: bool = False  # Succeeded or Failed
    terminating: bool = False  # deleted, still holding its node until it is gone
    job_uid: str = ""
    creation_timestamp: datetime = EPOCH
    unschedulable: str = ""
    """kube-scheduler's word on a pod it could not place (its PodScheduled condition)."""
    named_by: tuple[tuple[str, str], ...] = ()
    """(label, value) of the labels it carries that name a workload of another kind than Job
    (its JobSet, its Kubeflow job, its RayJob) or its pod set in it (a replica type, a worker
    group): how such a workload finds its pods, and which of its pod sets each is."""
    claims: tuple[str, ...] = ()
    """The ResourceClaims (of its namespace) it uses: those it names, those made for it from
    templates, and the one made for its device-backed extended resources."""
    gated: bool = False
    """It still carries sluice's scheduling gate: it waits for the queue, not for a node."""
    gate_index: int = -1
    """Where sluice's gate is in its spec.schedulingGates (-1: it carries none): what a
    release removes, tested first."""
    resizable: bool = False
    """A pod of a workload's controller (not a plain pod) carrying sluice.dev/resizable: gated
    at creation, released by its workload's admitted size."""
    uid: str = ""


@dataclass(frozen=True, slots=True)
class PriorityClassView:
    name: str
    value: int
    global_default: bool = False
    never_preempts: bool = False
    """``preemptionPolicy: Never``: its pods wait for room rather than take it from others."""


@dataclass(frozen=True, slots=True)
class NamespaceView:
    name: str
    default_queue: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


def pending_reason(position: int, queue: str, cause: str) -> str:
    """The text of sluice.dev/pending-reason: where the job stands, then what stops it."""
    return f"position {position} in {queue}; {cause}"


GROWTH_REASON_PREFIX = "growth of "
"""How the pending reason of an admitted workload's growth starts (``growth_reason``)."""


def growth_reason(pods: int, reason: str) -> str:
    """The text of sluice.dev/pending-reason on an admitted workload whose growth waits in its
    queue (docs/elastic.md, *Grown through the queue*): how many pods wait, then the reason
    of its growth entry, position first."""
    return f"{GROWTH_REASON_PREFIX}{pods} pods waiting: {reason}"


def split_growth_reason(reason: str | None) -> str | None:
    """The growth entry's reason (position first) in a growth's pending reason; None for any
    other text."""
    if not reason or not reason.startswith(GROWTH_REASON_PREFIX):
        return None
    _, sep, rest = reason.partition(" waiting: ")
    return rest if sep else None


def split_pending_reason(reason: str | None) -> tuple[int | None, str | None]:
    """A sluice.dev/pending-reason as (position, cause); position None when it has none
    (a victim's "reclaimed for ns/x", say)."""
    if reason and reason.startswith("position "):
        head, _, cause = reason.partition("; ")
        number = head.split(" ")[1]
        if number.isdigit():
            return int(number), cause
    return None, reason


STATE_ORDER = {"running": 0, "inqueue": 1, "pending": 2, "completed": 3}
"""How a queue's jobs are listed: admitted ones, then the line in order, then finished ones."""


@dataclass(frozen=True, slots=True)
class PublishedJob:
    """A managed job as the operator has published it on the Job itself: its state, its
    position and reason in its queue, when it was admitted and whom it made room for. What
    `sluice job list/why` and the dashboard show, readable with rights on the Job alone."""

    namespace: str
    name: str
    queue: str
    state: str
    position: int | None = None
    reason: str = ""
    admitted_at: str = ""
    reclaimed_by: str = ""
    domain: str = ""
    """The Topology domain it runs in, ``<level>=<value>``, while admitted into one."""
    asks: str = ""
    """What it asks of a Topology (``required example.com/rack``); "" for nothing."""
    sizes: str = ""
    """A resizable or recorded workload's pods admitted of those asked: ``6/8`` (``0/8``
    while it waits), per pod set by name for several (``Worker 6/8, group 3/4``); "" for
    any other (``workload_sizes.sizes_text``)."""
    size_words: str = ""
    """The same in words, with its minimum and its growth waiting (``sizes_words``); the
    growth left to ``growth`` when the operator wrote why it waits."""
    flavors: str = ""
    """The flavors it was admitted into (``flavor h100``), from its record; "" for none."""
    growth: str = ""
    """While admitted, why its growth waits (``growth of 2 pods waiting: position 1 in
    team; ...``); "" when none waits."""
    flavor_column: str = ""
    """The same for `job list`'s FLAVOR column: ``h100`` for a workload of one pod set,
    else ``driver=h100,workers=a100``; "" for none."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def sort_key(self) -> tuple[int, int, str, str]:
        return (STATE_ORDER.get(self.state, 9), self.position or 0, self.namespace, self.name)


def published_job(
    obj: Mapping[str, Any],
    read: Callable[[Mapping[str, Any]], WorkloadView | None],
) -> PublishedJob | None:
    """What the operator published about a workload, read by ``read`` (its kind's adapter);
    None when no queue manages it. Raises InvalidObject for one sluice cannot read."""
    view = read(obj)
    if view is None:
        return None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    position, cause, growth = (None, "", "")
    said_now = annotations.get(PENDING_REASON_ANNOTATION)
    if view.phase is JobPhase.PENDING:
        position, said = split_pending_reason(said_now)
        cause = said or ""
    elif view.phase.admitted and split_growth_reason(said_now) is not None:
        growth = str(said_now)
    return PublishedJob(
        namespace=view.namespace,
        name=view.name,
        queue=view.queue,
        state=view.phase.value,
        position=position,
        reason=cause,
        admitted_at=str(annotations.get(ADMITTED_AT_ANNOTATION) or ""),
        reclaimed_by=str(annotations.get(RECLAIMED_BY_ANNOTATION) or ""),
        domain=assignment_text(view.assignment) if view.phase.admitted else "",
        asks=topology_asks(view),
        sizes=sizes_text(view),
        size_words=sizes_words(view, growth=not growth),
        flavors=admitted_flavors(view),
        growth=growth,
        flavor_column=flavor_column(view),
    )


def admitted_flavors(view: WorkloadView) -> str:
    """The flavors an admitted workload runs in, from its record (``flavor h100``); ""
    while it waits or records none."""
    if not view.phase.admitted:
        return ""
    return flavors_text([(a.pod_set, a.flavor) for a in view.flavors])


def flavor_column(view: WorkloadView) -> str:
    """Each pod set's flavor while admitted, from its record, for a column (``h100``, or
    ``driver=h100,workers=a100``); "" while it waits or records none."""
    if not view.phase.admitted:
        return ""
    return flavors_listed([(a.pod_set, a.flavor) for a in view.flavors], len(view.pod_sets))


def topology_asks(view: WorkloadView) -> str:
    """What a workload asks of a Topology, in words: ``required example.com/rack`` for all its
    pod sets together, ``workers: required example.com/rack`` for its pod sets' own; ""."""
    if view.topology is not None:
        return view.topology.describe()
    return ", ".join(f"{s.name}: {s.topology.describe()}" for s in view.pod_sets if s.topology)


# --------------------------------------------------------------------------------------------
# Reading objects


def parse_time(value: Any, kind: str, name: str, field_name: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise InvalidObject(kind, name, field_name, f"{value!r} is not an RFC 3339 time")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidObject(kind, name, field_name, f"{value!r} is not an RFC 3339 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def named_metadata(obj: Mapping[str, Any], kind: str) -> tuple[Mapping[str, Any], str]:
    """An object's metadata and its name; InvalidObject when it has no name."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise InvalidObject(kind, "<unnamed>", "metadata.name", "missing")
    return meta, meta["name"]


def _resources(raw: Any, kind: str, name: str, field_name: str) -> Resources:
    try:
        return Resources.parse(raw, "")
    except QuantityError as err:
        raise InvalidObject(kind, name, field_name, str(err)) from None


def condition_true(status: Any, types: tuple[str, ...]) -> bool:
    """Whether status.conditions holds one of these types with status "True"."""
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") in types and c.get("status") == "True"
        for c in conditions
    )


JOB_FINISHED = ("Complete", "Failed")
"""A batch/v1 Job's conditions that say it has finished."""


def job_finished(obj: Mapping[str, Any]) -> bool:
    """A Job with condition Complete or Failed: it holds no quota and keeps no queue open."""
    return condition_true(obj.get("status"), JOB_FINISHED)


def job_pod_counts(
    spec: Mapping[str, Any], status: Mapping[str, Any], kind: str, name: str, base: str
) -> tuple[int, int]:
    """A batch/v1 Job spec's (parallelism, pods it still runs at once).

    The second is parallelism less the completions already reached; a Job without
    completions is a work queue, which starts no new pod once one has succeeded.
    """
    parallelism = spec.get("parallelism", 1)
    if parallelism is None:
        parallelism = 1
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 0:
        raise InvalidObject(kind, name, f"{base}.parallelism", f"{parallelism!r} is not a count")
    completions = spec.get("completions")
    succeeded = status.get("succeeded") or 0
    if isinstance(completions, int) and not isinstance(completions, bool):
        return parallelism, max(min(parallelism, completions - succeeded), 0)
    return parallelism, parallelism if succeeded == 0 else 0


def job_queue_name(
    obj: Mapping[str, Any], namespace_default_queue: Mapping[str, str] | None = None
) -> tuple[str | None, bool]:
    """The queue a Job belongs to and whether it came from its namespace's default-queue label."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    queue = labels.get(QUEUE_LABEL)
    if queue:
        return str(queue), False
    if namespace_default_queue:
        ns_queue = namespace_default_queue.get(meta.get("namespace") or "")
        if ns_queue:
            return ns_queue, True
    return None, False


def job_phase(*, finished: bool, suspended: bool, active: bool) -> JobPhase:
    """A workload's phase from what its object says, the same for every kind."""
    if finished:
        return JobPhase.COMPLETED
    if suspended:
        return JobPhase.PENDING
    return JobPhase.RUNNING if active else JobPhase.INQUEUE


def workload_view(
    obj: Mapping[str, Any],
    kind: str,
    queue: str,
    queue_from_namespace: bool,
    pod_sets: tuple[PodSet, ...],
    phase: JobPhase,
    pods_by: tuple[tuple[str, str], ...] = (),
    topology: TopologyRequest | None = None,
) -> WorkloadView:
    """The view of a managed workload of any kind, given what its kind's reading found (its
    pod sets, what it asks of a Topology for all of them): its metadata and what sluice wrote
    on it (its annotations) are read the same for all."""
    meta, name = named_metadata(obj, kind)
    namespace = str(meta.get("namespace") or "default")
    full = f"{namespace}/{name}"
    annotations = meta.get("annotations") or {}
    sized = size_records_of(annotations)
    if sized and phase is JobPhase.PENDING:
        pod_sets = as_asked(pod_sets, sized)
    request, priority_class_name, never_preempts = _together(pod_sets)
    claimed, devices_unknown = _claimed(pod_sets)
    return WorkloadView(
        namespace=namespace,
        name=name,
        kind=kind,
        uid=str(meta.get("uid") or ""),
        queue=queue,
        request=request + claimed if claimed else request,
        pod_sets=pod_sets,
        phase=phase,
        creation_timestamp=parse_time(
            meta.get("creationTimestamp"), kind, full, "metadata.creationTimestamp"
        )
        or EPOCH,
        priority_class_name=priority_class_name,
        admitted_at=parse_time(annotations.get(ADMITTED_AT_ANNOTATION), kind, full, _ADMITTED_AT),
        preemptable=str(annotations.get(PREEMPTABLE_ANNOTATION, "true")).lower() != "false",
        pending_reason=annotations.get(PENDING_REASON_ANNOTATION),
        queue_from_namespace=queue_from_namespace,
        never_preempts=never_preempts,
        generation=int(meta.get("generation") or 0),
        requeues=_count(annotations.get(REQUEUES_ANNOTATION), kind, full),
        requeued_at=parse_time(annotations.get(REQUEUED_AT_ANNOTATION), kind, full, _REQUEUED_AT),
        requeue_reason=annotations.get(REQUEUE_REASON_ANNOTATION),
        pods_by=pods_by,
        topology=topology,
        assignment=assignments_of(annotations),
        flavors=flavor_assignments_of(annotations),
        sized=sized,
        claimed=claimed,
        devices_unknown=devices_unknown,
    )


def as_asked(pod_sets: tuple[PodSet, ...], sized: tuple[SizeRecord, ...]) -> tuple[PodSet, ...]:
    """A waiting workload's pod sets at the sizes it asked, where sluice's record says it
    lowered them and they still hold the size it admitted: the operator puts those back
    (``size_restore_patch``), and until it has, the workload waits for its asked size, not
    the one it was last admitted at. A size its owner changed since is its own."""
    asked = {r.pod_set: r for r in sized}
    out: list[PodSet] = []
    for s in pod_sets:
        record = asked.get(s.name)
        count = s.count if record is None else asked_size(s.count, record)
        if count <= s.count:
            out.append(s)
            continue
        out.append(replace(s, count=count, pod_count=s.pod_count + count - s.count))
    return tuple(out)


_ADMITTED_AT = f"metadata.annotations[{ADMITTED_AT_ANNOTATION}]"
_REQUEUED_AT = f"metadata.annotations[{REQUEUED_AT_ANNOTATION}]"


def _together(pod_sets: tuple[PodSet, ...]) -> tuple[Resources, str | None, bool]:
    """What pod sets ask together, the first priority class one names, and whether any
    never preempts."""
    if len(pod_sets) == 1:  # most workloads: no sum to form
        (one,) = pod_sets
        return one.request, one.priority_class_name, one.never_preempts
    request = EMPTY
    for pod_set in pod_sets:
        request = request + pod_set.request
    priority_class_name = next(
        (s.priority_class_name for s in pod_sets if s.priority_class_name), None
    )
    return request, priority_class_name, any(s.never_preempts for s in pod_sets)


def _claimed(pod_sets: tuple[PodSet, ...]) -> tuple[Resources, str]:
    """What the claims the pod sets name directly count as, each claim once, and the first
    reason why what they ask cannot be known."""
    if all(not s.named_claims and not s.devices_unknown for s in pod_sets):
        return EMPTY, ""
    named = {key: amount for s in pod_sets for key, amount in s.named_claims}
    total = EMPTY
    for amount in named.values():
        total = total + amount
    return total, next((s.devices_unknown for s in pod_sets if s.devices_unknown), "")


def _count(value: Any, kind: str, job: str) -> int:
    if value is None:
        return 0
    text = str(value)
    if not text.isdigit():
        where = f"metadata.annotations[{REQUEUES_ANNOTATION}]"
        raise InvalidObject(kind, job, where, f"{value!r} is not a count")
    return int(text)


def node_from_object(obj: Mapping[str, Any]) -> NodeView:
    meta, name = named_metadata(obj, "Node")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = condition_true(status, ("Ready",))
    return NodeView(
        name=name,
        allocatable=_resources(status.get("allocatable"), "Node", name, "status.allocatable"),
        ready=ready,
        schedulable=not spec.get("unschedulable", False),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=taints_of(spec, name),
    )


def priority_class_from_object(obj: Mapping[str, Any]) -> PriorityClassView:
    _, name = named_metadata(obj, "PriorityClass")
    value = obj.get("value", 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidObject("PriorityClass", name, "value", f"{value!r} is not an integer")
    return PriorityClassView(
        name=name,
        value=value,
        global_default=bool(obj.get("globalDefault")),
        never_preempts=obj.get("preemptionPolicy") == NEVER,
    )


def namespace_from_object(obj: Mapping[str, Any]) -> NamespaceView:
    meta, name = named_metadata(obj, "Namespace")
    labels = dict(meta.get("labels") or {})
    return NamespaceView(name=name, default_queue=labels.get(DEFAULT_QUEUE_LABEL), labels=labels)
