"""preemptionPolicy: Never — a job whose pods may not preempt never reclaims or preempts; it
waits for room, and the next job that may take room back still does."""

from __future__ import annotations

from dataclasses import replace

from builders import job, node, queue, running, snapshot

from sluice.api.views import PriorityClassView, priority_class_from_object
from sluice.api.workloads.job import JOB
from sluice.operator.state import ClusterState
from sluice.scheduler.actions.outcome import FREED_AFTER_ITS_TURN, WAITS_FOR_ROOM
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult, Snapshot

POLITE = PriorityClassView("polite", 0, never_preempts=True)
URGENT_BUT_POLITE = PriorityClassView("urgent-polite", 100, never_preempts=True)
URGENT = PriorityClassView("urgent", 100)


def decisions(result: CycleResult) -> list[tuple[str, str]]:
    return [(d.action, d.job) for d in result.decisions]


def reasons(result: CycleResult) -> dict[str, str]:
    return {p.job: p.reason for p in result.pending}


def with_classes(snap: Snapshot, *classes: PriorityClassView) -> Snapshot:
    return replace(snap, priority_classes=classes)


def borrowed(*pending: object, dequeue: str = "traverse") -> Snapshot:
    """b borrowed the whole cluster; a deserves half of it and waits."""
    queues = [queue("a", dequeue=dequeue), queue("b")]
    jobs = [running("b1", "b", cpu=2, admitted=10), running("b2", "b", cpu=2, admitted=20)]
    return snapshot(queues, [*pending, *jobs], [node(cpu=4)])  # type: ignore[list-item]


def test_a_never_job_does_not_reclaim_and_the_next_job_that_may_does() -> None:
    snap = borrowed(
        job("polite", "a", cpu=2, created=1, priority_class="polite"),
        job("eager", "a", cpu=2, created=2),
    )
    result = run_cycle(with_classes(snap, POLITE))
    assert decisions(result) == [("reclaim", "ns/b2"), ("admit", "ns/eager")]
    assert reasons(result)["ns/polite"] == (
        f"position 1 in a; cluster has cpu 0 free, job requests cpu 2; {WAITS_FOR_ROOM}"
    )


def test_a_job_passed_over_whose_pods_fit_in_the_room_taken_back_later_is_told_so() -> None:
    """The cluster has cpu 2 free, 1 on each of two nodes: no node holds the polite job's pod
    at its turn. The eager job reclaims b3 (3) on n3 and takes 2 of it, so the room the cycle
    leaves holds the polite job's pod; its reason says why it waits all the same, not that
    "only 1 of its 1 pods" fit."""
    queues = [queue("a"), queue("b")]
    victims = [running(f"b{i}", "b", cpu=c, admitted=10 + i) for i, c in ((1, 4), (2, 3), (3, 3))]
    jobs = [
        job("polite", "a", cpu=2, created=1, priority_class="polite"),
        job("eager", "a", cpu=2, created=2),
        *victims,
    ]
    nodes = [node(name, cpu=4) for name in ("n1", "n2", "n3")]
    snap = snapshot(queues, jobs, nodes, config={"podsReadyTimeout": "0"})
    result = run_cycle(with_classes(snap, POLITE))
    assert decisions(result) == [("reclaim", "ns/b3"), ("admit", "ns/eager")]
    assert reasons(result)["ns/polite"] == (
        f"position 1 in a; {FREED_AFTER_ITS_TURN}; {WAITS_FOR_ROOM}"
    )


def test_without_never_the_first_job_reclaims() -> None:
    snap = borrowed(
        job("polite", "a", cpu=2, created=1, priority_class="polite"),
        job("eager", "a", cpu=2, created=2),
    )
    result = run_cycle(with_classes(snap, replace(POLITE, never_preempts=False)))
    assert decisions(result) == [("reclaim", "ns/b2"), ("admit", "ns/polite")]


def test_a_fifo_queue_keeps_its_later_jobs_behind_a_never_head() -> None:
    snap = borrowed(
        job("polite", "a", cpu=2, created=1, priority_class="polite"),
        job("eager", "a", cpu=2, created=2),
        dequeue="fifo",
    )
    result = run_cycle(with_classes(snap, POLITE))
    assert result.decisions == ()
    assert "waiting behind ns/polite" in reasons(result)["ns/eager"]


def test_a_never_job_does_not_preempt_inside_its_queue_and_the_next_one_may() -> None:
    config = {"actions": "enqueue, allocate, preempt"}
    jobs = [
        running("low", "q", cpu=4, admitted=5),
        job("polite", "q", cpu=4, created=1, priority_class="urgent-polite"),
        job("eager", "q", cpu=4, created=2, priority_class="urgent"),
    ]
    snap = snapshot([queue("q")], jobs, [node(cpu=4)], config=config)
    result = run_cycle(with_classes(snap, URGENT_BUT_POLITE, URGENT))
    assert decisions(result) == [("preempt", "ns/low"), ("admit", "ns/eager")]
    assert reasons(result)["ns/polite"].endswith(WAITS_FOR_ROOM)


def test_never_comes_from_the_template_the_queues_class_or_the_global_default() -> None:
    from_template = replace(job("polite", "a", cpu=2, created=1), never_preempts=True)
    result = run_cycle(borrowed(from_template))
    assert result.decisions == ()
    # The queue's priorityClassName, which the webhook copies into jobs that name none.
    queues = [queue("a", priority_class_name="polite"), queue("b")]
    jobs = [job("p", "a", cpu=2), running("b1", "b", cpu=2), running("b2", "b", cpu=2)]
    result = run_cycle(with_classes(snapshot(queues, jobs, [node(cpu=4)]), POLITE))
    assert result.decisions == ()
    # The global default, for a job and a queue that name no class.
    default = PriorityClassView("cluster-default", 0, global_default=True, never_preempts=True)
    result = run_cycle(with_classes(borrowed(job("p", "a", cpu=2)), default))
    assert result.decisions == ()
    # A class of its own that may preempt overrides a Never default.
    mine = job("p", "a", cpu=2, priority_class="urgent")
    result = run_cycle(with_classes(borrowed(mine), default, URGENT))
    assert decisions(result)[-1] == ("admit", "ns/p")


def test_the_policy_is_read_from_priority_classes_and_pod_templates() -> None:
    cls = {"metadata": {"name": "polite"}, "value": 5, "preemptionPolicy": "Never"}
    assert priority_class_from_object(cls).never_preempts
    other = {"metadata": {"name": "x"}, "value": 5, "preemptionPolicy": "PreemptLowerPriority"}
    assert not priority_class_from_object(other).never_preempts
    body = {
        "metadata": {"name": "j", "namespace": "ns", "labels": {"sluice.dev/queue-name": "a"}},
        "spec": {"suspend": True, "template": {"spec": {"preemptionPolicy": "Never"}}},
    }
    view = JOB.view(body)
    assert view is not None and view.never_preempts
    # The operator's snapshot carries the class as its watch stored it.
    state = ClusterState()
    state.on_priority_class("ADDED", cls)
    (seen,) = state.snapshot(snapshot([], [], []).now, 5).snapshot.priority_classes
    assert seen.never_preempts
