"""Manifests for the living cluster: fake nodes KWOK runs pods on, and pod templates that tell
KWOK how long a pod runs. Shared by the e2e tests, the benchmarks and the demo.

What KWOK does with them is in kwok-stages.yaml: a fake node becomes Ready with the
allocatable it was created with; a pod bound to it becomes Running; a pod annotated with
COMPLETE_AFTER succeeds that long after it started (the Job controller then counts it), one
without runs until deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# A Go duration ("5s", "2m"): the pod succeeds that long after it starts running.
COMPLETE_AFTER = "pod-complete.stage.kwok.x-k8s.io/delay"
# A Go duration: a deleted pod's containers take that long to stop (default: at once).
STOP_AFTER = "pod-delete.stage.kwok.x-k8s.io/delay"
# Never pulled: KWOK runs no containers.
IMAGE = "registry.k8s.io/pause:3.10"


def fake_node(
    name: str,
    allocatable: Mapping[str, str | int],
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node that KWOK makes Ready, with `allocatable` as its capacity and allocatable.

    The API server keeps a Node's status as created, so the resources need no second write.
    Without "pods" in `allocatable` the node holds 110 pods, the kubelet's default. Labels
    start with what a kubelet sets (hostname, os, arch); `labels` adds to or overrides them.
    """
    resources = {key: str(value) for key, value in allocatable.items()}
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": dict(resources)},
    }
    if taints:
        node["spec"]["taints"] = [dict(t) for t in taints]
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


def pod_template(
    requests: Mapping[str, str | int],
    *,
    complete_after: str | None = None,
    stop_after: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str | None = None,
    restart_policy: str = "Never",
) -> dict[str, Any]:
    """A pod template with one container asking for `requests`.

    Extended resources (anything but cpu, memory and ephemeral-storage) get equal limits, as
    Kubernetes requires. complete_after: the pod succeeds that long after it starts (a Go
    duration); without it the pod runs until deleted.
    """
    requested = {key: str(value) for key, value in requests.items()}
    limits = {
        key: value
        for key, value in requested.items()
        if key not in ("cpu", "memory", "ephemeral-storage")
    }
    container: dict[str, Any] = {"name": "main", "image": IMAGE, "resources": {}}
    if requested:
        container["resources"]["requests"] = requested
    if limits:
        container["resources"]["limits"] = limits
    spec: dict[str, Any] = {"restartPolicy": restart_policy, "containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata: dict[str, Any] = {}
    pod_annotations = dict(annotations or {})
    if complete_after is not None:
        pod_annotations[COMPLETE_AFTER] = complete_after
    if stop_after is not None:
        pod_annotations[STOP_AFTER] = stop_after
    if pod_annotations:
        metadata["annotations"] = pod_annotations
    if labels:
        metadata["labels"] = dict(labels)
    template: dict[str, Any] = {"spec": spec}
    if metadata:
        template["metadata"] = metadata
    return template


def job(
    name: str,
    template: Mapping[str, Any],
    *,
    namespace: str | None = None,
    queue: str | None = None,
    pods: int = 1,
    suspend: bool | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Job running `pods` pods of `template` at once, done when all of them succeed.

    queue: the sluice.dev/queue-name label. suspend: left out when None (the webhook decides).
    """
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if namespace:
        metadata["namespace"] = namespace
    if queue:
        metadata["labels"]["sluice.dev/queue-name"] = queue
    if not metadata["labels"]:
        del metadata["labels"]
    spec: dict[str, Any] = {
        "parallelism": pods,
        "completions": pods,
        "template": dict(template),
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def deployment(
    name: str, template: Mapping[str, Any], *, namespace: str, replicas: int = 1
) -> dict[str, Any]:
    """A Deployment outside any queue (a service that uses the nodes too). Its pods carry the
    label app=<name>; pass a template made with restart_policy="Always"."""
    labels = {"app": name}
    pod = {**template, "metadata": {**template.get("metadata", {})}}
    pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), **labels}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pod},
    }
