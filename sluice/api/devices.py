"""Dynamic Resource Allocation objects (resource.k8s.io/v1) as sluice reads them: DeviceClasses,
ResourceSlices and their pools, ResourceClaims and ResourceClaimTemplates, and the claims a pod
names. Read here into immutable values; what they count as in the queues is
sluice/api/device_quota.py, the rules in docs/scheduler.md, *Devices (DRA)*.

A driver publishes the devices of a pool in one or more ResourceSlices of one generation; a
pool is complete when all `resourceSliceCount` slices of its newest generation are there, and
only the newest generation's devices exist (older slices are being replaced). A device is
reached from one node (`nodeName`), from the nodes a selector matches (`nodeSelector`), from
all nodes (`allNodes`), or, with `perDeviceNodeSelection`, as each device says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from sluice.api.constraints import NodeTerm, Taint, node_selector_terms
from sluice.api.device_cel import AttributeValue, CelDevice, Scalar
from sluice.api.errors import InvalidObject
from sluice.api.quantity import QuantityError, parse_quantity
from sluice.api.semver import SemverError, parse_semver

GROUP: Final = "resource.k8s.io"
EXTENDED_RESOURCE_CLAIM: Final = "resource.kubernetes.io/extended-resource-claim"
"""The annotation kube-scheduler puts on a claim it makes for extended resources."""
_ATTRIBUTE_KINDS: Final = ("bool", "int", "string", "version")

AllocationMode = Literal["ExactCount", "All"]


# -- DeviceClass ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    """CEL expressions; a device of the class satisfies all of them."""
    extended_resource_name: str | None = None
    """The extended resource a container may ask for, which devices of this class serve."""
    created: str = ""
    """Its creation time (RFC 3339): of two classes naming one extended resource,
    Kubernetes serves it from the newer."""


def read_device_class(obj: Mapping[str, Any]) -> DeviceClass:
    name = _name(obj, "DeviceClass")
    spec = _mapping(obj.get("spec"), "DeviceClass", name, "spec")
    extended = spec.get("extendedResourceName")
    if extended is not None and not isinstance(extended, str):
        raise InvalidObject("DeviceClass", name, "spec.extendedResourceName", "expected a string")
    return DeviceClass(
        name=name,
        selectors=_selectors(spec.get("selectors"), "DeviceClass", name, "spec.selectors"),
        extended_resource_name=extended or None,
        created=str((obj.get("metadata") or {}).get("creationTimestamp") or ""),
    )


# -- ResourceSlice ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeAccess:
    """Which nodes reach a device. Exactly one of the three is set."""

    node_name: str | None = None
    node_selector: tuple[NodeTerm, ...] | None = None
    all_nodes: bool = False

    @property
    def node_local(self) -> bool:
        """On one node only (as a GPU is); else network-attached, shared by the nodes."""
        return self.node_name is not None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, int]
    """Milli-units of each counter of the set that the device uses up when allocated."""


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    """Milli-units."""
    consumes_counters: tuple[CounterConsumption, ...] = ()
    allow_multiple_allocations: bool = False
    access: NodeAccess | None = None
    """Its own node access, in a slice with perDeviceNodeSelection; else the slice's."""
    taints: tuple[Taint, ...] = ()

    def for_cel(self, driver: str) -> CelDevice:
        return CelDevice(driver, self.attributes, self.capacity, self.allow_multiple_allocations)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    access: NodeAccess | None
    """None with perDeviceNodeSelection: each device says."""
    devices: tuple[Device, ...] = ()
    shared_counters: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Counter set -> counter -> milli-units the pool's devices share."""


