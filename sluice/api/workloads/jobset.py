"""JobSet (jobset.x-k8s.io/v1alpha2): one pod set per replicated Job, its replicas times the
pods its Job template runs at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.pod_defaults import PodDefaults
from sluice.api.views import PodSet, condition_true, job_pod_counts
from sluice.api.workloads.model import (
    SPEC_SUSPEND,
    Adapter,
    TemplatePath,
    any_active,
    dig,
    listed,
    read_count,
    read_map,
    template_pod_set,
)

KIND = "JobSet"
FINISHED = ("Completed", "Failed")
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
"""On the pods of a JobSet's Jobs: the replicated Job they are of (their pod set)."""


def _pod_sets(obj: Mapping[str, Any], full: str, defaults: PodDefaults) -> tuple[PodSet, ...]:
    spec = read_map(obj.get("spec"), KIND, full, "spec")
    out: list[PodSet] = []
    for i, raw in enumerate(spec.get("replicatedJobs") or ()):
        where = f"spec.replicatedJobs[{i}]"
        replicated = read_map(raw, KIND, full, where)
        replicas = read_count(replicated.get("replicas"), 1, KIND, full, f"{where}.replicas")
        job = read_map(replicated.get("template"), KIND, full, f"{where}.template")
        job_spec = read_map(job.get("spec"), KIND, full, f"{where}.template.spec")
        # Its Jobs are new while the JobSet is held: no completion counts yet.
        parallelism, at_once = job_pod_counts(job_spec, {}, KIND, full, f"{where}.template.spec")
        name = _name(replicated, i)
        out.append(
            template_pod_set(
                name,
                replicas * parallelism,
                job_spec.get("template"),
                KIND,
                full,
                f"{where}.template.spec.template",
                defaults,
                replicas * at_once,
                pods_by=(REPLICATED_JOB_LABEL, name),
            )
        )
    return tuple(out)


def _name(replicated: Mapping[str, Any], i: int) -> str:
    """A replicated Job's pod set: its name (its index when it has none)."""
    return str(replicated.get("name") or i)


def _templates(obj: Mapping[str, Any]) -> tuple[tuple[str, TemplatePath], ...]:
    jobs = dig(obj, ("spec", "replicatedJobs"))
    return tuple(
        (
            _name(jobs[i] if isinstance(jobs[i], Mapping) else {}, i),
            ("spec", "replicatedJobs", i, "template", "spec", "template"),
        )
        for i in listed(obj, ("spec", "replicatedJobs"))
    )


JOBSET = Adapter(
    group="jobset.x-k8s.io",
    version="v1alpha2",
    kind=KIND,
    plural="jobsets",
    hold=SPEC_SUSPEND,
    read_pod_sets=_pod_sets,
    read_finished=lambda status: condition_true(status, FINISHED),
    read_active=lambda status: any_active(status.get("replicatedJobsStatus")),
    pod_label="jobset.sigs.k8s.io/jobset-name",
    pod_set_labels=(REPLICATED_JOB_LABEL,),
    pod_set_templates=_templates,
)
