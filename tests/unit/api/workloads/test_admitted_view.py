"""A workload sluice admitted smaller, as the scheduler reads it (docs/elastic.md, *Admitted
smaller*): while admitted it counts at its admitted size; waiting again, at the size it asked
until the operator has put it back, unless its owner changed it since."""

from __future__ import annotations

from typing import Any

from sluice.api.admitted_size import SizeRecord
from sluice.api.constants import ADMITTED_SIZE_ANNOTATION as RECORD
from sluice.api.constants import MIN_PARALLELISM_ANNOTATION as MIN
from sluice.api.views import WorkloadView
from sluice.api.workloads import workload_from_object

LOWERED = '{"main":{"admitted":6,"asked":8,"fields":{"spec.parallelism":8}}}'


def job(parallelism: int, *, suspended: bool, record: str | None = LOWERED) -> dict[str, Any]:
    annotations = {MIN: "4"} if record is None else {MIN: "4", RECORD: record}
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
            "suspend": suspended,
            "parallelism": parallelism,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }


def read(obj: dict[str, Any]) -> WorkloadView:
    workload = workload_from_object(obj)
    assert workload is not None
    return workload


def test_admitted_smaller_it_counts_at_its_admitted_size() -> None:
    view = read(job(6, suspended=False))
    assert (view.pod_sets[0].count, view.pod_sets[0].min_count) == (6, 4)
    assert view.request.get_amount("cpu") == 6000
    assert view.sized == (SizeRecord("main", 8, 6, (("spec.parallelism", 8),)),)


def test_waiting_again_it_asks_its_whole_size_before_it_is_put_back() -> None:
    view = read(job(6, suspended=True))
    assert (view.pod_sets[0].count, view.pod_sets[0].min_count) == (8, 4)
    assert view.pod_sets[0].pod_count == 8
    assert view.request.get_amount("cpu") == 8000


def test_a_size_its_owner_changed_is_its_own() -> None:
    view = read(job(5, suspended=True))
    assert view.pod_sets[0].count == 5
    assert view.request.get_amount("cpu") == 5000


def test_without_a_record_the_spec_is_the_size() -> None:
    view = read(job(6, suspended=True, record=None))
    assert view.pod_sets[0].count == 6
    assert view.sized == ()
