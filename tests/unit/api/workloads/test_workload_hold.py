"""How each kind is held, released and seen to finish: the patches sluice would send, applied
as the API server applies a JSON merge patch, read back by the same adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from workload_fixtures import merge_patch, objects

from sluice.api.workloads import ADAPTERS, Adapter, adapter_for
from sluice.api.workloads.job import JOB
from sluice.api.workloads.jobset import JOBSET
from sluice.api.workloads.kubeflow import MPI_JOB, PYTORCH_JOB
from sluice.api.workloads.rayjob import RAY_JOB
from sluice.api.workloads.trainjob import TRAIN_JOB

JOB_OBJ: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "ns", "labels": {"sluice.dev/queue-name": "q"}},
    "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
}
HELD = [
    (JOB, JOB_OBJ),
    (JOBSET, objects("jobsets.yaml")["two-slices"]),
    (TRAIN_JOB, objects("trainjobs.yaml")["three-node-ddp"]),
    (PYTORCH_JOB, objects("pytorchjobs.yaml")["mnist-nccl"]),
    (MPI_JOB, objects("mpijobs.yaml")["estimate-pi"]),
    (RAY_JOB, objects("rayjobs.yaml")["count-to-ten"]),
]
IDS = [adapter.kind for adapter, _ in HELD]


def test_every_adapter_is_looked_up_by_its_api() -> None:
    assert [a for a, _ in HELD] == list(ADAPTERS)
    for adapter, obj in HELD:
        assert adapter_for(obj["apiVersion"], obj["kind"]) is adapter
    assert {a.api_version for a in ADAPTERS} == {
        "batch/v1",
        "jobset.x-k8s.io/v1alpha2",
        "trainer.kubeflow.org/v1alpha1",
        "kubeflow.org/v1",
        "kubeflow.org/v2beta1",
        "ray.io/v1",
    }


@pytest.mark.parametrize(("adapter", "obj"), HELD, ids=IDS)
def test_release_then_hold_round_trips(adapter: Adapter, obj: dict[str, Any]) -> None:
    assert adapter.suspended(obj)
    released = merge_patch(obj, adapter.suspend_patch(False))
    assert not adapter.suspended(released)
    assert adapter.pod_sets(released) == adapter.pod_sets(obj)
    held = merge_patch(released, adapter.suspend_patch(True))
    assert adapter.suspended(held) and held == merge_patch(obj, {})


def test_kubeflow_jobs_are_held_under_run_policy() -> None:
    assert PYTORCH_JOB.suspend_patch(False) == {"spec": {"runPolicy": {"suspend": False}}}
    assert MPI_JOB.hold.name == "spec.runPolicy.suspend"
    released = merge_patch(objects("mpijobs.yaml")["estimate-pi"], MPI_JOB.suspend_patch(False))
    assert released["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"


def _conditions(*types: str, status: str = "True") -> dict[str, Any]:
    return {"conditions": [{"type": t, "status": status} for t in types]}


@pytest.mark.parametrize(
    ("adapter", "obj", "finished", "not_finished"),
    [
        (JOB, JOB_OBJ, _conditions("Complete"), _conditions("Suspended")),
        (JOB, JOB_OBJ, _conditions("Failed"), _conditions("Complete", status="False")),
        (JOBSET, HELD[1][1], _conditions("Completed"), _conditions("StartupPolicyCompleted")),
        (JOBSET, HELD[1][1], _conditions("Failed"), _conditions("Complete")),
        (TRAIN_JOB, HELD[2][1], _conditions("Complete"), _conditions("Suspended")),
        (TRAIN_JOB, HELD[2][1], _conditions("Failed"), _conditions("Failed", status="False")),
        (PYTORCH_JOB, HELD[3][1], _conditions("Succeeded"), _conditions("Running")),
        (MPI_JOB, HELD[4][1], _conditions("Failed"), _conditions("Restarting")),
        (RAY_JOB, HELD[5][1], {"jobDeploymentStatus": "Complete"}, {"jobStatus": "SUCCEEDED"}),
        (
            RAY_JOB,
            HELD[5][1],
            {"jobDeploymentStatus": "Failed"},
            {"jobDeploymentStatus": "Running"},
        ),
    ],
)
def test_finished_is_read_from_each_kinds_status(
    adapter: Adapter, obj: dict[str, Any], finished: dict[str, Any], not_finished: dict[str, Any]
) -> None:
    assert adapter.finished({**obj, "status": finished})
    assert not adapter.finished({**obj, "status": not_finished})
    assert not adapter.finished({**obj, "status": None})


@pytest.mark.parametrize(
    ("adapter", "obj", "status"),
    [
        (JOB, JOB_OBJ, {"active": 1}),
        (JOBSET, HELD[1][1], {"replicatedJobsStatus": [{"name": "slice", "active": 2}]}),
        (TRAIN_JOB, HELD[2][1], {"jobsStatus": [{"name": "node", "active": 1}]}),
        (PYTORCH_JOB, HELD[3][1], {"replicaStatuses": {"Worker": {"active": 3}}}),
        (MPI_JOB, HELD[4][1], {"replicaStatuses": {"Launcher": {"active": 1}}}),
        (RAY_JOB, HELD[5][1], {"jobDeploymentStatus": "Running"}),
    ],
    ids=IDS,
)
def test_active_is_read_from_each_kinds_status(
    adapter: Adapter, obj: dict[str, Any], status: dict[str, Any]
) -> None:
    assert adapter.active({**obj, "status": status})
    assert not adapter.active(obj)


def test_the_docs_table_lists_every_adapter_and_its_hold() -> None:
    docs = Path(__file__).parents[4] / "docs" / "workloads.md"
    kinds = docs.read_text().partition("\n## The kinds\n")[2].partition("\n### ")[0]
    rows = {
        cells[0]: (cells[1], cells[2])
        for line in kinds.splitlines()
        if line.startswith("| ") and not line.startswith("| Kind")
        for cells in [[c.strip().strip("`") for c in line.strip("|").split("|")]]
    }
    assert rows == {a.kind: (a.api_version, a.hold.name) for a in ADAPTERS}
