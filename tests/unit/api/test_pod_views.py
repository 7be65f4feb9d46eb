"""Pods, node labels and taints, and where a job's pods may go, as sluice reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sluice.api.config import format_duration, load_scheduler_config, parse_duration
from sluice.api.constraints import NodeRequirement, Taint, Toleration
from sluice.api.errors import ConfigError, InvalidObject
from sluice.api.pod_views import pod_from_object
from sluice.api.resources import Resources
from sluice.api.views import node_from_object
from sluice.api.workloads.job import JOB


def pod(**fields: Any) -> dict[str, Any]:
    spec = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
        **fields.pop("spec", {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            **fields.pop("metadata", {}),
        },
        "spec": spec,
        "status": fields.pop("status", {}),
    }


def test_a_bound_pod_holds_its_request_on_its_node_and_names_its_job() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": True}
    view = pod_from_object(
        pod(
            metadata={"ownerReferences": [owner]},
            spec={"nodeName": "n1", "overhead": {"cpu": "100m"}},
            status={"phase": "Running"},
        )
    )
    assert view.node == "n1" and view.job_uid == "u1" and not view.finished
    assert view.request == Resources({"cpu": 2100})
    assert view.creation_timestamp == datetime(2026, 1, 1, tzinfo=UTC)


def test_only_a_controlling_job_owns_a_pod() -> None:
    """A ReplicaSet's pod, or one that merely refers to a Job, belongs to no job."""
    refers: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1"}
    replica: dict[str, Any] = {"kind": "ReplicaSet", "name": "r", "uid": "u2", "controller": True}
    assert pod_from_object(pod(metadata={"ownerReferences": [refers, replica]})).job_uid == ""


@pytest.mark.parametrize(
    ("phase", "finished"),
    [("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False)],
)
def test_finished_pods(phase: str, finished: bool) -> None:
    assert pod_from_object(pod(status={"phase": phase})).finished is finished


def test_an_unschedulable_pod_carries_kube_schedulers_word_and_a_deleted_one_says_so() -> None:
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    }
    view = pod_from_object(
        pod(
            metadata={"deletionTimestamp": "2026-01-01T00:01:00Z"},
            status={"phase": "Pending", "conditions": [condition]},
        )
    )
    assert view.node is None and view.terminating
    assert (
        view.unschedulable
        == "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    )
    scheduled = {"type": "PodScheduled", "status": "True"}
    assert pod_from_object(pod(status={"conditions": [scheduled]})).unschedulable == ""


def test_a_pods_bad_quantity_is_named_with_its_own_path() -> None:
    bad = pod(spec={"containers": [{"name": "c", "resources": {"requests": {"cpu": "x"}}}]})
    with pytest.raises(InvalidObject, match=r"Pod ns/p: field spec\.containers\[0\]"):
        pod_from_object(bad)


def test_nodes_carry_their_labels_and_taints() -> None:
    node = node_from_object(
        {
            "metadata": {"name": "gpu-1", "labels": {"gpu": "a100"}},
            "spec": {
                "taints": [
                    {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
                    {"key": "maintenance", "effect": "NoExecute"},
                ]
            },
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        }
    )
    assert node.labels == {"gpu": "a100"}
    assert node.taints == (
        Taint("gpu", "a100", "NoSchedule"),
        Taint("maintenance", "", "NoExecute"),
    )
    assert [t.describe() for t in node.taints] == ["gpu=a100:NoSchedule", "maintenance:NoExecute"]


def job(pod_spec: dict[str, Any], **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": {"sluice.dev/queue-name": "q"}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                    **pod_spec,
                }
            },
            **spec,
        },
        "status": status,
    }


