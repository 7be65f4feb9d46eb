"""Plain pods and pod groups: pods held by a scheduling gate rather than by a suspend field.

A managed plain pod (docs/workloads.md, "Plain pods and pod groups") is read into a PodMember
as its watch event arrives; ``pod_workloads`` groups the members of a cycle into workloads,
each seen by the scheduler as a WorkloadView whose pods are those members, one pod set per shape
of pod among them. Pods whose group is not complete are not a workload yet and say why. The
operator and ``sluice simulate`` both form workloads here (``sluice.scheduler.snapshot``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sluice.api.constants import (
    ADMISSION_GATE,
    ADMITTED_AT_ANNOTATION,
    PENDING_REASON_ANNOTATION,
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL_ANNOTATION,
    PREEMPTABLE_ANNOTATION,
    QUEUE_LABEL,
)
from sluice.api.constraints import PodSpecView, pod_spec_view
from sluice.api.device_context import NO_DEVICES, DeviceContext, SpecDevices, spec_devices
from sluice.api.errors import InvalidObject
from sluice.api.flavor_assignment import FlavorAssignment, flavor_assignments_of
from sluice.api.pod_request import pod_request
from sluice.api.pod_views import plain_pod_workload_uid, pod_group_uid
from sluice.api.resources import EMPTY
from sluice.api.topology import (
    Assignment,
    TopologyRequest,
    assignment_of,
    assignment_text,
    request_of,
)
from sluice.api.views import (
    EPOCH,
    MAIN_POD_SET,
    NEVER,
    JobPhase,
    NamedClaims,
    PodSet,
    WorkloadView,
    parse_time,
)

KIND = "Pod"
POD_PREFIX = "pod/"
GROUP_PREFIX = "pod-group/"
"""A plain pod's workload is named ``pod/<pod>``, a group's ``pod-group/<group>``: never a
Job's name (no Kubernetes name holds a slash), so the two never meet in a queue."""


