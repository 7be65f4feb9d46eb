"""A workload as sluice sees it, whatever its kind: pod sets, a queue, a hold and an end.

Each kind the queues can gate (docs/workloads.md) is one Adapter: where its pods come from,
how it is held and released, and how it says it finished. Everything the adapters share (the
queue label, reading a pod template, counts) is here, so each kind's module only says what
is its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sluice.api.constants import MIN_PARALLELISM_ANNOTATION
from sluice.api.constraints import pod_spec_view
from sluice.api.device_context import SpecDevices, spec_devices
from sluice.api.errors import InvalidObject
from sluice.api.pod_defaults import NO_DEFAULTS, DefaultsOf, PodDefaults, no_defaults
from sluice.api.pod_request import pod_request
from sluice.api.topology import TopologyRequest, request_of, whole_request
from sluice.api.views import (
    NEVER,
    PodSet,
    WorkloadView,
    job_phase,
    job_queue_name,
    pod_set,
    workload_view,
)
from sluice.api.workloads.sizes import MinSource, with_minimums


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


_TEMPLATE_MIN = ("metadata", "annotations", MIN_PARALLELISM_ANNOTATION)
"""Where a pod template carries its pod set's minimum."""
SPEC_SUSPEND = SuspendField(("spec", "suspend"))
_NAME = ("metadata", "name")
"""The hold of most kinds: ``spec.suspend``."""

TemplatePath = tuple[str | int, ...]
"""A path into an object: keys, and indexes of list items."""

