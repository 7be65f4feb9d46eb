"""What `sluice job why` says about a pending job after one offline cycle (no cluster needed)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sluice.api.resources import Resources
from sluice.cli.job_report import explain_pending, free_up
from sluice.cli.snapshot_io import Located, build_snapshot
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


def queue(name: str, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {**spec, **({"parent": parent} if parent else {})},
    }


def job(name: str, queue_name: str, cpu: str, minute: int, admitted: bool = False) -> Any:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "labels": {"sluice.dev/queue-name": queue_name},
        "creationTimestamp": f"2026-03-02T08:{minute:02d}:00Z",
    }
    if admitted:
        meta["annotations"] = {"sluice.dev/admitted-at": "2026-03-02T08:30:00Z"}
    containers = [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"suspend": not admitted, "template": {"spec": {"containers": containers}}},
        "status": {"active": 1} if admitted else {},
    }


def node(cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {
            "allocatable": {"cpu": cpu},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def cycle(*objects: dict[str, Any]) -> CycleResult:
    items = [Located(f"object {i}", o) for i, o in enumerate(objects)]
    return run_cycle(build_snapshot(items, NOW).snapshot)


def test_a_job_over_its_queues_capability_names_the_queue_and_the_amount() -> None:
    result = cycle(
        node("16"),
        queue("root"),
        queue("team", capability={"cpu": "3"}),
        job("running", "team", "2", 0, admitted=True),
        job("first", "team", "2", 1),
        job("second", "team", "1500m", 2),
    )
    lines = explain_pending(result, "ns/second", "team", Resources({"cpu": 1500}))
    assert lines[0].startswith("now: position 2 in team; ")
    assert "position 2 of 2 pending in queue team" in lines
    assert "it requests cpu 1500m" in lines
    assert "queue team: cpu 500m must free up (it uses 2 of 3; the job requests 1500m)" in lines


def test_the_limiting_level_is_the_ancestor_that_sets_it() -> None:
    result = cycle(
        node("16"),
        queue("root"),
        queue("dept", capability={"cpu": "4"}),
        queue("team", "dept"),
        job("running", "team", "3", 0, admitted=True),
        job("big", "team", "2", 1),
    )
    assert free_up(result, "team", Resources({"cpu": 2000})) == [
        "queue dept: cpu 1 must free up (it uses 3 of 4; the job requests 2)"
    ]


def test_a_full_cluster_is_what_must_free_up() -> None:
    result = cycle(
        node("4"),
        queue("root"),
        queue("a"),
        job("hog", "a", "3", 0, admitted=True),
        job("wants", "a", "2", 1),
    )
    lines = explain_pending(result, "ns/wants", "a", Resources({"cpu": 2000}))
    assert "cluster: cpu 1 must free up (1 of 4 free; the job requests 2)" in lines


def test_a_job_that_fits_now_says_so() -> None:
    result = cycle(node("4"), queue("root"), queue("a"), job("fresh", "a", "1", 0))
    lines = explain_pending(result, "ns/fresh", "a", Resources({"cpu": 1000}))
    assert len(lines) == 1 and lines[0].startswith("now: it would be admitted this cycle")
