"""What devices asked through DRA claims count as in the queues (docs/scheduler.md, *Devices
(DRA)*): each device is one unit of the quota resource its DeviceClass maps to.

- The resource of a class: the mapping's (the scheduler configuration's
  `deviceClassMappings`), else the class's own `extendedResourceName`, else
  `deviceclass.resource.kubernetes.io/<class>` (the name Kubernetes itself gives a class's
  devices when a container asks for them as an extended resource). Every device therefore
  counts as exactly one resource, and none goes uncounted.
- A claim made from a template is the pod's own: it counts once per pod. A claim named
  directly may be shared: it counts once per workload, however many of its pods name it.
- Before allocation a claim counts what its spec asks: `count` devices per request
  (`ExactCount`); for `firstAvailable`, per resource the most any alternative asks (whichever
  kube-scheduler takes is covered); `allocationMode: All` cannot be counted before
  allocation. Once allocated, it counts what it was given (`status.allocation`).
- Requests with `adminAccess` take no device from anyone: they count nothing.
- A container's request for an extended resource that a DeviceClass serves counts as that
  class's resource, whichever way kube-scheduler satisfies it (a device plugin's
  allocatable, or devices of the class through a claim it makes for the pod, which then
  counts nothing itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.api.device_claims import (
    ClaimSpec,
    ExactRequest,
    PodClaim,
    ResourceClaim,
    ResourceClaimTemplate,
)
from sluice.api.devices import DeviceClass
from sluice.api.errors import ConfigError
from sluice.api.resources import EMPTY, Resources

IMPLICIT_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
ONE_DEVICE: Final = 1000
"""A device in milli-units, as every resource amount is kept."""
MAPPING_KEY: Final = "deviceClassMappings"


@dataclass(frozen=True, slots=True)
class DevicesUnknown:
    """Why what a pod or claim asks cannot be known yet: the workload waits, saying this."""

    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True, slots=True)
class DeviceMapping:
    """DeviceClass name -> the quota resource its devices count as."""

    resources: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any) -> DeviceMapping:
        """Read `[{name: nvidia.com/gpu, deviceClassNames: [gpu.nvidia.com, ...]}, ...]`
        (Kueue's shape). A class may be named once; several classes may share a resource."""
        if raw is None:
            return cls()
        if not isinstance(raw, list):
            raise ConfigError(MAPPING_KEY, "expected a list of {name, deviceClassNames}")
        out: dict[str, str] = {}
        for i, entry in enumerate(raw):
            key = f"{MAPPING_KEY}[{i}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise ConfigError(key, "expected name (a resource) and deviceClassNames")
            classes = entry.get("deviceClassNames")
            if not isinstance(classes, list) or not classes:
                raise ConfigError(f"{key}.deviceClassNames", "expected a non-empty list")
            for name in classes:
                if not isinstance(name, str) or not name:
                    raise ConfigError(f"{key}.deviceClassNames", f"{name!r} is not a class name")
                if name in out:
                    raise ConfigError(
                        f"{key}.deviceClassNames",
                        f"class {name} already counts as {out[name]}; a class counts as one "
                        "resource",
                    )
                out[name] = entry["name"]
        return cls(out)

    def resource_of(self, device_class: DeviceClass) -> str:
        return (
            self.resources.get(device_class.name)
            or device_class.extended_resource_name
            or IMPLICIT_PREFIX + device_class.name
        )


Classes = Mapping[str, DeviceClass]


def claim_asks(
    spec: ClaimSpec, classes: Classes, mapping: DeviceMapping, what: str
) -> Resources | DevicesUnknown:
    """What a claim spec asks before allocation; `what` names the claim in a reason."""
    total = EMPTY
    for request in spec.requests:
        most = EMPTY
        for alternative in request.alternatives:
            asked = _alternative_asks(alternative, classes, mapping, what)
            if isinstance(asked, DevicesUnknown):
                return asked
            most = most.maximum(asked)
        total = total + most
    return total


def claim_holds(
    claim: ResourceClaim, classes: Classes, mapping: DeviceMapping
) -> Resources | DevicesUnknown:
    """What an allocated claim was given (each device of each result, whichever alternative
    was taken); what it asks while it is not allocated."""
    what = f"ResourceClaim {claim.namespace}/{claim.name}"
    if claim.for_extended_resources:
        return EMPTY
    if claim.allocation is None:
        return claim_asks(claim.spec, classes, mapping, what)
    counts: dict[str, int] = {}
    for result in claim.allocation:
        if result.admin_access:
            continue
        alternative = claim.spec.alternative(result.request)
        if alternative is None:
            return DevicesUnknown(
                f"{what} was allocated for request {result.request}, which its spec lacks"
            )
        device_class = classes.get(alternative.device_class)
        if device_class is None:
            return _no_class(alternative.device_class, what)
        resource = mapping.resource_of(device_class)
        counts[resource] = counts.get(resource, 0) + ONE_DEVICE
    return Resources(counts)


def serving_classes(classes: Classes) -> dict[str, DeviceClass]:
    """Extended resource -> the DeviceClass whose devices serve it: each class's own
    `extendedResourceName` (of two naming one, the newer, then the first by name, as
    Kubernetes picks), and every class's implicit `deviceclass.resource.kubernetes.io/<name>`."""
    out = {IMPLICIT_PREFIX + c.name: c for c in classes.values()}
    named = sorted(
        (c for c in classes.values() if c.extended_resource_name),
        key=lambda c: c.name,
        reverse=True,
    )
    for c in sorted(named, key=lambda c: c.created):  # stable: equal times keep name order
        out[c.extended_resource_name or ""] = c
    return out


def extended_requests(
    request: Resources, serving: Mapping[str, DeviceClass], mapping: DeviceMapping
) -> Resources:
    """A pod's container request with each extended resource a DeviceClass serves counted as
    that class's resource (the same name unless the mapping names another)."""
    if serving.keys().isdisjoint(request):
        return request
    counts: dict[str, int] = {}
    for name, amount in request.items():
        device_class = serving.get(name)
        counted = mapping.resource_of(device_class) if device_class is not None else name
        counts[counted] = counts.get(counted, 0) + amount
    return Resources(counts)


@dataclass(frozen=True, slots=True)
class PodDevices:
    """What one pod's claims count as."""

    own: Resources = EMPTY
    """Its claims from templates: each pod has its own."""
    shared: Mapping[str, Resources] = field(default_factory=dict)
    """Claims it names directly, by `namespace/name`: counted once per workload."""


def pod_devices(
    namespace: str,
    claims_of_pod: Iterable[PodClaim],
    *,
    templates: Mapping[str, ResourceClaimTemplate],
    claims: Mapping[str, ResourceClaim],
    classes: Classes,
    mapping: DeviceMapping,
    generated: Mapping[str, str] | None = None,
) -> PodDevices | DevicesUnknown:
    """What a pod's `spec.resourceClaims` count as. `templates` and `claims` are the
    namespace's, by name; `generated` maps the pod's template claims to the claims the
    resourceclaim controller made for it (a pod that exists), which then count as they are."""
    own = EMPTY
    shared: dict[str, Resources] = {}
    for entry in claims_of_pod:
        made = (generated or {}).get(entry.name)
        name = entry.claim or made
        if name is not None:
            claim = claims.get(name)
            if claim is None:
                return DevicesUnknown(
                    f"pod claim {entry.name}: ResourceClaim {namespace}/{name} does not exist"
                )
            held = claim_holds(claim, classes, mapping)
            if isinstance(held, DevicesUnknown):
                return held
            if entry.claim is None:
                own = own + held
            else:
                shared[f"{namespace}/{name}"] = held
            continue
        template = templates.get(entry.template or "")
        if template is None:
            return DevicesUnknown(
                f"pod claim {entry.name}: ResourceClaimTemplate {namespace}/{entry.template} "
                "does not exist"
            )
        asked = claim_asks(
            template.spec, classes, mapping, f"ResourceClaimTemplate {namespace}/{template.name}"
        )
        if isinstance(asked, DevicesUnknown):
            return asked
        own = own + asked
    return PodDevices(own, shared)


def workload_devices(pods: Iterable[tuple[PodDevices, int]]) -> Resources:
    """What a workload's claims count as: each (pod's devices, how many such pods) counts its
    own claims per pod, and each shared claim once, however many pods name it."""
    total = EMPTY
    shared: dict[str, Resources] = {}
    for devices, count in pods:
        total = total + devices.own.scale(count)
        shared.update(devices.shared)
    for held in shared.values():
        total = total + held
    return total


def _alternative_asks(
    alternative: ExactRequest, classes: Classes, mapping: DeviceMapping, what: str
) -> Resources | DevicesUnknown:
    device_class = classes.get(alternative.device_class)
    if device_class is None:
        return _no_class(alternative.device_class, what)
    if alternative.admin_access:
        return EMPTY
    if alternative.mode == "All":
        return DevicesUnknown(
            f"{what} request {alternative.name} asks for all devices of class "
            f"{device_class.name} (allocationMode All): how many is known only once they are "
            "allocated"
        )
    return Resources({mapping.resource_of(device_class): alternative.count * ONE_DEVICE})


def _no_class(name: str, what: str) -> DevicesUnknown:
    return DevicesUnknown(
        f"{what} asks for devices of class {name}, and no DeviceClass {name} exists"
    )
