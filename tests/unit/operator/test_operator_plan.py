"""A cycle's result as writes: pure, no client."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sluice.operator.plan import plan
from sluice.operator.reason_writes import POSITION_REFRESH
from sluice.operator.state import ClusterState
from sluice.operator.stored import Packed
from sluice.operator.writes import EventSpec, basis
from sluice.scheduler.model import CycleResult, Decision, PendingJob

NOW = datetime(2026, 1, 1, 12, 0, 0, 500_000, tzinfo=UTC)


def stored(name: str, generation: int = 1, queue: str = "team", **annotations: str) -> Any:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "generation": generation,
            "labels": {"sluice.dev/queue-name": queue},
            "annotations": annotations,
        },
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


def cycle(*decisions: Decision, pending: tuple[PendingJob, ...] = ()) -> CycleResult:
    return CycleResult(queue_order=(), queues={}, decisions=decisions, pending=pending)


def test_victims_and_requeues_come_before_admissions_each_on_what_was_decided() -> None:
    result = cycle(
        Decision("admit", "ns/a", "team", "fits"),
        Decision("reclaim", "ns/v", "other", "other over its share", for_job="ns/a"),
        Decision("requeue", "ns/r", "team", "pod r-0 unschedulable", requeues=2),
    )
    decided = {"ns/a": (1, "team"), "ns/v": (3, "other"), "ns/r": (1, "team")}
    writes = plan(result, {}, {}, decided, NOW, 0.0, {})
    assert [(w.kind, w.workload, w.basis) for w in writes.victims] == [
        ("reclaim", "ns/v", (3, "other")),
        ("requeue", "ns/r", (1, "team")),
    ]
    assert [(w.kind, w.workload, w.basis) for w in writes.admissions] == [
        ("admit", "ns/a", (1, "team"))
    ]
    admit = writes.admissions[0]
    assert admit.patch == {
        "metadata": {
            "annotations": {
                "sluice.dev/admitted-at": "2026-01-01T12:00:00Z",
                "sluice.dev/pending-reason": None,
                "sluice.dev/reclaimed-by": None,
            }
        },
        "spec": {"suspend": False},
    }
    assert admit.event == EventSpec("Admitted", "admitted by queue team: fits")
    victim = writes.victims[0]
    assert victim.patch["spec"] == {"suspend": True}
    assert victim.patch["metadata"]["annotations"]["sluice.dev/reclaimed-by"] == "ns/a"
    assert victim.event == EventSpec("Reclaimed", "other over its share; suspended by sluice")


def test_a_requeue_records_how_often_when_and_why_and_its_event_says_the_same() -> None:
    writes = plan(
        cycle(Decision("requeue", "ns/r", "team", "pod r-0 unschedulable", requeues=1)),
        {},
        {},
        {},
        NOW,
        0.0,
        {},
    )
    (write,) = writes.victims
    notes = write.patch["metadata"]["annotations"]
    assert notes["sluice.dev/requeues"] == "1"
    assert notes["sluice.dev/requeued-at"] == "2026-01-01T12:00:00Z"
    assert notes["sluice.dev/requeue-reason"] == "pod r-0 unschedulable"
    assert notes["sluice.dev/admitted-at"] is None
    assert write.event is not None and write.event.warning
    assert write.event.message == f"suspended by sluice, {notes['sluice.dev/pending-reason']}"
    assert "requeued once" in write.event.message


def test_a_decision_without_what_it_rests_on_has_no_precondition() -> None:
    writes = plan(cycle(Decision("admit", "ns/a", "team")), {}, {}, {}, NOW, 0.0, {})
    assert writes.admissions[0].basis is None


def test_pending_reasons_travel_as_data_and_are_written_only_when_they_change() -> None:
    waiting = PendingJob("ns/j", "team", 3, "team would use cpu 6 > capability 4")
    assert waiting.reason == "position 3 in team; team would use cpu 6 > capability 4"
    state = ClusterState()
    for job in (
        stored("j", **{"sluice.dev/pending-reason": waiting.reason}),
        stored("new"),
        stored("moved", **{"sluice.dev/pending-reason": "position 9 in team; no node has room"}),
        stored("other", **{"sluice.dev/pending-reason": "position 2 in team; no node has room"}),
    ):
        state.on_workload("ADDED", job)
    jobs, views = state.workloads, state.workload_views
    pending = (
        waiting,
        PendingJob("ns/new", "team", 4, "no node has room"),
        PendingJob("ns/moved", "team", 5, "no node has room"),
        PendingJob("ns/other", "team", 2, "waiting behind ns/j"),
        PendingJob("ns/deleted", "team", 6, "no node has room"),
    )
    written = {"ns/moved": 100.0}
    writes = plan(
        cycle(pending=pending), jobs, views, {}, NOW, 100.0 + POSITION_REFRESH - 1, written
    )
    # Unchanged: nothing. New: written with its Event. Position alone, written recently:
    # nothing yet. New cause: written with its Event. Deleted meanwhile: nothing.
    assert [(w.workload, w.event is not None) for w in writes.reasons] == [
        ("ns/new", True),
        ("ns/other", True),
    ]
    assert writes.reasons[0].patch == {
        "metadata": {"annotations": {"sluice.dev/pending-reason": pending[1].reason}}
    }
    assert writes.reasons[0].event == EventSpec("Pending", pending[1].reason, warning=True)
    assert writes.pending == {"ns/j", "ns/new", "ns/moved", "ns/other", "ns/deleted"}
    later = plan(cycle(pending=pending), jobs, views, {}, NOW, 100.0 + POSITION_REFRESH, written)
    moved = [w for w in later.reasons if w.workload == "ns/moved"]
    assert len(moved) == 1 and moved[0].event is None  # the position caught up, no Event


def test_basis_is_the_spec_generation_and_the_queue() -> None:
    assert basis(stored("j", generation=4, queue="b")) == (4, "b")
    assert basis({"metadata": {}}) == (0, "")


def test_the_reasons_of_waiting_jobs_are_worked_out_from_their_views_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full pass plans a reason for every waiting job: parsing each one's stored text for
    it would cost the pass as much again at 100,000 jobs."""
    state = ClusterState()
    for i in range(3):
        state.on_workload("ADDED", stored(f"j{i}"))
    parsed: list[Packed] = []
    parse = Packed.parsed
    monkeypatch.setattr(Packed, "parsed", lambda kept: parsed.append(kept) or parse(kept))
    pending = tuple(PendingJob(f"ns/j{i}", "team", i + 1, "no room") for i in range(3))
    jobs, views = state.workloads, state.workload_views
    writes = plan(cycle(pending=pending), jobs, views, {}, NOW, 0.0, {})
    assert [w.workload for w in writes.reasons] == ["ns/j0", "ns/j1", "ns/j2"]
    assert parsed == []
    writes = plan(cycle(Decision("admit", "ns/j1", "team")), jobs, views, {}, NOW, 0.0, {})
    assert len(writes.admissions) == 1 and len(parsed) == 1  # a decision reads its object