PodSetReader = Callable[[Mapping[str, Any], str, PodDefaults], tuple[PodSet, ...]]
"""(object, "namespace/name", what its namespace adds to a pod) -> its pod sets, each pod's
request the one its pods will have; raises InvalidObject naming a field."""
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
    pod_label: str = ""
    """The label its controller puts on its pods: how its own pods are found (a Job's are
    found by their controller's uid instead)."""
    pod_label_value: Callable[[Mapping[str, Any]], Any] = lambda obj: dig(obj, _NAME)
    """What that label says on its pods: its name, unless the kind says otherwise."""
    owned_pods_label: str = ""
    """A label on the pods of a Job it owns and names after itself (a RayJob's submitter),
    valued with its name: those pods are its own too."""
    pod_set_labels: tuple[str, ...] = ()
    """The labels by which its controller tells its pod sets apart on the pods (each pod
    set's ``pods_by`` names one)."""
    pod_template: tuple[str, ...] = ()
    """The path of its one pod template, for a kind that has exactly one (a Job's
    spec.template): the admission webhook gives its pods the queue's priority class there.
    Empty for the kinds whose pods come from several."""
    pod_set_templates: Callable[[Mapping[str, Any]], tuple[tuple[str, TemplatePath], ...]] = (
        lambda obj: ()
    )
    """Each pod set that has a pod template in an object of this kind: its name and where the
    template is (list items by index). The admission webhook names the queue on each, so its
    pods carry it and the pod webhook guards them (docs/workloads.md), and admission into a
    Topology domain writes the domain's label in the nodeSelector of each it confines
    (docs/scheduler.md, *Topology*). Empty for a kind whose pods come from elsewhere (a
    TrainJob's runtime)."""
    made_at_creation: frozenset[str] = frozenset()
    """The pod sets whose pods come from an object its controller makes from the template
    once, when the workload is created, and only unsuspends later (an MPIJob's Launcher Job):
    a change to their template while the workload is held never reaches their pods, so no
    Topology domain is written there (docs/scheduler.md, *Topology*)."""
    orphans_by_default: bool = False
    """Deleting it with no propagationPolicy leaves its pods behind (a batch/v1 Job's
    default)."""
    pods_named: str = "pods"
    """What its pod count is called when a message tells it (a Job's ``parallelism``)."""
    checked_by_the_api_server: bool = False
    """A built-in kind, whose fields the API server checks itself: the admission webhook does
    not read it to refuse it (a Job)."""
    read_refusal: Callable[[Mapping[str, Any]], tuple[str, str] | None] = lambda obj: None
    """Why sluice cannot hold this object although it can read its pods: (the field, the
    problem); None when it can."""
    min_fields: Callable[[Mapping[str, Any]], tuple[tuple[str, TemplatePath], ...]] = lambda obj: ()
    """Each pod set that may be admitted smaller than it asks, and where its kind writes its
    minimum (a Job's annotation, a PyTorchJob's elasticPolicy.minReplicas): the other pod
    sets are admitted whole (docs/elastic.md, *The minimum*)."""
    size_fields: Callable[[Mapping[str, Any], str, int], tuple[tuple[TemplatePath, int], ...]] = (
        lambda obj, pod_set, pods: ()
    )
    """(object, pod set, pods) -> the fields that make that pod set run that many pods, each
    with the value it then has (a Job's parallelism): what admission at a smaller size
    lowers (docs/elastic.md, *Admitted smaller*)."""
    scale_replicas: tuple[str, ...] = ()
    """The field its /scale subresource writes (its CRD's specReplicasPath: `kubectl scale`,
    an HPA); () when it has none. The webhook judges a write there as that field written on
    the workload itself (docs/elastic.md, *Grown through the queue*)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def domain_templates(self, obj: Mapping[str, Any]) -> tuple[tuple[str, TemplatePath], ...]:
        """The pod set templates a Topology domain's nodeSelector is written in."""
        made = self.made_at_creation
        return tuple(entry for entry in self.pod_set_templates(obj) if entry[0] not in made)

    def template_paths(self, obj: Mapping[str, Any]) -> tuple[TemplatePath, ...]:
        """Where the pod templates of the object are."""
        return tuple(path for _, path in self.pod_set_templates(obj))

    def pod_sets(
        self, obj: Mapping[str, Any], defaults: PodDefaults = NO_DEFAULTS
    ) -> tuple[PodSet, ...]:
        return self.read_pod_sets(obj, full_name(obj, self.kind), defaults)

    def refusal(self, obj: Mapping[str, Any]) -> str | None:
        """Why sluice cannot manage this object, ``field F: problem``: its pod sets do not
        read, or its kind says it cannot be held as it is; None when it can."""
        try:
            self.view(obj, {})
        except InvalidObject as err:
            return f"field {err.field}: {err.problem}"
        return None

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

    def view(
        self,
        obj: Mapping[str, Any],
        namespace_default_queue: Mapping[str, str] | None = None,
        defaults_of: DefaultsOf = no_defaults,
    ) -> WorkloadView | None:
        """The workload as the scheduler sees it, or None when no queue manages it;
        ``defaults_of``: what a namespace adds to the requests of the pods created in it."""
        queue, from_namespace = self.queue(obj, namespace_default_queue)
        if queue is None:
            return None
        full = full_name(obj, self.kind)
        pod_sets = self.read_pod_sets(obj, full, defaults_of(full.partition("/")[0]))
        refused = self.read_refusal(obj)
        if refused is not None:
            raise InvalidObject(self.kind, full, *refused)
        phase = job_phase(
            finished=self.finished(obj), suspended=self.suspended(obj), active=self.active(obj)
        )
        pod_sets = with_minimums(pod_sets, self.min_sources(obj), self.kind, full)
        together, pod_sets = _asks(obj, pod_sets, self.kind, full)
        return workload_view(
            obj, self.kind, queue, from_namespace, pod_sets, phase, self.pods_by(obj), together
        )

    def min_sources(self, obj: Mapping[str, Any]) -> tuple[MinSource, ...]:
        """Where the object may write its pod sets' minimums: its kind's own places, then
        each pod template carrying sluice.dev/min-parallelism."""
        own = [MinSource(name, path, at(obj, path), True) for name, path in self.min_fields(obj)]
        for name, path in self.pod_set_templates(obj):
            where = (*path, *_TEMPLATE_MIN)
            value = at(obj, where)
            if value is not None:
                own.append(MinSource(name, where, value, False))
        return tuple(own)

    def pods_by(self, obj: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        """Each (label, value) that marks a pod as this object's own (docs/workloads.md)."""
        out: list[tuple[str, str]] = []
        value = self.pod_label_value(obj) if self.pod_label else None
        if value:
            out.append((self.pod_label, str(value)))
        if self.owned_pods_label:
            out.append((self.owned_pods_label, str(dig(obj, _NAME))))
        return tuple(out)


def _asks(
    obj: Mapping[str, Any], pod_sets: tuple[PodSet, ...], kind: str, full: str
) -> tuple[TopologyRequest | None, tuple[PodSet, ...]]:
    """What the workload asks of a Topology for all its pod sets together
    (api.topology.whole_request), and its pod sets, which keep an ask of their own only when
    it asks nothing for all of them."""
    meta = obj.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, Mapping) else None) or {}
    own = request_of(annotations, kind, full, "metadata.annotations")
    together = whole_request(own, [(s.name, s.topology) for s in pod_sets], kind, full)
    if together is not None and any(s.topology is not None for s in pod_sets):
        pod_sets = tuple(replace(s, topology=None) for s in pod_sets)
    return together, pod_sets


def listed(obj: Mapping[str, Any], path: tuple[str, ...]) -> range:
    """The indexes of the list at ``path`` (none when it is not a list)."""
    value = dig(obj, path)
    return range(len(value)) if isinstance(value, list) else range(0)


