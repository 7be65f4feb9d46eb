"""The operator reads a running RayJob at the worker group sizes of the RayCluster it runs
(docs/elastic.md, *Grown through the queue*): the RayClusters a managed RayJob controls are
listed and watched, each change to one reads its RayJob anew, and what the operator writes
to the RayJob is still worked out on the RayJob as stored."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from sluice.api.workloads import BY_KIND
from sluice.operator.state import ClusterState
from sluice.operator.watches import listings
from sluice.scheduler.snapshot import readers

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
RAY_JOB = BY_KIND["RayJob"]


def group(replicas: int) -> dict[str, Any]:
    return {
        "groupName": "workers",
        "replicas": replicas,
        "minReplicas": 1,
        "maxReplicas": 8,
        "template": {"spec": POD},
    }


def ray_job(version: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "uid-train",
            "resourceVersion": version,
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": {
                "sluice.dev/admitted-size": '{"workers":{"admitted":2,"asked":2,"fields":{}}}'
            },
        },
        "spec": {
            "suspend": False,
            "shutdownAfterJobFinishes": True,
            "submissionMode": "HTTPMode",
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": POD}},
                "workerGroupSpecs": [group(2)],
            },
        },
        "status": {"rayClusterName": "train-abc", "jobDeploymentStatus": "Running"},
    }


def ray_cluster(replicas: int, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "train-abc",
            "namespace": "ns",
            "resourceVersion": version,
            "labels": {"sluice.dev/queue-name": "team"},
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "name": "train",
                    "uid": "uid-train",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "headGroupSpec": {"template": {"spec": POD}},
            "workerGroupSpecs": [group(replicas)],
        },
    }


def workers(state: ClusterState) -> int:
    (job,) = state.snapshot(NOW, 5).snapshot.workloads
    return next(p.count for p in job.pod_sets if p.name == "workers")


def test_a_ray_job_asks_the_replicas_its_cluster_has_whichever_comes_first() -> None:
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    state.on_workload("ADDED", ray_job())
    assert workers(state) == 2
    state.on_ray_cluster("ADDED", ray_cluster(2, "10"))
    assert workers(state) == 2
    state.on_ray_cluster("MODIFIED", ray_cluster(5, "11"))  # as Ray's autoscaler raises it
    assert workers(state) == 5
    assert (
        state.workloads["ns/train"]["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"]
        == 2
    )  # the RayJob as stored, which the operator's writes are worked out on
    state.on_workload("MODIFIED", ray_job("2"))
    assert workers(state) == 5
    state.on_ray_cluster("DELETED", ray_cluster(5, "12"))
    assert workers(state) == 2

    later = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    later.on_ray_cluster("ADDED", ray_cluster(4, "10"))
    later.on_workload("ADDED", ray_job())
    assert workers(later) == 4


def test_a_cluster_change_wakes_the_decision_pass_for_its_ray_job() -> None:
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    state.on_workload("ADDED", ray_job())
    state.decision_snapshot(NOW, 5, whole=True)
    state.on_ray_cluster("ADDED", ray_cluster(3, "10"))
    _, changed = state.decision_snapshot(NOW, 5, whole=False)
    assert changed is not None
    view = changed["ns/train"]
    assert view is not None and [p.count for p in view.pod_sets if p.name == "workers"] == [3]


def test_the_clusters_of_managed_ray_jobs_are_listed_only_when_ray_jobs_are_gated() -> None:
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    kinds = {k for _, _, k, _, _ in listings(client.ApiClient(), state, (BY_KIND["Job"],))}
    assert "RayCluster" not in kinds
    found = listings(client.ApiClient(), state, (BY_KIND["Job"], RAY_JOB))
    (cluster,) = [one for one in found if one.kind == "RayCluster"]
    # KubeRay copies the RayJob's labels onto the cluster it makes.
    assert (cluster.api_version, cluster.selector) == ("ray.io/v1", "sluice.dev/queue-name")
    state.on_workload("ADDED", ray_job())
    cluster.store("ADDED", copy.deepcopy(ray_cluster(6, "10")))
    assert workers(state) == 6
    assert state.unlisted("RayCluster", set(), 10) == ["ns/train-abc"]
