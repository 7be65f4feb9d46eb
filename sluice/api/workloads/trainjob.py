"""Kubeflow TrainJob (trainer.kubeflow.org/v1alpha1): counted from what the TrainJob itself
states, spec.trainer.numNodes pods of spec.trainer.resourcesPerNode each. Its runtime, which
sluice does not read, can add pods and requests (docs/workloads.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constraints import PodSpecView
from sluice.api.errors import InvalidObject
from sluice.api.pod_defaults import PodDefaults
from sluice.api.pod_request import requirements_request
from sluice.api.resources import Resources
from sluice.api.views import PodSet, condition_true
from sluice.api.workloads.jobset import REPLICATED_JOB_LABEL
from sluice.api.workloads.model import (
    SPEC_SUSPEND,
    Adapter,
    any_active,
    read_count,
    read_map,
)

KIND = "TrainJob"
FINISHED = ("Complete", "Failed")
NODE = "node"
"""The trainer's pod set: the name the Trainer's runtimes give the trainer's replicated Job."""
_UNSTATED = "missing: sluice counts what a TrainJob states, not what its runtime would add"


def _pod_sets(obj: Mapping[str, Any], full: str, defaults: PodDefaults) -> tuple[PodSet, ...]:
    spec = read_map(obj.get("spec"), KIND, full, "spec")
    trainer = read_map(spec.get("trainer"), KIND, full, "spec.trainer")
    if trainer.get("numNodes") is None:
        raise InvalidObject(KIND, full, "spec.trainer.numNodes", _UNSTATED)
    nodes = read_count(trainer.get("numNodes"), 1, KIND, full, "spec.trainer.numNodes")
    where = "spec.trainer.resourcesPerNode"
    resources = read_map(trainer.get("resourcesPerNode"), KIND, full, where)
    request = requirements_request(resources, KIND, full, where)
    if not request:
        raise InvalidObject(KIND, full, where, _UNSTATED)
    request = Resources({**defaults.container_requests, **request})
    # Its trainer's pods are the pods of the replicated Job "node" of the JobSet it makes;
    # the pods of the runtime's other replicated Jobs (initializers) are its own too, counted
    # as they run.
    return (PodSet(NODE, nodes, PodSpecView(request), pods_by=(REPLICATED_JOB_LABEL, NODE)),)


TRAIN_JOB = Adapter(
    group="trainer.kubeflow.org",
    version="v1alpha1",
    kind=KIND,
    plural="trainjobs",
    hold=SPEC_SUSPEND,
    read_pod_sets=_pod_sets,
    read_finished=lambda status: condition_true(status, FINISHED),
    read_active=lambda status: any_active(status.get("jobsStatus")),
    pod_label="trainer.kubeflow.org/trainjob-name",
    pod_set_labels=(REPLICATED_JOB_LABEL,),
)
