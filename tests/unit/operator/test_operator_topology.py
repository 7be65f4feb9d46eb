"""Confining an admitted workload to its Topology domain, and undoing it: pure plans."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from test_operator_plan_pods import pod, workloads

from sluice.api.resources import Resources
from sluice.api.views import WorkloadView
from sluice.operator.metrics import TOPOLOGY_FREE, cycle_series, reason_class
from sluice.operator.plan import plan
from sluice.operator.state import ClusterState
from sluice.scheduler.model import CycleResult, Decision, PendingJob

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
RACK = "example.com/rack"
ASSIGNMENT = "sluice.dev/topology-assignment"


def cycle(*decisions: Decision, pending: tuple[PendingJob, ...] = ()) -> CycleResult:
    return CycleResult(queue_order=(), queues={}, decisions=decisions, pending=pending)


def job(
    suspend: bool, selector: dict[str, str] | None = None, **annotations: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if selector is not None:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": annotations,
        },
        "spec": {"suspend": suspend, "template": {"spec": spec}},
    }


def as_stored(obj: dict[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, WorkloadView]]:
    """The workload as the operator stores it, and its latest view."""
    state = ClusterState()
    state.on_workload("ADDED", obj)
    return state.workloads, state.workload_views


def test_an_admission_into_a_domain_adds_its_label_to_the_template_and_says_so() -> None:
    admit = Decision("admit", "ns/train", "team", "fits", domain=f"{RACK}=r3")
    (write,) = plan(cycle(admit), *as_stored(job(True)), {}, NOW, 0.0, {}).admissions
    assert write.patch["spec"] == {
        "suspend": False,
        "template": {"spec": {"nodeSelector": {RACK: "r3"}}},
    }
    assert write.patch["metadata"]["annotations"][ASSIGNMENT] == f"{RACK}=r3"


def test_a_template_that_selects_the_label_itself_gets_nothing_added_nor_recorded() -> None:
    admit = Decision("admit", "ns/train", "team", "fits", domain=f"{RACK}=r3")
    stored = job(True, {RACK: "r3", "gpu": "h100"})
    (write,) = plan(cycle(admit), *as_stored(stored), {}, NOW, 0.0, {}).admissions
    assert write.patch["spec"] == {"suspend": False}
    assert ASSIGNMENT not in write.patch["metadata"]["annotations"]


def test_a_suspended_job_gets_its_template_back_with_its_pending_reason() -> None:
    stored = job(True, {RACK: "r3", "gpu": "h100"}, **{ASSIGNMENT: f"{RACK}=r3"})
    waiting = PendingJob("ns/train", "team", 1, "cluster has gpu 0 free")
    (write,) = plan(cycle(pending=(waiting,)), *as_stored(stored), {}, NOW, 0.0, {}).reasons
    assert write.kind == "reason"
    assert write.patch["spec"] == {"template": {"spec": {"nodeSelector": {RACK: None}}}}
    assert write.patch["metadata"]["annotations"] == {
        "sluice.dev/pending-reason": "position 1 in team; cluster has gpu 0 free",
        ASSIGNMENT: None,
    }


def test_a_job_still_running_or_never_confined_is_left_alone() -> None:
    waiting = PendingJob("ns/train", "team", 1, "x")
    running = job(False, {RACK: "r3"}, **{ASSIGNMENT: f"{RACK}=r3"})
    said = {"sluice.dev/pending-reason": "position 1 in team; x"}
    for stored in (running, job(True, {RACK: "r3"}, **said)):
        writes = plan(cycle(pending=(waiting,)), *as_stored(stored), {}, NOW, 0.0, {}).reasons
        assert all("spec" not in w.patch for w in writes)


def test_a_gated_pod_gets_the_label_before_its_gate_goes() -> None:
    found = workloads(pod("a", reason="position 1 in team; waits"))
    admit = Decision("admit", "ns/pod/a", "team", "fits", domain=f"{RACK}=r3")
    (write,) = plan(cycle(admit), {}, {}, {}, NOW, 0.0, {}, found).admissions
    assert write.pods is not None
    ops = list(write.pods[0].patch or ())
    paths = [(op["op"], op["path"]) for op in ops]
    assert paths.index(("add", "/spec/nodeSelector")) < paths.index(
        ("remove", "/spec/schedulingGates/0")
    )
    assert ops[paths.index(("add", "/spec/nodeSelector"))]["value"] == {RACK: "r3"}
    stamped = next(
        op for op in ops if op["path"] == "/metadata/annotations/" + ASSIGNMENT.replace("/", "~1")
    )
    assert stamped["value"] == f"{RACK}=r3"


def test_a_pod_without_annotations_gets_the_record_with_its_admission() -> None:
    found = workloads(pod("a"))
    admit = Decision("admit", "ns/pod/a", "team", "fits", domain=f"{RACK}=r3")
    (write,) = plan(cycle(admit), {}, {}, {}, NOW, 0.0, {}, found).admissions
    assert write.pods is not None
    added = next(op for op in write.pods[0].patch or () if op["path"] == "/metadata/annotations")
    assert added["value"][ASSIGNMENT] == f"{RACK}=r3"


def test_the_free_room_of_each_widest_domain_is_a_gauge_and_waits_are_classed() -> None:
    free = {"example.com/block=b0": Resources({"nvidia.com/gpu": 24000})}
    result = CycleResult(queue_order=(), queues={}, domains_free=free)
    series = cycle_series(result, [])
    assert series == {(TOPOLOGY_FREE, ("example.com/block", "b0", "nvidia.com/gpu")): 24.0}
    assert reason_class(f"no {RACK} holds 2 x cpu 1: best rack r0 has ...") == "topology"
    assert reason_class("no Topology has the level x") == "topology"
