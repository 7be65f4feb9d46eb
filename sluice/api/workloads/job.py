"""batch/v1 Job: one pod set, the Job's template, parallelism pods at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import MIN_PARALLELISM_ANNOTATION
from sluice.api.pod_defaults import PodDefaults
from sluice.api.views import JOB_FINISHED, MAIN_POD_SET, PodSet, condition_true, job_pod_counts
from sluice.api.workloads.model import (
    SPEC_SUSPEND,
    Adapter,
    TemplatePath,
    dig,
    read_map,
    template_pod_set,
)

KIND = "Job"


def _pod_sets(obj: Mapping[str, Any], full: str, defaults: PodDefaults) -> tuple[PodSet, ...]:
    spec = read_map(obj.get("spec"), KIND, full, "spec")
    status = read_map(obj.get("status"), KIND, full, "status")
    parallelism, pod_count = job_pod_counts(spec, status, KIND, full, "spec")
    template = spec.get("template")
    return (
        template_pod_set(
            MAIN_POD_SET, parallelism, template, KIND, full, "spec.template", defaults, pod_count
        ),
    )


def _size_fields(
    obj: Mapping[str, Any], pod_set: str, pods: int
) -> tuple[tuple[TemplatePath, int], ...]:
    """parallelism; and completions with it for an Indexed Job whose completions equal its
    parallelism, which stays a gang of the smaller size rather than running its remaining
    indices later (Kubernetes lets such a Job change both together)."""
    spec = dig(obj, ("spec",)) or {}
    out: list[tuple[TemplatePath, int]] = [(("spec", "parallelism"), pods)]
    indexed = spec.get("completionMode") == "Indexed"
    if indexed and spec.get("completions") == spec.get("parallelism", 1):
        out.append((("spec", "completions"), pods))
    return tuple(out)


def _active(status: Mapping[str, Any]) -> bool:
    return (status.get("active") or 0) > 0


JOB = Adapter(
    group="batch",
    version="v1",
    kind=KIND,
    plural="jobs",
    hold=SPEC_SUSPEND,
    read_pod_sets=_pod_sets,
    read_finished=lambda status: condition_true(status, JOB_FINISHED),
    read_active=_active,
    pod_template=("spec", "template"),
    pod_set_templates=lambda obj: ((MAIN_POD_SET, ("spec", "template")),),
    orphans_by_default=True,
    pods_named="parallelism",
    checked_by_the_api_server=True,
    # A Job of any shape may run with fewer pods at once (docs/elastic.md, *Which Jobs*).
    size_fields=_size_fields,
    min_fields=lambda obj: (
        (MAIN_POD_SET, ("metadata", "annotations", MIN_PARALLELISM_ANNOTATION)),
    ),
)
