"""The kinds of workload other than Jobs (docs/workloads.md): watched, read, and held or
released through each kind's adapter and API."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from operator_fakes import apply_result, fake_executor

from sluice.api.workloads import BY_KIND
from sluice.api.workloads.jobset import JOBSET
from sluice.api.workloads.kubeflow import PYTORCH_JOB
from sluice.operator.state import ClusterState
from sluice.operator.watches import listings
from sluice.scheduler.model import CycleResult, Decision
from sluice.scheduler.snapshot import readers

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}


def pytorch_job(name: str, suspend: bool) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "generation": 1,
            "labels": {"sluice.dev/queue-name": "team"},
        },
        "spec": {
            "runPolicy": {"suspend": suspend},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": POD}}},
        },
    }


def jobset(name: str, suspend: bool) -> dict[str, Any]:
    job = {"parallelism": 2, "template": {"spec": POD}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "generation": 1,
            "labels": {"sluice.dev/queue-name": "team"},
        },
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [{"name": "workers", "template": {"spec": job}}],
        },
    }


def result(*decisions: Decision) -> CycleResult:
    return CycleResult(queue_order=(), queues={}, decisions=decisions, pending=())


async def test_each_kind_is_held_and_released_through_its_own_api_and_field() -> None:
    executor, cluster, state = fake_executor()
    for key, obj in [
        ("pytorchjobs/ns/train", pytorch_job("train", suspend=True)),
        ("jobsets/ns/sweep", jobset("sweep", suspend=False)),
    ]:
        state.on_workload("ADDED", cluster.add(key, obj))
    done = apply_result(
        executor,
        result(
            Decision("admit", "ns/train", "team", "fits"),
            Decision("reclaim", "ns/sweep", "other", "over its share", for_job="ns/train"),
        ),
        NOW,
    )
    assert done
    assert [key for verb, key in cluster.calls if verb == "patch"] == [
        "jobsets/ns/sweep",
        "pytorchjobs/ns/train",
    ]
    train = cluster.objects["pytorchjobs/ns/train"]
    assert train["spec"]["runPolicy"] == {"suspend": False}
    assert train["metadata"]["annotations"]["sluice.dev/admitted-at"] == "2026-01-01T12:00:00Z"
    sweep = cluster.objects["jobsets/ns/sweep"]
    assert sweep["spec"]["suspend"] is True
    assert sweep["metadata"]["annotations"]["sluice.dev/reclaimed-by"] == "ns/train"
    involved = sorted((e["involvedObject"]["kind"], e["reason"]) for e in cluster.events)
    assert involved == [("JobSet", "Reclaimed"), ("PyTorchJob", "Admitted")]
    assert {e["involvedObject"]["apiVersion"] for e in cluster.events} == {
        "kubeflow.org/v1",
        "jobset.x-k8s.io/v1alpha2",
    }


async def test_a_write_whose_answer_was_lost_is_read_again_through_its_kinds_api() -> None:
    executor, cluster, state = fake_executor()
    state.on_workload("ADDED", cluster.add("pytorchjobs/ns/train", pytorch_job("train", True)))
    cluster.lose_answer.add("pytorchjobs/ns/train")
    apply_result(executor, result(Decision("admit", "ns/train", "team", "fits")), NOW)
    assert executor.unsure == {"ns/train"}
    assert executor.reread_unsure()
    assert state.workloads["ns/train"]["spec"]["runPolicy"] == {"suspend": False}
    assert executor.unsure == set()


def child_job() -> dict[str, Any]:
    """A Job a JobSet made, carrying the queue label its namespace gave it."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sweep-workers-0",
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "team"},
            "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "controller": True}
            ],
        },
        "spec": {"suspend": False, "template": {"spec": POD}},
    }


@pytest.mark.parametrize(("gated", "managed"), [(("Job", "JobSet"), False), (("Job",), True)])
def test_a_job_a_gated_kind_controls_is_part_of_it_not_a_workload(
    gated: tuple[str, ...], managed: bool
) -> None:
    state = ClusterState(readers=readers(workload_kinds=gated))
    state.on_workload("ADDED", child_job())
    assert [j.key for j in state.snapshot(NOW, 5).snapshot.workloads] == (
        ["ns/sweep-workers-0"] if managed else []
    )


