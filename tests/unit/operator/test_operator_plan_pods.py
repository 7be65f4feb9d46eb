"""Decisions about plain-pod workloads as writes to their pods: pure, no client."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sluice.api.workloads.pods import PodWorkload, pod_member, pod_workloads
from sluice.operator.plan import plan
from sluice.operator.writes import EventSpec, PodChange
from sluice.scheduler.model import CycleResult, Decision, PendingJob

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def pod(name: str, gated: bool = True, reason: str | None = None, **labels: str) -> Any:
    annotations = {"sluice.dev/pending-reason": reason} if reason else {}
    if not gated:
        annotations["sluice.dev/admitted-at"] = "2026-01-01T11:00:00Z"
    if "sluice.dev/pod-group" in labels:
        annotations["sluice.dev/pod-group-total-count"] = "2"
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if gated:
        spec["schedulingGates"] = [{"name": "sluice.dev/admission"}]
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "resourceVersion": "41",
            "labels": {"sluice.dev/queue-name": "team", **labels},
            "annotations": annotations,
            "ownerReferences": [{"kind": "ReplicaSet", "uid": "rs", "controller": True}],
        },
        "spec": spec,
    }


def workloads(*objs: Any) -> dict[str, PodWorkload]:
    members = [pod_member(o) for o in objs]
    return pod_workloads([m for m in members if m is not None])


def cycle(*decisions: Decision, pending: tuple[PendingJob, ...] = ()) -> CycleResult:
    return CycleResult(queue_order=(), queues={}, decisions=decisions, pending=pending)


def test_admission_removes_the_gate_from_the_pod_as_the_cycle_saw_it() -> None:
    found = workloads(pod("a", reason="position 1 in team; waits"))
    writes = plan(
        cycle(Decision("admit", "ns/pod/a", "team", "fits")), {}, {}, {}, NOW, 0.0, {}, found
    )
    (admit,) = writes.admissions
    assert (admit.kind, admit.workload, admit.event) == (
        "admit",
        "ns/pod/a",
        EventSpec("Admitted", "admitted by queue team: fits"),
    )
    assert admit.pods == (
        PodChange(
            "ns/a",
            "u-a",
            "41",
            [
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "41"},
                {
                    "op": "test",
                    "path": "/spec/schedulingGates/0/name",
                    "value": "sluice.dev/admission",
                },
                {"op": "remove", "path": "/spec/schedulingGates/0"},
                {
                    "op": "add",
                    "path": "/metadata/annotations/sluice.dev~1admitted-at",
                    "value": "2026-01-01T12:00:00Z",
                },
                {"op": "remove", "path": "/metadata/annotations/sluice.dev~1pending-reason"},
            ],
        ),
    )


def test_a_victim_is_its_running_pods_deleted() -> None:
    group = {"sluice.dev/pod-group": "g"}
    found = workloads(pod("a", gated=False, **group), pod("b", gated=False, **group))
    decision = Decision("reclaim", "ns/pod-group/g", "team", "team over its share", for_job="ns/x")
    (victim,) = plan(cycle(decision), {}, {}, {}, NOW, 0.0, {}, found).victims
    assert victim.pods == (PodChange("ns/a", "u-a"), PodChange("ns/b", "u-b"))
    assert victim.event == EventSpec("Reclaimed", "team over its share; pods deleted by sluice")


def test_a_waiting_workload_says_why_on_each_gated_pod_once() -> None:
    found = workloads(pod("a", reason="position 2 in team; full"))
    waits = PendingJob("ns/pod/a", "team", 1, "full")
    (write,) = plan(cycle(pending=(waits,)), {}, {}, {}, NOW, 100.0, {}, found).reasons
    patch = {"metadata": {"annotations": {"sluice.dev/pending-reason": "position 1 in team; full"}}}
    assert write.pods == (PodChange("ns/a", "u-a", patch=patch),)
    assert write.event is None  # only the position moved
    said = workloads(pod("a", reason="position 1 in team; full"))
    assert plan(cycle(pending=(waits,)), {}, {}, {}, NOW, 100.0, {}, said).reasons == ()


def test_an_incomplete_group_says_what_it_waits_for_and_a_replacement_is_released() -> None:
    group = {"sluice.dev/pod-group": "g"}
    (write,) = plan(cycle(), {}, {}, {}, NOW, 0.0, {}, workloads(pod("a", **group))).reasons
    assert write.event == EventSpec("Pending", "1 of 2 pods of group g exist", warning=True)
    assert [c.pod for c in write.pods or ()] == ["ns/a"]
    # One pod of an admitted group was lost and its controller made another: it goes through.
    found = workloads(pod("a", gated=False, **group), pod("c", **group))
    (release,) = plan(cycle(), {}, {}, {}, NOW, 0.0, {}, found).admissions
    assert (release.workload, release.event, [c.pod for c in release.pods or ()]) == (
        "ns/pod-group/g",
        None,
        ["ns/c"],
    )


def test_a_group_still_being_created_is_not_told_what_it_waits_for_yet() -> None:
    fresh = pod("a", **{"sluice.dev/pod-group": "g"})
    fresh["metadata"]["creationTimestamp"] = "2026-01-01T11:59:57Z"  # 3 s before NOW
    assert plan(cycle(), {}, {}, {}, NOW, 0.0, {}, workloads(fresh)).reasons == ()
    fresh["metadata"]["creationTimestamp"] = "2026-01-01T11:59:55Z"
    assert len(plan(cycle(), {}, {}, {}, NOW, 0.0, {}, workloads(fresh)).reasons) == 1
