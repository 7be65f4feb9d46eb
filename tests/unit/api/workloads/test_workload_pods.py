"""Plain pods and pod groups: which pods are members, and the workloads they form."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.errors import InvalidObject
from sluice.api.pod_views import pod_from_object
from sluice.api.resources import Resources
from sluice.api.views import JobPhase
from sluice.api.workloads.pods import PodMember, pod_member, pod_workloads


def pod(
    name: str,
    *,
    group: str | None = None,
    total: str | None = None,
    queue: str | None = "team",
    gated: bool = True,
    admitted_at: str | None = None,
    cpu: str = "1",
    owner: str | None = None,
    phase: str = "Pending",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {"sluice.dev/queue-name": queue} if queue else {}
    notes = dict(annotations or {})
    if group:
        labels["sluice.dev/pod-group"] = group
    if total:
        notes["sluice.dev/pod-group-total-count"] = total
    if admitted_at:
        notes["sluice.dev/admitted-at"] = admitted_at
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "labels": labels,
        "annotations": notes,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "resourceVersion": "7",
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "uid": "owner", "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": "other"}, {"name": "sluice.dev/admission"}]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def member(obj: dict[str, Any]) -> PodMember:
    found = pod_member(obj)
    assert found is not None
    return found


def test_only_gated_or_admitted_pods_of_a_queue_that_no_job_controls_are_members() -> None:
    assert pod_member(pod("a", queue=None)) is None
    for owner in ("Job", "PyTorchJob", "MPIJob", "RayCluster"):
        assert pod_member(pod("a", owner=owner)) is None  # held by its own workload
    assert pod_member(pod("a", gated=False)) is None  # never held by sluice
    gated = member(pod("a", owner="ReplicaSet"))
    assert (gated.gate_index, gated.controlled, gated.preemptable) == (1, True, True)
    admitted = member(pod("a", gated=False, admitted_at="2026-01-01T00:01:00Z"))
    assert not admitted.gated and admitted.admitted_at is not None


def test_a_bare_pod_is_a_victim_only_when_it_opts_in() -> None:
    assert not member(pod("a")).preemptable
    assert member(pod("a", annotations={"sluice.dev/preemptable": "true"})).preemptable
    kept = pod("a", owner="ReplicaSet", annotations={"sluice.dev/preemptable": "false"})
    assert not member(kept).preemptable


def test_a_group_pod_must_say_how_many_the_group_has() -> None:
    with pytest.raises(InvalidObject, match=r"pod-group-total-count.*missing"):
        pod_member(pod("a", group="g"))
    with pytest.raises(InvalidObject, match=r"'0' is not a count of at least 1"):
        pod_member(pod("a", group="g", total="0"))


def test_each_pod_of_no_group_is_its_own_workload() -> None:
    found = pod_workloads([member(pod("a", owner="ReplicaSet")), member(pod("b", cpu="2"))])
    assert sorted(found) == ["ns/pod/a", "ns/pod/b"]
    view = found["ns/pod/b"].view
    assert view is not None
    assert (view.name, view.queue, view.phase, view.uid) == (
        "pod/b",
        "team",
        JobPhase.PENDING,
        "uid-b",
    )
    assert view.request == Resources.parse({"cpu": "2"})


def test_a_group_is_a_workload_only_once_all_its_pods_exist() -> None:
    three = [member(pod(n, group="g", total="4")) for n in "abc"]
    waiting = pod_workloads(three)["ns/pod-group/g"]
    assert (waiting.view, waiting.waiting) == (None, "3 of 4 pods of group g exist")
    four = pod_workloads([*three, member(pod("d", group="g", total="4"))])["ns/pod-group/g"]
    assert four.view is not None
    assert (four.view.pod_sets[0].count, four.view.pod_count) == (4, 4)
    assert four.view.request == Resources.parse({"cpu": "4"})
    assert four.view.uid == "pod-group/ns/g"


def test_a_group_whose_pods_differ_is_one_workload_of_a_pod_set_per_shape() -> None:
    pods = [
        member(pod(n, group="g", total="4", cpu="1" if n == "leader" else "2"))
        for n in ("worker-1", "leader", "worker-0", "worker-2")
    ]
    found = pod_workloads(pods)["ns/pod-group/g"]
    assert found.view is not None and found.waiting == ""
    sets = [(s.name, s.count, s.pod.request) for s in found.view.pod_sets]
    assert sets == [
        ("leader", 1, Resources.parse({"cpu": "1"})),
        ("worker-0", 3, Resources.parse({"cpu": "2"})),
    ]
    assert found.view.request == Resources.parse({"cpu": "7"})
    assert pod_workloads(reversed(pods))["ns/pod-group/g"].view == found.view


def test_a_group_whose_pods_disagree_on_its_count_waits_and_says_so() -> None:
    counts = [member(pod("a", group="g", total="2")), member(pod("b", group="g", total="3"))]
    assert pod_workloads(counts)["ns/pod-group/g"].waiting == (
        "the pods of group g disagree on their sluice.dev/pod-group-total-count: 2, 3"
    )


def test_an_admitted_group_that_lost_a_pod_still_holds_it_in_its_largest_set() -> None:
    admitted = "2026-01-01T00:01:00Z"
    pods = [
        member(pod(n, group="g", total="4", gated=False, admitted_at=admitted, cpu=cpu))
        for n, cpu in (("leader", "1"), ("worker-0", "2"), ("worker-1", "2"))
    ]
    view = pod_workloads(pods)["ns/pod-group/g"].view
    assert view is not None
    assert [(s.name, s.count) for s in view.pod_sets] == [("leader", 1), ("worker-0", 3)]


def test_an_admitted_group_releases_a_replacement_pod_and_its_pods_count_as_its_own() -> None:
    admitted = "2026-01-01T00:01:00Z"
    pods = [
        pod("a", group="g", total="2", gated=False, admitted_at=admitted, owner="StatefulSet"),
        pod("c", group="g", total="2", owner="StatefulSet"),
    ]
    workload = pod_workloads([member(p) for p in pods])["ns/pod-group/g"]
    assert workload.view is not None and workload.view.phase is JobPhase.INQUEUE
    assert [m.name for m in workload.stragglers] == ["c"]
    assert {pod_from_object(p).job_uid for p in pods} == {workload.view.uid}


def test_a_pod_sluice_may_not_delete_is_never_requeued() -> None:
    admitted = "2026-01-01T00:01:00Z"
    bare = pod_workloads([member(pod("a", gated=False, admitted_at=admitted))])["ns/pod/a"]
    owned = pod_workloads(
        [member(pod("b", gated=False, admitted_at=admitted, owner="ReplicaSet", phase="Running"))]
    )["ns/pod/b"]
    assert bare.view is not None and owned.view is not None
    assert (bare.view.admitted_at, bare.view.preemptable) == (None, False)
    assert owned.view.admitted_at is not None and owned.view.phase is JobPhase.RUNNING


def test_a_finished_pod_is_a_completed_workload() -> None:
    done = pod("a", gated=False, admitted_at="2026-01-01T00:01:00Z", phase="Succeeded")
    view = pod_workloads([member(done)])["ns/pod/a"].view
    assert view is not None and view.phase is JobPhase.COMPLETED


def test_a_pod_view_says_whether_it_carries_the_gate() -> None:
    assert pod_from_object(pod("a")).gated
    assert not pod_from_object(pod("a", gated=False)).gated


def test_a_pod_view_says_where_its_gate_is_and_its_uid_for_a_release() -> None:
    view = pod_from_object(pod("a", owner="Job"))
    assert (view.gate_index, view.uid) == (1, "uid-a")
    assert pod_from_object(pod("a", gated=False)).gate_index == -1
