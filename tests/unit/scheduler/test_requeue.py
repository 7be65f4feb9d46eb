"""Admitted but not running: a job whose pods are not scheduled within podsReadyTimeout gives
its quota back, waits out a back-off, then queues behind the jobs of its priority."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from builders import NOW, T0, gang, node, pod, queue, snapshot

from sluice.api.admitted_size import SizeRecord
from sluice.api.views import JobPhase, PodView, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.model import CycleResult
from sluice.scheduler.readiness import backoff

MESSAGE = "Unschedulable: 0/1 nodes are available: 1 node(s) had untolerated taint {gpu: broken}."
ADMITTED = 3600 - 400  # seconds after T0: 6m40s before NOW


def decisions(result: CycleResult) -> list[tuple[str, str]]:
    return [(d.action, d.job.split("/")[1]) for d in result.decisions]


def reason(result: CycleResult, job: str) -> str:
    return next(p.reason for p in result.pending if p.job == f"ns/{job}")


def stuck(pods_created: int = ADMITTED) -> tuple[WorkloadView, list[PodView]]:
    """An admitted job, one pod running and one kube-scheduler could not place."""
    train = gang("train", "q", 2, cpu=2, phase=JobPhase.INQUEUE, admitted=ADMITTED)
    pods = [
        pod("train-a", "n1", owner=train, created=pods_created),
        pod("train-b", None, owner=train, created=pods_created, unschedulable=MESSAGE),
    ]
    return train, pods


def test_a_job_whose_pods_are_not_scheduled_in_time_is_requeued_saying_which_and_why() -> None:
    train, pods = stuck()
    waiting = gang("next", "q", 1, cpu=2, created=5)
    result = run_cycle(snapshot([queue("q")], [train, waiting], [node(cpu=4)], pods=pods))
    assert decisions(result) == [("requeue", "train"), ("admit", "next")]
    requeue = result.decisions[0]
    assert requeue.requeues == 1
    assert requeue.reason == f"1 of its pods not scheduled within 5m: train-b ({MESSAGE})"
    assert reason(result, "train") == (
        "position 1 in q; requeued once, waits until 2026-01-01T01:01:00Z: " + requeue.reason
    )


def test_within_the_timeout_it_keeps_its_quota() -> None:
    train, pods = stuck(pods_created=3600 - 120)  # the waiting pod is two minutes old
    result = run_cycle(snapshot([queue("q")], [train], [node(cpu=4)], pods=pods))
    assert decisions(result) == []


def test_the_timeout_is_configured_and_zero_turns_it_off() -> None:
    train, pods = stuck(pods_created=3600 - 120)
    quick = run_cycle(
        snapshot([queue("q")], [train], [node(cpu=4)], pods=pods, config={"podsReadyTimeout": "1m"})
    )
    assert decisions(quick) == [("requeue", "train")]
    assert quick.decisions[0].reason.startswith("1 of its pods not scheduled within 1m:")
    train, pods = stuck()
    never = run_cycle(
        snapshot([queue("q")], [train], [node(cpu=4)], pods=pods, config={"podsReadyTimeout": "0"})
    )
    assert decisions(never) == []


def test_without_pods_in_the_snapshot_nothing_is_requeued() -> None:
    train, _ = stuck()
    result = run_cycle(snapshot([queue("q")], [train], [node(cpu=4)], pods=None))
    assert decisions(result) == []


def test_a_job_given_no_pod_since_its_admission_is_requeued() -> None:
    train = gang("train", "q", 1, cpu=2, phase=JobPhase.INQUEUE, admitted=ADMITTED)
    old = pod("train-old", None, owner=train, created=0, finished=True)  # of an earlier run
    result = run_cycle(snapshot([queue("q")], [train], [node(cpu=4)], pods=[old]))
    assert decisions(result) == [("requeue", "train")]
    assert result.decisions[0].reason == "no pod of it was created within 5m of its admission"


def test_running_pods_and_ones_being_deleted_do_not_count_as_waiting() -> None:
    train = gang("train", "q", 2, cpu=2, phase=JobPhase.RUNNING, admitted=0)
    pods = [
        pod("train-a", "n1", owner=train),
        pod("train-b", "n1", owner=train),
        pod("train-c", None, owner=train, terminating=True),
    ]
    result = run_cycle(snapshot([queue("q")], [train], [node(cpu=4)], pods=pods))
    assert decisions(result) == []


def test_pods_that_lose_their_node_later_get_the_timeout_again_from_their_creation() -> None:
    """Running for an hour, then its node is tainted: the new pods wait from their creation."""
    train = gang("train", "q", 1, cpu=2, phase=JobPhase.RUNNING, admitted=0)
    fresh = [pod("train-new", None, owner=train, created=3600 - 60, unschedulable=MESSAGE)]
    assert decisions(run_cycle(snapshot([queue("q")], [train], [node(cpu=4)], pods=fresh))) == []
    later = snapshot(
        [queue("q")], [train], [node(cpu=4)], pods=fresh, now=NOW + timedelta(minutes=5)
    )
    assert decisions(run_cycle(later)) == [("requeue", "train")]


def test_the_back_off_doubles_up_to_an_hour() -> None:
    assert [backoff(n) for n in (1, 2, 3, 6, 7, 30)] == [
        timedelta(minutes=1),
        timedelta(minutes=2),
        timedelta(minutes=4),
        timedelta(minutes=32),
        timedelta(hours=1),
        timedelta(hours=1),
    ]


@pytest.mark.parametrize(
    ("requeues", "ago", "until"),
    [(1, 30, "01:00:30"), (3, 180, "01:01:00"), (1, 61, None)],
)
def test_a_requeued_job_waits_out_its_back_off(requeues: int, ago: int, until: str | None) -> None:
    job = replace(
        gang("train", "q", 1, cpu=2, created=0),
        requeues=requeues,
        requeued_at=NOW - timedelta(seconds=ago),
        requeue_reason="1 of its pods not scheduled within 5m: train-b (...)",
    )
    result = run_cycle(snapshot([queue("q")], [job], [node(cpu=4)], pods=[]))
    if until is None:
        assert decisions(result) == [("admit", "train")]
        return
    assert decisions(result) == []
    times = "once" if requeues == 1 else f"{requeues} times"
    assert reason(result, "train") == (
        f"position 1 in q; requeued {times}, waits until 2026-01-01T{until}Z:"
        " 1 of its pods not scheduled within 5m: train-b (...)"
    )


def test_a_job_backing_off_does_not_hold_up_a_fifo_queue() -> None:
    resting = replace(
        gang("first", "q", 1, cpu=2, created=0), requeues=1, requeued_at=NOW, requeue_reason="x"
    )
    result = run_cycle(
        snapshot(
            [queue("q", dequeue="fifo")],
            [resting, gang("second", "q", 1, cpu=2, created=1)],
            [node(cpu=4)],
            pods=[],
        )
    )
    assert decisions(result) == [("admit", "second")]


def test_once_its_back_off_is_over_it_queues_behind_the_jobs_of_its_priority() -> None:
    requeued = replace(
        gang("requeued", "q", 1, cpu=4, created=0, priority_class="high"),
        requeues=1,
        requeued_at=T0 + timedelta(minutes=30),
    )
    jobs = [
        requeued,
        gang("older-high", "q", 1, cpu=4, created=60, priority_class="high"),
        gang("low", "q", 1, cpu=4, created=1, priority_class="low"),
    ]
    result = run_cycle(
        snapshot(
            [queue("q")],
            jobs,
            [node(cpu=4)],
            pods=[],
            config={"actions": "enqueue"},
            priority_classes={"high": 10, "low": 1},
        )
    )
    # older-high was created after requeued, but was waiting before it was requeued.
    assert decisions(result) == [("admit", "older-high")]
    assert [p.job for p in result.pending] == ["ns/requeued", "ns/low"]


def test_simulate_applies_a_requeue_like_the_operator_writes_it() -> None:
    train, pods = stuck()
    snap = snapshot([queue("q")], [train], [node(cpu=4)], pods=pods)
    result = run_cycle(snap)
    after = apply_decisions(snap, result, NOW)
    view = next(j for j in after.workloads if j.name == "train")
    assert view.phase is JobPhase.PENDING and view.admitted_at is None
    assert view.requeues == 1 and view.requeued_at == NOW
    assert view.requeue_reason == result.decisions[0].reason
    assert after.pods == []  # the Job controller deletes a suspended job's pods
    again = run_cycle(after)
    assert decisions(again) == []  # backing off
    assert "requeued once" in reason(again, "train")


def test_a_pod_that_ran_since_admission_counts_as_one_created_while_the_next_is_made() -> None:
    """One pod at a time: between the first succeeding and the Job controller creating the
    next, the job has no pod waiting and one that ran since its admission."""
    train = gang("train", "q", 1, cpu=2, phase=JobPhase.INQUEUE, admitted=ADMITTED)
    done = pod("train-a", "n1", owner=train, finished=True)
    result = run_cycle(snapshot([queue("q")], [train], [node(cpu=4)], pods=[done]))
    assert decisions(result) == []


def test_the_gated_pods_of_a_workload_with_a_size_record_are_its_growth_not_late() -> None:
    # docs/elastic.md, *Timeouts and shrinking*: they wait for the queue, not for a node.
    train, (running, late) = stuck()
    gated = [running, replace(late, gated=True)]
    sized = replace(train, sized=(SizeRecord("main", 2, 1),))
    result = run_cycle(snapshot([queue("q")], [sized], [node(cpu=4)], pods=gated))
    assert decisions(result) == [("admit", "train (growth)")]  # its growth, nothing requeued
    result = run_cycle(snapshot([queue("q")], [train], [node(cpu=4)], pods=gated))
    assert decisions(result) == [("requeue", "train")]  # any other workload's are late
