"""At the door: a workload's minimum size (docs/elastic.md, *The minimum*) is its owner's to
write at creation and while it waits, and stays as it was admitted while it runs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from queue_builders import cluster, q

from sluice.api.constants import MIN_PARALLELISM_ANNOTATION as MIN
from sluice.api.workloads import BY_KIND, Adapter
from sluice.api.workloads.job import JOB
from sluice.queues.jobs import Writer, check_job_create, check_job_update
from sluice.queues.pods import check_pod_create

FIXTURES = Path(__file__).parents[1] / "api" / "workloads"
OPERATOR = Writer("system:serviceaccount:sluice-system:sluice-operator", operator=True)
ALICE = Writer("alice", ("system:authenticated",))
QUEUES = cluster(q("team"))


def job(*, held: bool = True, meta: str | None = None, template: str | None = None) -> Any:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": {} if meta is None else {MIN: meta},
        },
        "spec": {
            "suspend": held,
            "parallelism": 8,
            "template": {
                "metadata": {"annotations": {} if template is None else {MIN: template}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def fixture(file_name: str, name: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((FIXTURES / file_name).read_text())
    obj = next(d for d in docs if d and d["metadata"]["name"] == name)
    obj["metadata"]["namespace"] = "ns"
    obj["metadata"]["labels"] = {"sluice.dev/queue-name": "team"}
    assert isinstance(obj, dict)
    return obj


def create(obj: Any, adapter: Adapter = JOB) -> Any:
    return check_job_create(obj, "ns", QUEUES, None, ALICE, adapter=adapter)


def update(old: Any, new: Any, adapter: Adapter = JOB, writer: Writer = ALICE) -> Any:
    return check_job_update(old, new, "ns", QUEUES, None, writer, adapter)


def test_a_tenant_writes_the_minimum_when_creating_a_job() -> None:
    assert create(job(meta="4")).allowed
    assert create(job(template="4")).allowed
    assert create(job(meta="4", template="6")).allowed


def test_a_minimum_that_is_no_count_is_refused_at_creation_by_name() -> None:
    verdict = create(job(meta="four"))
    assert verdict.rule == "job-min-size-invalid"
    assert verdict.message == (
        f"job ns/train: field metadata.annotations[{MIN}]: 'four' is not a count of at least 1"
    )
    assert create(job(template="0")).rule == "job-min-size-invalid"


def test_the_minimum_may_change_while_the_job_waits() -> None:
    assert update(job(), job(meta="4")).allowed
    assert update(job(meta="4"), job(meta="6")).allowed
    assert update(job(template="4"), job()).allowed


def test_the_minimum_of_an_admitted_job_cannot_change() -> None:
    admitted = job(held=False, meta="4")
    verdict = update(admitted, job(held=False, meta="2"))
    assert verdict.rule == "job-min-size-immutable"
    assert verdict.message == (
        f"job ns/train: the minimum size of an admitted workload cannot change"
        f" (metadata.annotations[{MIN}]: 4 -> 2); suspend it (spec.suspend: true) to queue it"
        " again with the new minimum"
    )
    removed = update(admitted, job(held=False))
    assert removed.rule == "job-min-size-immutable"
    assert "(metadata.annotations[sluice.dev/min-parallelism]: 4 -> nothing)" in removed.message
    added = update(job(held=False), job(held=False, template="4"))
    assert added.rule == "job-min-size-immutable"
    assert f"(spec.template.metadata.annotations[{MIN}]: nothing -> 4)" in added.message


def test_the_minimum_changes_in_the_write_that_suspends_and_by_the_operator() -> None:
    admitted = job(held=False, meta="4")
    assert update(admitted, job(held=True, meta="2")).allowed
    assert update(admitted, job(held=False, meta="2"), writer=OPERATOR).allowed


def test_a_ray_worker_groups_min_replicas_stays_while_admitted() -> None:
    held = fixture("rayjobs.yaml", "own-submitter")
    admitted = copy.deepcopy(held)
    admitted["spec"]["suspend"] = False
    lowered = copy.deepcopy(admitted)
    lowered["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["minReplicas"] = 0
    verdict = update(admitted, lowered, BY_KIND["RayJob"])
    assert verdict.rule == "job-min-size-immutable"
    assert "(spec.rayClusterSpec.workerGroupSpecs[0].minReplicas: 1 -> 0)" in verdict.message
    waiting = {**lowered, "spec": {**lowered["spec"], "suspend": True}}
    assert update(held, waiting, BY_KIND["RayJob"]).allowed


def test_a_pytorchjobs_elastic_minimum_stays_while_admitted() -> None:
    admitted = fixture("pytorchjobs.yaml", "elastic-resnet")
    admitted["spec"]["runPolicy"] = {"suspend": False}
    raised = copy.deepcopy(admitted)
    raised["spec"]["elasticPolicy"]["minReplicas"] = 2
    verdict = update(admitted, raised, BY_KIND["PyTorchJob"])
    assert verdict.rule == "job-min-size-immutable"
    assert "(spec.elasticPolicy.minReplicas: 1 -> 2)" in verdict.message


def test_the_jobs_annotation_on_another_kinds_metadata_is_refused() -> None:
    obj = fixture("pytorchjobs.yaml", "elastic-resnet")
    obj["metadata"]["annotations"] = {MIN: "1"}
    verdict = create(obj, BY_KIND["PyTorchJob"])
    assert verdict.rule == "job-min-size-place"
    assert verdict.message == (
        f"pytorchjob ns/elastic-resnet: annotation {MIN} is read on a Job's metadata, or on"
        " the pod template of the pod set it bounds (Worker), not on a PyTorchJob's metadata"
    )


def test_a_minimum_on_a_pod_set_admitted_whole_is_refused() -> None:
    obj = fixture("mpijobs.yaml", next(iter(_names("mpijobs.yaml"))))
    template = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    template.setdefault("metadata", {})["annotations"] = {MIN: "1"}
    verdict = create(obj, BY_KIND["MPIJob"])
    assert verdict.rule == "job-min-size-invalid"
    assert "pod set Worker of a MPIJob is admitted whole only" in verdict.message


def test_a_plain_pod_cannot_carry_the_minimum() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": {MIN: "1"},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    assert check_pod_create(pod, "ns", QUEUES, None, ALICE).rule == "job-operator-annotation"


def _names(file_name: str) -> list[str]:
    docs = yaml.safe_load_all((FIXTURES / file_name).read_text())
    return [d["metadata"]["name"] for d in docs if d]