def test_a_jobs_pod_says_where_it_may_go() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "gpu", "operator": "In", "values": ["a100", "h100"]},
                            {"key": "gen", "operator": "Gt", "values": ["3"]},
                        ]
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                }
            ],
        }
    }
    view = JOB.view(
        job(
            {
                "nodeSelector": {"zone": "b", "pool": "train"},
                "affinity": affinity,
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
            parallelism=3,
        )
    )
    assert view is not None
    (pods,) = view.pod_sets
    assert pods.pod.request == Resources({"cpu": 1000}) and view.request == Resources({"cpu": 3000})
    assert view.pod_count == 3
    assert pods.pod.node_selector == (("pool", "train"), ("zone", "b"))
    assert pods.pod.affinity == (
        (NodeRequirement("gpu", "In", ("a100", "h100")), NodeRequirement("gen", "Gt", ("3",))),
        (NodeRequirement("metadata.name", "In", ("n9",), on_field=True),),
    )
    assert pods.pod.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"),)


def test_a_job_without_constraints_may_go_anywhere() -> None:
    view = JOB.view(job({}))
    assert view is not None and view.pod_sets[0].pod.affinity is None
    assert view.pod_sets[0].pod.constraints == ((), None, ())


@pytest.mark.parametrize(
    ("spec", "count"),
    [
        ({"parallelism": 4, "completions": 4, "status": {"succeeded": 1}}, 3),
        ({"parallelism": 4, "completions": 10, "status": {"succeeded": 5}}, 4),
        ({"parallelism": 4, "completions": 10, "status": {"succeeded": 8}}, 2),
        ({"parallelism": 4}, 4),  # a work queue: every pod runs until one succeeds
        ({"parallelism": 4, "status": {"succeeded": 1}}, 0),
    ],
)
def test_how_many_pods_a_job_still_runs_at_once(spec: dict[str, Any], count: int) -> None:
    view = JOB.view(job({}, **spec))
    assert view is not None and view.pod_count == count


@pytest.mark.parametrize(
    ("affinity", "field"),
    [
        ({"key": "a", "operator": "Near"}, "operator"),
        ({"key": "a", "operator": "Gt", "values": ["x"]}, "values"),
        ({"key": "a", "operator": "Lt", "values": ["1", "2"]}, "values"),
    ],
)
def test_bad_node_affinity_is_named(affinity: dict[str, Any], field: str) -> None:
    required = {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}
    bad = job(
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}
    )
    with pytest.raises(InvalidObject, match=rf"matchExpressions\[0\]\.{field}"):
        JOB.view(bad)


def test_requeue_annotations_are_read_and_a_requeued_job_queues_from_then() -> None:
    obj = job({})
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    obj["metadata"]["annotations"] = {
        "sluice.dev/requeues": "2",
        "sluice.dev/requeued-at": "2026-01-01T01:00:00Z",
        "sluice.dev/requeue-reason": "1 of its pods not scheduled within 5m: p (...)",
    }
    view = JOB.view(obj)
    assert view is not None and view.requeues == 2
    assert view.queued_at == datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert view.requeue_reason and view.requeue_reason.startswith("1 of its pods")
    obj["metadata"]["annotations"]["sluice.dev/requeues"] = "-1"
    with pytest.raises(InvalidObject, match="requeues"):
        JOB.view(obj)


def test_pods_ready_timeout_in_the_configuration() -> None:
    assert load_scheduler_config("").pods_ready_timeout == timedelta(minutes=5)
    assert load_scheduler_config("podsReadyTimeout: 90s").pods_ready_timeout == timedelta(
        seconds=90
    )
    assert load_scheduler_config("podsReadyTimeout: 0").pods_ready_timeout == timedelta(0)
    with pytest.raises(ConfigError, match="podsReadyTimeout"):
        load_scheduler_config("podsReadyTimeout: soon")


@pytest.mark.parametrize(
    ("text", "written"),
    [("5m", "5m"), ("90s", "1m30s"), ("1h", "1h"), ("1h30m", "1h30m"), ("2s", "2s"), ("0", "0s")],
)
def test_durations_are_written_as_they_are_read(text: str, written: str) -> None:
    assert format_duration(parse_duration(text)) == written
    assert parse_duration(written) == parse_duration(text)


def test_jobs_of_one_pod_shape_share_one_pod_view_and_others_do_not() -> None:
    def one(name: str, selector: dict[str, str]) -> Any:
        obj = job({"nodeSelector": selector})
        obj["metadata"]["name"] = name
        view = JOB.view(obj)
        assert view is not None
        return view.pod_sets[0].pod

    first, second = one("a", {"pool": "x"}), one("b", {"pool": "x"})
    assert first is second  # equal shapes: one object, compared and looked up at once
    assert one("c", {"pool": "y"}) is not first
