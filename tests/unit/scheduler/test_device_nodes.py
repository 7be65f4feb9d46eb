"""Devices as node room and as what pods hold (sluice/scheduler/device_nodes.py), on the
objects the real control plane wrote (tests/unit/api/devices_real): a node's allocatable less
its bound pods' requests is exactly its free devices, whatever claims the pods hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sluice.api.device_claims import read_resource_claim
from sluice.api.device_quota import DeviceMapping
from sluice.api.devices import read_device_class, read_resource_slice
from sluice.api.pod_views import pod_from_object
from sluice.api.resources import Resources
from sluice.api.views import NodeView
from sluice.scheduler.device_nodes import DeviceObjects, with_devices

REAL = Path(__file__).parents[1] / "api" / "devices_real"
GPU = "example.com/gpu"
MAPPING = DeviceMapping({"gpu-x": GPU})


def real(name: str) -> dict[str, Any]:
    return dict(json.loads((REAL / name).read_text()))


CLASS = read_device_class(real("gpu.deviceclass.json"))
SLICE = read_resource_slice(real("node-local.resourceslice.json"))
N1 = NodeView("n1", Resources({"cpu": 16_000}))
TEMPLATE_POD = pod_from_object(real("from-template.pod.json"))
TEMPLATE_CLAIM = read_resource_claim(real("from-template.resourceclaim.json"))
EXTENDED_POD = pod_from_object(real("extended-resource.pod.json"))
EXTENDED_CLAIM = read_resource_claim(real("extended-resource.resourceclaim.json"))


def _free(node: NodeView, pods: list[Any]) -> int:
    taken = sum(p.request.get(GPU, 0) for p in pods if p.node == node.name and not p.finished)
    return node.allocatable.get(GPU, 0) - taken


def test_a_node_without_claims_has_all_its_devices() -> None:
    (node,), _pods, notes = with_devices([N1], [], DeviceObjects([CLASS], [SLICE], []), MAPPING)
    assert node.allocatable[GPU] == 8000
    assert notes.classes_of == {GPU: ("gpu-x",)}
    assert notes.asked_through_claims(GPU) == " (devices of gpu-x asked through claims)"
    assert notes.asked_through_claims("cpu") == ""


def test_bound_pods_hold_their_claims_devices_and_the_rest_is_free() -> None:
    assert TEMPLATE_POD.node == EXTENDED_POD.node == "n1"
    objects = DeviceObjects([CLASS], [SLICE], [TEMPLATE_CLAIM, EXTENDED_CLAIM])
    (node,), pods, _ = with_devices([N1], [TEMPLATE_POD, EXTENDED_POD], objects, MAPPING)
    assert pods is not None
    by_name = {p.name: p for p in pods}
    # The template's claim is the pod's own: its 5 devices are in its request.
    assert by_name[TEMPLATE_POD.name].request[GPU] == 5000
    # The extended resource the class serves counts as the class's resource, once: the
    # claim kube-scheduler made for it counts nothing of its own.
    assert by_name[EXTENDED_POD.name].request[GPU] == 2000
    assert "deviceclass.resource.kubernetes.io/gpu-x" not in by_name[EXTENDED_POD.name].request
    assert _free(node, list(pods)) == 1000  # 8 - 5 - 2


def test_a_claim_held_by_no_pod_seen_is_simply_not_free() -> None:
    # The pods are gone from the view (deleted), their claims not yet deallocated.
    objects = DeviceObjects([CLASS], [SLICE], [TEMPLATE_CLAIM, EXTENDED_CLAIM])
    (node,), _pods, _ = with_devices([N1], [], objects, MAPPING)
    assert node.allocatable[GPU] == 1000


def test_views_are_kept_while_their_devices_are_the_same() -> None:
    objects = DeviceObjects([CLASS], [SLICE], [TEMPLATE_CLAIM])
    first_nodes, first_pods, _ = with_devices([N1], [TEMPLATE_POD], objects, MAPPING)
    again_nodes, again_pods, _ = with_devices([N1], [TEMPLATE_POD], objects, MAPPING)
    assert first_nodes[0] is again_nodes[0]
    assert first_pods is not None and again_pods is not None
    assert first_pods[0] is again_pods[0]
    # Once the claim is gone, the pod holds no device; the node's room is the same 8.
    later_nodes, later_pods, _ = with_devices(
        [N1], [TEMPLATE_POD], DeviceObjects([CLASS], [SLICE]), MAPPING
    )
    assert later_pods is not None and GPU not in later_pods[0].request
    assert later_nodes[0].allocatable[GPU] == 8000


def test_a_new_view_of_a_claim_is_counted_again() -> None:
    held = DeviceObjects([CLASS], [SLICE], [TEMPLATE_CLAIM])
    (node,), pods, _ = with_devices([N1], [TEMPLATE_POD], held, MAPPING)
    assert pods is not None and _free(node, list(pods)) == 3000
    # The same claim deallocated, the pod unchanged: its 5 devices are free on the node again,
    # and the pod still asks them (its own claim counts what it asks).
    deallocated = real("from-template.resourceclaim.json")
    deallocated.pop("status")
    released = DeviceObjects([CLASS], [SLICE], [read_resource_claim(deallocated)])
    (node,), pods, _ = with_devices([N1], [TEMPLATE_POD], released, MAPPING)
    assert pods is not None and pods[0].request[GPU] == 5000
    assert node.allocatable[GPU] == 8000


def test_a_selector_that_fails_leaves_the_resource_unknown_and_nothing_free() -> None:
    broken = read_device_class(
        {
            "metadata": {"name": "gpu-x"},
            "spec": {"selectors": [{"cel": {"expression": "device.attributes['x'].nope > 1"}}]},
        }
    )
    (node,), _, notes = with_devices([N1], [], DeviceObjects([broken], [SLICE]), MAPPING)
    assert GPU not in node.allocatable
    assert GPU in notes.unknown and "gpu-x" in notes.unknown[GPU]
