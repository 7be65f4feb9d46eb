"""Free devices per node, on slices and allocations the real control plane wrote
(tests/unit/api/devices_real): held devices, shared counters, incomplete pools, taints,
network-attached slices, and selectors that fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sluice.api.constraints import Taint
from sluice.api.device_cel import SelectorError
from sluice.api.device_claims import read_resource_claim
from sluice.api.device_room import ClassRoom, class_room, held_devices
from sluice.api.devices import (
    DeviceClass,
    NodeAccess,
    pools,
    read_device_class,
    read_resource_slice,
)

REAL = Path(__file__).parent / "devices_real"


def real(name: str) -> dict[str, Any]:
    return dict(json.loads((REAL / name).read_text()))


NODE_LOCAL = pools([read_resource_slice(real("node-local.resourceslice.json"))])
PARTITIONED = pools(
    [
        read_resource_slice(real("partitioned-counters.resourceslice.json")),
        read_resource_slice(real("partitioned-devices.resourceslice.json")),
    ]
)
GPU = read_device_class(real("gpu.deviceclass.json"))
WHOLE = read_device_class(real("whole.deviceclass.json"))
HALF = read_device_class(real("half.deviceclass.json"))
TEMPLATE_CLAIM = read_resource_claim(real("from-template.resourceclaim.json"))  # gpu-0..4 on n1
EXTENDED_CLAIM = read_resource_claim(real("extended-resource.resourceclaim.json"))  # gpu-5, 6
HALVES_CLAIM = read_resource_claim(real("first-available.resourceclaim.json"))  # both halves


def test_devices_no_claim_holds_are_free_on_their_node() -> None:
    assert class_room(NODE_LOCAL, frozenset(), GPU) == ClassRoom(by_node={"n1": 8})
    held = held_devices([TEMPLATE_CLAIM])
    assert class_room(NODE_LOCAL, held, GPU) == ClassRoom(by_node={"n1": 3})
    held = held_devices([TEMPLATE_CLAIM, EXTENDED_CLAIM])
    assert class_room(NODE_LOCAL, held, GPU) == ClassRoom(by_node={"n1": 1})


def test_request_selectors_narrow_the_free_devices() -> None:
    held = held_devices([TEMPLATE_CLAIM])
    index = "device.attributes['gpu.example.com'].index"
    assert class_room(NODE_LOCAL, held, GPU, [f"{index} >= 6"]) == ClassRoom(by_node={"n1": 2})
    assert class_room(NODE_LOCAL, held, GPU, [f"{index} < 3"]) == ClassRoom(by_node={})


def test_partitions_share_counters_with_the_whole_device() -> None:
    # Nothing held: the whole GPU, or both halves (never all three at once).
    assert class_room(PARTITIONED, frozenset(), WHOLE) == ClassRoom(by_node={"n2": 1})
    assert class_room(PARTITIONED, frozenset(), HALF) == ClassRoom(by_node={"n2": 2})
    # The halves held (kube-scheduler's real allocation): no counters left for the whole.
    held = held_devices([HALVES_CLAIM])
    assert class_room(PARTITIONED, held, WHOLE) == ClassRoom(by_node={})
    assert class_room(PARTITIONED, held, HALF) == ClassRoom(by_node={})
    # The whole held: neither half.
    whole = frozenset({("gpu.example.com", "n2", "gpu-0")})
    assert class_room(PARTITIONED, whole, HALF) == ClassRoom(by_node={})


def test_a_pool_missing_a_slice_has_no_free_device() -> None:
    devices_only = pools([read_resource_slice(real("partitioned-devices.resourceslice.json"))])
    assert class_room(devices_only, frozenset(), HALF) == ClassRoom(
        by_node={}, incomplete_pools=("gpu.example.com/n2",)
    )


def test_a_tainted_device_is_not_free() -> None:
    raw = real("node-local.resourceslice.json")
    raw["spec"]["devices"][7]["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    raw["spec"]["devices"][6]["taints"] = [{"key": "hint", "effect": "None"}]
    tainted = read_resource_slice(raw)
    assert tainted.devices[7].taints == (Taint("broken", "", "NoSchedule"),)
    assert class_room(pools([tainted]), frozenset(), GPU) == ClassRoom(by_node={"n1": 7})


def test_a_shared_device_already_held_is_not_counted_free() -> None:
    raw = real("node-local.resourceslice.json")
    for device in raw["spec"]["devices"]:
        device["allowMultipleAllocations"] = True
    shareable = pools([read_resource_slice(raw)])
    held = held_devices([TEMPLATE_CLAIM])
    assert class_room(shareable, held, GPU) == ClassRoom(by_node={"n1": 3})


def test_network_attached_devices_are_room_shared_by_the_nodes_they_reach() -> None:
    raw = real("node-local.resourceslice.json")
    del raw["spec"]["nodeName"]
    raw["spec"]["allNodes"] = True
    everywhere = pools([read_resource_slice(raw)])
    held = held_devices([TEMPLATE_CLAIM])
    assert class_room(everywhere, held, GPU) == ClassRoom(shared=((NodeAccess(all_nodes=True), 3),))


def test_a_selector_that_fails_on_a_device_is_the_answer_not_a_guess() -> None:
    strict = DeviceClass("strict", ("device.attributes['gpu.example.com'].vendor == 'x'",))
    found = class_room(NODE_LOCAL, frozenset(), strict)
    assert isinstance(found, SelectorError)
    assert "vendor" in found.reason
    guarded = DeviceClass(
        "guarded", ("device.attributes['gpu.example.com'].?vendor.orValue('') == 'x'",)
    )
    assert class_room(NODE_LOCAL, frozenset(), guarded) == ClassRoom(by_node={})
    broken = DeviceClass("broken", ("device.driver ==",))
    assert isinstance(class_room(NODE_LOCAL, frozenset(), broken), SelectorError)
