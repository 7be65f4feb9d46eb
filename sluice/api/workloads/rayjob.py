"""RayJob (ray.io/v1): the Ray cluster it brings (spec.rayClusterSpec), head and worker
groups, plus the pod that submits its job; held by spec.suspend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sluice.api.errors import InvalidObject
from sluice.api.pod_defaults import PodDefaults
from sluice.api.views import PodSet, Shedding
from sluice.api.workloads.model import (
    SPEC_SUSPEND,
    Adapter,
    TemplatePath,
    dig,
    injected_container,
    listed,
    read_count,
    read_map,
    template_pod_set,
)
from sluice.api.workloads.ray_cluster import group_hosts

KIND = "RayJob"
FINISHED: Final = ("Complete", "Failed")
"""status.jobDeploymentStatus values after which KubeRay does nothing more for the job."""
HEAD = "head"
SUBMITTER = "submitter"
MAX_REPLICAS: Final = 2**31 - 1
"""A worker group's maxReplicas when it names none."""
SUBMITTER_CONTAINER: Final = injected_container(
    "ray-job-submitter", {"cpu": "500m", "memory": "200Mi"}
)
"""KubeRay's own submitter container (K8sJobMode without a submitterPodTemplate, and
SidecarMode)."""
AUTOSCALER_REQUEST: Final = {"cpu": "500m", "memory": "512Mi"}
"""What the autoscaler container KubeRay adds to the head pod requests, unless
autoscalerOptions.resources says otherwise."""
WAIT_GCS_READY: Final = injected_container("wait-gcs-ready", {"cpu": "200m", "memory": "256Mi"})
"""The init container KubeRay (v1.5) adds to every worker pod, which waits for the head's
GCS (docs/workloads.md)."""
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""On the submitter's pod: the name of the Job KubeRay runs it in, which is the RayJob's."""


def _pod_sets(obj: Mapping[str, Any], full: str, defaults: PodDefaults) -> tuple[PodSet, ...]:
    """The head, each worker group, and the submitter's pod when KubeRay runs it as a Job."""
    spec = read_map(obj.get("spec"), KIND, full, "spec")
    if not isinstance(spec.get("rayClusterSpec"), Mapping):
        raise InvalidObject(
            KIND,
            full,
            "spec.rayClusterSpec",
            "missing: sluice gates a RayJob that brings its own cluster, not one that runs on a"
            " cluster it selects (spec.clusterSelector)",
        )
    cluster: Mapping[str, Any] = spec["rayClusterSpec"]
    mode = spec.get("submissionMode") or "K8sJobMode"
    out = [_head(cluster, full, defaults, sidecar=mode == "SidecarMode")]
    base = "spec.rayClusterSpec"
    for i, raw in enumerate(cluster.get("workerGroupSpecs") or ()):
        where = f"{base}.workerGroupSpecs[{i}]"
        group = read_map(raw, KIND, full, where)
        name = _group_name(group, i)
        hosts = read_count(group.get("numOfHosts"), 1, KIND, full, f"{where}.numOfHosts")
        out.append(
            template_pod_set(
                name,
                _worker_pods(group, full, where) * hosts,
                group.get("template"),
                KIND,
                full,
                f"{where}.template",
                defaults,
                pods_by=(GROUP_LABEL, name),
                injected=(WAIT_GCS_READY,),
                count_step=hosts,
            )
        )
    if mode == "K8sJobMode":
        out.append(_submitter(spec, full, defaults))
    return tuple(out)


def _head(cluster: Mapping[str, Any], full: str, defaults: PodDefaults, sidecar: bool) -> PodSet:
    """The head pod, with the containers KubeRay adds to it: the autoscaler's, and the
    submitter's in SidecarMode."""
    where = "spec.rayClusterSpec.headGroupSpec"
    head_group = read_map(cluster.get("headGroupSpec"), KIND, full, where)
    added = _autoscaler(cluster, full) + ((SUBMITTER_CONTAINER,) if sidecar else ())
    return template_pod_set(
        HEAD,
        1,
        head_group.get("template"),
        KIND,
        full,
        f"{where}.template",
        defaults,
        pods_by=(NODE_TYPE_LABEL, HEAD),
        added=added,
    )


def _submitter(spec: Mapping[str, Any], full: str, defaults: PodDefaults) -> PodSet:
    """The pod that submits the job (K8sJobMode): its template, or KubeRay's own."""
    template = spec.get("submitterPodTemplate")
    if template is None:
        template = {"spec": {"containers": [SUBMITTER_CONTAINER]}}
    return template_pod_set(
        SUBMITTER,
        1,
        template,
        KIND,
        full,
        "spec.submitterPodTemplate",
        defaults,
        pods_by=(JOB_NAME_LABEL, full.partition("/")[2]),
    )


def _worker_pods(group: Mapping[str, Any], full: str, where: str) -> int:
    """The replicas a worker group starts with (each of numOfHosts pods): replicas
    (minReplicas when unset) kept within [minReplicas, maxReplicas]; none while the group is
    suspended."""
    if group.get("suspend") is True:
        return 0
    low = read_count(group.get("minReplicas"), 0, KIND, full, f"{where}.minReplicas")
    high = read_count(group.get("maxReplicas"), MAX_REPLICAS, KIND, full, f"{where}.maxReplicas")
    replicas = read_count(group.get("replicas"), low, KIND, full, f"{where}.replicas")
    return min(max(replicas, low), high)