def read_resource_slice(obj: Mapping[str, Any]) -> ResourceSlice:
    kind = "ResourceSlice"
    name = _name(obj, kind)
    spec = _mapping(obj.get("spec"), kind, name, "spec")
    driver = _string(spec.get("driver"), kind, name, "spec.driver")
    pool = _mapping(spec.get("pool"), kind, name, "spec.pool")
    per_device = spec.get("perDeviceNodeSelection") is True
    access = None if per_device else _access(spec, kind, name, "spec")
    devices = tuple(
        _device(raw, kind, name, f"spec.devices[{i}]", per_device)
        for i, raw in enumerate(spec.get("devices") or ())
    )
    counters = {
        _string(s.get("name"), kind, name, f"spec.sharedCounters[{i}].name"): _counters(
            s.get("counters"), kind, name, f"spec.sharedCounters[{i}].counters"
        )
        for i, s in enumerate(spec.get("sharedCounters") or ())
        if isinstance(s, Mapping)
    }
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=_string(pool.get("name"), kind, name, "spec.pool.name"),
        generation=_integer(pool.get("generation"), kind, name, "spec.pool.generation"),
        slice_count=_integer(
            pool.get("resourceSliceCount"), kind, name, "spec.pool.resourceSliceCount"
        ),
        access=access,
        devices=devices,
        shared_counters=counters,
    )


@dataclass(frozen=True, slots=True)
class Pool:
    """A driver's pool at its newest generation."""

    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSlice, ...]
    complete: bool
    """All the generation's slices are there. An incomplete pool's devices are never counted
    as free: what is missing may hold the counters or the devices a claim was given."""

    @property
    def devices(self) -> tuple[tuple[ResourceSlice, Device], ...]:
        return tuple((s, d) for s in self.slices for d in s.devices)

    @property
    def shared_counters(self) -> dict[str, Mapping[str, int]]:
        out: dict[str, Mapping[str, int]] = {}
        for s in self.slices:
            out.update(s.shared_counters)
        return out


def pools(slices: Iterable[ResourceSlice]) -> tuple[Pool, ...]:
    """The pools the slices make up, by driver then name: each at its newest generation (older
    slices are being replaced by their driver and count for nothing)."""
    grouped: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        grouped.setdefault((s.driver, s.pool), []).append(s)
    out: list[Pool] = []
    for (driver, name), found in sorted(grouped.items()):
        newest = max(s.generation for s in found)
        current = tuple(sorted((s for s in found if s.generation == newest), key=lambda s: s.name))
        counts = {s.slice_count for s in current}
        complete = len(counts) == 1 and len(current) == counts.pop()
        out.append(Pool(driver, name, newest, current, complete))
    return tuple(out)


# -- ResourceClaim and ResourceClaimTemplate --------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """One way to satisfy a request: `count` devices of a class (or all of them)."""

    name: str
    """The request's name, or `request/subrequest` for an alternative of firstAvailable: the
    name an allocation result carries."""
    device_class: str
    mode: AllocationMode = "ExactCount"
    count: int = 1
    selectors: tuple[str, ...] = ()
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    alternatives: tuple[ExactRequest, ...]
    """One for `exactly`; the firstAvailable list in order (kube-scheduler takes the first
    it can satisfy)."""

    @property
    def first_available(self) -> bool:
        return len(self.alternatives) > 1 or self.alternatives[0].name != self.name


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()

    def alternative(self, result_request: str) -> ExactRequest | None:
        """The (sub)request an allocation result names."""
        for request in self.requests:
            for alternative in request.alternatives:
                if alternative.name == result_request:
                    return alternative
        return None


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    share_id: str | None = None
    """Set when the device allows multiple allocations and this is one share of it."""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    spec: ClaimSpec
    allocation: tuple[AllocatedDevice, ...] | None = None
    """None until kube-scheduler allocates it."""
    allocation_nodes: tuple[NodeTerm, ...] | None = None
    reserved_for: tuple[tuple[str, str], ...] = ()
    """(resource, name) of each consumer, such as ("pods", "train-0")."""
    owner_pod: str | None = None
    """The pod whose template it was made from (its controlling owner)."""
    deleting: bool = False
    for_extended_resources: bool = False
    """Made by kube-scheduler for a pod's container requests of an extended resource that
    a DeviceClass serves: those requests count, not this claim."""


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec


