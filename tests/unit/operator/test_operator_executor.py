"""Carrying out a cycle's plan: order, preconditions, repeat-safety, each error class's policy."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from operator_fakes import apply_result, fake_executor, job

from sluice.kube.writer import WRITERS
from sluice.operator import executor as executor_module
from sluice.operator.executor import BACKGROUND_WRITERS
from sluice.operator.plan import plan
from sluice.operator.reason_writes import POSITION_REFRESH
from sluice.operator.writes import basis
from sluice.scheduler.model import CycleResult, Decision, PendingJob

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def result(*decisions: Decision, pending: tuple[PendingJob, ...] = ()) -> CycleResult:
    return CycleResult(queue_order=(), queues={}, decisions=decisions, pending=pending)


def annotations(obj: dict[str, object]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}  # type: ignore[attr-defined,no-any-return]


async def test_victims_are_suspended_before_anything_is_admitted() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "victim")
    cluster.objects["job/ns/victim"]["spec"]["suspend"] = False
    state.on_workload("MODIFIED", dict(cluster.objects["job/ns/victim"]))
    job(cluster, state, "starving")
    done = apply_result(
        executor,
        result(
            Decision("admit", "ns/starving", "a", "fits"),
            Decision("reclaim", "ns/victim", "b", "b over its share", for_job="ns/starving"),
        ),
        NOW,
    )
    assert done
    writes = [key for verb, key in cluster.calls if verb == "patch"]
    assert writes == ["job/ns/victim", "job/ns/starving"]
    victim = cluster.objects["job/ns/victim"]
    assert victim["spec"]["suspend"] is True
    assert annotations(victim)["sluice.dev/reclaimed-by"] == "ns/starving"
    admitted = cluster.objects["job/ns/starving"]
    assert admitted["spec"]["suspend"] is False
    assert annotations(admitted)["sluice.dev/admitted-at"] == "2026-01-01T12:00:00Z"
    assert sorted(e["reason"] for e in cluster.events) == ["Admitted", "Reclaimed"]
    # Every decision is on its Job before any Event is posted about it.
    assert [verb for verb, _ in cluster.calls] == ["patch", "patch", "event", "event"]


async def test_a_victim_that_could_not_be_suspended_defers_every_admission() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "victim")
    job(cluster, state, "starving")
    job(cluster, state, "other")
    cluster.refuse.add("job/ns/victim")
    state.wake.clear()
    done = apply_result(
        executor,
        result(
            Decision("reclaim", "ns/victim", "b", "", for_job="ns/starving"),
            Decision("admit", "ns/starving", "a", ""),
            Decision("admit", "ns/other", "c", ""),
        ),
        NOW,
    )
    assert not done
    assert cluster.objects["job/ns/starving"]["spec"]["suspend"] is True
    assert cluster.objects["job/ns/other"]["spec"]["suspend"] is True
    assert state.wake.is_set()  # the loop decides again on a fresh view


async def test_a_write_based_on_a_stale_view_fails_instead_of_acting() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "j")
    # Someone changed the job after the operator saw it (e.g. it was deleted and recreated).
    cluster.patch("job/ns/j", {"metadata": {"labels": {"x": "y"}}})
    apply_result(executor, result(Decision("admit", "ns/j", "team", "")), NOW)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is True
    assert executor.stats.conflicts == 1
    assert cluster.events == []


async def test_a_job_changed_while_the_cycle_decided_is_not_admitted_as_it_now_is() -> None:
    """The watch may deliver a tenant's change (another queue, a bigger size) while the cycle
    runs: the admission must be conditional on the version the cycle decided on, not on the
    newer one the state holds by the time it is written."""
    executor, cluster, state = fake_executor()
    job(cluster, state, "j")
    decided = {"ns/j": basis(state.workloads["ns/j"])}
    moved = cluster.patch("job/ns/j", {"metadata": {"labels": {"sluice.dev/queue-name": "b"}}})
    state.on_workload("MODIFIED", moved)  # delivered before the write
    apply_result(executor, result(Decision("admit", "ns/j", "a", "")), NOW, decided_on=decided)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is True
    assert executor.stats.conflicts == 1
    grown = cluster.patch("job/ns/j", {"metadata": {"generation": 2}, "spec": {"parallelism": 9}})
    state.on_workload("MODIFIED", grown)
    decided = {"ns/j": (1, "b")}
    apply_result(executor, result(Decision("admit", "ns/j", "b", "")), NOW, decided_on=decided)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is True


async def test_a_status_update_while_the_cycle_decided_does_not_stop_its_decision() -> None:
    """The Job controller rewrites a fresh job's status again and again; a victim chosen on
    the version before must still be suspended."""
    executor, cluster, state = fake_executor()
    job(cluster, state, "j")
    decided = {"ns/j": basis(state.workloads["ns/j"])}
    touched = cluster.patch("job/ns/j", {"status": {"active": 2}})
    state.on_workload("MODIFIED", touched)
    apply_result(executor, result(Decision("admit", "ns/j", "a", "")), NOW, decided_on=decided)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is False


async def test_repeating_a_cycle_after_its_writes_changes_nothing() -> None:
    """The loop remembers what the API server returned, so the same decision on the next
    cycle (before the watch delivers) is refused by the precondition, not applied twice."""
    executor, cluster, state = fake_executor()
    job(cluster, state, "j")
    cycle = result(Decision("admit", "ns/j", "team", ""))
    apply_result(executor, cycle, NOW)
    stored = state.workloads["ns/j"]
    assert stored["spec"]["suspend"] is False  # the cache already reflects the write
    assert (
        stored["metadata"]["resourceVersion"]
        == cluster.objects["job/ns/j"]["metadata"]["resourceVersion"]
    )
    # A watch event older than the write arrives late: it must not undo it.
    state.on_workload(
        "MODIFIED", {**stored, "metadata": {**stored["metadata"], "resourceVersion": "1"}}
    )
    assert state.workloads["ns/j"]["spec"]["suspend"] is False


async def test_a_write_whose_answer_was_lost_is_read_back_before_the_next_decision() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "j")
    job(cluster, state, "gone")
    cluster.lose_answer |= {"job/ns/j", "job/ns/gone"}
    apply_result(
        executor,
        result(Decision("admit", "ns/j", "team", ""), Decision("admit", "ns/gone", "team", "")),
        NOW,
    )
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is False  # it did happen
    assert state.workloads["ns/j"]["spec"]["suspend"] is True  # but the operator cannot know
    assert executor.unsure == {"ns/j", "ns/gone"}
    del cluster.objects["job/ns/gone"]
    assert executor.reread_unsure()
    assert state.workloads["ns/j"]["spec"]["suspend"] is False
    assert "ns/gone" not in state.workloads
    assert executor.unsure == set()


async def test_no_phase_runs_once_the_lease_is_no_longer_held() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "j")
    done = apply_result(
        executor, result(Decision("admit", "ns/j", "team", "")), NOW, may_write=lambda: False
    )
    assert not done and cluster.calls == []


async def test_a_pending_reason_lands_on_the_object_seen_whatever_else_changed_since() -> None:
    """A reason is sluice's own annotation: a status write the operator has not seen yet
    (a controller's) does not make it fail, but it never lands on a job created since
    under the same name."""
    executor, cluster, state = fake_executor()
    job(cluster, state, "j")
    cluster.patch("job/ns/j", {"status": {"conditions": [{"type": "Suspended"}]}})  # unseen
    reason = PendingJob("ns/j", "team", 1, "no node has room")
    apply_result(executor, result(pending=(reason,)), NOW)
    assert annotations(cluster.objects["job/ns/j"])["sluice.dev/pending-reason"] == (
        "position 1 in team; no node has room"
    )
    assert executor.stats.conflicts == 0
    job(cluster, state, "k")
    cluster.objects["job/ns/k"]["metadata"]["uid"] = "uid-k-again"  # deleted, created again
    apply_result(executor, result(pending=(PendingJob("ns/k", "team", 1, "no room"),)), NOW)
    assert "sluice.dev/pending-reason" not in annotations(cluster.objects["job/ns/k"])
    # A decision still rests on the version seen: it fails on the unseen change.
    cluster.patch("job/ns/j", {"status": {"active": 0}})
    apply_result(executor, result(Decision("admit", "ns/j", "team", "")), NOW)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is True


async def test_pending_reason_written_when_it_changes_event_only_when_its_cause_does() -> None:
    executor, cluster, state = fake_executor()
    now = [1000.0]
    executor.clock = lambda: now[0]
    job(cluster, state, "j")

    def split(reason: str) -> tuple[int, str]:
        head, _, cause = reason.partition("; ")
        return int(head.split(" ")[1]), cause

    async def pending(reason: str) -> None:
        apply_result(executor, result(pending=(PendingJob("ns/j", "team", *split(reason)),)), NOW)

    def stored() -> str:
        return annotations(cluster.objects["job/ns/j"])["sluice.dev/pending-reason"]

    await pending("position 3 in team; team would use cpu 6 > capability 4")
    await pending("position 3 in team; team would use cpu 6 > capability 4")
    # Moving up the queue alone is not worth a write per admission ahead of it...
    await pending("position 2 in team; team would use cpu 6 > capability 4")
    assert stored() == "position 3 in team; team would use cpu 6 > capability 4"
    # ...a new cause is written at once, with its Event...
    await pending("position 2 in team; no node has room")
    assert stored() == "position 2 in team; no node has room"
    # ...and the position catches up once the refresh interval has passed.
    await pending("position 1 in team; no node has room")
    assert stored() == "position 2 in team; no node has room"
    now[0] += POSITION_REFRESH
    await pending("position 1 in team; no node has room")
    assert stored() == "position 1 in team; no node has room"
    assert [verb for verb, _ in cluster.calls if verb == "patch"] == ["patch"] * 3
    assert [e["message"] for e in cluster.events] == [
        "position 3 in team; team would use cpu 6 > capability 4",
        "position 2 in team; no node has room",
    ]
    assert {e["reason"] for e in cluster.events} == {"Pending"}
    # An admitted job is forgotten.
    apply_result(executor, result(), NOW)
    assert executor.positions_written == {}


async def test_a_refused_write_does_not_stop_the_rest_of_the_cycle() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "refused")
    job(cluster, state, "fine")
    cluster.refuse.add("job/ns/refused")
    done = apply_result(
        executor,
        result(Decision("admit", "ns/refused", "a", ""), Decision("admit", "ns/fine", "a", "")),
        NOW,
    )
    assert done
    assert cluster.objects["job/ns/fine"]["spec"]["suspend"] is False
    assert executor.unsure == set() and executor.stats.conflicts == 0


async def test_statuses_are_told_once_decisions_are_written_not_after_a_deferral() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "a")
    job(cluster, state, "waiting")
    told: list[list[str]] = []
    cycle = result(
        Decision("admit", "ns/a", "team", ""),
        pending=(PendingJob("ns/waiting", "team", 1, "no node has room"),),
    )
    writes = plan(cycle, state.workloads, state.workload_views, {}, NOW, 0.0, {})
    # Told after the admission, before the pending reason is written.
    assert executor.run(
        writes, lambda: True, lambda: told.append([c for c in cluster.calls if c[0] == "patch"])
    )
    assert told == [[("patch", "job/ns/a")]]
    job(cluster, state, "victim")
    cluster.refuse.add("job/ns/victim")
    deferred = plan(
        result(Decision("reclaim", "ns/victim", "b", "", for_job="ns/waiting")),
        state.workloads,
        state.workload_views,
        {},
        NOW,
        0.0,
        {},
    )
    assert not executor.run(deferred, lambda: True, lambda: told.append([]))
    assert len(told) == 1


async def test_the_full_passs_reasons_are_written_by_no_more_writers_than_it_is_given() -> None:
    """The full pass writes its reasons with few writers (``BACKGROUND_WRITERS``), so the
    API server they keep busy still answers the decisions and the watches promptly."""
    executor, cluster, state = fake_executor()
    for i in range(12):
        job(cluster, state, f"j{i}")
    answer = executor.custom.patch_namespaced_custom_object
    lock = threading.Lock()
    flight = {"now": 0, "most": 0}

    def slow(*args: Any, **kwargs: Any) -> Any:
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        time.sleep(0.02)
        with lock:
            flight["now"] -= 1
        return answer(*args, **kwargs)

    executor.custom.patch_namespaced_custom_object = slow  # type: ignore[method-assign]
    reasons = tuple(PendingJob(f"ns/j{i}", "team", i + 1, "no room") for i in range(12))
    writes = plan(
        result(pending=reasons),
        state.workloads,
        state.workload_views,
        {},
        NOW,
        executor.clock(),
        {},
    )
    assert executor.run(writes, lambda: True, writers=BACKGROUND_WRITERS)
    assert flight["most"] == BACKGROUND_WRITERS < WRITERS
    assert all("sluice.dev/pending-reason" in annotations(cluster.objects[f"job/ns/j{i}"])
               for i in range(12))  # fmt: skip
    flight["most"] = 0
    again = tuple(PendingJob(f"ns/j{i}", "team", i + 1, "no room now") for i in range(12))
    writes = plan(
        result(pending=again), state.workloads, state.workload_views, {}, NOW, executor.clock(), {}
    )
    assert executor.run(writes, lambda: True)
    assert flight["most"] > BACKGROUND_WRITERS  # the decisions' writers, by default


def test_a_phase_hands_its_writes_over_a_window_at_a_time_and_keeps_only_their_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new leader's first full pass writes a reason on every stored job: handed over all at
    once, each answer kept whole to the end of the phase, they were the operator's peak of
    memory (its resident size keeps a peak)."""
    executor, cluster, state = fake_executor()
    for i in range(7):
        job(cluster, state, f"j{i}")
    monkeypatch.setattr(executor_module, "WINDOW", 3)
    handed: list[int] = []
    hand = ThreadPoolExecutor.map

    def counted(pool: ThreadPoolExecutor, fn: Any, *iterables: Any, **kwargs: Any) -> Any:
        items = list(iterables[0])
        handed.append(len(items))
        return hand(pool, fn, items, **kwargs)

    monkeypatch.setattr(ThreadPoolExecutor, "map", counted)
    told: list[dict[str, Any]] = []
    monkeypatch.setattr(executor, "post_event", lambda obj, spec, kind="Job": told.append(obj))
    waiting = tuple(PendingJob(f"ns/j{i}", "team", i + 1, "no room") for i in range(7))
    writes = plan(result(pending=waiting), state.workloads, state.workload_views, {}, NOW, 0.0, {})
    assert executor.run(writes, lambda: True)
    assert handed == [3, 3, 1]
    assert [o["metadata"]["name"] for o in told] == [f"j{i}" for i in range(7)]
    assert all(set(o) == {"apiVersion", "kind", "metadata"} for o in told)
    assert all(set(o["metadata"]) <= {"name", "namespace", "uid", "resourceVersion"} for o in told)


def _counted(name: str, **labels: str) -> float:
    from sluice.operator import metrics

    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_each_decision_is_counted_once_when_it_lands_and_never_when_it_does_not() -> None:
    executor, cluster, state = fake_executor()
    for name in ("victim", "starving", "refused"):
        job(cluster, state, name)
    cluster.objects["job/ns/victim"]["spec"]["suspend"] = False
    state.on_workload("MODIFIED", dict(cluster.objects["job/ns/victim"]))
    cluster.refuse.add("job/ns/refused")
    waits = _counted("sluice_admission_wait_seconds_count", queue="mx-a")
    evictions = _counted("sluice_evictions_total", queue="mx-b", reason="reclaim")
    admits = _counted("sluice_decisions_total", action="admit")
    done = apply_result(
        executor,
        result(
            Decision("reclaim", "ns/victim", "mx-b", "", for_job="ns/starving"),
            Decision("admit", "ns/starving", "mx-a", ""),
            Decision("admit", "ns/refused", "mx-a", ""),
        ),
        NOW,
    )
    assert done
    assert _counted("sluice_evictions_total", queue="mx-b", reason="reclaim") == evictions + 1
    # The refused admission is not counted: only what landed is.
    assert _counted("sluice_admission_wait_seconds_count", queue="mx-a") == waits + 1
    assert _counted("sluice_decisions_total", action="admit") == admits + 1
