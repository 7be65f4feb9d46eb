"""What a pod template's devices count as, given what the cluster holds beside it: the
DeviceClasses, the scheduler configuration's mapping, and its namespace's ResourceClaims and
ResourceClaimTemplates (docs/scheduler.md, *Devices (DRA)*).

A workload's pod sets ask what their pods will: a template is read with its namespace's
``DeviceContext``, as it is with its LimitRange defaults (``pod_defaults.PodDefaults``). Its
claims from templates are each pod's own and join the pod's request; the claims it names
directly may be shared, and count once per workload (``SpecDevices.named``); a container's
request for an extended resource a DeviceClass serves counts as that class's resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.api.device_claims import ResourceClaim, ResourceClaimTemplate, read_pod_claims
from sluice.api.device_quota import (
    DeviceMapping,
    DevicesUnknown,
    extended_requests,
    pod_devices,
    serving_classes,
)
from sluice.api.devices import DeviceClass
from sluice.api.resources import Resources
from sluice.api.views import NamedClaims


@dataclass(frozen=True, slots=True)
class DeviceContext:
    """What the devices a pod of one namespace asks count as: the cluster's DeviceClasses and
    mapping, and the namespace's templates and the claims its pods may name (claims made from
    templates are left out: no workload names them)."""

    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    mapping: DeviceMapping = field(default_factory=DeviceMapping)
    templates: Mapping[str, ResourceClaimTemplate] = field(default_factory=dict)
    claims: Mapping[str, ResourceClaim] = field(default_factory=dict)
    serving: Mapping[str, DeviceClass] = field(default_factory=dict)
    """Extended resource -> the class whose devices serve it (``serving_classes``)."""

    @classmethod
    def of(
        cls,
        classes: Mapping[str, DeviceClass],
        mapping: DeviceMapping,
        templates: Mapping[str, ResourceClaimTemplate] | None = None,
        claims: Mapping[str, ResourceClaim] | None = None,
    ) -> DeviceContext:
        return cls(classes, mapping, templates or {}, claims or {}, serving_classes(classes))

    def __bool__(self) -> bool:
        return bool(self.classes) or bool(self.templates) or bool(self.claims)


NO_DEVICES = DeviceContext()


@dataclass(frozen=True, slots=True)
class SpecDevices:
    """What a pod spec asks once its devices are counted."""

    request: Resources
    """Its pod's request, its own claims' devices and device-backed extended resources in."""
    named: NamedClaims = ()
    unknown: str = ""
    """Why what it asks cannot be known before allocation ("" when it can): the workload
    waits with this as its reason."""


def spec_devices(
    spec: Mapping[str, Any],
    request: Resources,
    namespace: str,
    context: DeviceContext,
    kind: str,
    full: str,
    where: str,
) -> SpecDevices:
    """``request`` (the pod's, as Kubernetes counts its containers) with what the pod spec at
    ``where`` asks through claims and device-backed extended resources counted in."""
    if context.serving:
        request = extended_requests(request, context.serving, context.mapping)
    if not spec.get("resourceClaims"):
        return SpecDevices(request)
    entries = read_pod_claims(spec, kind, full, where)
    found = pod_devices(
        namespace,
        entries,
        templates=context.templates,
        claims=context.claims,
        classes=context.classes,
        mapping=context.mapping,
    )
    if isinstance(found, DevicesUnknown):
        return SpecDevices(request, unknown=found.reason)
    return SpecDevices(request + found.own, tuple(sorted(found.shared.items())))


def device_contexts(
    classes: Iterable[DeviceClass],
    templates: Iterable[ResourceClaimTemplate],
    claims: Iterable[ResourceClaim],
    mapping: DeviceMapping,
) -> dict[str, DeviceContext]:
    """Namespace -> its DeviceContext, for every namespace with templates or claims its pods
    may name; the key "" holds what every other namespace gets (the classes alone). Claims
    made from templates, or for extended resources, are no pod's to name: left out."""
    by_name = {c.name: c for c in classes}
    serving = serving_classes(by_name)
    own_templates: dict[str, dict[str, ResourceClaimTemplate]] = {}
    for template in templates:
        own_templates.setdefault(template.namespace, {})[template.name] = template
    named: dict[str, dict[str, ResourceClaim]] = {}
    for claim in claims:
        if claim.owner_pod is None and not claim.for_extended_resources:
            named.setdefault(claim.namespace, {})[claim.name] = claim
    out = {
        namespace: DeviceContext(
            by_name, mapping, own_templates.get(namespace, {}), named.get(namespace, {}), serving
        )
        for namespace in {*own_templates, *named}
    }
    out[""] = DeviceContext(by_name, mapping, serving=serving) if by_name else NO_DEVICES
    return out
