"""The living cluster hands out devices through Dynamic Resource Allocation: the API server
serves resource.k8s.io/v1, the controller manager's resourceclaim controller makes each pod's
claims from its templates (and deletes them when the pod is gone), and kube-scheduler
allocates devices from the ResourceSlices a driver publishes (tests/e2e/devices.py). No sluice
process runs here: these are the cluster's own controllers, which sluice's device accounting
is checked against."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import devices
from .helpers import Kubectl, controlplane, unique_name, wait_for

kwok = controlplane.kwok


@pytest.fixture
def device_node(kubectl: Kubectl) -> Iterator[tuple[str, str]]:
    """A fake node with one ResourceSlice of 8 devices, and a DeviceClass of the driver's
    devices: (node, class). The node carries a label of its own, for pods to pin to it."""
    node = unique_name("dra-node")
    device_class = unique_name("gpu")
    kubectl.create(kwok.fake_node(node, {"cpu": "8"}, labels={"e2e.sluice.dev/dra": node}))
    kubectl.create(devices.device_class(device_class))
    slice_ = devices.resource_slice(node)
    kubectl.create(slice_)
    try:
        yield node, device_class
    finally:
        kubectl.delete("resourceslice", slice_["metadata"]["name"])
        kubectl.delete("deviceclass", device_class)
        kubectl.delete("node", node)


def _pod(kubectl: Kubectl, namespace: str, name: str, node: str, template: str) -> None:
    pod = devices.with_claim_template(
        kwok.pod_template({}, node_selector={"e2e.sluice.dev/dra": node}), template
    )
    kubectl.create(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, **pod}, "-n", namespace
    )


def _claim(kubectl: Kubectl, namespace: str, pod: str) -> dict[str, Any] | None:
    """The claim the resourceclaim controller made for `pod` from its template, once it has
    recorded its name in the pod's status."""
    statuses = kubectl.get("pod", pod, namespace).get("status", {}).get("resourceClaimStatuses")
    names = [s.get("resourceClaimName") for s in statuses or [] if s.get("resourceClaimName")]
    return kubectl.get("resourceclaim", names[0], namespace) if names else None


def _unschedulable(kubectl: Kubectl, namespace: str, pod: str) -> str | None:
    """kube-scheduler's message once it has tried the pod and found no node."""
    conditions = kubectl.get("pod", pod, namespace).get("status", {}).get("conditions") or []
    for condition in conditions:
        if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return str(condition.get("message", ""))
    return None


def _phase(kubectl: Kubectl, namespace: str, pod: str) -> str:
    return str(kubectl.get("pod", pod, namespace).get("status", {}).get("phase"))


def test_the_api_server_serves_dra_v1(kubectl: Kubectl) -> None:
    resources = kubectl.run("api-resources", "--api-group=resource.k8s.io", "-o", "name")
    for kind in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"):
        assert f"{kind}.resource.k8s.io" in resources.split()
    assert "resource.k8s.io/v1" in kubectl.run("api-versions").split()


def test_kube_scheduler_allocates_devices_from_a_claim_template(
    kubectl: Kubectl, namespace: str, device_node: tuple[str, str]
) -> None:
    node, device_class = device_node
    kubectl.create(devices.claim_template("four", namespace, device_class, 4))
    kubectl.create(devices.claim_template("five", namespace, device_class, 5))

    _pod(kubectl, namespace, "four", node, "four")
    wait_for(lambda: _phase(kubectl, namespace, "four") == "Running", what="pod four Running")
    claim = wait_for(lambda: _claim(kubectl, namespace, "four"), what="pod four's claim")
    held = devices.allocated_devices(claim)
    assert len(held) == 4
    assert kubectl.get("pod", "four", namespace)["spec"]["nodeName"] == node
    # The node's own pool, four different devices, all for the pod's one request.
    assert {(r["driver"], r["pool"], r["request"]) for r in held} == {
        (devices.DRIVER, node, "gpus")
    }
    assert len({r["device"] for r in held}) == 4
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["four"]
    assert claim["metadata"]["ownerReferences"][0]["name"] == "four"

    # Four devices are left on the only node this pod may use: five do not fit.
    _pod(kubectl, namespace, "five", node, "five")
    message = wait_for(
        lambda: _unschedulable(kubectl, namespace, "five"), what="kube-scheduler to try five"
    )
    assert "cannot allocate all claims" in message
    assert _phase(kubectl, namespace, "five") == "Pending"
    waiting = wait_for(lambda: _claim(kubectl, namespace, "five"), what="pod five's claim")
    assert devices.allocated_devices(waiting) == []

    # Once the first pod is gone, its claim goes with it and its devices are free again.
    kubectl.delete("pod", "four", namespace)
    wait_for(lambda: _phase(kubectl, namespace, "five") == "Running", what="pod five Running")
    five = wait_for(lambda: _claim(kubectl, namespace, "five"), what="pod five's claim")
    assert len(devices.allocated_devices(five)) == 5
    gone = claim["metadata"]["name"]
    wait_for(
        lambda: (
            not kubectl.run(
                "get", "resourceclaim", gone, "-n", namespace, "--ignore-not-found"
            ).strip()
        ),
        what=f"pod four's claim {gone} deleted",
    )


def test_kube_scheduler_gives_an_extended_resource_a_class_serves_from_its_devices(
    kubectl: Kubectl, namespace: str, device_node: tuple[str, str]
) -> None:
    """No node advertises the resource; kube-scheduler makes the pod a claim for devices of
    the class that serves it, and allocates them from the node's slice."""
    node, _ = device_node
    served = f"example.com/{unique_name('served')}"
    device_class = unique_name("served")
    kubectl.create(devices.device_class(device_class, extended_resource_name=served))
    try:
        pod = kwok.pod_template({served: 3}, node_selector={"e2e.sluice.dev/dra": node})
        kubectl.create(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "served"}, **pod},
            "-n",
            namespace,
        )
        wait_for(lambda: _phase(kubectl, namespace, "served") == "Running", what="pod Running")
        assert served not in kubectl.get("node", node)["status"]["allocatable"]
        status = kubectl.get("pod", "served", namespace)["status"]
        name = status["extendedResourceClaimStatus"]["resourceClaimName"]
        claim = kubectl.get("resourceclaim", name, namespace)
        held = devices.allocated_devices(claim)
        assert len(held) == 3 and {r["pool"] for r in held} == {node}
    finally:
        kubectl.delete("deviceclass", device_class)
