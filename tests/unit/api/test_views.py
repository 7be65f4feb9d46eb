"""Jobs, Nodes and Queues as sluice reads them from Kubernetes objects."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.errors import InvalidObject
from sluice.api.pod_request import pod_request
from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, node_from_object
from sluice.api.workloads.job import JOB


def job(**spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {"sluice.dev/queue-name": "team"})
    annotations = spec.pop("annotations", {})
    status = spec.pop("status", {})
    pod = spec.pop("pod", {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": labels, "annotations": annotations},
        "spec": {"template": {"spec": pod}, **spec},
        "status": status,
    }


def test_request_is_parallelism_times_the_pod_request() -> None:
    view = JOB.view(job(parallelism=4))
    assert view is not None and view.request == Resources({"cpu": 4000})


def test_init_containers_and_sidecars_as_kubernetes_computes_them() -> None:
    pod = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "initContainers": [
            {"name": "setup", "resources": {"requests": {"cpu": "3"}}},
            {
                "name": "proxy",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "500m"}},
            },
            {"name": "late", "resources": {"requests": {"memory": "4Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    # cpu: max(1 + 0.5 sidecar, setup 3, late 0 + 0.5) + 0.1; memory: max(1Gi, 4Gi)
    assert pod_request(pod, "Job", "ns/j") == Resources.parse({"cpu": "3100m", "memory": "4Gi"})


def test_pod_level_resources_replace_the_containers_for_what_they_name() -> None:
    """A tenant cannot ask for 64 cpus at the pod level while sluice counts one."""
    pod = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "resources": {"requests": {"cpu": "64"}, "limits": {"memory": "8Gi"}},
        "overhead": {"cpu": "100m"},
    }
    assert pod_request(pod, "Job", "ns/j") == Resources.parse({"cpu": "64100m", "memory": "8Gi"})


def test_a_limit_without_a_request_requests_the_limit() -> None:
    pod = {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    assert pod_request(pod, "Job", "ns/j") == Resources({"nvidia.com/gpu": 2000})


@pytest.mark.parametrize(
    ("spec", "phase"),
    [
        ({"suspend": True}, JobPhase.PENDING),
        ({"suspend": False}, JobPhase.INQUEUE),
        ({"status": {"active": 2}}, JobPhase.RUNNING),
        (
            {"suspend": True, "status": {"conditions": [{"type": "Failed", "status": "True"}]}},
            JobPhase.COMPLETED,
        ),
        ({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}, JobPhase.COMPLETED),
    ],
)
def test_phases(spec: dict[str, Any], phase: JobPhase) -> None:
    view = JOB.view(job(**spec))
    assert view is not None and view.phase is phase


def test_queue_from_label_or_namespace_and_unmanaged_jobs() -> None:
    assert JOB.view(job(labels={})) is None
    view = JOB.view(job(labels={}), {"ns": "ns-queue"})
    assert view is not None and view.queue == "ns-queue" and view.queue_from_namespace


def test_annotations_preemptable_and_admitted_at() -> None:
    view = JOB.view(
        job(
            annotations={
                "sluice.dev/preemptable": "false",
                "sluice.dev/admitted-at": "2026-01-01T00:00:00Z",
            }
        )
    )
    assert view is not None and not view.preemptable
    assert view.admitted_at is not None and view.admitted_at.year == 2026


def test_bad_fields_are_named() -> None:
    bad = job(pod={"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]})
    with pytest.raises(InvalidObject) as err:
        JOB.view(bad)
    assert "Job ns/j: field spec.template.spec.containers[0].resources.requests" in str(err.value)
    with pytest.raises(InvalidObject, match=r"spec\.parallelism"):
        JOB.view(job(parallelism=-1))
    with pytest.raises(InvalidObject, match="admitted-at"):
        JOB.view(job(annotations={"sluice.dev/admitted-at": "yesterday"}))


def test_nodes_count_only_when_ready_and_schedulable() -> None:
    ready = {"type": "Ready", "status": "True"}
    node = {
        "metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "8"}, "conditions": [ready]},
    }
    assert node_from_object(node).usable
    cordoned = {**node, "spec": {"unschedulable": True}}
    assert not node_from_object(cordoned).usable
    not_ready = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "8"}}}
    assert not node_from_object(not_ready).usable


def test_queue_errors_name_the_field() -> None:
    with pytest.raises(InvalidObject) as err:
        Queue.from_object({"metadata": {"name": "q"}, "spec": {"weight": 0}})
    assert str(err.value).startswith("Queue q: field spec.weight:")
    with pytest.raises(InvalidObject, match="priority and priorityClassName cannot both be set"):
        Queue.from_object(
            {"metadata": {"name": "q"}, "spec": {"priority": 1, "priorityClassName": "x"}}
        )
    with pytest.raises(InvalidObject, match=r"metadata\.name"):
        Queue.from_object({"metadata": {}})


def test_resources_arithmetic_and_limits() -> None:
    a = Resources.parse({"cpu": "2", "memory": "1Gi"})
    b = Resources.parse({"cpu": "500m"})
    assert (a + b)["cpu"] == 2500 and (a - b)["cpu"] == 1500
    assert (b - b) == Resources() and not (b - b)
    assert b.exceeding(Resources(), absent_is_unlimited=True) == []
    assert b.exceeding(Resources(), absent_is_unlimited=False) == [("cpu", 500, 0)]
    assert a.exceeding(Resources({"cpu": 1000}), absent_is_unlimited=True) == [("cpu", 2000, 1000)]
    assert a.describe() == "cpu 2, memory 1Gi"