def test_every_gated_kind_is_streamed_only_when_managed() -> None:
    state = ClusterState(readers=readers(workload_kinds=("Job", "JobSet", "PyTorchJob")))
    kinds = (BY_KIND["Job"], JOBSET, PYTORCH_JOB)
    watched = {
        kind: selector for _, _, kind, _, selector in listings(client.ApiClient(), state, kinds)
    }
    assert watched == {
        "Job": "sluice.dev/queue-name",
        "JobSet": "sluice.dev/queue-name",
        "PyTorchJob": "sluice.dev/queue-name",
        "Pod": "",  # every pod bound to a node takes room there, whoever owns it
    }
    # One whose label went away leaves the cache, whatever the event says.
    store = listings(client.ApiClient(), state, kinds)[1][3]
    store("ADDED", copy.deepcopy(jobset("sweep", True)))
    assert "ns/sweep" in state.workloads
    unlabelled = copy.deepcopy(jobset("sweep", True))
    del unlabelled["metadata"]["labels"]
    store("MODIFIED", unlabelled)
    assert "ns/sweep" not in state.workloads


def test_the_snapshot_holds_every_kind_the_state_stores() -> None:
    state = ClusterState()
    state.on_workload("ADDED", copy.deepcopy(pytorch_job("train", True)))
    state.on_workload("ADDED", copy.deepcopy(jobset("sweep", True)))
    jobs = state.snapshot(NOW, 5).snapshot.workloads
    assert sorted((j.kind, j.key, j.request.describe()) for j in jobs) == [
        ("JobSet", "ns/sweep", "cpu 2"),
        ("PyTorchJob", "ns/train", "cpu 1"),
    ]


def test_workloads_of_one_name_across_kinds_are_left_out_and_said_why() -> None:
    state = ClusterState()
    state.on_workload("ADDED", jobset("train", True))
    state.on_workload("ADDED", pytorch_job("train", True))
    state.on_workload("ADDED", jobset("other", True))
    taken = state.snapshot(NOW, 5)
    assert [j.key for j in taken.snapshot.workloads] == ["ns/other"]
    assert taken.unreadable == {
        "jobset/ns/train": "workloads of kinds JobSet, PyTorchJob are all named ns/train: sluice"
        " does not tell them apart and leaves them out; give them different names",
        "pytorchjob/ns/train": "workloads of kinds JobSet, PyTorchJob are all named ns/train:"
        " sluice does not tell them apart and leaves them out; give them different names",
    }


def test_the_decision_pass_takes_only_the_workloads_whose_read_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After one whole snapshot, each decision snapshot carries no workload but the views
    that changed since the last, by key (None: gone or left out); put into what the pass
    kept, they make the workloads of the whole snapshot, step by step."""
    state = ClusterState()
    state.on_workload("ADDED", jobset("a", True))
    state.on_workload("ADDED", pytorch_job("b", True))
    taken, changed = state.decision_snapshot(NOW, 5, whole=True)
    assert changed is None
    kept: dict[str, Any] = {j.key: j for j in taken.snapshot.workloads}
    assert sorted(kept) == ["ns/a", "ns/b"]

    def step(expected: set[str]) -> None:
        taken, changed = state.decision_snapshot(NOW, 5, whole=False)
        assert taken.snapshot.workloads == [] and changed is not None
        assert set(changed) == expected
        for key, view in changed.items():
            if view is None:
                kept.pop(key, None)
            else:
                kept[key] = view
        assert kept == {j.key: j for j in state.snapshot(NOW, 5).snapshot.workloads}

    step(set())
    unsuspended = jobset("a", False)
    unsuspended["metadata"]["resourceVersion"] = "2"
    state.on_workload("MODIFIED", unsuspended)
    step({"ns/a"})
    echoed = jobset("a", False)  # a new version that reads the same (a status, an annotation)
    echoed["metadata"]["resourceVersion"] = "3"
    state.on_workload("MODIFIED", echoed)
    step(set())
    state.on_workload("ADDED", pytorch_job("a", True))  # one name across kinds: both left out
    step({"ns/a"})
    assert "ns/a" not in kept
    state.on_workload("DELETED", pytorch_job("a", True))
    state.on_workload("DELETED", pytorch_job("b", True))
    step({"ns/a", "ns/b"})
    assert sorted(kept) == ["ns/a"]
    # More changes than the log holds: the next pass takes every workload again.
    monkeypatch.setattr("sluice.operator.stores.CHANGES", 1)
    state.on_workload("ADDED", pytorch_job("c", True))
    state.on_workload("ADDED", pytorch_job("d", True))
    taken, changed = state.decision_snapshot(NOW, 5, whole=False)
    assert changed is None
    assert sorted(j.key for j in taken.snapshot.workloads) == ["ns/a", "ns/c", "ns/d"]
