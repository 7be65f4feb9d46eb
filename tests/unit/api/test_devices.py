"""DRA objects read as the real control plane writes them (tests/unit/api/devices_real), and
the pools their slices make up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.api.constraints import NodeRequirement
from sluice.api.device_cel import matches
from sluice.api.device_claims import (
    AllocatedDevice,
    ExactRequest,
    PodClaim,
    read_claim_template,
    read_generated_claims,
    read_pod_claims,
    read_resource_claim,
)
from sluice.api.devices import (
    NodeAccess,
    ResourceSlice,
    pools,
    read_device_class,
    read_resource_slice,
)
from sluice.api.errors import InvalidObject
from sluice.api.quantity import parse_quantity
from sluice.api.semver import Semver

REAL = Path(__file__).parent / "devices_real"


def real(name: str) -> dict[str, Any]:
    return dict(json.loads((REAL / name).read_text()))


def test_a_device_class_and_its_selectors() -> None:
    whole = read_device_class(real("whole.deviceclass.json"))
    assert whole.name == "whole"
    assert whole.selectors == (
        "device.driver == 'gpu.example.com'",
        "device.attributes['gpu.example.com'].type == 'gpu'",
    )
    assert whole.extended_resource_name is None
    backed = real("whole.deviceclass.json")
    backed["spec"]["extendedResourceName"] = "example.com/gpu"
    assert read_device_class(backed).extended_resource_name == "example.com/gpu"


def test_a_node_local_slice() -> None:
    found = read_resource_slice(real("node-local.resourceslice.json"))
    assert (found.driver, found.pool, found.generation, found.slice_count) == (
        "gpu.example.com",
        "n1",
        1,
        1,
    )
    assert found.access == NodeAccess(node_name="n1")
    assert found.access.node_local
    assert [d.name for d in found.devices] == [f"gpu-{i}" for i in range(8)]
    first = found.devices[0]
    assert first.attributes == {
        "type": "gpu",
        "index": 0,
        "model": "example-a100",
        "driverVersion": Semver(1, 2, 0),
    }
    assert first.capacity == {"memory": parse_quantity("80Gi")}
    assert not first.allow_multiple_allocations and not first.consumes_counters
    # As a selector sees it: the unqualified names are the driver's domain.
    assert matches(
        "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.0.0'))"
        " && device.capacity['gpu.example.com'].memory == quantity('80Gi')",
        first.for_cel(found.driver),
    )


def test_a_partitioned_device_and_its_shared_counters() -> None:
    counters = read_resource_slice(real("partitioned-counters.resourceslice.json"))
    devices = read_resource_slice(real("partitioned-devices.resourceslice.json"))
    assert counters.devices == ()
    assert counters.shared_counters == {
        "gpu-0-counters": {"memory": parse_quantity("80Gi"), "multiprocessors": 98_000}
    }
    half = devices.devices[1]
    assert half.name == "gpu-0-half-0"
    assert [(c.counter_set, dict(c.counters)) for c in half.consumes_counters] == [
        ("gpu-0-counters", {"memory": parse_quantity("40Gi"), "multiprocessors": 49_000})
    ]
    (pool,) = pools([devices, counters])
    assert (pool.driver, pool.name, pool.generation, pool.complete) == (
        "gpu.example.com",
        "n2",
        1,
        True,
    )
    assert [d.name for _, d in pool.devices] == ["gpu-0", "gpu-0-half-0", "gpu-0-half-1"]
    assert pool.shared_counters == counters.shared_counters


def _slice(name: str, pool: str, generation: int, count: int) -> ResourceSlice:
    return ResourceSlice(
        name, "gpu.example.com", pool, generation, count, NodeAccess(all_nodes=True)
    )


def test_a_pool_is_its_newest_generation_and_complete_only_with_all_its_slices() -> None:
    found = pools(
        [
            _slice("a-old", "a", 1, 1),
            _slice("a-new-1", "a", 2, 2),
            _slice("a-new-2", "a", 2, 2),
            _slice("b-new-1", "b", 3, 2),  # its second slice is not published yet
            _slice("b-old", "b", 2, 1),
        ]
    )
    assert [(p.name, p.generation, [s.name for s in p.slices], p.complete) for p in found] == [
        ("a", 2, ["a-new-1", "a-new-2"], True),
        ("b", 3, ["b-new-1"], False),
    ]


def test_network_attached_and_per_device_access() -> None:
    raw = real("node-local.resourceslice.json")
    spec = raw["spec"]
    del spec["nodeName"]
    spec["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
        ]
    }
    selected = read_resource_slice(raw)
    assert selected.access is not None and not selected.access.node_local
    assert selected.access.node_selector == ((NodeRequirement("rack", "In", ("r1",)),),)
    del spec["nodeSelector"]
    spec["allNodes"] = True
    assert read_resource_slice(raw).access == NodeAccess(all_nodes=True)
    del spec["allNodes"]
    spec["perDeviceNodeSelection"] = True
    for i, device in enumerate(spec["devices"]):
        device["nodeName" if i else "allNodes"] = f"n{i}" if i else True
    per_device = read_resource_slice(raw)
    assert per_device.access is None
    assert per_device.devices[0].access == NodeAccess(all_nodes=True)
    assert per_device.devices[3].access == NodeAccess(node_name="n3")


def test_a_claim_template_and_the_claim_made_from_it() -> None:
    template = read_claim_template(real("five.resourceclaimtemplate.json"))
    assert template.name == "five"
    (request,) = template.spec.requests
    assert request.alternatives == (ExactRequest("gpus", "gpu-x", "ExactCount", 5),)
    assert not request.first_available

    pod = real("from-template.pod.json")
    assert read_pod_claims(pod["spec"], "Pod", "b", "spec") == (PodClaim("gpus", template="five"),)
    made = read_generated_claims(pod["status"])
    claim = read_resource_claim(real("from-template.resourceclaim.json"))
    assert made == {"gpus": claim.name}
    assert claim.owner_pod == "b"
    assert claim.spec == template.spec
    assert claim.allocation is not None and len(claim.allocation) == 5
    assert {(r.request, r.driver, r.pool) for r in claim.allocation} == {
        ("gpus", "gpu.example.com", "n1")
    }
    assert claim.allocation_nodes == (
        (NodeRequirement("metadata.name", "In", ("n1",), on_field=True),),
    )
    assert claim.reserved_for == (("pods", "b"),)


def test_a_first_available_claim_names_the_alternative_it_was_given() -> None:
    claim = read_resource_claim(real("first-available.resourceclaim.json"))
    (request,) = claim.spec.requests
    assert request.first_available
    assert [(a.name, a.device_class, a.count) for a in request.alternatives] == [
        ("gpus/whole", "whole", 2),
        ("gpus/halves", "half", 2),
    ]
    assert claim.allocation == (
        AllocatedDevice("gpus/halves", "gpu.example.com", "n2", "gpu-0-half-0"),
        AllocatedDevice("gpus/halves", "gpu.example.com", "n2", "gpu-0-half-1"),
    )
    assert claim.spec.alternative("gpus/halves") == request.alternatives[1]
    assert claim.owner_pod is None
    pod = real("shared-claim.pod.json")
    assert read_pod_claims(pod["spec"], "Pod", "p", "spec") == (PodClaim("gpus", claim="halves"),)


def test_an_unallocated_claim_and_allocation_mode_all() -> None:
    raw = real("first-available.resourceclaim.json")
    del raw["status"]
    raw["spec"]["devices"]["requests"] = [
        {"name": "every", "exactly": {"deviceClassName": "whole", "allocationMode": "All"}},
        {"name": "one", "exactly": {"deviceClassName": "whole"}},
    ]
    claim = read_resource_claim(raw)
    assert claim.allocation is None and claim.reserved_for == ()
    every, one = (r.alternatives[0] for r in claim.spec.requests)
    assert (every.mode, one.mode, one.count) == ("All", "ExactCount", 1)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s["pool"].pop("generation"), "spec.pool.generation"),
        (
            lambda s: s["devices"][0]["attributes"].update(bad={"int": "x"}),
            "spec.devices[0].attributes[bad].int",
        ),
        (
            lambda s: s["devices"][0]["attributes"].update(v={"version": "1.2"}),
            "spec.devices[0].attributes[v].version",
        ),
        (
            lambda s: s["devices"][0]["capacity"].update(m={"value": "lots"}),
            "spec.devices[0].capacity[m].value",
        ),
        (lambda s: s.update(allNodes=True), "spec"),
    ],
)
def test_an_unreadable_slice_names_the_field(change: Any, field: str) -> None:
    raw = real("node-local.resourceslice.json")
    change(raw["spec"])
    with pytest.raises(InvalidObject) as error:
        read_resource_slice(raw)
    assert error.value.field == field
    assert error.value.kind == "ResourceSlice"


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        ({"name": "r"}, "spec.devices.requests[0]"),
        (
            {"name": "r", "exactly": {"deviceClassName": "c", "count": 0}},
            "spec.devices.requests[0].exactly.count",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}},
            "spec.devices.requests[0].exactly.allocationMode",
        ),
        (
            {"name": "r", "exactly": {"count": 1}},
            "spec.devices.requests[0].exactly.deviceClassName",
        ),
        (
            {"name": "r", "firstAvailable": [{"deviceClassName": "c"}]},
            "spec.devices.requests[0].firstAvailable[0].name",
        ),
    ],
)
def test_an_unreadable_claim_names_the_field(request_: dict[str, Any], field: str) -> None:
    raw = real("first-available.resourceclaim.json")
    raw["spec"]["devices"]["requests"] = [request_]
    with pytest.raises(InvalidObject) as error:
        read_resource_claim(raw)
    assert error.value.field == field


def test_a_pod_claim_names_a_claim_or_a_template() -> None:
    with pytest.raises(InvalidObject, match="one of resourceClaimName, resourceClaimTemplateName"):
        read_pod_claims(
            {"resourceClaims": [{"name": "gpus"}]}, "Job", "ml/train", "spec.template.spec"
        )
    assert read_pod_claims({}, "Pod", "p", "spec") == ()
