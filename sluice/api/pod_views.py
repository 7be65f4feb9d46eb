"""Pods as sluice reads them: which pods hold room where, which workload owns each, and which
are plain pods (held by sluice's scheduling gate, docs/workloads.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import (
    ADMISSION_GATE,
    ADMITTED_AT_ANNOTATION,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    RESIZABLE_LABEL,
)
from sluice.api.pod_request import pod_request
from sluice.api.views import EPOCH, PodView, named_metadata, parse_time


def job_controller_uid(meta: Mapping[str, Any]) -> str:
    """The uid of the Job that controls a pod (its ownerReferences); "" when none does."""
    for owner in meta.get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("controller") and owner.get("kind") == "Job":
            return str(owner.get("uid") or "")
    return ""


JOB_POD_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
"""Labels the Job controller puts on its pods, naming their Job's uid."""

WORKLOAD_POD_OWNERS = frozenset({"Job", "PyTorchJob", "MPIJob", "RayCluster"})
"""Controllers of the pods of workloads held by their own suspend field (docs/workloads.md):
a Job (also a JobSet's or a TrainJob's), a PyTorchJob's or MPIJob's own pods, a RayJob's
RayCluster."""


def job_pod(meta: Mapping[str, Any]) -> bool:
    """A pod of a workload of its own: one such a controller controls, or one carrying the
    labels the Job controller gives its pods. That workload is sluice's, never the pod."""
    labels = meta.get("labels") or {}
    if any(labels.get(k) for k in JOB_POD_UID_LABELS):
        return True
    return any(
        isinstance(owner, Mapping)
        and owner.get("controller")
        and owner.get("kind") in WORKLOAD_POD_OWNERS
        for owner in meta.get("ownerReferences") or ()
    )


def gate_index(spec: Mapping[str, Any]) -> int:
    """Where sluice's scheduling gate is in a pod's spec.schedulingGates; -1 when absent."""
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        return -1
    for i, gate in enumerate(gates):
        if isinstance(gate, Mapping) and gate.get("name") == ADMISSION_GATE:
            return i
    return -1


def gated(spec: Mapping[str, Any]) -> bool:
    """Whether a pod still carries sluice's scheduling gate."""
    gates = spec.get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates
    )


def plain_pod_workload_uid(obj: Mapping[str, Any]) -> str:
    """The workload a managed plain pod belongs to (docs/workloads.md, "Plain pods and pod
    groups"), as the uid its PodView names: its group's ``pod-group/<namespace>/<group>``,
    else the pod's own uid. "" for any other pod: one a Job controls (its Job is the
    workload), one no queue manages, one neither gated nor admitted by sluice."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if not labels.get(QUEUE_LABEL) or job_pod(meta):
        return ""
    annotations = meta.get("annotations") or {}
    if not gated(obj.get("spec") or {}) and not annotations.get(ADMITTED_AT_ANNOTATION):
        return ""
    group = labels.get(POD_GROUP_LABEL)
    if group:
        return pod_group_uid(str(meta.get("namespace") or "default"), str(group))
    return str(meta.get("uid") or "")


def pod_group_uid(namespace: str, group: str) -> str:
    """What stands for a pod group's uid: its pods have no common owner to take it from."""
    return f"pod-group/{namespace}/{group}"


def pod_from_object(obj: Mapping[str, Any], workload_labels: tuple[str, ...] = ()) -> PodView:
    """A pod as placement sees it; ``workload_labels``: the labels by which workloads other
    than Jobs name their pods and their pod sets (sluice.api.workloads.POD_LABELS)."""
    meta, name = named_metadata(obj, "Pod")
    namespace = str(meta.get("namespace") or "default")
    full = f"{namespace}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    job_uid = job_controller_uid(meta) or plain_pod_workload_uid(obj)
    unschedulable = ""
    for cond in status.get("conditions") or ():
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
        ):
            reason, message = cond.get("reason") or "", cond.get("message") or ""
            unschedulable = f"{reason}: {message}" if reason and message else reason or message
    labels = meta.get("labels") or {}
    return PodView(
        namespace=namespace,
        name=name,
        request=pod_request(spec, "Pod", full, "spec"),
        node=spec.get("nodeName") or None,
        finished=status.get("phase") in ("Succeeded", "Failed"),
        terminating=meta.get("deletionTimestamp") is not None,
        job_uid=job_uid,
        creation_timestamp=parse_time(
            meta.get("creationTimestamp"), "Pod", full, "metadata.creationTimestamp"
        )
        or EPOCH,
        unschedulable=unschedulable,
        named_by=tuple((k, str(labels[k])) for k in workload_labels if k in labels),
        gated=gated(spec),
        gate_index=gate_index(spec),
        resizable=RESIZABLE_LABEL in labels and job_pod(meta),
        uid=str(meta.get("uid") or ""),
        claims=(
            claims_used(spec, status)
            if spec.get("resourceClaims") or status.get("extendedResourceClaimStatus")
            else ()
        ),
    )


def claims_used(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[str, ...]:
    """The ResourceClaims a pod uses: those its spec names, those its status says were made
    for it from templates, and the one made for its device-backed extended resources."""
    out = [
        str(c["resourceClaimName"])
        for c in spec.get("resourceClaims") or ()
        if isinstance(c, Mapping) and c.get("resourceClaimName")
    ]
    out += [
        str(s["resourceClaimName"])
        for s in status.get("resourceClaimStatuses") or ()
        if isinstance(s, Mapping) and s.get("resourceClaimName")
    ]
    extended = status.get("extendedResourceClaimStatus")
    if isinstance(extended, Mapping) and extended.get("resourceClaimName"):
        out.append(str(extended["resourceClaimName"]))
    return tuple(out)
