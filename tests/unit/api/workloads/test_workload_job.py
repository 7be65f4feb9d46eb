"""The batch/v1 Job adapter, on every Job the examples hold and on the Job shapes the views'
tests use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.pod_request import pod_request
from sluice.api.workloads import workload_from_object
from sluice.api.workloads.job import JOB
from sluice.queues.jobs import workload_request

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
def test_a_job_is_one_pod_set_of_parallelism_pods_of_its_template(obj: dict[str, Any]) -> None:
    """The one place a Job's request is computed: its adapter's pod set, the template's pod
    request times the Job's parallelism, what the scheduler and the webhooks both count."""
    queues = _default_queues(_example_objects())
    view = workload_from_object(obj, queues)
    labels = obj["metadata"].get("labels") or {}
    if "sluice.dev/queue-name" not in labels and obj["metadata"].get("namespace") not in queues:
        assert view is None
        return
    assert view is not None and view.kind == "Job"
    spec = obj["spec"]
    parallelism = 1 if spec.get("parallelism") is None else spec["parallelism"]
    pod = pod_request(spec["template"]["spec"], "Job", "ns/j")
    (pods,) = view.pod_sets
    assert (pods.name, pods.count, pods.pod.request) == ("main", parallelism, pod)
    assert view.request == pod.scale(parallelism)
    assert workload_request(obj, JOB) == view.request  # the webhooks' count is the same
    assert pods.priority_class_name == spec["template"]["spec"].get("priorityClassName")


def test_the_job_adapter_names_the_jobs_api() -> None:
    assert JOB.api_version == "batch/v1" and JOB.plural == "jobs"
    assert JOB.suspend_patch(False) == {"spec": {"suspend": False}}
