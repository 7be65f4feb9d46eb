"""A DRA driver for the living cluster, as plain API objects: a `DeviceClass` and, for each
KWOK node, one `ResourceSlice` listing that node's devices.

A real driver publishes its slices from a kubelet plugin on each node; KWOK runs no kubelet,
and kube-scheduler needs nothing more than the slices to allocate devices, so a test publishes
them itself. Each node's devices form one pool named after the node (one slice, generation 1),
as a node-local driver publishes them. kube-scheduler writes what it allocated into the claim's
`status.allocation`, naming the pool and the device; the controller manager's resourceclaim
controller makes each pod's claims from its templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

API_VERSION = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"
DEVICES_PER_NODE = 8
# What each device offers, in the driver's own terms (a device's `capacity`).
DEVICE_MEMORY = "80Gi"
MODEL = "example-a100"


def device_class(
    name: str,
    *,
    driver: str = DRIVER,
    selectors: tuple[str, ...] = (),
    extended_resource_name: str | None = None,
) -> dict[str, Any]:
    """A DeviceClass selecting every device of `driver`, narrowed by `selectors` (CEL); with
    `extended_resource_name`, a container asking for that extended resource gets devices of
    the class (kube-scheduler makes a claim for the pod)."""
    expressions = (f"device.driver == '{driver}'", *selectors)
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def device(index: int, *, memory: str = DEVICE_MEMORY, model: str = MODEL) -> dict[str, Any]:
    """One whole device: attributes a selector can test (type, index, model, a driver
    version) and its memory as capacity."""
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "index": {"int": index},
            "model": {"string": model},
            "driverVersion": {"version": "1.2.0"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def resource_slice(
    node: str,
    *,
    driver: str = DRIVER,
    devices: int = DEVICES_PER_NODE,
    generation: int = 1,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ResourceSlice of `node`: its `devices` devices, all of one pool named after the
    node, published in one slice. `extra` adds fields to the slice's spec."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [device(i) for i in range(devices)],
            **(extra or {}),
        },
    }


def claim_spec(device_class_name: str, count: int, *, request: str = "gpus") -> dict[str, Any]:
    """A claim's spec asking `count` devices of the class (allocation mode ExactCount)."""
    return {
        "devices": {
            "requests": [
                {
                    "name": request,
                    "exactly": {
                        "deviceClassName": device_class_name,
                        "allocationMode": "ExactCount",
                        "count": count,
                    },
                }
            ]
        }
    }


def first_available_spec(
    alternatives: list[tuple[str, str, int]], *, request: str = "gpus"
) -> dict[str, Any]:
    """A claim's spec of one request whose `firstAvailable` lists the alternatives, each
    (subrequest name, class, count), in the order kube-scheduler tries them."""
    subrequests = [
        {"name": name, "deviceClassName": device_class_name, "count": count}
        for name, device_class_name, count in alternatives
    ]
    return {"devices": {"requests": [{"name": request, "firstAvailable": subrequests}]}}


def claim_template(
    name: str,
    namespace: str,
    device_class_name: str,
    count: int,
    *,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ResourceClaimTemplate: each pod naming it gets a claim of its own for `count`
    devices of the class (or of `spec`, a claim's spec, when given)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": dict(spec) if spec else claim_spec(device_class_name, count)},
    }


def resource_claim(name: str, namespace: str, device_class_name: str, count: int) -> dict[str, Any]:
    """A ResourceClaim made beforehand, for pods to name directly (and share)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": claim_spec(device_class_name, count),
    }


def with_claim_template(
    template: Mapping[str, Any], template_name: str, *, claim: str = "gpus"
) -> dict[str, Any]:
    """A copy of a pod template (kwok.pod_template) whose pod asks for the devices of the
    ResourceClaimTemplate `template_name`, and whose containers use them."""
    return _with_claim(template, {"name": claim, "resourceClaimTemplateName": template_name})


def with_claim(
    template: Mapping[str, Any], claim_name: str, *, claim: str = "gpus"
) -> dict[str, Any]:
    """A copy of a pod template whose pod names the ResourceClaim `claim_name` directly
    (every pod of it shares that one claim), and whose containers use it."""
    return _with_claim(template, {"name": claim, "resourceClaimName": claim_name})


def _with_claim(template: Mapping[str, Any], pod_claim: Mapping[str, str]) -> dict[str, Any]:
    claim = pod_claim["name"]
    spec = dict(template["spec"])
    spec["resourceClaims"] = [dict(pod_claim)]
    spec["containers"] = [
        {**c, "resources": {**c.get("resources", {}), "claims": [{"name": claim}]}}
        for c in spec["containers"]
    ]
    return {**template, "spec": spec}


def allocated_devices(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The devices kube-scheduler allocated to a claim (empty while it is not allocated)."""
    allocation = claim.get("status", {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])
