"""Kubeflow's replica-spec jobs, PyTorchJob (kubeflow.org/v1) and MPIJob
(kubeflow.org/v2beta1): one pod set per replica type, its replicas times its template; held by
spec.runPolicy.suspend."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from sluice.api.pod_defaults import PodDefaults
from sluice.api.views import PodSet, condition_true
from sluice.api.workloads.model import (
    Adapter,
    PodSetReader,
    SuspendField,
    TemplatePath,
    any_active,
    injected_container,
    keyed,
    read_count,
    read_map,
    template_pod_set,
)

FINISHED = ("Succeeded", "Failed")
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
"""On the pods of a PyTorchJob (training-operator): their replica type, in lower case."""
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
"""On the pods of an MPIJob (MPI operator v2): their replica type, in lower case (the
training-operator puts it on a PyTorchJob's master alone)."""
PYTORCH_INIT: Final = injected_container("init-pytorch", {"cpu": "50m", "memory": "10Mi"})
"""What the training-operator (v1.8 and v1.9) adds to each Worker pod of a PyTorchJob that has a
Master: an init container that waits for the Master (its requests; docs/workloads.md)."""


def _pytorch_injected(replica_type: str, types: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    return (PYTORCH_INIT,) if replica_type == "Worker" and "Master" in types else ()


def _none_injected(replica_type: str, types: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    return ()


Injected = Callable[[str, Mapping[str, Any]], tuple[dict[str, Any], ...]]
"""(replica type, all replica specs) -> the init containers the controller adds to its pods."""


def _replica_sets(
    kind: str, field: str, counts: Mapping[str, int], injected: Injected, set_label: str
) -> PodSetReader:
    """Pod sets from spec.<field>: a map of replica type to {replicas, template}; a type
    without replicas runs ``counts[type]`` pods (1 when the kind names no default)."""

    def read(obj: Mapping[str, Any], full: str, defaults: PodDefaults) -> tuple[PodSet, ...]:
        spec = read_map(obj.get("spec"), kind, full, "spec")
        types = read_map(spec.get(field), kind, full, f"spec.{field}")
        out: list[PodSet] = []
        for replica_type, raw in types.items():
            where = f"spec.{field}.{replica_type}"
            replica = read_map(raw, kind, full, where)
            default = counts.get(replica_type, 1)
            count = read_count(replica.get("replicas"), default, kind, full, f"{where}.replicas")
            out.append(
                template_pod_set(
                    replica_type,
                    count,
                    replica.get("template"),
                    kind,
                    full,
                    f"{where}.template",
                    defaults,
                    pods_by=(set_label, replica_type.lower()),
                    injected=injected(replica_type, types),
                )
            )
        return tuple(out)

    return read


def _elastic_workers(obj: Mapping[str, Any]) -> tuple[tuple[str, TemplatePath], ...]:
    """The workers may shrink, down to elasticPolicy.minReplicas (the training-operator's
    elastic training scales the Worker replicas alone); the Master is admitted whole."""
    if "Worker" not in keyed(obj, ("spec", "pytorchReplicaSpecs")):
        return ()
    return (("Worker", ("spec", "elasticPolicy", "minReplicas")),)


def _finished(status: Mapping[str, Any]) -> bool:
    return condition_true(status, FINISHED)


def _active(status: Mapping[str, Any]) -> bool:
    return any_active(status.get("replicaStatuses"))


def _replica_job(
    version: str,
    kind: str,
    field: str,
    counts: Mapping[str, int],
    injected: Injected,
    set_label: str,
    made_at_creation: frozenset[str] = frozenset(),
) -> Adapter:
    return Adapter(
        group="kubeflow.org",
        version=version,
        kind=kind,
        plural=f"{kind.lower()}s",
        hold=SuspendField(("spec", "runPolicy", "suspend")),
        read_pod_sets=_replica_sets(kind, field, counts, injected, set_label),
        read_finished=_finished,
        read_active=_active,
        pod_label="training.kubeflow.org/job-name",
        pod_set_labels=(set_label,),
        made_at_creation=made_at_creation,
        pod_set_templates=lambda obj: tuple(
            (replica_type, ("spec", field, replica_type, "template"))
            for replica_type in keyed(obj, ("spec", field))
        ),
    )


PYTORCH_JOB = replace(
    _replica_job(
        "v1", "PyTorchJob", "pytorchReplicaSpecs", {}, _pytorch_injected, REPLICA_TYPE_LABEL
    ),
    min_fields=_elastic_workers,
    size_fields=lambda obj, pod_set, pods: (
        (("spec", "pytorchReplicaSpecs", pod_set, "replicas"), pods),
    ),
    # The training-operator's CRD (v1.8, v1.9): the HPA it makes for an elastic policy with
    # metrics scales the workers here.
    scale_replicas=("spec", "pytorchReplicaSpecs", "Worker", "replicas"),
)
MPI_JOB = _replica_job(
    "v2beta1",
    "MPIJob",
    "mpiReplicaSpecs",
    {"Launcher": 1, "Worker": 0},
    _none_injected,
    JOB_ROLE_LABEL,
    # The MPI operator (v0.6) makes the Launcher's Job when the MPIJob is created, suspended
    # with it, and on resume only unsuspends it.
    frozenset({"Launcher"}),
)
