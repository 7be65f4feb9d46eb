"""ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1) as sluice reads them, and the
claims a pod names: what a claim asks (its requests, each exactly one way or a firstAvailable
list of ways) and what kube-scheduler gave it (``status.allocation``). What they count as in
the queues is sluice/api/device_quota.py; the rules are in docs/scheduler.md, *Devices (DRA)*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from sluice.api.constraints import NodeTerm, node_selector_terms
from sluice.api.device_fields import mapping_at, object_name, read_selectors, string_at
from sluice.api.errors import InvalidObject

EXTENDED_RESOURCE_CLAIM: Final = "resource.kubernetes.io/extended-resource-claim"
"""The annotation kube-scheduler puts on a claim it makes for extended resources."""

AllocationMode = Literal["ExactCount", "All"]


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
    name = object_name(obj, kind)
    metadata = obj.get("metadata") or {}
    status = mapping_at(obj.get("status") or {}, kind, name, "status")
    allocation: tuple[AllocatedDevice, ...] | None = None
    nodes: tuple[NodeTerm, ...] | None = None
    raw_allocation = status.get("allocation")
    if raw_allocation:
        where = "status.allocation"
        raw_allocation = mapping_at(raw_allocation, kind, name, where)
        devices = mapping_at(raw_allocation.get("devices") or {}, kind, name, f"{where}.devices")
        allocation = tuple(
            _result(r, kind, name, f"{where}.devices.results[{i}]")
            for i, r in enumerate(devices.get("results") or ())
        )
        if raw_allocation.get("nodeSelector"):
            selector = mapping_at(
                raw_allocation["nodeSelector"], kind, name, f"{where}.nodeSelector"
            )
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
    name = object_name(obj, kind)
    spec = mapping_at(obj.get("spec"), kind, name, "spec")
    return ResourceClaimTemplate(
        namespace=str((obj.get("metadata") or {}).get("namespace") or ""),
        name=name,
        spec=read_claim_spec(spec.get("spec"), kind, name, "spec.spec"),
    )


def read_claim_spec(raw: Any, kind: str, name: str, where: str) -> ClaimSpec:
    spec = mapping_at(raw or {}, kind, name, where)
    devices = mapping_at(spec.get("devices") or {}, kind, name, f"{where}.devices")
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
        entry = mapping_at(raw, kind, name, where)
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if (claim is None) == (template is None):
            raise InvalidObject(
                kind, name, where, "expected one of resourceClaimName, resourceClaimTemplateName"
            )
        out.append(
            PodClaim(
                name=string_at(entry.get("name"), kind, name, f"{where}.name"),
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


def _request(raw: Any, kind: str, name: str, where: str) -> DeviceRequest:
    entry = mapping_at(raw, kind, name, where)
    request = string_at(entry.get("name"), kind, name, f"{where}.name")
    exactly, first = entry.get("exactly"), entry.get("firstAvailable")
    if exactly is not None and first is None:
        return DeviceRequest(request, (_exact(exactly, request, kind, name, f"{where}.exactly"),))
    if exactly is not None or not isinstance(first, list) or not first:
        raise InvalidObject(kind, name, where, "expected one of exactly, firstAvailable")
    alternatives = []
    for i, sub in enumerate(first):
        at = f"{where}.firstAvailable[{i}]"
        sub_name = string_at(mapping_at(sub, kind, name, at).get("name"), kind, name, f"{at}.name")
        alternatives.append(_exact(sub, f"{request}/{sub_name}", kind, name, at))
    return DeviceRequest(request, tuple(alternatives))


def _exact(raw: Any, request: str, kind: str, name: str, where: str) -> ExactRequest:
    entry = mapping_at(raw, kind, name, where)
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
        device_class=string_at(
            entry.get("deviceClassName"), kind, name, f"{where}.deviceClassName"
        ),
        mode=mode,
        count=count,
        selectors=read_selectors(entry.get("selectors"), kind, name, f"{where}.selectors"),
        admin_access=entry.get("adminAccess") is True,
    )


def _result(raw: Any, kind: str, name: str, where: str) -> AllocatedDevice:
    entry = mapping_at(raw, kind, name, where)
    return AllocatedDevice(
        request=string_at(entry.get("request"), kind, name, f"{where}.request"),
        driver=string_at(entry.get("driver"), kind, name, f"{where}.driver"),
        pool=string_at(entry.get("pool"), kind, name, f"{where}.pool"),
        device=string_at(entry.get("device"), kind, name, f"{where}.device"),
        admin_access=entry.get("adminAccess") is True,
        share_id=str(entry["shareID"]) if entry.get("shareID") else None,
    )
