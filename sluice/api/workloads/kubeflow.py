"""Kubeflow's replica-spec jobs, PyTorchJob (kubeflow.org/v1) and MPIJob
(kubeflow.org/v2beta1): one pod set per replica type, its replicas times its template; held by
spec.runPolicy.suspend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.views import PodSet, condition_true
from sluice.api.workloads.model import (
    Adapter,
    PodSetReader,
    SuspendField,
    any_active,
    read_count,
    read_map,
    template_pod_set,
)

FINISHED = ("Succeeded", "Failed")


def _replica_sets(kind: str, field: str, defaults: Mapping[str, int]) -> PodSetReader:
    """Pod sets from spec.<field>: a map of replica type to {replicas, template}; a type
    without replicas runs ``defaults[type]`` pods (1 when the kind names no default)."""

    def read(obj: Mapping[str, Any], full: str) -> tuple[PodSet, ...]:
        spec = read_map(obj.get("spec"), kind, full, "spec")
        out: list[PodSet] = []
        for replica_type, raw in read_map(spec.get(field), kind, full, f"spec.{field}").items():
            where = f"spec.{field}.{replica_type}"
            replica = read_map(raw, kind, full, where)
            default = defaults.get(replica_type, 1)
            count = read_count(replica.get("replicas"), default, kind, full, f"{where}.replicas")
            template = replica.get("template")
            out.append(
                template_pod_set(replica_type, count, template, kind, full, f"{where}.template")
            )
        return tuple(out)

    return read


def _finished(status: Mapping[str, Any]) -> bool:
    return condition_true(status, FINISHED)


def _active(status: Mapping[str, Any]) -> bool:
    return any_active(status.get("replicaStatuses"))


def _replica_job(version: str, kind: str, field: str, defaults: Mapping[str, int]) -> Adapter:
    return Adapter(
        group="kubeflow.org",
        version=version,
        kind=kind,
        plural=f"{kind.lower()}s",
        hold=SuspendField(("spec", "runPolicy", "suspend")),
        read_pod_sets=_replica_sets(kind, field, defaults),
        read_finished=_finished,
        read_active=_active,
        pod_label="training.kubeflow.org/job-name",
    )


PYTORCH_JOB = _replica_job("v1", "PyTorchJob", "pytorchReplicaSpecs", {})
MPI_JOB = _replica_job("v2beta1", "MPIJob", "mpiReplicaSpecs", {"Launcher": 1, "Worker": 0})