def read_resource_claim(obj: Mapping[str, Any]) -> ResourceClaim:
    kind = "ResourceClaim"
    name = _name(obj, kind)
    metadata = obj.get("metadata") or {}
    status = _mapping(obj.get("status") or {}, kind, name, "status")
    allocation: tuple[AllocatedDevice, ...] | None = None
    nodes: tuple[NodeTerm, ...] | None = None
    raw_allocation = status.get("allocation")
    if raw_allocation:
        where = "status.allocation"
        raw_allocation = _mapping(raw_allocation, kind, name, where)
        devices = _mapping(raw_allocation.get("devices") or {}, kind, name, f"{where}.devices")
        allocation = tuple(
            _result(r, kind, name, f"{where}.devices.results[{i}]")
            for i, r in enumerate(devices.get("results") or ())
        )
        if raw_allocation.get("nodeSelector"):
            selector = _mapping(raw_allocation["nodeSelector"], kind, name, f"{where}.nodeSelector")
            nodes = node_selector_terms(selector, kind, name, f"{where}.nodeSelector")
    owners = [
        o
        for o in metadata.get("ownerReferences") or ()
        if isinstance(o, Mapping) and o.get("controller") and o.get("kind") == "Pod"
    ]
    return ResourceClaim(
        namespace=str(metadata.get("namespace") or ""),
        name=name,
        spec=read_claim_spec(obj.get("spec"), kind, name, "spec"),
        allocation=allocation,
        allocation_nodes=nodes,
        reserved_for=tuple(
            (str(r.get("resource") or ""), str(r.get("name") or ""))
            for r in status.get("reservedFor") or ()
            if isinstance(r, Mapping)
        ),
        owner_pod=str(owners[0].get("name")) if owners else None,
        deleting=bool(metadata.get("deletionTimestamp")),
        for_extended_resources=(metadata.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM)
        == "true",
    )


def read_claim_template(obj: Mapping[str, Any]) -> ResourceClaimTemplate:
    kind = "ResourceClaimTemplate"
    name = _name(obj, kind)
    spec = _mapping(obj.get("spec"), kind, name, "spec")
    return ResourceClaimTemplate(
        namespace=str((obj.get("metadata") or {}).get("namespace") or ""),
        name=name,
        spec=read_claim_spec(spec.get("spec"), kind, name, "spec.spec"),
    )


def read_claim_spec(raw: Any, kind: str, name: str, where: str) -> ClaimSpec:
    spec = _mapping(raw or {}, kind, name, where)
    devices = _mapping(spec.get("devices") or {}, kind, name, f"{where}.devices")
    return ClaimSpec(
        tuple(
            _request(r, kind, name, f"{where}.devices.requests[{i}]")
            for i, r in enumerate(devices.get("requests") or ())
        )
    )


