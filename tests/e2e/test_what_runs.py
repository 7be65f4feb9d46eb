"""sluice counts what the pods really ask on the living cluster (docs/scheduler.md, *What a
workload holds*): the API server's LimitRange defaults and RuntimeClass overhead are in the
request it admits, and a sidecar a mutating webhook adds to the pods (one of this test's own,
which sluice knows nothing of) puts the queue over its capability in memory, which it then
says; it admits nothing more that asks for memory until the workload ends, and what asks for
none goes in meanwhile."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.api.resources import Resources

from .helpers import Kubectl, controlplane, review_server, unique_name, wait_for
from .scenario import Scenario, kwok
from .test_operator import operator, s

__all__ = ["operator", "s"]  # fixtures

SIDECAR_LABEL = "e2e.sluice.dev/sidecar"
SIDECAR = {"name": "mesh-proxy", "image": "proxy", "resources": {"requests": {"memory": "1Gi"}}}


def _memory(pod: dict[str, Any]) -> Resources:
    """What a pod asks of memory: its containers, as the API server stored them, and the
    overhead it was given."""
    total = Resources()
    for container in pod["spec"]["containers"]:
        requests = (container.get("resources") or {}).get("requests") or {}
        total = total + Resources.parse({"memory": requests.get("memory", "0")})
    return total + Resources.parse(
        {"memory": (pod["spec"].get("overhead") or {}).get("memory", "0")}
    )


def _job(s: Scenario, name: str, queue: str, pods: int, **spec: Any) -> None:
    """A suspended Job of `pods` pods asking 1 of the test's resource each, with `spec` in its
    pod template's spec (and labels: in its metadata)."""
    labels = spec.pop("labels", None)
    template = kwok.pod_template({s.resource: 1}, labels=labels)
    template["spec"].update(spec)
    kubectl_job = kwok.job(
        name, template, namespace=s.namespace, queue=s.name(queue), pods=pods, suspend=True
    )
    s.kubectl.create(kubectl_job)


def test_limit_range_defaults_and_runtime_class_overhead_are_what_is_admitted(
    s: Scenario, kubectl: Kubectl
) -> None:
    runtime = unique_name("kata")
    kubectl.create(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": runtime},
            "handler": "kata",
            "overhead": {"podFixed": {"memory": "512Mi"}},
        }
    )
    try:
        kubectl.create(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "defaults", "namespace": s.namespace},
                "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "1Gi"}}]},
            }
        )
        s.node(10, allocatable={"memory": "4Gi"})
        s.queue("team")
        # Each pod names no memory: the LimitRange gives its container 1Gi, its RuntimeClass
        # 512Mi of overhead, so the Job's two pods ask 3Gi of the node's 4Gi.
        _job(s, "first", "team", 2, runtimeClassName=runtime)
        s.wait_admitted("first")
        pods = s.wait_pods_running("first", 2)
        asked = sum((_memory(p) for p in pods), Resources())
        assert asked == Resources.parse({"memory": "3Gi"})
        allocated = wait_for(
            lambda: s.queue_status("team").get("allocated", {}).get("memory"),
            what="the queue's allocated memory",
        )
        assert Resources.parse({"memory": allocated}) == asked
        # Another such pod (1536Mi) does not fit in the 1Gi left; one asking 1Gi in all does:
        # the running pods are counted once, at what they ask.
        _job(s, "second", "team", 1, runtimeClassName=runtime)
        reason = wait_for(lambda: s.annotation("second", "pending-reason"), what="second waits")
        assert "memory 1536Mi" in reason, reason
        _job(s, "exact", "team", 1)  # no RuntimeClass: the LimitRange's 1Gi alone
        s.wait_admitted("exact")
        assert not s.admitted("second")
    finally:
        kubectl.delete("runtimeclass", runtime)


def _add_sidecar(request: dict[str, Any]) -> dict[str, Any]:
    """A mesh's answer to any pod: a 1Gi container more."""
    patch = [{"op": "add", "path": "/spec/containers/-", "value": SIDECAR}]
    encoded = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}


@pytest.fixture
def sidecars(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path: Path
) -> Iterator[None]:
    """A mesh-like webhook that injects a sidecar into the pods labelled SIDECAR_LABEL."""
    with review_server(control_plane, tmp_path, _add_sidecar) as port:
        name = unique_name("sidecars")
        kubectl.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": "sidecars.e2e.sluice.dev",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/mutate",
                            "caBundle": base64.b64encode(
                                control_plane.ca_cert.read_bytes()
                            ).decode(),
                        },
                        "rules": [
                            {
                                "operations": ["CREATE"],
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "resources": ["pods"],
                            }
                        ],
                        "objectSelector": {"matchLabels": {SIDECAR_LABEL: "yes"}},
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",
                    }
                ],
            }
        )
        try:
            yield
        finally:
            kubectl.delete("mutatingwebhookconfiguration", name)


def test_a_sidecar_nobody_declared_puts_the_queue_over_its_capability(
    s: Scenario, kubectl: Kubectl, sidecars: None
) -> None:
    s.node(10, allocatable={"memory": "16Gi"})
    team = s.queue("team", capability={"memory": "4Gi"})
    # Admitted with 2 x 1536Mi = 3Gi; each pod then gets a 1Gi sidecar: 5Gi.
    _job(
        s,
        "meshed",
        "team",
        2,
        labels={SIDECAR_LABEL: "yes"},
        containers=[
            {"name": "main", "image": "x", "resources": {"requests": {"memory": "1536Mi"}}}
        ],
    )
    s.wait_admitted("meshed")
    pods = s.wait_pods_running("meshed", 2)
    assert all(len(p["spec"]["containers"]) == 2 for p in pods)  # the sidecar is in
    over = wait_for(
        lambda: s.queue_status("team").get("overCapability"), what="the queue over capability"
    )
    assert over == (
        f"memory 5Gi > capability 4Gi; pods ask more than admitted: {s.namespace}/meshed memory 2Gi"
    )
    conditions = {c["type"]: c for c in s.queue_status("team")["conditions"]}
    assert conditions["OverCapability"]["status"] == "True"
    warned = wait_for(
        lambda: [
            e
            for e in kubectl.json(
                "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={team}"
            )["items"]
            if e["reason"] == "OverCapability"
        ],
        what="the queue's OverCapability event",
    )
    assert warned[0]["type"] == "Warning" and over in warned[0]["message"]
    columns = kubectl.run(
        "get", "sq", team, "--no-headers", "-o", "custom-columns=O:.status.overCapability"
    )
    assert columns.strip() == over
    # A job asking no memory goes in while the queue is over; one asking memory waits.
    s.job("later", "team", 1)
    s.wait_admitted("later")
    requests = {s.resource: "1", "memory": "512Mi"}
    limits = {s.resource: "1"}
    resources = {"requests": requests, "limits": limits}
    _job(
        s, "hungry", "team", 1, containers=[{"name": "main", "image": "x", "resources": resources}]
    )
    reason = wait_for(lambda: s.annotation("hungry", "pending-reason"), what="hungry's reason")
    assert reason == (
        f"position 1 in {team}; queue {team} is over its capability in memory, and admits"
        f" nothing more that asks for it until it fits again: {over}"
    )
    assert s.admitted("meshed")  # nothing is evicted for it
    kubectl.delete("job", "meshed", s.namespace)
    s.wait_admitted("hungry", timeout=60)
    wait_for(
        lambda: "overCapability" not in s.queue_status("team"), what="the queue within it again"
    )
