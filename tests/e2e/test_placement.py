"""Placement on the living cluster: what other workloads use, what fits on one node, the pods
a reclaim stops and starts, and a job whose pods kube-scheduler cannot place."""

from __future__ import annotations

import time
from typing import Any

from .components import Operator
from .helpers import Kubectl, set_scheduler_config, wait_for
from .scenario import Scenario, kwok
from .test_operator import operator, s

__all__ = ["operator", "s"]  # fixtures


def _running(kubectl: Kubectl, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = kubectl.json("get", "pods", "-n", namespace, "-l", selector)["items"]
    return [p for p in found if p["status"].get("phase") == "Running"]


def test_a_deployments_pods_outside_sluice_reduce_what_sluice_admits(
    s: Scenario, kubectl: Kubectl
) -> None:
    node = s.node(4)
    serving = kwok.pod_template({s.resource: 1}, restart_policy="Always")
    kubectl.create(kwok.deployment("serve", serving, namespace=s.namespace, replicas=2))
    wait_for(lambda: len(_running(kubectl, s.namespace, "app=serve")) == 2, what="2 serve pods")
    team = s.queue("team")
    s.job("train", "team", 1, pods=3)
    reason = wait_for(lambda: s.annotation("train", "pending-reason"), what="train's reason")
    assert (
        reason
        == f"position 1 in {team}; cluster has {s.resource} 2 free, job requests {s.resource} 3"
    )
    assert not s.admitted("train") and not s.pods("train")
    # When the service scales down, its room is free for sluice to hand out.
    kubectl.run("scale", "deployment", "serve", "-n", s.namespace, "--replicas=0")
    s.wait_admitted("train", timeout=30)
    assert {p["spec"]["nodeName"] for p in s.wait_pods_running("train", 3)} == {node}


def test_a_gang_that_fits_in_total_but_not_on_the_nodes_waits_and_says_why(s: Scenario) -> None:
    first, second = sorted([s.node(3), s.node(3)])
    gang = s.queue("gang")
    s.job("ring", "gang", 2, pods=3)  # 6 in total, but one 2-unit pod per 3-unit node
    reason = wait_for(lambda: s.annotation("ring", "pending-reason"), what="ring's reason")
    assert reason.startswith(
        f"position 1 in {gang}; only 2 of its 3 pods of {s.resource} 2 fit on the nodes at once"
        f" ({first} 1, {second} 1)"
    ), reason
    assert not s.admitted("ring") and not s.pods("ring")
    third = s.node(3)
    s.wait_admitted("ring")
    pods = s.wait_pods_running("ring", 3)
    assert {p["spec"]["nodeName"] for p in pods} == {first, second, third}


def test_a_reclaimed_jobs_pods_are_deleted_and_the_reclaimers_pods_run(s: Scenario) -> None:
    node = s.node(4)
    s.queue("lender")
    s.queue("owed")
    for job in ("first", "second"):
        s.job(job, "lender", 1, pods=2)
        s.wait_admitted(job)
        s.wait_pods_running(job, 2)
        # Admission times are stamped to the second; a tie would fall to creation time and
        # then to name (docs/scheduler.md), and this test is about the later admission.
        time.sleep(1.1)
    # owed deserves half the node; lender holds it all, second admitted last.
    s.job("owed-job", "owed", 1, pods=2)
    s.wait_admitted("owed-job")
    assert not s.admitted("second")
    assert s.annotation("second", "reclaimed-by") == f"{s.namespace}/owed-job"
    s.wait_no_pods("second")
    assert {p["spec"]["nodeName"] for p in s.wait_pods_running("owed-job", 2)} == {node}
    assert s.admitted("first") and len(s.wait_pods_running("first", 2)) == 2


def test_a_job_whose_pod_cannot_be_scheduled_after_admission_is_requeued_after_the_timeout(
    s: Scenario, kubectl: Kubectl, operator: Operator
) -> None:
    loaded = operator.logs().count("event=config-loaded")
    set_scheduler_config(kubectl, "podsReadyTimeout: 5s\n")
    node = s.node(1)
    try:
        wait_for(
            lambda: operator.logs().count("event=config-loaded") > loaded,
            what="podsReadyTimeout 5s in use",
        )
        fragile = s.queue("fragile")
        # One pod at a time, two in all: the second is created when the first succeeds.
        pod = kwok.pod_template({s.resource: 1}, complete_after="4s")
        steps = kwok.job("steps", pod, namespace=s.namespace, queue=fragile, pods=2, suspend=True)
        steps["spec"]["parallelism"] = 1
        kubectl.create(steps)
        s.wait_admitted("steps")
        s.wait_pods_running("steps", 1)
        kubectl.run("cordon", node)  # before the second pod comes: it has nowhere to go
        s.wait_suspended("steps", timeout=60)
        why = s.annotation("steps", "requeue-reason") or ""
        assert why.startswith("1 of its pods not scheduled within 5s: steps-"), why
        assert "node(s) were unschedulable" in why  # kube-scheduler's own message
        assert s.annotation("steps", "requeues") == "1"
        reason = s.annotation("steps", "pending-reason") or ""
        assert "requeued once, waits until" in reason and reason.endswith(why), reason
        [event] = [e for e in s.events("steps") if e["reason"] == "Requeued"]
        assert event["type"] == "Warning" and event["message"].endswith(why)
        # The Job controller removes the pod that never ran; the one that succeeded stays.
        wait_for(
            lambda: {p["status"].get("phase") for p in s.pods("steps")} == {"Succeeded"},
            what="the unscheduled pod removed",
        )
    finally:
        kubectl.run("delete", "configmap", "sluice-scheduler", "-n", "sluice-system")
        kubectl.run("uncordon", node)
