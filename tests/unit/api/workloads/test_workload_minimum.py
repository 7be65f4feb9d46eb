"""The smallest size each pod set may be admitted at (docs/elastic.md, *The minimum*): a Job's
annotation, the kind's own field, the pod template's annotation winning for its pod set."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from workload_fixtures import objects

from sluice.api.constants import MIN_PARALLELISM_ANNOTATION as MIN
from sluice.api.errors import InvalidObject
from sluice.api.views import WorkloadView
from sluice.api.workloads import workload_from_object

PYTORCHJOBS = objects("pytorchjobs.yaml")
RAYJOBS = objects("rayjobs.yaml")
JOBSETS = objects("jobsets.yaml")


def read(obj: dict[str, Any]) -> WorkloadView:
    workload = workload_from_object(obj)
    assert workload is not None
    return workload


def sizes(obj: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    """Each pod set's (count, min_count, count_step)."""
    return {s.name: (s.count, s.min_count, s.count_step) for s in read(obj).pod_sets}


def job(
    parallelism: int = 8, meta: str | None = None, template: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "q"},
            "annotations": {} if meta is None else {MIN: meta},
        },
        "spec": {
            "suspend": True,
            "parallelism": parallelism,
            "template": {
                "metadata": {"annotations": {} if template is None else {MIN: template}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }


def test_a_job_without_a_minimum_is_admitted_whole_only() -> None:
    assert sizes(job()) == {"main": (8, 8, 1)}
    assert not read(job()).pod_sets[0].resizable


def test_a_jobs_annotation_is_its_minimum_parallelism() -> None:
    assert sizes(job(meta="4")) == {"main": (8, 4, 1)}
    assert read(job(meta="4")).pod_sets[0].resizable


def test_the_templates_annotation_wins_over_the_jobs() -> None:
    assert sizes(job(meta="4", template="6")) == {"main": (8, 6, 1)}
    assert sizes(job(template="3")) == {"main": (8, 3, 1)}


def test_a_minimum_above_the_size_asks_the_whole_size() -> None:
    # Lowering parallelism (which frees quota) must not make an admitted Job unreadable.
    assert sizes(job(parallelism=3, meta="4")) == {"main": (3, 3, 1)}


def test_a_pod_set_says_whether_its_minimum_is_written_even_one_equal_to_its_size() -> None:
    # Its pods are gated all the same, and its record is what they are released up to.
    declared = read(job(parallelism=4, meta="4")).pod_sets[0]
    assert declared.min_declared and not declared.resizable
    assert not read(job()).pod_sets[0].min_declared


@pytest.mark.parametrize("value", ["0", "-1", "four", "2.5", "", " 3", "+3"])
def test_a_minimum_that_is_no_positive_count_is_refused_by_name(value: str) -> None:
    with pytest.raises(InvalidObject) as err:
        read(job(meta=value))
    assert err.value.field == f"metadata.annotations[{MIN}]"
    assert err.value.problem == f"{value!r} is not a count of at least 1"
    with pytest.raises(InvalidObject) as err:
        read(job(template=value))
    assert err.value.field == f"spec.template.metadata.annotations[{MIN}]"


def test_a_pytorchjobs_elastic_policy_bounds_its_workers() -> None:
    assert sizes(PYTORCHJOBS["elastic-resnet"]) == {"Worker": (2, 1, 1)}
    # No elastic policy: the workers are admitted all together or not at all.
    assert sizes(PYTORCHJOBS["mnist-nccl"]) == {"Master": (1, 1, 1), "Worker": (3, 3, 1)}


def test_a_pytorchjob_workers_template_annotation_wins_over_its_policy() -> None:
    obj = copy.deepcopy(PYTORCHJOBS["elastic-resnet"])
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {MIN: "2"}
    }
    assert sizes(obj) == {"Worker": (3, 2, 1)}
    plain = copy.deepcopy(PYTORCHJOBS["mnist-nccl"])
    plain["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {MIN: "1"}
    }
    assert sizes(plain)["Worker"] == (3, 1, 1)


def test_a_minimum_on_a_pod_set_that_cannot_shrink_is_refused() -> None:
    obj = copy.deepcopy(PYTORCHJOBS["mnist-nccl"])
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"] = {
        "annotations": {MIN: "1"}
    }
    with pytest.raises(InvalidObject) as err:
        read(obj)
    assert (
        err.value.field == f"spec.pytorchReplicaSpecs.Master.template.metadata.annotations[{MIN}]"
    )
    assert err.value.problem == (
        "pod set Master of a PyTorchJob is admitted whole only; a minimum size is read on Worker"
    )
    jobset = copy.deepcopy(JOBSETS["fanout"])
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template.setdefault("metadata", {})["annotations"] = {MIN: "1"}
    with pytest.raises(InvalidObject) as err:
        read(jobset)
    assert err.value.problem == (
        "pod set workers of a JobSet is admitted whole only; a JobSet is never admitted smaller"
    )


def test_a_ray_worker_groups_min_replicas_counts_in_slices_of_its_hosts() -> None:
    # 2 replicas of 2 hosts each, minReplicas 1: 4 pods, at least 2, 2 at a time.
    assert sizes(RAYJOBS["own-submitter"])["wide"] == (4, 2, 2)
    assert sizes(RAYJOBS["own-submitter"])["head"] == (1, 1, 1)
    assert sizes(RAYJOBS["own-submitter"])["submitter"] == (1, 1, 1)


def test_a_ray_worker_group_without_min_replicas_is_admitted_whole() -> None:
    obj = copy.deepcopy(RAYJOBS["own-submitter"])
    group = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    del group["minReplicas"]
    assert sizes(obj)["wide"] == (4, 4, 2)
    group["template"].setdefault("metadata", {})["annotations"] = {MIN: "1"}
    assert sizes(obj)["wide"] == (4, 2, 2)


def test_a_ray_template_annotation_wins_over_min_replicas() -> None:
    obj = copy.deepcopy(RAYJOBS["own-submitter"])
    group = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["replicas"] = 3
    group["template"].setdefault("metadata", {})["annotations"] = {MIN: "2"}
    assert sizes(obj)["wide"] == (6, 4, 2)


def test_a_jobs_annotation_on_another_kinds_metadata_is_not_read() -> None:
    # The door refuses it there (queues.sizes); the reader leaves the pod sets whole.
    obj = copy.deepcopy(PYTORCHJOBS["mnist-nccl"])
    obj["metadata"]["annotations"] = {MIN: "1"}
    assert sizes(obj)["Worker"] == (3, 3, 1)
