"""A workload as sluice sees it, whatever its kind: pod sets, a queue, a hold and an end.

Each kind the queues can gate (docs/workloads.md) is one Adapter: where its pods come from,
how it is held and released, and how it says it finished. Everything the adapters share (the
queue label, reading a pod template, counts) is here, so each kind's module only says what
is its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sluice.api.constraints import PodSpecView, pod_spec_view
from sluice.api.errors import InvalidObject
from sluice.api.resources import EMPTY, Resources
from sluice.api.views import EPOCH, NEVER, job_queue_name, parse_time, pod_request


@dataclass(frozen=True, slots=True)
class PodSet:
    """Pods of one template that a workload runs together."""

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

    def __post_init__(self) -> None:
        if self.pod_count < 0:
            object.__setattr__(self, "pod_count", self.count)

    @property
    def request(self) -> Resources:
        return self.pod.request.scale(self.count)


@dataclass(frozen=True, slots=True)
class SuspendField:
    """A workload held by a boolean field of its spec (``spec.suspend``): true holds it, and
    its controller creates no pod (or deletes those it has) until the field is false."""

    path: tuple[str, ...]

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def held(self, obj: Mapping[str, Any]) -> bool:
        return bool(dig(obj, self.path))

    def patch(self, suspend: bool) -> dict[str, Any]:
        """The JSON merge patch that sets the field: true holds, false releases."""
        body: dict[str, Any] = {self.path[-1]: suspend}
        for key in reversed(self.path[:-1]):
            body = {key: body}
        return body


SPEC_SUSPEND = SuspendField(("spec", "suspend"))
"""The hold of most kinds: ``spec.suspend``."""

PodSetReader = Callable[[Mapping[str, Any], str], tuple[PodSet, ...]]
"""(object, "namespace/name") -> its pod sets; raises InvalidObject naming a field."""
StatusReader = Callable[[Mapping[str, Any]], bool]
"""The object's status -> yes or no."""


@dataclass(frozen=True, slots=True)
class Adapter:
    """One kind of workload: its API, its pod sets, its hold, its end."""

    group: str
    version: str
    kind: str
    plural: str
    hold: SuspendField
    read_pod_sets: PodSetReader
    read_finished: StatusReader
    """Its status says it succeeded or failed: it holds no quota any more."""
    read_active: StatusReader
    """Its status says at least one of its pods (or child Jobs) is running."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def pod_sets(self, obj: Mapping[str, Any]) -> tuple[PodSet, ...]:
        return self.read_pod_sets(obj, full_name(obj, self.kind))

    def suspended(self, obj: Mapping[str, Any]) -> bool:
        return self.hold.held(obj)

    def suspend_patch(self, suspend: bool) -> dict[str, Any]:
        return self.hold.patch(suspend)

    def finished(self, obj: Mapping[str, Any]) -> bool:
        return self.read_finished(_status(obj))

    def active(self, obj: Mapping[str, Any]) -> bool:
        return self.read_active(_status(obj))

    def queue(
        self, obj: Mapping[str, Any], namespace_default_queue: Mapping[str, str] | None = None
    ) -> tuple[str | None, bool]:
        """Its queue (label sluice.dev/queue-name, else its namespace's default queue) and
        whether it came from the namespace; the same rule for every kind."""
        return job_queue_name(obj, namespace_default_queue)

    def read(
        self, obj: Mapping[str, Any], namespace_default_queue: Mapping[str, str] | None = None
    ) -> Workload | None:
        """The workload, or None when no queue manages it."""
        queue, from_namespace = self.queue(obj, namespace_default_queue)
        if queue is None:
            return None
        full = full_name(obj, self.kind)
        meta = obj.get("metadata") or {}
        namespace, _, name = full.partition("/")
        created = parse_time(
            meta.get("creationTimestamp"), self.kind, full, "metadata.creationTimestamp"
        )
        return Workload(
            kind=self.kind,
            namespace=namespace,
            name=name,
            uid=str(meta.get("uid") or ""),
            generation=int(meta.get("generation") or 0),
            creation_timestamp=created or EPOCH,
            queue=queue,
            queue_from_namespace=from_namespace,
            pod_sets=self.read_pod_sets(obj, full),
            suspended=self.suspended(obj),
            finished=self.finished(obj),
            active=self.active(obj),
        )


@dataclass(frozen=True, slots=True)
class Workload:
    """One managed workload of any kind, read from its object by its Adapter."""

    kind: str
    namespace: str
    name: str
    queue: str
    pod_sets: tuple[PodSet, ...]
    suspended: bool = False
    finished: bool = False
    active: bool = False
    uid: str = ""
    generation: int = 0
    creation_timestamp: datetime = EPOCH
    queue_from_namespace: bool = False
    request: Resources = field(init=False, default=EMPTY)
    """Every pod set's request: what it holds while admitted."""

    def __post_init__(self) -> None:
        total = EMPTY
        for pod_set in self.pod_sets:
            total = total + pod_set.request
        object.__setattr__(self, "request", total)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pod_count(self) -> int:
        return sum(pod_set.pod_count for pod_set in self.pod_sets)

    @property
    def priority_class_name(self) -> str | None:
        """The first priority class its pod templates name, in pod-set order; None when none
        does (its queue's priority then applies)."""
        return next((p.priority_class_name for p in self.pod_sets if p.priority_class_name), None)

    @property
    def never_preempts(self) -> bool:
        return any(pod_set.never_preempts for pod_set in self.pod_sets)


# --------------------------------------------------------------------------------------------
# Reading, shared by the adapters


def dig(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a field path, None where any step is missing or not an object."""
    value: Any = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def full_name(obj: Mapping[str, Any], kind: str) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise InvalidObject(kind, "<unnamed>", "metadata.name", "missing")
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def read_count(value: Any, default: int, kind: str, name: str, where: str) -> int:
    """A replica or node count: a non-negative integer, ``default`` when absent."""
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidObject(kind, name, where, f"{value!r} is not a count")
    return value


def read_map(value: Any, kind: str, name: str, where: str) -> Mapping[str, Any]:
    """An object-valued field; empty when absent."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidObject(kind, name, where, "expected an object")
    return value


def template_pod_set(
    name: str,
    count: int,
    template: Any,
    kind: str,
    full: str,
    where: str,
    pod_count: int = -1,
) -> PodSet:
    """The pod set of a PodTemplateSpec at ``where``: its pod's request as Kubernetes counts it,
    the nodes it may go on, its priority class."""
    spec = read_map(read_map(template, kind, full, where).get("spec"), kind, full, f"{where}.spec")
    request = pod_request(spec, kind, full, f"{where}.spec")
    return PodSet(
        name=name,
        count=count,
        pod=pod_spec_view(spec, request, kind, full, f"{where}.spec"),
        pod_count=pod_count,
        priority_class_name=spec.get("priorityClassName") or None,
        never_preempts=spec.get("preemptionPolicy") == NEVER,
    )


def any_active(entries: Any) -> bool:
    """Whether any entry of a status list (or map) counts an ``active`` pod or child Job."""
    if isinstance(entries, Mapping):
        entries = entries.values()
    return any(isinstance(e, Mapping) and (e.get("active") or 0) > 0 for e in entries or ())
