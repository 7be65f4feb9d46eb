"""The local cluster lives: the controller manager, kube-scheduler and KWOK do what a real
cluster's do, so what sluice's tests see of pods, Jobs and namespaces is real."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from .helpers import Kubectl, controlplane, unique_name, wait_for

kwok = controlplane.kwok


def _pods(kubectl: Kubectl, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list(kubectl.json("get", "pods", "-n", namespace, "-l", selector)["items"])


def _ready(kubectl: Kubectl, node: str) -> bool:
    conditions = kubectl.get("node", node).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_a_fake_node_becomes_ready_with_the_allocatable_it_was_created_with(
    kubectl: Kubectl,
) -> None:
    name = unique_name("node")
    kubectl.create(kwok.fake_node(name, {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 4}))
    wait_for(lambda: _ready(kubectl, name), what=f"{name} Ready")
    status = kubectl.get("node", name)["status"]
    # KWOK adds only the kubelet's default pod count; what the node was created with stays.
    assert status["allocatable"] == {
        "cpu": "8",
        "memory": "32Gi",
        "nvidia.com/gpu": "4",
        "pods": "110",
    }
    assert status["capacity"] == status["allocatable"]
    assert status["nodeInfo"]["kubeletVersion"].startswith("kwok-")
    kubectl.delete("node", name)


def test_a_node_not_marked_fake_is_left_alone(kubectl: Kubectl) -> None:
    name = unique_name("real")
    node = kwok.fake_node(name, {"cpu": "8"})
    del node["metadata"]["annotations"]
    kubectl.create(node)
    other = unique_name("fake")
    kubectl.create(kwok.fake_node(other, {"cpu": "8"}))
    wait_for(lambda: _ready(kubectl, other), what=f"{other} Ready")
    assert not _ready(kubectl, name)
    kubectl.delete("node", name)
    kubectl.delete("node", other)


def test_a_job_runs_on_fake_nodes_and_completes_through_the_job_controller(
    kubectl: Kubectl, namespace: str
) -> None:
    resource = f"e2e.sluice.dev/{unique_name('r')}"
    node = unique_name("node")
    kubectl.create(kwok.fake_node(node, {resource: 2}))
    template = kwok.pod_template({resource: 1}, complete_after="2s")
    kubectl.create(kwok.job("runs", template, namespace=namespace, pods=2))
    selector = "batch.kubernetes.io/job-name=runs"

    def phases() -> list[str]:
        return sorted(p["status"].get("phase", "") for p in _pods(kubectl, namespace, selector))

    wait_for(lambda: phases() == ["Running", "Running"], what="both pods Running")
    assert {p["spec"]["nodeName"] for p in _pods(kubectl, namespace, selector)} == {node}

    def complete() -> bool:
        conditions = kubectl.get("job", "runs", namespace).get("status", {}).get("conditions")
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions or [])

    wait_for(complete, timeout=30, what="the Job Complete")
    assert phases() == ["Succeeded", "Succeeded"]
    assert kubectl.get("job", "runs", namespace)["status"]["succeeded"] == 2
    kubectl.delete("node", node)


def test_a_pod_without_a_completion_delay_keeps_running(kubectl: Kubectl, namespace: str) -> None:
    resource = f"e2e.sluice.dev/{unique_name('r')}"
    node = unique_name("node")
    kubectl.create(kwok.fake_node(node, {resource: 2}))
    for name, delay in (("quick", "1s"), ("endless", None)):
        template = kwok.pod_template({resource: 1}, complete_after=delay)
        metadata = {"name": name, "namespace": namespace, **template.get("metadata", {})}
        kubectl.create({"apiVersion": "v1", "kind": "Pod", **template, "metadata": metadata})

    def phase(name: str) -> str:
        return str(kubectl.get("pod", name, namespace)["status"].get("phase"))

    wait_for(lambda: phase("quick") == "Succeeded", what="quick Succeeded")
    assert phase("endless") == "Running"
    kubectl.delete("node", node)


def test_a_deployment_runs_and_its_namespace_finishes_deleting(kubectl: Kubectl) -> None:
    """The deployment, replicaset, garbage-collector and namespace controllers all run."""
    namespace = unique_name("e2e")
    kubectl.run("create", "namespace", namespace)
    resource = f"e2e.sluice.dev/{unique_name('r')}"
    node = unique_name("node")
    kubectl.create(kwok.fake_node(node, {resource: 3}))
    template = kwok.pod_template({resource: 1}, restart_policy="Always")
    kubectl.create(kwok.deployment("serve", template, namespace=namespace, replicas=3))
    wait_for(
        lambda: (
            kubectl.get("deployment", "serve", namespace).get("status", {}).get("readyReplicas")
            == 3
        ),
        what="3 ready replicas",
    )
    assert {p["spec"]["nodeName"] for p in _pods(kubectl, namespace, "app=serve")} == {node}
    kubectl.delete("namespace", namespace)
    wait_for(
        lambda: not kubectl.run("get", "namespace", namespace, "--ignore-not-found").strip(),
        timeout=60,
        what=f"namespace {namespace} gone",
    )
    kubectl.delete("node", node)


def test_aggregated_cluster_roles_are_filled(kubectl: Kubectl) -> None:
    view = kubectl.get("clusterrole", "view")
    assert view["aggregationRule"]["clusterRoleSelectors"]
    resources = {r for rule in view.get("rules") or [] for r in rule.get("resources", [])}
    assert {"pods", "configmaps", "jobs"} <= resources


def test_kwok_may_run_pods_and_nothing_more(kubectl: Kubectl) -> None:
    def can(verb: str, resource: str) -> bool:
        answer = kubectl.run(
            "auth", "can-i", verb, resource, "--as=kwok-controller", "-A", check=False
        )
        return answer.strip() == "yes"

    assert can("patch", "pods/status") and can("patch", "nodes/status") and can("delete", "pods")
    assert not can("get", "secrets")
    assert not can("create", "pods")
    assert not can("update", "jobs.batch")


def test_up_reuses_a_whole_cluster_replaces_one_missing_a_part_and_down_stops_all(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "cluster"
    plane = controlplane.ControlPlane(state_dir, tie_to_parent=True, data_root=tmp_path)

    def pids() -> dict[str, int]:
        return dict(json.loads((state_dir / "state.json").read_text())["pids"])

    def alive(pid: int) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    first = plane.up()
    again: dict[str, int] = {}
    try:
        started = pids()
        assert set(started) == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        }
        assert plane.up().server == first.server and pids() == started
        os.kill(started["kwok"], signal.SIGKILL)
        wait_for(lambda: not alive(started["kwok"]), what="kwok killed")
        assert plane.status() is None  # a cluster without KWOK is not the cluster
        plane.up()
        again.update(pids())
        assert not set(again.values()) & set(started.values())
        assert not any(alive(pid) for pid in started.values())
        assert all(alive(pid) for pid in again.values())
    finally:
        plane.down()
    assert not any(alive(pid) for pid in again.values())
    assert not (state_dir / "state.json").exists()


def test_a_cluster_may_leave_out_the_controller_manager_and_is_still_whole(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "cluster"
    with pytest.raises(controlplane.ControlPlaneError, match="cannot leave out"):
        controlplane.ControlPlane(state_dir, leave_out=("kube-apiserver",))
    plane = controlplane.ControlPlane(
        state_dir, tie_to_parent=True, data_root=tmp_path, leave_out=("kube-controller-manager",)
    )
    first = plane.up()
    try:
        started = json.loads((state_dir / "state.json").read_text())["pids"]
        assert set(started) == {"etcd", "kube-apiserver", "kube-scheduler", "kwok"}
        assert plane.status() is not None  # what was left out is not missing
        assert plane.up().server == first.server
        assert json.loads((state_dir / "state.json").read_text())["pids"] == started
    finally:
        plane.down()