def keyed(obj: Mapping[str, Any], path: tuple[str, ...]) -> list[str]:
    """The keys of the map at ``path`` (none when it is not a map)."""
    value = dig(obj, path)
    return [str(k) for k in value] if isinstance(value, Mapping) else []


def controlled_by(obj: Mapping[str, Any], kinds: frozenset[str]) -> bool:
    """Whether a workload of one of these kinds controls the object (its controller
    ownerReference): it is then part of that workload, not one of its own (a JobSet's Jobs)."""
    meta = obj.get("metadata")
    owners = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return isinstance(owners, list) and any(
        isinstance(owner, Mapping) and owner.get("controller") and owner.get("kind") in kinds
        for owner in owners
    )


# --------------------------------------------------------------------------------------------
# Reading, shared by the adapters


def dig(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a field path, None where any step is missing or not an object."""
    value: Any = obj
    for key in path:
        if type(value) is not dict and not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def at(obj: Mapping[str, Any], path: TemplatePath) -> Any:
    """The value at a path of keys and list indexes, None where any step is missing."""
    value: Any = obj
    for key in path:
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and 0 <= key < len(value) else None
        elif type(value) is dict or isinstance(value, Mapping):
            value = value.get(key)
        else:
            return None
    return value


def scaled(obj: Mapping[str, Any], path: tuple[str, ...], replicas: int) -> dict[str, Any]:
    """The object with ``replicas`` at ``path``, copied along the path and shared
    elsewhere: what a write of its /scale subresource makes of it."""
    out = dict(obj)
    here = out
    for key in path[:-1]:
        child = here.get(key)
        here[key] = dict(child) if isinstance(child, Mapping) else {}
        here = here[key]
    here[path[-1]] = replicas
    return out


def full_name(obj: Mapping[str, Any], kind: str) -> str:
    meta = obj.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise InvalidObject(kind, "<unnamed>", "metadata.name", "missing")
    name = meta.get("name")
    if type(name) is not str:
        raise InvalidObject(kind, "<unnamed>", "metadata.name", "missing")
    return f"{meta.get('namespace') or 'default'}/{name}"


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if type(status) is dict or isinstance(status, Mapping) else {}


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
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidObject(kind, name, where, "expected an object")
    return value


def template_pod_set(
    name: str,
    count: int,
    template: Any,
    kind: str,
    full: str,
    where: str,
    defaults: PodDefaults,
    pod_count: int = -1,
    *,
    pods_by: tuple[str, str] | None = None,
    injected: tuple[Mapping[str, Any], ...] = (),
    added: tuple[Mapping[str, Any], ...] = (),
    count_step: int = 1,
) -> PodSet:
    """The pod set of a PodTemplateSpec at ``where``: its pod's request as Kubernetes counts it
    for a pod created from it (with ``defaults``, and the ``injected`` init containers and
    ``added`` containers its controller puts in each pod), the nodes it may go on, its
    priority class, what it asks of a Topology; ``count_step``: the pods of one unit of its
    kind's size."""
    template = read_map(template, kind, full, where)
    spec = read_map(template.get("spec"), kind, full, f"{where}.spec")
    meta = read_map(template.get("metadata"), kind, full, f"{where}.metadata")
    where_asked = f"{where}.metadata.annotations"
    annotations = read_map(meta.get("annotations"), kind, full, where_asked)
    counted = spec
    if injected or added:
        init = spec.get("initContainers") or []
        containers = spec.get("containers") or []
        counted = {
            **spec,
            "initContainers": [*init, *injected],
            "containers": [*containers, *added],
        }
    at_spec = f"{where}.spec"
    request = pod_request(counted, kind, full, at_spec, defaults)
    devices = SpecDevices(request)
    if defaults.devices or spec.get("resourceClaims"):
        namespace = full.partition("/")[0]
        devices = spec_devices(spec, request, namespace, defaults.devices, kind, full, at_spec)
    return pod_set(
        name,
        count,
        pod_spec_view(spec, devices.request, kind, full, at_spec),
        pod_count,
        spec.get("priorityClassName") or None,
        spec.get("preemptionPolicy") == NEVER,
        pods_by,
        request_of(annotations, kind, full, where_asked),
        named_claims=devices.named,
        devices_unknown=devices.unknown,
        count_step=count_step,
    )


def injected_container(name: str, requests: Mapping[str, Any]) -> dict[str, Any]:
    """A container a controller adds to the pods it creates, as far as its request goes."""
    return {"name": name, "resources": {"requests": dict(requests), "limits": dict(requests)}}


def any_active(entries: Any) -> bool:
    """Whether any entry of a status list (or map) counts an ``active`` pod or child Job."""
    if isinstance(entries, Mapping):
        entries = entries.values()
    return any(isinstance(e, Mapping) and (e.get("active") or 0) > 0 for e in entries or ())