@dataclass(frozen=True, slots=True)
class PodMember:
    """One managed plain pod, as its workload needs it."""

    namespace: str
    name: str
    uid: str
    queue: str
    pod: PodSpecView
    group: str = ""
    total: int = 1
    """The group's sluice.dev/pod-group-total-count; 1 for a pod of no group."""
    gate_index: int = -1
    """Where sluice's gate is in spec.schedulingGates; -1: released (admitted)."""
    admitted_at: datetime | None = None
    pending_reason: str | None = None
    has_annotations: bool = False
    running: bool = False
    finished: bool = False
    controlled: bool = False
    """Some controller (a ReplicaSet, a StatefulSet) owns it and recreates it when deleted."""
    preemptable: bool = False
    """sluice may delete it to reclaim or preempt: a controlled pod unless annotated
    sluice.dev/preemptable "false", a pod no controller owns only when annotated "true"."""
    priority_class_name: str | None = None
    never_preempts: bool = False
    creation_timestamp: datetime = EPOCH
    resource_version: str = ""
    topology: TopologyRequest | None = None
    """What it asks of a Topology (its own annotations): its whole workload in one domain."""
    assignment: Assignment | None = None
    """The domain sluice put it in when it released its gate (sluice.dev/topology-assignment)."""
    flavor: FlavorAssignment | None = None
    """The flavor sluice put it on when it released its gate, and what that added to it
    (sluice.dev/flavor-assignment)."""
    named_claims: NamedClaims = ()
    """The ResourceClaims it names directly and what each counts as (counted once per
    workload); its claims from templates are in its request."""
    devices_unknown: str = ""
    """Why what its claims ask cannot be known before allocation; "" when it can."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gated(self) -> bool:
        return self.gate_index >= 0


def group_total(value: Any, full: str) -> int:
    """A sluice.dev/pod-group-total-count: a whole number of at least 1."""
    where = f"metadata.annotations[{POD_GROUP_TOTAL_ANNOTATION}]"
    if value is None:
        raise InvalidObject(KIND, full, where, "missing: a pod of a group says how many it has")
    text = str(value)
    if not text.isdigit() or int(text) < 1:
        raise InvalidObject(KIND, full, where, f"{value!r} is not a count of at least 1")
    return int(text)


def pod_member(obj: Mapping[str, Any], devices: DeviceContext = NO_DEVICES) -> PodMember | None:
    """The pod as a member of its workload, its claims counted with its namespace's
    ``devices``; None when it is no managed plain pod, or is being deleted (it leaves its
    workload then). Raises InvalidObject naming a field."""
    if not plain_pod_workload_uid(obj):
        return None
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp") is not None:
        return None
    namespace = str(meta.get("namespace") or "default")
    full = f"{namespace}/{meta.get('name')}"
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    group = str(labels.get(POD_GROUP_LABEL) or "")
    total = group_total(annotations.get(POD_GROUP_TOTAL_ANNOTATION), full) if group else 1
    controlled = any(
        isinstance(o, Mapping) and o.get("controller") for o in meta.get("ownerReferences") or ()
    )
    opt = str(annotations.get(PREEMPTABLE_ANNOTATION, "")).lower()
    phase = status.get("phase")
    asked = SpecDevices(pod_request(spec, KIND, full, "spec"))
    if devices or spec.get("resourceClaims"):
        asked = spec_devices(spec, asked.request, namespace, devices, KIND, full, "spec")
    return PodMember(
        namespace=namespace,
        name=str(meta.get("name")),
        uid=str(meta.get("uid") or ""),
        queue=str(labels[QUEUE_LABEL]),
        pod=pod_spec_view(spec, asked.request, KIND, full, "spec"),
        group=group,
        total=total,
        gate_index=_gate_index(spec),
        admitted_at=parse_time(
            annotations.get(ADMITTED_AT_ANNOTATION),
            KIND,
            full,
            f"metadata.annotations[{ADMITTED_AT_ANNOTATION}]",
        ),
        pending_reason=annotations.get(PENDING_REASON_ANNOTATION),
        has_annotations=bool(annotations),
        topology=request_of(annotations, KIND, full, "metadata.annotations"),
        assignment=assignment_of(annotations),
        flavor=next(iter(flavor_assignments_of(annotations)), None),
        running=phase == "Running",
        finished=phase in ("Succeeded", "Failed"),
        controlled=controlled,
        preemptable=opt != "false" if controlled else opt == "true",
        priority_class_name=spec.get("priorityClassName") or None,
        never_preempts=spec.get("preemptionPolicy") == NEVER,
        creation_timestamp=parse_time(
            meta.get("creationTimestamp"), KIND, full, "metadata.creationTimestamp"
        )
        or EPOCH,
        resource_version=str(meta.get("resourceVersion") or ""),
        named_claims=asked.named,
        devices_unknown=asked.unknown,
    )


def _gate_index(spec: Mapping[str, Any]) -> int:
    """Where sluice's scheduling gate is in the pod's gates; -1 when it has none."""
    gates = spec.get("schedulingGates") or []
    return next(
        (
            i
            for i, g in enumerate(gates)
            if isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE
        ),
        -1,
    )


@dataclass(frozen=True, slots=True)
class PodWorkload:
    """The members of one workload, and the WorkloadView the scheduler sees (None while it is not
    a workload yet: ``waiting`` says why)."""

    key: str
    """namespace/pod/<name> or namespace/pod-group/<group>: the WorkloadView's key."""
    members: tuple[PodMember, ...]
    view: WorkloadView | None = None
    waiting: str = ""

    @property
    def stragglers(self) -> tuple[PodMember, ...]:
        """Gated pods of an admitted workload (a controller's replacement for one that was
        lost): released without a new decision while the workload has room for them."""
        if self.view is None or not self.view.phase.admitted:
            return ()
        live = sum(1 for m in self.members if not m.gated and not m.finished)
        room = sum(pods.count for pods in self.view.pod_sets) - live
        return tuple(sorted((m for m in self.members if m.gated), key=lambda m: m.name))[:room]

    @property
    def domain(self) -> str:
        """The domains it was admitted into, as sluice.dev/topology-assignment writes them
        ("" when none): where its stragglers go."""
        return assignment_text(self.view.assignment) if self.view is not None else ""


def pod_workloads(members: Iterable[PodMember]) -> dict[str, PodWorkload]:
    """The workloads these members form, by key."""
    by_key: dict[str, list[PodMember]] = {}
    for member in members:
        short = GROUP_PREFIX + member.group if member.group else POD_PREFIX + member.name
        by_key.setdefault(f"{member.namespace}/{short}", []).append(member)
    out: dict[str, PodWorkload] = {}
    for key, found in by_key.items():
        found.sort(key=lambda m: m.name)
        out[key] = _workload(key, tuple(found))
    return out


def _waiting(members: tuple[PodMember, ...]) -> str:
    """Why pods of a group that nothing admitted yet are not a workload; "" when they are."""
    first = members[0]
    if not first.group:
        return ""
    group = f"group {first.group}"
    for what, values in (
        ("queue", {m.queue for m in members}),
        (POD_GROUP_TOTAL_ANNOTATION, {str(m.total) for m in members}),
    ):
        if len(values) > 1:
            return f"the pods of {group} disagree on their {what}: {', '.join(sorted(values))}"
    if len(members) < first.total:
        return f"{len(members)} of {first.total} pods of {group} exist"
    if len(members) > first.total:
        return (
            f"{len(members)} pods of {group} exist, more than its"
            f" {POD_GROUP_TOTAL_ANNOTATION} {first.total}"
        )
    return ""


