"""What devices asked through DRA claims count as in the queues: the class -> resource mapping,
claims before and after allocation (on objects the real control plane wrote), and a pod's and a
workload's claims, with shared claims counted once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.api.device_claims import (
    ClaimSpec,
    DeviceRequest,
    ExactRequest,
    PodClaim,
    ResourceClaim,
    ResourceClaimTemplate,
    read_claim_template,
    read_generated_claims,
    read_pod_claims,
    read_resource_claim,
)
from sluice.api.device_quota import (
    IMPLICIT_PREFIX,
    DeviceMapping,
    DevicesUnknown,
    PodDevices,
    claim_asks,
    claim_holds,
    extended_requests,
    pod_devices,
    serving_classes,
    workload_devices,
)
from sluice.api.devices import DeviceClass, read_device_class
from sluice.api.errors import ConfigError
from sluice.api.resources import Resources

REAL = Path(__file__).parent / "devices_real"
GPU = "nvidia.com/gpu"


def real(name: str) -> dict[str, Any]:
    return dict(json.loads((REAL / name).read_text()))


CLASSES = {
    c.name: c
    for c in (
        DeviceClass("gpu.nvidia.com"),
        DeviceClass("a100.nvidia.com"),
        DeviceClass("mig.nvidia.com"),
        DeviceClass("nic.example.com", extended_resource_name="example.com/nic"),
        DeviceClass("fpga.example.com"),
        read_device_class(real("whole.deviceclass.json")),
        read_device_class(real("half.deviceclass.json")),
        read_device_class(real("gpu.deviceclass.json")),
    )
}
MAPPING = DeviceMapping.parse(
    [
        {"name": GPU, "deviceClassNames": ["gpu.nvidia.com", "a100.nvidia.com", "whole", "gpu-x"]},
        {"name": "nvidia.com/mig", "deviceClassNames": ["mig.nvidia.com", "half"]},
    ]
)


def devices(n: int) -> Resources:
    return Resources({GPU: n * 1000})


def spec(*alternatives: ExactRequest, first_available: bool = False) -> ClaimSpec:
    if first_available:
        return ClaimSpec((DeviceRequest("r", alternatives),))
    return ClaimSpec(tuple(DeviceRequest(a.name, (a,)) for a in alternatives))


# -- the mapping ------------------------------------------------------------------------------


def test_a_class_counts_as_its_mapping_else_its_extended_resource_else_its_own_name() -> None:
    assert MAPPING.resource_of(CLASSES["a100.nvidia.com"]) == GPU
    assert MAPPING.resource_of(CLASSES["mig.nvidia.com"]) == "nvidia.com/mig"
    assert MAPPING.resource_of(CLASSES["nic.example.com"]) == "example.com/nic"
    assert MAPPING.resource_of(CLASSES["fpga.example.com"]) == IMPLICIT_PREFIX + "fpga.example.com"
    # The mapping wins over the class's own extended resource.
    remapped = DeviceMapping.parse(
        [{"name": "example.com/port", "deviceClassNames": ["nic.example.com"]}]
    )
    assert remapped.resource_of(CLASSES["nic.example.com"]) == "example.com/port"


@pytest.mark.parametrize(
    ("raw", "key", "problem"),
    [
        ({"gpu.nvidia.com": GPU}, "deviceClassMappings", "expected a list"),
        ([{"deviceClassNames": ["a"]}], "deviceClassMappings[0]", "expected name"),
        (
            [{"name": GPU, "deviceClassNames": []}],
            "deviceClassMappings[0].deviceClassNames",
            "non-empty",
        ),
        (
            [{"name": GPU, "deviceClassNames": ["a"]}, {"name": "x/y", "deviceClassNames": ["a"]}],
            "deviceClassMappings[1].deviceClassNames",
            "class a already counts as nvidia.com/gpu",
        ),
    ],
)
def test_a_bad_mapping_names_the_key(raw: Any, key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        DeviceMapping.parse(raw)
    assert error.value.key == key
    assert problem in error.value.problem


# -- a claim before and after allocation ------------------------------------------------------


def test_exact_count_requests_add_up_per_resource() -> None:
    asked = claim_asks(
        spec(
            ExactRequest("a", "gpu.nvidia.com", count=4),
            ExactRequest("b", "a100.nvidia.com", count=2),
            ExactRequest("c", "mig.nvidia.com", count=3),
            ExactRequest("d", "fpga.example.com"),
        ),
        CLASSES,
        MAPPING,
        "claim",
    )
    assert asked == Resources(
        {GPU: 6000, "nvidia.com/mig": 3000, IMPLICIT_PREFIX + "fpga.example.com": 1000}
    )


def test_first_available_counts_the_most_any_alternative_asks_per_resource() -> None:
    asked = claim_asks(
        spec(
            ExactRequest("r/whole", "gpu.nvidia.com", count=1),
            ExactRequest("r/halves", "mig.nvidia.com", count=2),
            ExactRequest("r/two", "gpu.nvidia.com", count=2),
            first_available=True,
        ),
        CLASSES,
        MAPPING,
        "claim",
    )
    assert asked == Resources({GPU: 2000, "nvidia.com/mig": 2000})


def test_admin_access_counts_nothing() -> None:
    watcher = ExactRequest("watch", "gpu.nvidia.com", count=8, admin_access=True)
    assert claim_asks(spec(watcher), CLASSES, MAPPING, "claim") == Resources()


def test_allocation_mode_all_cannot_be_counted_before_allocation() -> None:
    every = ExactRequest("every", "gpu.nvidia.com", mode="All", count=0)
    asked = claim_asks(spec(every), CLASSES, MAPPING, "ResourceClaimTemplate ml/all")
    assert isinstance(asked, DevicesUnknown)
    assert str(asked) == (
        "ResourceClaimTemplate ml/all request every asks for all devices of class "
        "gpu.nvidia.com (allocationMode All): how many is known only once they are allocated"
    )


def test_a_class_that_does_not_exist_cannot_be_counted() -> None:
    asked = claim_asks(spec(ExactRequest("r", "tpu.example.com")), CLASSES, MAPPING, "claim ml/x")
    assert asked == DevicesUnknown(
        "claim ml/x asks for devices of class tpu.example.com, and no DeviceClass "
        "tpu.example.com exists"
    )


def test_an_allocated_claim_holds_what_it_was_given() -> None:
    claim = read_resource_claim(real("from-template.resourceclaim.json"))
    assert claim_holds(claim, CLASSES, MAPPING) == devices(5)
    # firstAvailable: the alternative kube-scheduler took (the halves), not the most asked.
    shared = read_resource_claim(real("first-available.resourceclaim.json"))
    assert claim_asks(shared.spec, CLASSES, MAPPING, "claim") == Resources(
        {GPU: 2000, "nvidia.com/mig": 2000}
    )
    assert claim_holds(shared, CLASSES, MAPPING) == Resources({"nvidia.com/mig": 2000})


def test_an_allocated_claim_of_all_devices_is_counted_from_its_allocation() -> None:
    raw = real("from-template.resourceclaim.json")
    raw["spec"]["devices"]["requests"][0]["exactly"] = {
        "deviceClassName": "gpu-x",
        "allocationMode": "All",
    }
    claim = read_resource_claim(raw)
    assert claim_holds(claim, CLASSES, MAPPING) == devices(5)
    del raw["status"]
    assert isinstance(claim_holds(read_resource_claim(raw), CLASSES, MAPPING), DevicesUnknown)


# -- a pod's claims and a workload's ----------------------------------------------------------


TEMPLATES = {
    "four": ResourceClaimTemplate(
        "ml", "four", spec(ExactRequest("gpus", "gpu.nvidia.com", count=4))
    ),
    "five": read_claim_template(real("five.resourceclaimtemplate.json")),
}


def _shared_claim(name: str, count: int) -> ResourceClaim:
    return ResourceClaim("ml", name, spec(ExactRequest("gpus", "gpu.nvidia.com", count=count)))


CLAIMS = {"team-pool": _shared_claim("team-pool", 8)}


def test_a_template_gives_each_pod_its_own_claim() -> None:
    found = pod_devices(
        "ml",
        [PodClaim("gpus", template="four")],
        templates=TEMPLATES,
        claims=CLAIMS,
        classes=CLASSES,
        mapping=MAPPING,
    )
    assert found == PodDevices(own=devices(4))
    assert isinstance(found, PodDevices)
    assert workload_devices([(found, 2)]) == devices(8)


def test_a_claim_named_directly_counts_once_per_workload_however_many_pods_name_it() -> None:
    found = pod_devices(
        "ml",
        [PodClaim("gpus", template="four"), PodClaim("pool", claim="team-pool")],
        templates=TEMPLATES,
        claims=CLAIMS,
        classes=CLASSES,
        mapping=MAPPING,
    )
    assert found == PodDevices(own=devices(4), shared={"ml/team-pool": devices(8)})
    assert isinstance(found, PodDevices)
    # 3 workers and a launcher that names the same shared claim: 3 x 4 + 8, not 4 x 8.
    launcher = PodDevices(shared={"ml/team-pool": devices(8)})
    assert workload_devices([(found, 3), (launcher, 1)]) == devices(20)


def test_a_pod_that_exists_counts_the_claims_made_for_it() -> None:
    pod = real("from-template.pod.json")
    claim = read_resource_claim(real("from-template.resourceclaim.json"))
    found = pod_devices(
        "ml",
        read_pod_claims(pod["spec"], "Pod", "b", "spec"),
        templates=TEMPLATES,
        claims={claim.name: claim},
        classes=CLASSES,
        mapping=MAPPING,
        generated=read_generated_claims(pod["status"]),
    )
    assert found == PodDevices(own=devices(5))


@pytest.mark.parametrize(
    ("claim", "reason"),
    [
        (
            PodClaim("gpus", template="nine"),
            "pod claim gpus: ResourceClaimTemplate ml/nine does not exist",
        ),
        (PodClaim("gpus", claim="other"), "pod claim gpus: ResourceClaim ml/other does not exist"),
    ],
)
def test_a_claim_or_template_not_found_cannot_be_counted(claim: PodClaim, reason: str) -> None:
    found = pod_devices(
        "ml", [claim], templates=TEMPLATES, claims=CLAIMS, classes=CLASSES, mapping=MAPPING
    )
    assert found == DevicesUnknown(reason)


def test_one_claim_that_cannot_be_counted_makes_the_pod_unknown() -> None:
    templates = {
        **TEMPLATES,
        "all": ResourceClaimTemplate(
            "ml", "all", spec(ExactRequest("every", "gpu.nvidia.com", mode="All", count=0))
        ),
    }
    found = pod_devices(
        "ml",
        [PodClaim("gpus", template="four"), PodClaim("rest", template="all")],
        templates=templates,
        claims=CLAIMS,
        classes=CLASSES,
        mapping=MAPPING,
    )
    assert isinstance(found, DevicesUnknown)
    assert "ResourceClaimTemplate ml/all request every" in found.reason


def test_a_pod_without_claims_asks_no_devices() -> None:
    found = pod_devices("ml", [], templates={}, claims={}, classes=CLASSES, mapping=MAPPING)
    assert found == PodDevices()
    assert isinstance(found, PodDevices)
    assert workload_devices([(found, 10)]) == Resources()


# -- extended resources that DeviceClasses serve ----------------------------------------------


def test_the_class_serving_an_extended_resource_is_the_newest_then_the_first_by_name() -> None:
    classes = {
        c.name: c
        for c in (
            DeviceClass(
                "old", extended_resource_name="example.com/gpu", created="2026-01-01T00:00:00Z"
            ),
            DeviceClass(
                "new", extended_resource_name="example.com/gpu", created="2026-02-01T00:00:00Z"
            ),
            DeviceClass(
                "b-tied", extended_resource_name="example.com/nic", created="2026-01-01T00:00:00Z"
            ),
            DeviceClass(
                "a-tied", extended_resource_name="example.com/nic", created="2026-01-01T00:00:00Z"
            ),
            DeviceClass("plain"),
        )
    }
    serving = serving_classes(classes)
    assert serving["example.com/gpu"].name == "new"
    assert serving["example.com/nic"].name == "a-tied"
    # Every class also serves its implicit name.
    assert serving[IMPLICIT_PREFIX + "plain"].name == "plain"
    assert serving[IMPLICIT_PREFIX + "old"].name == "old"


def test_an_extended_resource_a_class_serves_counts_as_the_class_resource() -> None:
    """Asking the devices of a class as an extended resource is no way around its quota."""
    serving = serving_classes(CLASSES)
    request = Resources(
        {"cpu": 2000, IMPLICIT_PREFIX + "gpu.nvidia.com": 3000, "example.com/nic": 1000, GPU: 1000}
    )
    assert extended_requests(request, serving, MAPPING) == Resources(
        {"cpu": 2000, GPU: 4000, "example.com/nic": 1000}
    )
    plain = Resources({"cpu": 1000, "memory": 2000})
    assert extended_requests(plain, serving, MAPPING) is plain


def test_the_claim_kube_scheduler_makes_for_extended_resources_counts_nothing_itself() -> None:
    """Its devices count through the container's request (above), never twice."""
    pod = real("extended-resource.pod.json")
    claim = read_resource_claim(real("extended-resource.resourceclaim.json"))
    assert claim.for_extended_resources
    assert claim.owner_pod == pod["metadata"]["name"]
    assert claim.allocation is not None and len(claim.allocation) == 2
    assert claim_holds(claim, CLASSES, MAPPING) == Resources()
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    asked = Resources.parse(requests)
    assert extended_requests(asked, serving_classes(CLASSES), MAPPING) == devices(2)
