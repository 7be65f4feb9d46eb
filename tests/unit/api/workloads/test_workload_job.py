"""The batch/v1 Job adapter answers what job_from_object answers, on every Job the examples
hold and on the Job shapes the views' tests use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.views import job_from_object
from sluice.api.workloads import workload_from_object
from sluice.api.workloads.job import JOB

EXAMPLES = Path(__file__).parents[4] / "examples"


def _example_objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        out += [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]
    return out


def _default_queues(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["metadata"]["labels"]["sluice.dev/default-queue"]
        for o in objects
        if o.get("kind") == "Namespace"
        and "sluice.dev/default-queue" in (o["metadata"].get("labels") or {})
    }


def _job(**spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    pod = spec.pop("pod", {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": {"sluice.dev/queue-name": "q"}},
        "spec": {"template": {"spec": pod}, **spec},
        "status": status,
    }


EXAMPLE_JOBS = [o for o in _example_objects() if o.get("kind") == "Job"]
SHAPED_JOBS = [
    _job(parallelism=4),
    _job(parallelism=4, completions=6, status={"succeeded": 3}),
    _job(parallelism=3, status={"succeeded": 1}),
    _job(parallelism=None, suspend=True),
    _job(status={"active": 2}),
    _job(status={"conditions": [{"type": "Failed", "status": "True"}]}),
    _job(
        pod={
            "priorityClassName": "urgent",
            "preemptionPolicy": "Never",
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        }
    ),
]


def test_the_examples_hold_jobs() -> None:
    assert len(EXAMPLE_JOBS) >= 8


@pytest.mark.parametrize("obj", EXAMPLE_JOBS + SHAPED_JOBS)
def test_the_job_adapter_agrees_with_job_from_object(obj: dict[str, Any]) -> None:
    queues = _default_queues(_example_objects())
    view = job_from_object(obj, queues)
    workload = workload_from_object(obj, queues)
    if view is None:
        assert workload is None
        return
    assert workload is not None and workload.kind == "Job"
    assert workload.pod_sets == view.pod_sets
    assert workload.request == view.request
    assert workload.priority_class_name == view.priority_class_name
    assert workload.never_preempts == view.never_preempts
    assert (workload.queue, workload.queue_from_namespace) == (
        view.queue,
        view.queue_from_namespace,
    )
    assert (workload.key, workload.uid, workload.generation) == (
        view.key,
        view.uid,
        view.generation,
    )
    assert workload.creation_timestamp == view.creation_timestamp
    assert workload.phase is view.phase


def test_the_job_adapter_names_the_jobs_api() -> None:
    assert JOB.api_version == "batch/v1" and JOB.plural == "jobs"
    assert JOB.suspend_patch(False) == {"spec": {"suspend": False}}
