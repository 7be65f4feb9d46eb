"""Devices asked through DRA claims count in the flavor a pod set is given: a claim made from
a template is each pod's own and joins its pod's request (``PodSet.request``), so
``flavor_quota.counted`` puts it under the pod set's flavor, as it does a container's request
(docs/scheduler.md, *Flavors* and *Devices (DRA)*)."""

from __future__ import annotations

from typing import Any

from sluice.api.device_claims import read_claim_template
from sluice.api.device_context import DeviceContext
from sluice.api.device_quota import DeviceMapping
from sluice.api.devices import DeviceClass
from sluice.api.pod_defaults import PodDefaults
from sluice.api.workloads.job import JOB
from sluice.scheduler.flavor_quota import counted

GPU = "nvidia.com/gpu"
H100_CLASS = "h100.nvidia.com"  # a DeviceClass per GPU model, mapped to one quota resource
MAPPING = DeviceMapping.parse([{"name": GPU, "deviceClassNames": [H100_CLASS]}])
TEMPLATE = read_claim_template(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "four-h100", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {"deviceClassName": H100_CLASS, "count": 4},
                        }
                    ]
                }
            }
        },
    }
)
CONTEXT = DeviceContext.of({H100_CLASS: DeviceClass(H100_CLASS)}, MAPPING, {"four-h100": TEMPLATE})


def job(pods: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "trainer",
        "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpus"}]},
    }
    spec = {
        "restartPolicy": "Never",
        "containers": [container],
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-h100"}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "labels": {"sluice.dev/queue-name": "team-a"},
        },
        "spec": {"parallelism": pods, "completions": pods, "template": {"spec": spec}},
    }


def test_devices_from_claim_templates_count_in_the_pod_sets_flavor() -> None:
    view = JOB.view(job(2), defaults_of=lambda _ns: PodDefaults(devices=CONTEXT))
    assert view is not None
    assert counted(view.pod_sets, {"main": "h100"}) == {"h100": {"cpu": 2000, GPU: 8000}}
    assert counted(view.pod_sets, {"main": "a100"}) == {"a100": {"cpu": 2000, GPU: 8000}}
