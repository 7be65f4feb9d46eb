"""The adapters against what the real controllers make (real/: objects as KubeRay, the
training-operator, the MPI operator and JobSet left them on the living cluster). Each pod a
controller made is its workload's own, of the pod set its labels name, and asks exactly what
the adapter counted for a pod of that set (with what the controller adds to it): so a running
workload is counted once on the nodes and in its queue."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sluice.api.pod_views import pod_from_object
from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, NodeView, PodView, WorkloadView
from sluice.api.workloads import POD_LABELS, workload_from_object
from sluice.scheduler.model import Snapshot
from sluice.scheduler.session import Session

REAL = Path(__file__).parent / "real"
NOW = datetime(2026, 11, 26, tzinfo=UTC)

REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
# file -> (the workload's entry, [(a pod's entry, its pod set, how many such pods it runs,
# labels changed on the copies: the captured JobSet pod stands for its driver's too)])
CAPTURED: dict[str, tuple[str, list[tuple[str, str, int, dict[str, str]]]]] = {
    "rayjob": (
        "rayjob",
        [
            ("head_pod", "head", 1, {}),
            ("worker_pod", "workers", 2, {}),
            ("submitter_pod", "submitter", 1, {}),
        ],
    ),
    "pytorchjob": (
        "pytorchjob",
        [("master_pod", "Master", 1, {}), ("worker_pod", "Worker", 2, {})],
    ),
    "mpijob": ("mpijob", [("launcher_pod", "Launcher", 1, {}), ("worker_pod", "Worker", 2, {})]),
    "jobset": (
        "jobset",
        [("pod", "workers", 2, {}), ("pod", "driver", 1, {REPLICATED_JOB: "driver"})],
    ),
}


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((REAL / f"{name}.json").read_text())
    return loaded


def workload(name: str) -> tuple[WorkloadView, dict[str, Any]]:
    objects = load(name)
    view = workload_from_object(objects[CAPTURED[name][0]])
    assert view is not None
    return view, objects


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_each_pod_asks_what_its_pod_set_counted(name: str) -> None:
    view, objects = workload(name)
    sets = {s.name: s for s in view.pod_sets}
    for entry, set_name, _, relabel in CAPTURED[name][1]:
        if relabel:
            continue  # a copy, not what the controller made
        pod = pod_from_object(objects[entry], POD_LABELS)
        assert pod.request == sets[set_name].pod.request, f"{entry} of {set_name}"
        marks = dict(view.pods_by)
        assert any(marks.get(label) == value for label, value in pod.named_by), entry
        assert sets[set_name].pods_by in pod.named_by, f"{entry} is told apart as {set_name}"


def running(name: str) -> tuple[WorkloadView, list[PodView]]:
    """The captured workload admitted and running, with every pod it runs bound to node n1
    (the captured pod of a set copied under other names up to the set's count)."""
    view, objects = workload(name)
    view = replace(view, phase=JobPhase.RUNNING, admitted_at=NOW)
    pods: list[PodView] = []
    for entry, set_name, count, relabel in CAPTURED[name][1]:
        for i in range(count):
            obj = copy.deepcopy(objects[entry])
            obj["metadata"]["name"] += f"-{set_name}-{i}"
            obj["metadata"]["labels"].update(relabel)
            obj["metadata"]["creationTimestamp"] = "2026-11-26T00:00:01Z"
            obj["spec"]["nodeName"] = "n1"
            pods.append(pod_from_object(obj, POD_LABELS))
    return view, pods


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_a_running_workload_is_counted_once_on_the_nodes_and_in_its_queue(name: str) -> None:
    view, pods = running(name)
    queue = Queue.from_object({"metadata": {"name": view.queue}, "spec": {}})
    node = NodeView("n1", Resources.parse({"cpu": "64", "memory": "256Gi"}))
    session = Session(Snapshot([queue], [view], [node], NOW, pods=pods))
    asked = Resources()
    for pod in pods:
        asked = asked + pod.request
    (info,) = session.queues[view.queue].admitted_jobs
    assert len(info.pods) == len(pods)  # every pod is its own
    assert Resources(session.used) == asked == view.request
    assert Resources(session.queues[view.queue].allocated) == view.request
    assert session.placement.free[0] == dict((node.allocatable - asked).amounts)
