"""A workload admitted smaller, as the plan writes it (docs/elastic.md, *Admitted smaller*):
its size lowered and recorded in the write that releases it, and the size it asked put back
once it waits again, in the write of its pending reason."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sluice.api.views import WorkloadView
from sluice.operator.plan import plan
from sluice.operator.state import ClusterState
from sluice.scheduler.model import CycleResult, Decision, PendingJob

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
RECORD = "sluice.dev/admitted-size"
LOWERED = '{"main":{"admitted":6,"asked":8,"fields":{"spec.parallelism":8}}}'
RACK = "example.com/rack"


def job(suspend: bool, parallelism: int, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "generation": 3,
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": {"sluice.dev/min-parallelism": "4", **annotations},
        },
        "spec": {
            "suspend": suspend,
            "parallelism": parallelism,
            "template": {"spec": {"containers": [{"name": "c"}]}},
        },
    }


def cycle(*decisions: Decision, pending: tuple[PendingJob, ...] = ()) -> CycleResult:
    return CycleResult(queue_order=(), queues={}, decisions=decisions, pending=pending)


def as_stored(obj: dict[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, WorkloadView]]:
    state = ClusterState()
    state.on_workload("ADDED", obj)
    return state.workloads, state.workload_views


def admit(sizes: tuple[tuple[str, int, int], ...], domain: str = "") -> Decision:
    return Decision("admit", "ns/train", "team", "allocate: admitted", domain=domain, sizes=sizes)


def test_the_release_lowers_the_size_and_records_it() -> None:
    decision = admit((("main", 8, 6),))
    (write,) = plan(cycle(decision), *as_stored(job(True, 8)), {}, NOW, 0.0, {}).admissions
    assert write.patch["spec"] == {"suspend": False, "parallelism": 6}
    assert json.loads(write.patch["metadata"]["annotations"][RECORD]) == json.loads(LOWERED)


def test_a_release_into_a_domain_carries_both() -> None:
    decision = admit((("main", 8, 6),), domain=f"{RACK}=r3")
    (write,) = plan(cycle(decision), *as_stored(job(True, 8)), {}, NOW, 0.0, {}).admissions
    assert write.patch["spec"] == {
        "suspend": False,
        "parallelism": 6,
        "template": {"spec": {"nodeSelector": {RACK: "r3"}}},
    }
    assert RECORD in write.patch["metadata"]["annotations"]


def test_a_whole_release_writes_no_size() -> None:
    (write,) = plan(cycle(admit(())), *as_stored(job(True, 8)), {}, NOW, 0.0, {}).admissions
    assert write.patch["spec"] == {"suspend": False}
    assert RECORD not in write.patch["metadata"]["annotations"]


def test_waiting_again_it_gets_its_size_back_with_its_pending_reason() -> None:
    waiting = PendingJob("ns/train", "team", 1, "team would use cpu 8 > capability 3")
    stored = job(True, 6, **{RECORD: LOWERED})
    (write,) = plan(cycle(pending=(waiting,)), *as_stored(stored), {}, NOW, 0.0, {}).reasons
    assert (write.kind, write.basis) == ("reason", (3, "team"))
    assert write.patch["spec"] == {"parallelism": 8}
    assert write.patch["metadata"]["annotations"] == {
        "sluice.dev/pending-reason": "position 1 in team; team would use cpu 8 > capability 3",
        RECORD: None,
    }


def test_released_again_before_its_restore_landed_it_is_sized_from_what_it_asked() -> None:
    stored = as_stored(job(True, 6, **{RECORD: LOWERED}))
    (write,) = plan(cycle(admit((("main", 8, 5),))), *stored, {}, NOW, 0.0, {}).admissions
    assert write.patch["spec"] == {"suspend": False, "parallelism": 5}
    assert json.loads(write.patch["metadata"]["annotations"][RECORD]) == {
        "main": {"admitted": 5, "asked": 8, "fields": {"spec.parallelism": 8}}
    }
    (whole,) = plan(cycle(admit(())), *stored, {}, NOW, 0.0, {}).admissions
    assert whole.patch["spec"] == {"suspend": False, "parallelism": 8}
    assert whole.patch["metadata"]["annotations"][RECORD] is None


def test_while_it_runs_nothing_is_put_back() -> None:
    waiting = PendingJob("ns/train", "team", 1, "x")
    stored = job(False, 6, **{RECORD: LOWERED})
    writes = plan(cycle(pending=(waiting,)), *as_stored(stored), {}, NOW, 0.0, {}).reasons
    assert all("spec" not in w.patch for w in writes)
