"""Admissions into flavors as writes: the flavors enforced in the patch that releases a
workload (a Job, plain pods) and undone once it waits again (sluice/operator/plan.py)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from sluice.api.flavor import FlavorView, Taint
from sluice.api.views import WorkloadView
from sluice.api.workloads.flavor_patches import applied
from sluice.api.workloads.pods import PodWorkload, pod_member, pod_workloads
from sluice.operator.plan import Plan, plan
from sluice.operator.state import ClusterState
from sluice.operator.writes import basis
from sluice.scheduler.model import CycleResult, Decision, PendingJob

NOW = datetime(2026, 11, 28, tzinfo=UTC)
MODEL = "gpu.example.com/model"
RACK = "example.com/rack"
FLAVORS = {
    "h100": FlavorView(
        "h100", {MODEL: "H100"}, (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    ),
    "a100": FlavorView("a100", {MODEL: "A100"}),
}
EQUAL = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
RECORD = "sluice.dev/flavor-assignment"


def job(suspend: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "generation": 1,
            "labels": {"sluice.dev/queue-name": "team-a"},
        },
        "spec": {
            "suspend": suspend,
            "parallelism": 1,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


def as_stored(obj: dict[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, WorkloadView]]:
    state = ClusterState()
    state.on_workload("ADDED", obj)
    return state.workloads, state.workload_views


def admit(obj: dict[str, Any], decision: Decision) -> Plan:
    result = CycleResult((), {}, decisions=(decision,))
    decided = {"ns/j": basis(obj)}
    return plan(result, *as_stored(obj), decided, NOW, 0.0, {}, None, FLAVORS)


def test_a_job_is_released_on_its_flavor_with_its_domain_in_one_write() -> None:
    decision = Decision(
        "admit", "ns/j", "team-a", "fits", domain=f"{RACK}=r1", flavors=(("main", "h100"),)
    )
    (write,) = admit(job(), decision).admissions
    running = applied(job(), write.patch)
    spec = running["spec"]["template"]["spec"]
    assert running["spec"]["suspend"] is False
    assert spec["nodeSelector"] == {RACK: "r1", MODEL: "H100"}
    assert spec["tolerations"] == [EQUAL]
    assert running["metadata"]["annotations"][RECORD] == (
        '{"main":{"flavor":"h100","nodeSelector":{"gpu.example.com/model":"H100"},'
        '"tolerations":[{"effect":"NoSchedule","key":"nvidia.com/gpu","operator":"Equal",'
        '"value":"present"}]}}'
    )


def test_a_flavor_gone_since_the_decision_keeps_the_job_held() -> None:
    decision = Decision("admit", "ns/j", "team-a", "fits", flavors=(("main", "l4"),))
    assert admit(job(), decision).admissions == ()


def test_a_job_waiting_again_gets_its_template_back_with_its_reason() -> None:
    decision = Decision(
        "admit", "ns/j", "team-a", "fits", domain=f"{RACK}=r1", flavors=(("main", "h100"),)
    )
    (write,) = admit(job(), decision).admissions
    running = applied(job(), write.patch)
    waiting = applied(running, {"spec": {"suspend": True}})
    result = CycleResult((), {}, pending=(PendingJob("ns/j", "team-a", 1, "reclaimed"),))
    (restore,) = plan(result, *as_stored(waiting), {}, NOW, 0.0, {}, None, FLAVORS).reasons
    back = applied(waiting, restore.patch)
    assert back["spec"] == job()["spec"]
    assert RECORD not in back["metadata"]["annotations"]
    assert back["metadata"]["annotations"]["sluice.dev/pending-reason"].endswith("reclaimed")
    assert restore.basis == basis(waiting)
    # While it runs, its flavor stays.
    result = CycleResult((), {}, pending=(PendingJob("ns/j", "team-a", 1, "x"),))
    writes = plan(result, *as_stored(running), {}, NOW, 0.0, {}, None, FLAVORS).reasons
    assert all("spec" not in w.patch for w in writes)


def pod(name: str, gated: bool = True, **annotations: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if gated:
        spec["schedulingGates"] = [{"name": "sluice.dev/admission"}]
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "resourceVersion": "41",
            "labels": {"sluice.dev/queue-name": "team", "sluice.dev/pod-group": "g"},
            "annotations": {"sluice.dev/pod-group-total-count": "2", **annotations},
            "ownerReferences": [{"kind": "ReplicaSet", "uid": "rs", "controller": True}],
        },
        "spec": spec,
    }


def workloads(*objs: Any) -> dict[str, PodWorkload]:
    members = [pod_member(o) for o in objs]
    return pod_workloads([m for m in members if m is not None])


def released(obj: dict[str, Any], ops: Any) -> dict[str, Any]:
    return jsonpatch.apply_patch(copy.deepcopy(obj), [o for o in ops if o["op"] != "replace"])


def test_plain_pods_go_on_their_flavor_before_their_gate_goes() -> None:
    pods = (pod("a"), pod("b"))
    decision = Decision("admit", "ns/pod-group/g", "team", "fits", flavors=(("main", "h100"),))
    result = CycleResult((), {}, decisions=(decision,))
    (write,) = plan(result, {}, {}, {}, NOW, 0.0, {}, workloads(*pods), FLAVORS).admissions
    assert [c.pod for c in write.pods or ()] == ["ns/a", "ns/b"]
    for obj, change in zip(pods, write.pods or (), strict=True):
        after = released(obj, change.patch)
        assert after["spec"]["nodeSelector"] == {MODEL: "H100"}
        assert after["spec"]["tolerations"] == [EQUAL]
        assert "schedulingGates" not in after["spec"] or after["spec"]["schedulingGates"] == []
        assert '"flavor":"h100"' in after["metadata"]["annotations"][RECORD]
    # The released pods' records are the workload's flavors.
    running = [released(o, c.patch) for o, c in zip(pods, write.pods or (), strict=True)]
    view = workloads(*running)["ns/pod-group/g"].view
    assert view is not None
    assert [(f.pod_set, f.flavor) for f in view.flavors] == [("main", "h100")]


def test_a_replacement_pod_of_an_admitted_group_goes_on_the_flavor_of_the_others() -> None:
    decision = Decision("admit", "ns/pod-group/g", "team", "fits", flavors=(("main", "h100"),))
    result = CycleResult((), {}, decisions=(decision,))
    (write,) = plan(
        result, {}, {}, {}, NOW, 0.0, {}, workloads(pod("a"), pod("b")), FLAVORS
    ).admissions
    (first, _) = write.pods or ()
    a = released(pod("a"), first.patch)
    (release,) = plan(
        CycleResult((), {}, ()), {}, {}, {}, NOW, 0.0, {}, workloads(a, pod("c")), FLAVORS
    ).admissions
    (change,) = release.pods or ()
    assert released(pod("c"), change.patch)["spec"]["nodeSelector"] == {MODEL: "H100"}
    # Its flavor deleted since, the replacement stays gated.
    gone = {"a100": FLAVORS["a100"]}
    assert (
        plan(
            CycleResult((), {}, ()), {}, {}, {}, NOW, 0.0, {}, workloads(a, pod("c")), gone
        ).admissions
        == ()
    )