# -- the claims a pod names --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's `spec.resourceClaims`: a claim named directly (it may be shared),
    or a template each pod gets a claim of its own from."""

    name: str
    claim: str | None = None
    template: str | None = None


def read_pod_claims(
    spec: Mapping[str, Any], kind: str, name: str, base: str
) -> tuple[PodClaim, ...]:
    out: list[PodClaim] = []
    for i, raw in enumerate(spec.get("resourceClaims") or ()):
        where = f"{base}.resourceClaims[{i}]"
        entry = _mapping(raw, kind, name, where)
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if (claim is None) == (template is None):
            raise InvalidObject(
                kind, name, where, "expected one of resourceClaimName, resourceClaimTemplateName"
            )
        out.append(
            PodClaim(
                name=_string(entry.get("name"), kind, name, f"{where}.name"),
                claim=str(claim) if claim is not None else None,
                template=str(template) if template is not None else None,
            )
        )
    return tuple(out)


def read_generated_claims(status: Mapping[str, Any]) -> dict[str, str]:
    """A pod's claims the resourceclaim controller made from templates: pod claim name ->
    ResourceClaim name (`status.resourceClaimStatuses`)."""
    return {
        str(s["name"]): str(s["resourceClaimName"])
        for s in status.get("resourceClaimStatuses") or ()
        if isinstance(s, Mapping) and s.get("name") and s.get("resourceClaimName")
    }


# -- readers ----------------------------------------------------------------------------------


def _request(raw: Any, kind: str, name: str, where: str) -> DeviceRequest:
    entry = _mapping(raw, kind, name, where)
    request = _string(entry.get("name"), kind, name, f"{where}.name")
    exactly, first = entry.get("exactly"), entry.get("firstAvailable")
    if exactly is not None and first is None:
        return DeviceRequest(request, (_exact(exactly, request, kind, name, f"{where}.exactly"),))
    if exactly is not None or not isinstance(first, list) or not first:
        raise InvalidObject(kind, name, where, "expected one of exactly, firstAvailable")
    alternatives = []
    for i, sub in enumerate(first):
        at = f"{where}.firstAvailable[{i}]"
        sub_name = _string(_mapping(sub, kind, name, at).get("name"), kind, name, f"{at}.name")
        alternatives.append(_exact(sub, f"{request}/{sub_name}", kind, name, at))
    return DeviceRequest(request, tuple(alternatives))


def _exact(raw: Any, request: str, kind: str, name: str, where: str) -> ExactRequest:
    entry = _mapping(raw, kind, name, where)
    written = entry.get("allocationMode") or "ExactCount"
    if written not in ("ExactCount", "All"):
        raise InvalidObject(
            kind, name, f"{where}.allocationMode", f"{written!r} is not ExactCount or All"
        )
    mode: AllocationMode = "All" if written == "All" else "ExactCount"
    count = entry.get("count", 1) if mode == "ExactCount" else 0
    if mode == "ExactCount" and (
        isinstance(count, bool) or not isinstance(count, int) or count < 1
    ):
        raise InvalidObject(kind, name, f"{where}.count", f"{count!r} is not a count of at least 1")
    return ExactRequest(
        name=request,
        device_class=_string(entry.get("deviceClassName"), kind, name, f"{where}.deviceClassName"),
        mode=mode,
        count=count,
        selectors=_selectors(entry.get("selectors"), kind, name, f"{where}.selectors"),
        admin_access=entry.get("adminAccess") is True,
    )


def _result(raw: Any, kind: str, name: str, where: str) -> AllocatedDevice:
    entry = _mapping(raw, kind, name, where)
    return AllocatedDevice(
        request=_string(entry.get("request"), kind, name, f"{where}.request"),
        driver=_string(entry.get("driver"), kind, name, f"{where}.driver"),
        pool=_string(entry.get("pool"), kind, name, f"{where}.pool"),
        device=_string(entry.get("device"), kind, name, f"{where}.device"),
        admin_access=entry.get("adminAccess") is True,
        share_id=str(entry["shareID"]) if entry.get("shareID") else None,
    )


def _device(raw: Any, kind: str, name: str, where: str, per_device: bool) -> Device:
    entry = _mapping(raw, kind, name, where)
    attributes = {
        str(key): _attribute(value, kind, name, f"{where}.attributes[{key}]")
        for key, value in _mapping(entry.get("attributes") or {}, kind, name, where).items()
    }
    capacity = {
        str(key): _quantity(
            _mapping(value, kind, name, f"{where}.capacity[{key}]").get("value"),
            kind,
            name,
            f"{where}.capacity[{key}].value",
        )
        for key, value in _mapping(entry.get("capacity") or {}, kind, name, where).items()
    }
    consumes = tuple(
        CounterConsumption(
            _string(c.get("counterSet"), kind, name, f"{where}.consumesCounters[{i}].counterSet"),
            _counters(c.get("counters"), kind, name, f"{where}.consumesCounters[{i}].counters"),
        )
        for i, c in enumerate(entry.get("consumesCounters") or ())
        if isinstance(c, Mapping)
    )
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in entry.get("taints") or ()
        if isinstance(t, Mapping)
    )
    return Device(
        name=_string(entry.get("name"), kind, name, f"{where}.name"),
        attributes=attributes,
        capacity=capacity,
        consumes_counters=consumes,
        allow_multiple_allocations=entry.get("allowMultipleAllocations") is True,
        access=_access(entry, kind, name, where) if per_device else None,
        taints=taints,
    )


def _access(raw: Mapping[str, Any], kind: str, name: str, where: str) -> NodeAccess:
    node, selector, everywhere = raw.get("nodeName"), raw.get("nodeSelector"), raw.get("allNodes")
    if sum((bool(node), bool(selector), everywhere is True)) != 1:
        raise InvalidObject(kind, name, where, "expected one of nodeName, nodeSelector, allNodes")
    if node:
        return NodeAccess(node_name=str(node))
    if selector:
        where = f"{where}.nodeSelector"
        terms = node_selector_terms(_mapping(selector, kind, name, where), kind, name, where)
        return NodeAccess(node_selector=terms)
    return NodeAccess(all_nodes=True)


def _attribute(raw: Any, kind: str, name: str, where: str) -> AttributeValue:
    entry = _mapping(raw, kind, name, where)
    found = [(k, v) for k, v in entry.items() if k.rstrip("s") in _ATTRIBUTE_KINDS]
    if len(found) != 1:
        raise InvalidObject(kind, name, where, "expected one of bool, int, string, version")
    key, value = found[0]
    if key.endswith("s"):
        if not isinstance(value, list):
            raise InvalidObject(kind, name, f"{where}.{key}", "expected a list")
        return tuple(_scalar(key[:-1], v, kind, name, f"{where}.{key}") for v in value)
    return _scalar(key, value, kind, name, f"{where}.{key}")


def _scalar(key: str, value: Any, kind: str, name: str, where: str) -> Scalar:
    if key == "bool" and isinstance(value, bool):
        return value
    if key == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if key == "string" and isinstance(value, str):
        return value
    if key == "version" and isinstance(value, str):
        try:
            return parse_semver(value)
        except SemverError as error:
            raise InvalidObject(kind, name, where, str(error)) from None
    raise InvalidObject(kind, name, where, f"{value!r} is not a {key}")


def _counters(raw: Any, kind: str, name: str, where: str) -> dict[str, int]:
    return {
        str(key): _quantity(
            _mapping(value, kind, name, f"{where}[{key}]").get("value"),
            kind,
            name,
            f"{where}[{key}].value",
        )
        for key, value in _mapping(raw or {}, kind, name, where).items()
    }


def _selectors(raw: Any, kind: str, name: str, where: str) -> tuple[str, ...]:
    out: list[str] = []
    for i, selector in enumerate(raw or ()):
        cel = _mapping(
            _mapping(selector, kind, name, f"{where}[{i}]").get("cel"),
            kind,
            name,
            f"{where}[{i}].cel",
        )
        out.append(_string(cel.get("expression"), kind, name, f"{where}[{i}].cel.expression"))
    return tuple(out)


def _name(obj: Mapping[str, Any], kind: str) -> str:
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject(kind, "?", "metadata.name", "missing")
    return name


def _mapping(raw: Any, kind: str, name: str, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidObject(kind, name, where, "expected an object")
    return raw


def _string(raw: Any, kind: str, name: str, where: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise InvalidObject(kind, name, where, "expected a non-empty string")
    return raw


def _integer(raw: Any, kind: str, name: str, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise InvalidObject(kind, name, where, f"{raw!r} is not a non-negative integer")
    return raw


def _quantity(raw: Any, kind: str, name: str, where: str) -> int:
    try:
        return parse_quantity(raw)
    except QuantityError as error:
        raise InvalidObject(kind, name, where, str(error)) from None
