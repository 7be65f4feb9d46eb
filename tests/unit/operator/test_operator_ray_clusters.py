"""The operator reads a running RayJob at the worker group sizes of the RayCluster it runs
(docs/elastic.md, *Grown through the queue*): the RayClusters a managed RayJob controls are
listed and watched, each change to one reads its RayJob anew, and what the operator writes
to the RayJob is still worked out on the RayJob as stored."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from operator_fakes import fake_executor

from sluice.api.workloads import BY_KIND
from sluice.operator.plan import plan
from sluice.operator.state import ClusterState
from sluice.operator.watches import listings
from sluice.operator.writes import Beside, Write
from sluice.scheduler.model import CycleResult, Decision
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


def autoscaled(replicas: int, admitted: int) -> dict[str, Any]:
    """A running RayJob with Ray's autoscaler on, its workers recorded at ``admitted``."""
    obj = ray_job()
    obj["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [group(replicas)]
    record = f'{{"workers":{{"admitted":{admitted},"asked":{admitted},"fields":{{}}}}}}'
    obj["metadata"]["annotations"]["sluice.dev/admitted-size"] = record
    return obj


def shrunk(*names: str) -> CycleResult:
    decision = Decision(
        "reclaim", "ns/train", "team", "reclaimed for ns/a1 above its minimum",
        for_job="ns/a1", sizes=(("workers", 3, 1),),
        deletes=tuple(("workers", name) for name in names),
    )  # fmt: skip
    return CycleResult(queue_order=(), queues={}, decisions=(decision,), pending=())


def test_a_shrink_names_the_workers_taken_on_its_cluster_and_lowers_the_record() -> None:
    # Grown to 3 on its cluster: reclaim takes its 2 newest workers above its minimum of 1.
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    state.on_workload("ADDED", autoscaled(1, 3))
    state.on_ray_cluster("ADDED", ray_cluster(3, "10"))
    clusters = state.ray_clusters_of(["ns/train", "ns/other"])
    assert list(clusters) == ["ns/train"]
    writes = plan(shrunk("w-3", "w-2"), state.workloads, state.workload_views,
                  {}, NOW, 0.0, {}, clusters=clusters)  # fmt: skip
    (write,) = writes.victims
    assert write.beside is not None
    assert (write.beside.plural, write.beside.key) == ("rayclusters", "ns/train-abc")
    assert list(write.beside.patch) == [
        {"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": "workers"},
        {"op": "test", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
        {
            "op": "add",
            "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": ["w-3", "w-2"]},
        },
    ]
    # The RayJob itself: its record lowered, its own replicas (1) already there, not held.
    assert "suspend" not in write.patch.get("spec", {})
    record = write.patch["metadata"]["annotations"]["sluice.dev/admitted-size"]
    assert json.loads(record) == {"workers": {"admitted": 1, "asked": 3, "fields": {}}}


def test_a_shrink_of_a_ray_job_whose_cluster_is_not_known_lands_nowhere() -> None:
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    state.on_workload("ADDED", autoscaled(1, 3))
    writes = plan(shrunk("w-3", "w-2"), state.workloads, state.workload_views,
                  {}, NOW, 0.0, {}, clusters=state.ray_clusters_of(["ns/train"]))  # fmt: skip
    (write,) = writes.victims
    assert write.beside is not None and write.beside.key == ""


def test_a_shrink_leaves_a_cluster_already_at_the_size_admitted_alone() -> None:
    # The autoscaler lowered it meanwhile: only the record is written.
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    state.on_workload("ADDED", autoscaled(1, 3))
    state.on_ray_cluster("ADDED", ray_cluster(1, "10"))
    writes = plan(shrunk("w-3", "w-2"), state.workloads, state.workload_views,
                  {}, NOW, 0.0, {}, clusters=state.ray_clusters_of(["ns/train"]))  # fmt: skip
    (write,) = writes.victims
    assert write.beside is None
    assert "sluice.dev/admitted-size" in write.patch["metadata"]["annotations"]


def test_the_cluster_is_written_first_and_the_ray_job_only_once_it_landed() -> None:
    executor, cluster, state = fake_executor()
    obj = autoscaled(1, 3)
    cluster.add("rayjobs/ns/train", obj)
    state.on_workload("ADDED", copy.deepcopy(obj))
    ops = ({"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},)
    beside = Beside("ray.io", "v1", "rayclusters", "ns/train-abc", ops)
    lowered = {"metadata": {"annotations": {"sluice.dev/admitted-size": "x"}}}
    write = Write("reclaim", "ns/train", lowered, None, beside=beside)
    cluster.refuse.add("rayclusters/ns/train-abc")
    assert executor.write(write) is None
    assert cluster.calls == [("json-patch", "rayclusters/ns/train-abc")]
    cluster.refuse.clear()
    assert executor.write(write) is not None
    assert cluster.calls[1:] == [
        ("json-patch", "rayclusters/ns/train-abc"),
        ("patch", "rayjobs/ns/train"),
    ]
    assert cluster.json_patches == [("rayclusters/ns/train-abc", list(ops))]
    nowhere = Write(
        "reclaim", "ns/train", lowered, None, beside=Beside("ray.io", "v1", "rayclusters", "", ())
    )
    assert executor.write(nowhere) is None
    assert len(cluster.calls) == 3


def test_a_group_its_autoscaler_lowered_on_the_cluster_lowers_the_record() -> None:
    # Grown to 3, then lowered to 1 by Ray's autoscaler: the record follows, so a raise
    # back is growth through the queue again.
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    state.on_workload("ADDED", autoscaled(1, 3))
    state.on_ray_cluster("ADDED", ray_cluster(1, "10"))
    (write,) = plan(
        CycleResult(queue_order=(), queues={}, decisions=(), pending=()),
        state.workloads, state.workload_views, {}, NOW, 0.0, {},
    ).reasons  # fmt: skip
    assert write.kind == "record"
    record = write.patch["metadata"]["annotations"]["sluice.dev/admitted-size"]
    assert json.loads(record) == {"workers": {"admitted": 1, "asked": 1, "fields": {}}}


def test_a_shrink_that_names_no_worker_still_lowers_the_clusters_replicas_first() -> None:
    # Its pods not known to the cycle: the replicas still go down on the cluster before the
    # record, so the record never says less than the cluster runs.
    state = ClusterState(readers=readers(workload_kinds=("Job", "RayJob")))
    state.on_workload("ADDED", autoscaled(1, 3))
    state.on_ray_cluster("ADDED", ray_cluster(3, "10"))
    writes = plan(shrunk(), state.workloads, state.workload_views,
                  {}, NOW, 0.0, {}, clusters=state.ray_clusters_of(["ns/train"]))  # fmt: skip
    (write,) = writes.victims
    assert write.beside is not None
    assert write.beside.patch[-2:] == (
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
        {
            "op": "add",
            "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": []},
        },
    )
