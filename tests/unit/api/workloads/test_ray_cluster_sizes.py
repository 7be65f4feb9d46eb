"""A RayJob read at the worker group sizes of the RayCluster it runs (docs/elastic.md,
*Grown through the queue*): Ray's autoscaler raises a group's replicas there, not on the
RayJob, and KubeRay never carries a RayJob's later changes into its cluster."""

from __future__ import annotations

import copy
import json
from typing import Any

from sluice.api.workloads import BY_KIND
from sluice.api.workloads.ray_cluster import ClusterSizes, as_its_cluster_asks, cluster_sizes

RAY_JOB = BY_KIND["RayJob"]
POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}


def group(name: str, replicas: int, hosts: int = 1) -> dict[str, Any]:
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": 1,
        "maxReplicas": 8,
        "numOfHosts": hosts,
        "template": {"spec": POD},
    }


RECORD = {
    "sluice.dev/admitted-size": json.dumps(
        {
            "small": {"admitted": 2, "asked": 2, "fields": {}},
            "wide": {"admitted": 2, "asked": 2, "fields": {}},
        }
    )
}


def ray_job(suspend: bool = False) -> dict[str, Any]:
    """Admitted with its two worker groups recorded (they declare their minimums)."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "uid-train",
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": dict(RECORD),
        },
        "spec": {
            "suspend": suspend,
            "shutdownAfterJobFinishes": True,
            "submissionMode": "HTTPMode",
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": POD}},
                "workerGroupSpecs": [group("small", 2), group("wide", 1, hosts=2)],
            },
        },
        "status": {"rayClusterName": "train-abc"},
    }


def ray_cluster(
    small: int, wide: int, owner: str = "train", uid: str = "uid-train", name: str = "train-abc"
) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "team"},
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "name": owner,
                    "uid": uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "headGroupSpec": {"template": {"spec": POD}},
            "workerGroupSpecs": [group("small", small), group("wide", wide, hosts=2)],
        },
    }


def counts(obj: dict[str, Any]) -> dict[str, int]:
    return {p.name: p.count for p in RAY_JOB.pod_sets(obj)}


def test_a_cluster_a_ray_job_controls_names_its_job_and_each_groups_replicas() -> None:
    assert cluster_sizes(ray_cluster(5, 3)) == ClusterSizes(
        job="ns/train",
        job_uid="uid-train",
        cluster="train-abc",
        replicas=(("small", 5), ("wide", 3)),
    )


def test_a_cluster_of_its_own_or_another_owners_has_no_sizes_for_a_job() -> None:
    own = ray_cluster(5, 3)
    del own["metadata"]["ownerReferences"]
    assert cluster_sizes(own) is None
    other = ray_cluster(5, 3)
    other["metadata"]["ownerReferences"][0]["kind"] = "RayService"
    assert cluster_sizes(other) is None
    not_controller = ray_cluster(5, 3)
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert cluster_sizes(not_controller) is None


def test_a_running_ray_job_asks_its_clusters_replicas_in_steps_of_its_hosts() -> None:
    job = ray_job()
    assert counts(job)["small"] == 2
    asked = as_its_cluster_asks(job, cluster_sizes(ray_cluster(5, 3)))
    assert counts(asked)["small"] == 5
    assert counts(asked)["wide"] == 6
    assert counts(job)["small"] == 2  # the object itself is left as it is


def test_the_cluster_is_bounded_by_the_ray_jobs_own_max_replicas() -> None:
    asked = as_its_cluster_asks(ray_job(), cluster_sizes(ray_cluster(50, 1)))
    assert counts(asked)["small"] == 8


def test_a_suspended_job_or_a_cluster_it_does_not_run_changes_nothing() -> None:
    sizes = cluster_sizes(ray_cluster(5, 3))
    held = ray_job(suspend=True)
    assert as_its_cluster_asks(held, sizes) is held
    job = ray_job()
    assert as_its_cluster_asks(job, None) is job
    for other in (
        cluster_sizes(ray_cluster(5, 3, name="train-old")),  # a cluster of an earlier start
        cluster_sizes(ray_cluster(5, 3, uid="uid-earlier")),  # of a RayJob of the same name
        cluster_sizes(ray_cluster(5, 3, owner="other")),
    ):
        assert as_its_cluster_asks(job, other) is job


def test_a_group_the_cluster_lacks_keeps_the_jobs_size() -> None:
    cluster = ray_cluster(5, 3)
    del cluster["spec"]["workerGroupSpecs"][1]
    asked = as_its_cluster_asks(copy.deepcopy(ray_job()), cluster_sizes(cluster))
    assert counts(asked) == {**counts(ray_job()), "small": 5}


def test_only_a_group_its_record_holds_grows_on_its_cluster() -> None:
    # Without a record the RayJob is held, and its gated pods released, at what its spec
    # asks: a size read from its cluster would release workers no queue admitted.
    job = ray_job()
    job["metadata"]["annotations"]["sluice.dev/admitted-size"] = json.dumps(
        {"wide": {"admitted": 2, "asked": 2, "fields": {}}}
    )
    assert counts(as_its_cluster_asks(job, cluster_sizes(ray_cluster(5, 3)))) == {
        **counts(job),
        "wide": 6,
    }
    del job["metadata"]["annotations"]["sluice.dev/admitted-size"]
    assert as_its_cluster_asks(job, cluster_sizes(ray_cluster(5, 3))) is job
