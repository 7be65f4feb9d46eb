"""What the API server adds to a pod's request when it creates it (docs/workloads.md, "The
request sluice counts"): the namespace's LimitRange default requests and the RuntimeClass's
overhead. A workload's template is read with them, so sluice decides on what the pods ask."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.errors import InvalidObject
from sluice.api.pod_defaults import (
    NO_DEFAULTS,
    PodDefaults,
    PodDefaultsTable,
    limit_range_from_object,
    pod_defaults,
    runtime_class_from_object,
)
from sluice.api.pod_request import pod_request
from sluice.api.resources import Resources
from sluice.api.workloads.job import JOB
from sluice.api.workloads.kubeflow import PYTORCH_JOB


def R(**amounts: str) -> Resources:
    return Resources.parse({k.replace("__", "."): v for k, v in amounts.items()})


def limit_range(name: str, *items: dict[str, Any], namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limits": list(items)},
    }


def container(**resources: dict[str, str]) -> dict[str, Any]:
    return {"name": "c", "image": "x", "resources": resources}


def test_a_container_without_a_request_gets_the_default_request() -> None:
    lr = limit_range_from_object(
        limit_range(
            "defaults",
            {"type": "Container", "defaultRequest": {"cpu": "250m"}, "default": {"memory": "1Gi"}},
        )
    )
    # A default limit with no default request defaults the request too, as the API server
    # fills a LimitRange in when it stores it.
    assert lr.container_requests == R(cpu="250m", memory="1Gi")
    defaults = PodDefaults(lr.container_requests)
    spec = {
        "containers": [
            container(),
            container(limits={"cpu": "2"}),  # a limit alone requests the limit
            container(requests={"memory": "64Mi"}),
        ]
    }
    assert pod_request(spec, "Pod", "team/p", defaults=defaults) == R(cpu="2500m", memory="2112Mi")
    assert pod_request(spec, "Pod", "team/p") == R(cpu="2", memory="64Mi")


def test_the_default_limit_falls_back_to_max_and_the_request_to_min() -> None:
    lr = limit_range_from_object(
        limit_range(
            "bounds",
            {"type": "Container", "max": {"cpu": "4"}, "min": {"memory": "32Mi"}},
            {"type": "Pod", "max": {"cpu": "64"}},  # pods get no defaults
        )
    )
    assert lr.container_requests == R(cpu="4", memory="32Mi")


def test_init_containers_get_defaults_too() -> None:
    defaults = PodDefaults(R(cpu="1"))
    spec = {"initContainers": [container()], "containers": [container(requests={"cpu": "100m"})]}
    assert pod_request(spec, "Pod", "team/p", defaults=defaults) == R(cpu="1")


def test_several_limit_ranges_the_first_by_name_gives_a_resource() -> None:
    a = limit_range_from_object(
        limit_range("a", {"type": "Container", "defaultRequest": {"cpu": "1"}})
    )
    b = limit_range_from_object(
        limit_range("b", {"type": "Container", "defaultRequest": {"cpu": "3", "memory": "1Gi"}})
    )
    table = pod_defaults([b, a], [])
    assert table["team"].container_requests == R(cpu="1", memory="1Gi")
    assert "other" not in table


def test_a_runtime_class_overhead_is_added_unless_the_pod_names_its_own() -> None:
    kata = runtime_class_from_object(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "kata"},
            "handler": "kata",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
        }
    )
    defaults = pod_defaults([], [kata])[""]
    spec = {"runtimeClassName": "kata", "containers": [container(requests={"cpu": "1"})]}
    assert pod_request(spec, "Pod", "team/p", defaults=defaults) == R(cpu="1250m", memory="120Mi")
    own = {**spec, "overhead": {"cpu": "100m"}}
    assert pod_request(own, "Pod", "team/p", defaults=defaults) == R(cpu="1100m")
    other = {**spec, "runtimeClassName": "runc"}
    assert pod_request(other, "Pod", "team/p", defaults=defaults) == R(cpu="1")


def test_a_workload_is_read_with_its_namespaces_defaults() -> None:
    table = PodDefaultsTable()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "team", "labels": {"sluice.dev/queue-name": "q"}},
        "spec": {"parallelism": 3, "template": {"spec": {"containers": [container()]}}},
    }
    assert (view := JOB.view(job, defaults_of=table.of)) is not None
    assert view.request == Resources()
    lr = limit_range_from_object(
        limit_range("d", {"type": "Container", "defaultRequest": {"cpu": "500m"}})
    )
    assert table.set_limit_range("team/d", lr)
    assert not table.set_limit_range("team/d", lr)  # the same again changes nothing
    assert (view := JOB.view(job, defaults_of=table.of)) is not None
    assert view.request == R(cpu="1500m")
    assert table.of("elsewhere") == NO_DEFAULTS
    assert table.set_limit_range("team/d", None)
    assert table.of("team") == NO_DEFAULTS


def test_an_injected_init_container_is_not_defaulted_past_its_own_request() -> None:
    # The training-operator's init container states cpu and memory; a default request for
    # cpu does not replace it.
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "t", "namespace": "team", "labels": {"sluice.dev/queue-name": "q"}},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [container()]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [container()]}}},
            }
        },
    }
    defaults = PodDefaults(R(cpu="10m"))
    master, worker = PYTORCH_JOB.pod_sets(job, defaults)
    assert master.pod.request == R(cpu="10m")
    assert worker.pod.request == R(cpu="50m", memory="10Mi")


def test_a_limit_range_that_does_not_read_names_its_field() -> None:
    bad = limit_range("bad", {"type": "Container", "defaultRequest": {"cpu": "lots"}})
    with pytest.raises(InvalidObject, match=r"LimitRange team/bad: field spec\.limits\[0\]"):
        limit_range_from_object(bad)
