"""A workload admitted smaller, as the plan writes it (docs/elastic.md, *Admitted smaller*):
its size lowered and recorded in the write that releases it, and the size it asked put back
once it waits again, in the write of its pending reason."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sluice.api.resources import EMPTY
from sluice.api.views import PodView, WorkloadView
from sluice.operator.plan import plan, written_on
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


def test_a_resizable_job_released_whole_is_recorded_whole() -> None:
    # The decision of a resizable workload admitted whole carries its sizes, equal.
    decision = admit((("main", 8, 8),))
    (write,) = plan(cycle(decision), *as_stored(job(True, 8)), {}, NOW, 0.0, {}).admissions
    assert write.patch["spec"] == {"suspend": False}
    assert json.loads(write.patch["metadata"]["annotations"][RECORD]) == {
        "main": {"admitted": 8, "asked": 8, "fields": {}}
    }


def test_an_admitted_growth_raises_the_record_of_its_workload() -> None:
    # Running at 6 of 8, raised to 10 by its owner: its growth of 4 is admitted.
    grown = Decision(
        "admit", "ns/train (growth)", "team", "allocate: fits", sizes=(("main", 10, 10),)
    )
    stored = as_stored(job(False, 10, **{RECORD: LOWERED}))
    (write,) = plan(cycle(grown), *stored, {"ns/train": (4, "team")}, NOW, 0.0, {}).admissions
    assert write.workload == "ns/train"
    assert write.basis == (4, "team")  # void once its size changed again
    assert write.decision == grown
    assert write.patch == {
        "metadata": {
            "annotations": {
                RECORD: '{"main":{"admitted":10,"asked":10,"fields":{"spec.parallelism":8}}}',
                "sluice.dev/pending-reason": None,  # its growth no longer waits
            }
        }
    }


GROWTH_WAITS = "growth of 4 pods waiting: position 1 in team; queue team has no room"


def test_a_waiting_growth_says_why_on_its_workload() -> None:
    # Running at 6 of 8, raised to 10: its 4 pods beyond the record wait in its queue.
    waiting = PendingJob("ns/train (growth)", "team", 1, "queue team has no room")
    stored = as_stored(job(False, 10, **{RECORD: LOWERED}))
    result = plan(cycle(pending=(waiting,)), *stored, {}, NOW, 0.0, {})
    (write,) = result.reasons
    assert (write.kind, write.workload, write.basis) == ("reason", "ns/train", None)
    assert write.patch == {"metadata": {"annotations": {"sluice.dev/pending-reason": GROWTH_WAITS}}}
    assert write.event is not None and write.event.message == GROWTH_WAITS
    assert result.pending is not None and "ns/train" in result.pending  # its pacing is kept
    # Written once: the same reason again writes nothing, a new position alone is paced.
    said = as_stored(job(False, 10, **{RECORD: LOWERED, "sluice.dev/pending-reason": GROWTH_WAITS}))
    assert plan(cycle(pending=(waiting,)), *said, {}, NOW, 0.0, {}).reasons == ()
    second = PendingJob("ns/train (growth)", "team", 2, "queue team has no room")
    assert plan(cycle(pending=(second,)), *said, {}, NOW, 5.0, {"ns/train": 0.0}).reasons == ()
    (moved,) = plan(cycle(pending=(second,)), *said, {}, NOW, 60.0, {"ns/train": 0.0}).reasons
    assert moved.event is None  # the same cause: no new Event


def test_a_growth_reason_goes_once_its_growth_no_longer_waits() -> None:
    said = as_stored(job(False, 8, **{RECORD: LOWERED, "sluice.dev/pending-reason": GROWTH_WAITS}))
    assert plan(cycle(), *said, {}, NOW, 0.0, {}, explains=False).reasons == ()  # decision pass
    (write,) = plan(cycle(), *said, {}, NOW, 0.0, {}).reasons
    assert (write.workload, write.event) == ("ns/train", None)
    assert write.patch == {"metadata": {"annotations": {"sluice.dev/pending-reason": None}}}
    # A plain pending reason of an admitted workload is not a growth's: left alone.
    other = as_stored(job(False, 8, **{RECORD: LOWERED, "sluice.dev/pending-reason": "x"}))
    assert plan(cycle(), *other, {}, NOW, 0.0, {}).reasons == ()


def test_a_growth_rests_on_the_spec_of_the_workload_it_grows() -> None:
    # The passes take each decision's basis from the workload it is written on.
    assert written_on(Decision("admit", "ns/train (growth)", "team")) == "ns/train"
    assert written_on(Decision("admit", "ns/train", "team")) == "ns/train"


def test_the_gates_a_cycle_releases_are_removed_where_the_cycle_saw_them() -> None:
    gated = PodView("ns", "train-x", EMPTY, gated=True, gate_index=1, uid="u1")
    result = CycleResult(queue_order=(), queues={}, releases=(("ns/train", (gated,)),))
    (write,) = plan(result, *as_stored(job(False, 8)), {}, NOW, 0.0, {}).admissions
    assert (write.workload, write.decision, write.event) == ("ns/train", None, None)
    assert write.pods is not None
    (change,) = write.pods
    assert (change.pod, change.uid) == ("ns/train-x", "u1")
    assert change.patch == [
        {"op": "test", "path": "/spec/schedulingGates/1/name", "value": "sluice.dev/admission"},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]


def shrink(sizes: tuple[tuple[str, int, int], ...]) -> Decision:
    return Decision(
        "reclaim", "ns/train", "team", "reclaimed for ns/a1 of queue a above its minimum",
        for_job="ns/a1", sizes=sizes,
    )  # fmt: skip


def test_a_shrink_lowers_the_size_and_the_record_and_the_job_keeps_running() -> None:
    # Admitted whole at 8 (minimum 4): reclaim takes 2 of its pods above its minimum.
    whole = '{"main":{"admitted":8,"asked":8,"fields":{}}}'
    stored = as_stored(job(False, 8, **{RECORD: whole}))
    (write,) = plan(cycle(shrink((("main", 8, 6),))), *stored, {"ns/train": (3, "team")},
                    NOW, 0.0, {}).victims  # fmt: skip
    assert (write.kind, write.workload, write.basis) == ("reclaim", "ns/train", (3, "team"))
    assert write.patch["spec"] == {"parallelism": 6}  # no suspend: it runs on
    assert json.loads(write.patch["metadata"]["annotations"][RECORD]) == {
        "main": {"admitted": 6, "asked": 8, "fields": {"spec.parallelism": 8}}
    }
    assert write.patch["metadata"]["annotations"]["sluice.dev/pending-reason"] is None
    assert set(write.patch["metadata"]["annotations"]) == {RECORD, "sluice.dev/pending-reason"}
    assert write.event is not None and write.event.reason == "Reclaimed"
    assert "its size lowered by sluice" in write.event.message


def test_a_shrink_keeps_what_the_first_admission_lowered() -> None:
    # Admitted at 6 of 8, shrunk to 5: a requeue still puts back the 8 it asked.
    stored = as_stored(job(False, 6, **{RECORD: LOWERED}))
    (write,) = plan(cycle(shrink((("main", 8, 5),))), *stored, {}, NOW, 0.0, {}).victims
    assert write.patch["spec"] == {"parallelism": 5}
    assert json.loads(write.patch["metadata"]["annotations"][RECORD]) == {
        "main": {"admitted": 5, "asked": 8, "fields": {"spec.parallelism": 8}}
    }
    # Suspended later, it waits for all 8 again.
    waiting = PendingJob("ns/train", "team", 1, "x")
    restored = job(True, 5, **{RECORD: write.patch["metadata"]["annotations"][RECORD]})
    (reason,) = plan(cycle(pending=(waiting,)), *as_stored(restored), {}, NOW, 0.0, {}).reasons
    assert reason.patch["spec"] == {"parallelism": 8}