Shape = tuple[PodSpecView, str | None, bool, NamedClaims, str]
"""What makes pods of a workload one pod set: the request and the nodes they may go on, their
priority class, their preemption policy."""


def _shape(member: PodMember) -> Shape:
    return (
        member.pod,
        member.priority_class_name,
        member.never_preempts,
        member.named_claims,
        member.devices_unknown,
    )


def _pod_sets(members: tuple[PodMember, ...], total: int) -> tuple[PodSet, ...]:
    """One pod set per shape of pod (docs/workloads.md, "Plain pods and pod groups"), in the
    order of their first pods' names and named after that pod (``main`` when all its pods are
    alike). Counted: its released pods, then its gated ones by name, up to ``total``; the
    pods it lacks (lost, their replacements not created yet) count in the set with the most
    pods, the first of those."""
    released = [m for m in members if not m.gated]
    counted = released + [m for m in members if m.gated][: max(total - len(released), 0)]
    by_shape: dict[Shape, list[PodMember]] = {}
    for member in sorted(counted, key=lambda m: m.name):
        by_shape.setdefault(_shape(member), []).append(member)
    found = list(by_shape.values())
    counts = [len(pods) for pods in found]
    largest = counts.index(max(counts))
    counts[largest] += max(total - len(counted), 0)
    return tuple(
        PodSet(
            MAIN_POD_SET if len(found) == 1 else pods[0].name,
            count,
            pods[0].pod,
            max(count - sum(1 for m in pods if m.finished and not m.gated), 0),
            pods[0].priority_class_name,
            pods[0].never_preempts,
            named_claims=pods[0].named_claims,
            devices_unknown=pods[0].devices_unknown,
        )
        for pods, count in zip(found, counts, strict=True)
    )


def pod_set_of(member: PodMember, pod_sets: Sequence[PodSet]) -> str | None:
    """The pod set of its workload a gated member is counted in: the one of its shape."""
    shape = _shape(member)
    return next(
        (
            s.name
            for s in pod_sets
            if (s.pod, s.priority_class_name, s.never_preempts, s.named_claims, s.devices_unknown)
            == shape
        ),
        None,
    )


def _flavors(admitted: Sequence[PodMember]) -> tuple[FlavorAssignment, ...]:
    """The flavors a workload's released pods were put on, one per pod set, by name."""
    by_set: dict[str, FlavorAssignment] = {}
    for member in admitted:
        if member.flavor is not None:
            by_set.setdefault(member.flavor.pod_set, member.flavor)
    return tuple(by_set[name] for name in sorted(by_set))


def _workload(key: str, members: tuple[PodMember, ...]) -> PodWorkload:
    admitted = [m for m in members if not m.gated]
    if not admitted:
        waiting = _waiting(members)
        if waiting:
            return PodWorkload(key, members, waiting=waiting)
    first = members[0]
    total = first.total
    finished = sum(1 for m in admitted if m.finished)
    if not admitted:
        phase = JobPhase.PENDING
    elif finished >= total or all(m.finished for m in members):
        phase = JobPhase.COMPLETED
    elif any(m.running for m in admitted):
        phase = JobPhase.RUNNING
    else:
        phase = JobPhase.INQUEUE
    preemptable = all(m.preemptable for m in members)
    times = [m.admitted_at for m in admitted if m.admitted_at is not None]
    namespace, _, name = key.partition("/")
    pod_sets = _pod_sets(members, total)
    request = EMPTY
    for pod_set in pod_sets:
        request = request + pod_set.request
    view = WorkloadView(
        namespace=namespace,
        name=name,
        queue=first.queue,
        request=request,
        phase=phase,
        creation_timestamp=min(m.creation_timestamp for m in members),
        uid=pod_group_uid(namespace, first.group) if first.group else first.uid,
        priority_class_name=next(
            (s.priority_class_name for s in pod_sets if s.priority_class_name), None
        ),
        # A workload sluice may not delete is never given back for pods not scheduled in
        # time: it could not be held again.
        admitted_at=min(times) if times and preemptable else None,
        preemptable=preemptable,
        pending_reason=next((m.pending_reason for m in members if m.gated), None),
        never_preempts=any(s.never_preempts for s in pod_sets),
        pod_sets=pod_sets,
        topology=next((m.topology for m in members if m.topology is not None), None),
        assignment=tuple(next(((m.assignment,) for m in admitted if m.assignment is not None), ())),
        flavors=_flavors(admitted),
    )
    return PodWorkload(key, members, view)
