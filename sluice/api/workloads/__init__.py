"""Workloads of every kind sluice reads, and the adapter that reads each (docs/workloads.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.views import PodSet, WorkloadView
from sluice.api.workloads.job import JOB
from sluice.api.workloads.jobset import JOBSET
from sluice.api.workloads.kubeflow import MPI_JOB, PYTORCH_JOB
from sluice.api.workloads.model import Adapter, SuspendField, controlled_by
from sluice.api.workloads.rayjob import RAY_JOB
from sluice.api.workloads.trainjob import TRAIN_JOB

ADAPTERS: tuple[Adapter, ...] = (JOB, JOBSET, TRAIN_JOB, PYTORCH_JOB, MPI_JOB, RAY_JOB)
_BY_TYPE = {(a.api_version, a.kind): a for a in ADAPTERS}
BY_KIND = {a.kind: a for a in ADAPTERS}
"""Each kind's adapter by its kind alone: no two kinds sluice gates share a name."""
POD_LABELS = tuple(
    dict.fromkeys(
        label
        for a in ADAPTERS
        for label in (a.pod_label, a.owned_pods_label, *a.pod_set_labels)
        if label
    )
)
"""The labels that name a workload, or its pod set, on its pods (docs/workloads.md)."""


def adapter_for(api_version: str, kind: str) -> Adapter | None:
    """The adapter of objects of this apiVersion and kind; None for a kind sluice does not gate."""
    return _BY_TYPE.get((api_version, kind))


def workload_from_object(
    obj: Mapping[str, Any], namespace_default_queue: Mapping[str, str] | None = None
) -> WorkloadView | None:
    """The workload an object of any gated kind is; None when no queue manages it or sluice
    gates no such kind."""
    adapter = adapter_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    return None if adapter is None else adapter.view(obj, namespace_default_queue)


__all__ = [
    "ADAPTERS",
    "BY_KIND",
    "POD_LABELS",
    "Adapter",
    "PodSet",
    "SuspendField",
    "adapter_for",
    "controlled_by",
    "workload_from_object",
]