def _autoscaler(cluster: Mapping[str, Any], full: str) -> tuple[dict[str, Any], ...]:
    """The autoscaler container KubeRay adds to the head pod, as far as its request goes."""
    if cluster.get("enableInTreeAutoscaling") is not True:
        return ()
    where = "spec.rayClusterSpec.autoscalerOptions"
    options = read_map(cluster.get("autoscalerOptions"), KIND, full, where)
    if options.get("resources") is None:
        return (injected_container("autoscaler", AUTOSCALER_REQUEST),)
    resources = read_map(options["resources"], KIND, full, f"{where}.resources")
    return ({"name": "autoscaler", "resources": resources},)


def _group_name(group: Mapping[str, Any], i: int) -> str:
    """A worker group's pod set: its groupName (its index when it has none)."""
    return str(group.get("groupName") or i)


def _templates(obj: Mapping[str, Any]) -> tuple[tuple[str, TemplatePath], ...]:
    base = ("spec", "rayClusterSpec")
    out: list[tuple[str, TemplatePath]] = [(HEAD, (*base, "headGroupSpec", "template"))]
    groups = dig(obj, (*base, "workerGroupSpecs"))
    for i in listed(obj, (*base, "workerGroupSpecs")):
        group = groups[i] if isinstance(groups[i], Mapping) else {}
        out.append((_group_name(group, i), (*base, "workerGroupSpecs", i, "template")))
    if isinstance(dig(obj, ("spec", "submitterPodTemplate")), Mapping):
        out.append((SUBMITTER, ("spec", "submitterPodTemplate")))
    return tuple(out)


def _worker_minimums(obj: Mapping[str, Any]) -> tuple[tuple[str, TemplatePath], ...]:
    """Every worker group may shrink, down to its minReplicas (what Ray's autoscaler keeps
    it at); the head and the submitter are admitted whole."""
    base = ("spec", "rayClusterSpec", "workerGroupSpecs")
    groups = dig(obj, base)
    return tuple(
        (
            _group_name(groups[i] if isinstance(groups[i], Mapping) else {}, i),
            (*base, i, "minReplicas"),
        )
        for i in listed(obj, base)
    )


def _size_fields(
    obj: Mapping[str, Any], pod_set: str, pods: int
) -> tuple[tuple[TemplatePath, int], ...]:
    """A worker group's replicas for that many pods (numOfHosts each), and its minReplicas
    no higher: KubeRay keeps a group at its minReplicas whatever its replicas say."""
    base = ("spec", "rayClusterSpec", "workerGroupSpecs")
    groups = dig(obj, base)
    for i in listed(obj, base):
        group = groups[i] if isinstance(groups[i], Mapping) else {}
        if _group_name(group, i) != pod_set:
            continue
        replicas = pods // group_hosts(group)
        out: list[tuple[TemplatePath, int]] = [((*base, i, "replicas"), replicas)]
        low = group.get("minReplicas")
        if isinstance(low, int):
            out.append(((*base, i, "minReplicas"), min(low, replicas)))
        return tuple(out)
    return ()


def _sheds(obj: Mapping[str, Any]) -> Shedding:
    """With Ray's autoscaler on, KubeRay (v1.5) deletes on a lowered ``replicas`` only the
    workers its group's ``scaleStrategy.workersToDelete`` names, so sluice names the ones it
    takes. Without it KubeRay also deletes, wherever its count of a group's pods exceeds
    ``replicas``, the first pods it lists, whichever they are: the workers counted as
    staying could go, so such a RayJob is taken whole (docs/scheduler.md, *Victims above a
    minimum*)."""
    autoscaled = dig(obj, ("spec", "rayClusterSpec", "enableInTreeAutoscaling")) is True
    return "named" if autoscaled else "whole"


def _refusal(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and spec.get("shutdownAfterJobFinishes") is True:
        return None
    return (
        "spec.shutdownAfterJobFinishes",
        "must be true: KubeRay holds a RayJob by spec.suspend only then (its Ray cluster goes"
        " when its job ends), and sluice holds RayJobs by spec.suspend",
    )


RAY_JOB = Adapter(
    group="ray.io",
    version="v1",
    kind=KIND,
    plural="rayjobs",
    hold=SPEC_SUSPEND,
    read_pod_sets=_pod_sets,
    read_finished=lambda status: status.get("jobDeploymentStatus") in FINISHED,
    read_active=lambda status: status.get("jobDeploymentStatus") == "Running",
    # KubeRay labels the pods of the RayCluster it makes with that cluster's name, which the
    # RayJob's status names once it exists.
    pod_label="ray.io/cluster",
    pod_label_value=lambda obj: dig(obj, ("status", "rayClusterName")),
    # KubeRay runs the submitter (K8sJobMode) as a Job named after the RayJob: its pod
    # carries no Ray label, only the Job controller's.
    owned_pods_label=JOB_NAME_LABEL,
    pod_set_labels=(NODE_TYPE_LABEL, GROUP_LABEL, JOB_NAME_LABEL),
    pod_set_templates=_templates,
    read_refusal=_refusal,
    min_fields=_worker_minimums,
    size_fields=_size_fields,
    read_sheds=_sheds,
)
