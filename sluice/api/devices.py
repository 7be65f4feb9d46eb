"""The devices of Dynamic Resource Allocation (resource.k8s.io/v1) as sluice reads them:
DeviceClasses, and the ResourceSlices that publish devices, grouped into their pools. Read here
into immutable values; the claims are sluice/api/device_claims.py, what they count as in the
queues sluice/api/device_quota.py, the rules in docs/scheduler.md, *Devices (DRA)*.

A driver publishes the devices of a pool in one or more ResourceSlices of one generation; a
pool is complete when all `resourceSliceCount` slices of its newest generation are there, and
only the newest generation's devices exist (older slices are being replaced). A device is
reached from one node (`nodeName`), from the nodes a selector matches (`nodeSelector`), from
all nodes (`allNodes`), or, with `perDeviceNodeSelection`, as each device says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.api.constraints import NodeTerm, Taint, node_selector_terms
from sluice.api.device_cel import AttributeValue, CelDevice, Scalar
from sluice.api.device_fields import (
    count_at,
    mapping_at,
    object_name,
    quantity_at,
    read_selectors,
    string_at,
)
from sluice.api.errors import InvalidObject
from sluice.api.semver import SemverError, parse_semver

GROUP: Final = "resource.k8s.io"
_ATTRIBUTE_KINDS: Final = ("bool", "int", "string", "version")

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
    name = object_name(obj, "DeviceClass")
    spec = mapping_at(obj.get("spec"), "DeviceClass", name, "spec")
    extended = spec.get("extendedResourceName")
    if extended is not None and not isinstance(extended, str):
        raise InvalidObject("DeviceClass", name, "spec.extendedResourceName", "expected a string")
    return DeviceClass(
        name=name,
        selectors=read_selectors(spec.get("selectors"), "DeviceClass", name, "spec.selectors"),
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
    name = object_name(obj, kind)
    spec = mapping_at(obj.get("spec"), kind, name, "spec")
    driver = string_at(spec.get("driver"), kind, name, "spec.driver")
    pool = mapping_at(spec.get("pool"), kind, name, "spec.pool")
    per_device = spec.get("perDeviceNodeSelection") is True
    access = None if per_device else _access(spec, kind, name, "spec")
    devices = tuple(
        _device(raw, kind, name, f"spec.devices[{i}]", per_device)
        for i, raw in enumerate(spec.get("devices") or ())
    )
    counters = {
        string_at(s.get("name"), kind, name, f"spec.sharedCounters[{i}].name"): _counters(
            s.get("counters"), kind, name, f"spec.sharedCounters[{i}].counters"
        )
        for i, s in enumerate(spec.get("sharedCounters") or ())
        if isinstance(s, Mapping)
    }
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=string_at(pool.get("name"), kind, name, "spec.pool.name"),
        generation=count_at(pool.get("generation"), kind, name, "spec.pool.generation"),
        slice_count=count_at(
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


# -- readers ----------------------------------------------------------------------------------


def _device(raw: Any, kind: str, name: str, where: str, per_device: bool) -> Device:
    entry = mapping_at(raw, kind, name, where)
    attributes = {
        str(key): _attribute(value, kind, name, f"{where}.attributes[{key}]")
        for key, value in mapping_at(entry.get("attributes") or {}, kind, name, where).items()
    }
    capacity = {
        str(key): quantity_at(
            mapping_at(value, kind, name, f"{where}.capacity[{key}]").get("value"),
            kind,
            name,
            f"{where}.capacity[{key}].value",
        )
        for key, value in mapping_at(entry.get("capacity") or {}, kind, name, where).items()
    }
    consumes = tuple(
        CounterConsumption(
            string_at(c.get("counterSet"), kind, name, f"{where}.consumesCounters[{i}].counterSet"),
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
        name=string_at(entry.get("name"), kind, name, f"{where}.name"),
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
        terms = node_selector_terms(mapping_at(selector, kind, name, where), kind, name, where)
        return NodeAccess(node_selector=terms)
    return NodeAccess(all_nodes=True)


def _attribute(raw: Any, kind: str, name: str, where: str) -> AttributeValue:
    entry = mapping_at(raw, kind, name, where)
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
        str(key): quantity_at(
            mapping_at(value, kind, name, f"{where}[{key}]").get("value"),
            kind,
            name,
            f"{where}[{key}].value",
        )
        for key, value in mapping_at(raw or {}, kind, name, where).items()
    }
