"""Queue states and lifecycle actions as the cycle reports them."""

from __future__ import annotations

from builders import job, node, queue, running, snapshot

from sluice.api.views import JobPhase
from sluice.scheduler.cycle import run_cycle


def test_closing_until_the_last_job_finishes_then_closed() -> None:
    queues = [queue("q", state="Closed")]
    busy = run_cycle(snapshot(queues, [running("r", "q")], [node(cpu=4)]))
    assert busy.queues["q"].state == "Closing"
    done = run_cycle(snapshot(queues, [job("r", "q", phase=JobPhase.COMPLETED)], [node(cpu=4)]))
    assert done.queues["q"].state == "Closed"
    assert done.queues["q"].completed == 1


def test_a_closed_parent_is_closing_while_its_subtree_has_work() -> None:
    """Its children are still Open (the cascade that closes them is the Queue reconciler's): they
    count as closing, and the one with a running job holds its parent Closing."""
    queues = [queue("dept", state="Closed"), queue("a", "dept"), queue("b", "dept")]
    result = run_cycle(snapshot(queues, [running("r", "a")], [node(cpu=4)]))
    assert result.queues["dept"].state == "Closing"
    assert result.queues["a"].state == "Closing"
    assert result.queues["b"].state == "Closed"


def test_a_closing_queue_still_schedules_its_jobs() -> None:
    queues = [queue("q", state="Closed")]
    result = run_cycle(snapshot(queues, [job("p", "q")], [node(cpu=4)]))
    assert [d.job for d in result.decisions] == ["ns/p"]


def test_parent_counts_are_the_sum_of_the_subtree() -> None:
    queues = [queue("dept"), queue("a", "dept"), queue("b", "dept")]
    jobs = [running("r", "a"), job("p", "b", cpu=10), job("c", "a", phase=JobPhase.COMPLETED)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=4)]))
    dept = result.queues["dept"]
    assert (dept.pending, dept.running, dept.completed) == (1, 1, 1)


def test_a_cycle_without_root_schedules_under_an_implied_one() -> None:
    from sluice.scheduler.model import Snapshot

    base = snapshot([queue("a")], [job("j", "a", cpu=1)], [node(cpu=1)])
    snap = Snapshot(
        queues=[q for q in base.queues if q.name != "root"],
        workloads=base.workloads,
        nodes=base.nodes,
        now=base.now,
    )
    result = run_cycle(snap)
    assert [d.job for d in result.decisions if d.action == "admit"] == ["ns/j"]
    assert result.queues["a"].parent == "root"
