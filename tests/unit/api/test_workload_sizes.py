"""A resizable workload's sizes as people see them (docs/elastic.md, *Seen everywhere*): per
pod set its pods admitted, asked, its minimum and its pods waiting in its queue, read from its
spec and its record alone."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from sluice.api.constants import ADMITTED_SIZE_ANNOTATION as RECORD
from sluice.api.constants import MIN_PARALLELISM_ANNOTATION as MIN
from sluice.api.views import WorkloadView
from sluice.api.workload_sizes import (
    PodSetSize,
    pod_set_sizes,
    pods_admitted_and_waiting,
    sizes_text,
    sizes_words,
)
from sluice.api.workloads import workload_from_object

FIXTURES = Path(__file__).parent / "workloads" / "pytorchjobs.yaml"


def job(parallelism: int, record: str | None, *, running: bool = True, done: bool = False) -> Any:
    annotations = {MIN: "4"} if record is None else {MIN: "4", RECORD: record}
    status: dict[str, Any] = {"active": parallelism} if running else {}
    if done:
        status = {"conditions": [{"type": "Complete", "status": "True"}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u",
            "labels": {"sluice.dev/queue-name": "q"},
            "annotations": annotations,
        },
        "spec": {
            "suspend": not running and not done,
            "parallelism": parallelism,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
        "status": status,
    }


def read(obj: Any) -> WorkloadView:
    view = workload_from_object(obj)
    assert view is not None
    return view


def record(admitted: int, asked: int, fields: str = "") -> str:
    return f'{{"main":{{"admitted":{admitted},"asked":{asked},"fields":{{{fields}}}}}}}'


SMALLER = record(6, 8, '"spec.parallelism":8')


def test_admitted_smaller_it_holds_its_record_and_asks_what_it_asked() -> None:
    view = read(job(6, SMALLER))
    assert pod_set_sizes(view) == (PodSetSize("main", 6, 8, 4, 0),)
    assert (sizes_text(view), sizes_words(view)) == ("6/8", "admitted 6 of 8 pods (min 4)")
    assert pods_admitted_and_waiting(view) == (6, 0)


def test_grown_its_growth_waits_beyond_its_record() -> None:
    view = read(job(8, record(6, 6)))
    assert pod_set_sizes(view) == (PodSetSize("main", 6, 8, 4, 2),)
    assert sizes_words(view) == (
        "admitted 6 of 8 pods (min 4), growth of 2 pods waiting in its queue"
    )
    assert pods_admitted_and_waiting(view) == (6, 2)


def test_a_size_its_owner_lowered_holds_and_asks_the_lower_size() -> None:
    view = read(job(5, record(6, 6)))
    assert pod_set_sizes(view) == (PodSetSize("main", 5, 5, 4, 0),)
    assert sizes_text(view) == "5/5"


def test_waiting_it_asks_everything_and_admits_nothing() -> None:
    view = read(job(8, None, running=False))
    assert pod_set_sizes(view) == (PodSetSize("main", 0, 8, 4, 8),)
    assert sizes_text(view) == "0/8"
    assert sizes_words(view) == "asks 8 pods (min 4): admitted smaller when that is all that fits"
    assert pods_admitted_and_waiting(view) == (0, 8)


def test_finished_or_without_a_minimum_or_a_record_it_has_no_sizes() -> None:
    assert pod_set_sizes(read(job(6, SMALLER, done=True))) == ()
    plain = job(8, None)
    del plain["metadata"]["annotations"][MIN]
    view = read(plain)
    assert (pod_set_sizes(view), sizes_text(view), sizes_words(view)) == ((), "", "")
    assert pods_admitted_and_waiting(view) is None


def torch_job() -> Any:
    """A PyTorchJob of a Master and 3 Workers (minimum 1), admitted at 2 Workers."""
    docs = yaml.safe_load_all(FIXTURES.read_text())
    obj = next(d for d in docs if d and d["metadata"]["name"] == "elastic-resnet")
    specs = obj["spec"]["pytorchReplicaSpecs"]
    specs["Master"] = {**copy.deepcopy(specs["Worker"]), "replicas": 1}
    specs["Worker"]["replicas"] = 2
    obj["metadata"]["annotations"] = {
        RECORD: '{"Worker":{"admitted":2,"asked":3,'
        '"fields":{"spec.pytorchReplicaSpecs.Worker.replicas":3}}}',
        "sluice.dev/admitted-at": "2026-11-23T08:00:00Z",
    }
    obj["spec"]["runPolicy"] = {"suspend": False}
    return obj


def test_a_workload_of_several_pod_sets_names_the_ones_that_resize() -> None:
    view = read(torch_job())
    sizes = {s.pod_set: s for s in pod_set_sizes(view)}
    assert sizes["Master"] == PodSetSize("Master", 1, 1, 1, 0)
    assert sizes["Worker"] == PodSetSize("Worker", 2, 3, 1, 0)
    assert sizes_text(view) == "Worker 2/3"
    assert sizes_words(view) == "admitted Worker 2 of 3 pods (min 1)"
    assert pods_admitted_and_waiting(view) == (3, 0)
