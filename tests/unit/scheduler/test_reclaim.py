"""reclaim between queues (seeds 003 and 004) and preempt within one queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from builders import NOW, T0, job, node, queue, running, snapshot

from sluice.scheduler.cycle import run_cycle


def decisions(result: object) -> list[tuple[str, str]]:
    return [(d.action, d.job) for d in result.decisions]  # type: ignore[attr-defined]


def family() -> list:
    """root -> d1 (a, b), d2 (c): a is starving, b (sibling) and c (cousin) are over."""
    return [queue("d1"), queue("d2"), queue("a", "d1"), queue("b", "d1"), queue("c", "d2")]


def busy() -> list:
    return [
        running("b1", "b", cpu=3, admitted=10),
        running("b2", "b", cpu=3, admitted=20),
        running("c1", "c", cpu=3, admitted=30),
        running("c2", "c", cpu=3, admitted=40),
    ]


def test_reclaim_from_the_sibling_before_the_cousin() -> None:
    result = run_cycle(snapshot(family(), [job("a1", "a", cpu=3), *busy()], [node(cpu=12)]))
    assert decisions(result) == [("reclaim", "ns/b2"), ("admit", "ns/a1")]
    victim = result.decisions[0]
    assert victim.for_job == "ns/a1" and victim.queue == "b"
    assert result.queues["a"].inqueue == 1 and result.queues["b"].pending == 1


def test_the_most_recently_admitted_job_goes_first() -> None:
    jobs = [job("a1", "a", cpu=3), *busy()]
    result = run_cycle(snapshot(family(), jobs, [node(cpu=12)]))
    assert result.decisions[0].job == "ns/b2"  # admitted at 20, after b1 at 10


@pytest.mark.parametrize(
    ("created", "victim"),
    [((0, 5), "ns/b2"), ((5, 0), "ns/b1"), ((0, 0), "ns/b1")],
)
def test_victims_admitted_together_go_newest_created_first_then_by_name(
    created: tuple[int, int], victim: str
) -> None:
    jobs = [
        job("a1", "a", cpu=3),
        running("b1", "b", cpu=3, admitted=20, created=created[0]),
        running("b2", "b", cpu=3, admitted=20, created=created[1]),
        running("c1", "c", cpu=3, admitted=30),
        running("c2", "c", cpu=3, admitted=40),
    ]
    result = run_cycle(snapshot(family(), jobs, [node(cpu=12)]))
    assert decisions(result) == [("reclaim", victim), ("admit", "ns/a1")]


@pytest.mark.parametrize(("created", "victim"), [((0, 5), "ns/low2"), ((5, 0), "ns/low1")])
def test_preempt_breaks_ties_the_same_way(created: tuple[int, int], victim: str) -> None:
    config = {"actions": "enqueue, allocate, preempt"}
    jobs = [
        running("low1", "q", cpu=2, admitted=5, created=created[0]),
        running("low2", "q", cpu=2, admitted=5, created=created[1]),
        job("urgent", "q", cpu=2, priority_class="hi"),
    ]
    result = run_cycle(
        snapshot([queue("q")], jobs, [node(cpu=4)], config=config, priority_classes={"hi": 100})
    )
    assert decisions(result) == [("preempt", victim), ("admit", "ns/urgent")]


def test_lower_priority_queue_is_reclaimed_before_a_higher_one() -> None:
    queues = [queue("want", weight=2), queue("low", priority=1), queue("high", priority=5)]
    jobs = [
        job("w", "want", cpu=4),
        running("l1", "low", cpu=4, admitted=1),
        running("h1", "high", cpu=4, admitted=50),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=8)]))
    assert decisions(result) == [("reclaim", "ns/l1"), ("admit", "ns/w")]


def test_nothing_is_reclaimed_when_all_victims_together_cannot_make_room() -> None:
    jobs = [job("a1", "a", cpu=20), *busy()]
    result = run_cycle(snapshot(family(), jobs, [node(cpu=12)]))
    assert result.decisions == ()


def test_a_queue_at_its_deserved_share_does_not_reclaim() -> None:
    queues = [queue("a"), queue("b")]
    jobs = [running("a-r", "a", cpu=4), running("b-r", "b", cpu=4), job("a-p", "a", cpu=2)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=8)]))
    assert result.decisions == ()


def test_min_runtime_protects_recently_admitted_jobs() -> None:
    config = {"configurations": [{"name": "reclaim", "arguments": {"minRuntime": "10m"}}]}
    jobs = [
        job("a1", "a", cpu=3),
        running("b1", "b", cpu=3, admitted=0),
        running("b2", "b", cpu=3, admitted=int((NOW - T0 - timedelta(minutes=5)).total_seconds())),
        running("c1", "c", cpu=3, admitted=30),
        running("c2", "c", cpu=3, admitted=40),
    ]
    result = run_cycle(snapshot(family(), jobs, [node(cpu=12)], config=config))
    assert decisions(result) == [("reclaim", "ns/b1"), ("admit", "ns/a1")]


def test_jobs_marked_not_preemptable_are_never_victims() -> None:
    queues = [queue("a"), queue("b")]
    jobs = [
        job("a1", "a", cpu=2),
        running("old", "b", cpu=2, admitted=10),
        running("new", "b", cpu=2, admitted=20, preemptable=False),
        running("b3", "b", cpu=2, admitted=5, preemptable=False),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=6)]))
    assert decisions(result) == [("reclaim", "ns/old"), ("admit", "ns/a1")]


def test_a_full_branch_does_not_reclaim_from_cousins() -> None:
    # d1 is already at its deserved share because of b; taking from cousin c would put d1 over.
    jobs = [
        job("a1", "a", cpu=3),
        running("b1", "b", cpu=3, admitted=10, preemptable=False),
        running("b2", "b", cpu=3, admitted=20, preemptable=False),
        running("c1", "c", cpu=3, admitted=30),
        running("c2", "c", cpu=3, admitted=40),
    ]
    result = run_cycle(snapshot(family(), jobs, [node(cpu=12)]))
    assert result.decisions == ()


def test_non_reclaimable_queues_keep_their_jobs() -> None:
    queues = [queue("d1"), queue("d2"), queue("a", "d1"), queue("b", "d1", reclaimable=False)]
    queues.append(queue("c", "d2", reclaimable=False))
    result = run_cycle(snapshot(queues, [job("a1", "a", cpu=3), *busy()], [node(cpu=12)]))
    assert result.decisions == ()


def test_a_victim_queue_is_never_taken_below_its_guarantee() -> None:
    queues = [queue("a"), queue("b", guarantee={"cpu": 6})]
    jobs = [
        job("a1", "a", cpu=3),
        running("b1", "b", cpu=3, admitted=1),
        running("b2", "b", cpu=3, admitted=2),
    ]
    # b is above its deserved share, but taking either job leaves it under its guarantee.
    result = run_cycle(snapshot(queues, jobs, [node(cpu=6)]))
    assert result.decisions == ()


def test_jobs_admitted_in_this_cycle_are_not_victims_in_it() -> None:
    queues = [queue("a"), queue("b")]
    jobs = [job("b-new", "b", cpu=4, created=1), job("a-late", "a", cpu=4, created=2)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=4)]))
    assert [d.action for d in result.decisions] == ["admit"]


def test_preempt_inside_a_queue_by_job_priority() -> None:
    config = {"actions": "enqueue, allocate, preempt"}
    jobs = [running("low", "q", cpu=4, admitted=5), job("urgent", "q", cpu=4, priority_class="hi")]
    result = run_cycle(
        snapshot([queue("q")], jobs, [node(cpu=4)], config=config, priority_classes={"hi": 100})
    )
    assert decisions(result) == [("preempt", "ns/low"), ("admit", "ns/urgent")]
    assert result.decisions[0].for_job == "ns/urgent"


def test_preempt_never_takes_equal_or_higher_priority_jobs() -> None:
    config = {"actions": "enqueue, allocate, preempt"}
    jobs = [running("peer", "q", cpu=4, admitted=5), job("same", "q", cpu=4)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=4)], config=config))
    assert result.decisions == ()


def test_an_oversubscribed_cluster_still_reclaims_for_an_owed_queue() -> None:
    # A node went away: admitted jobs use 10 cpu of 8. a is owed half and gets it back.
    queues = [queue("a"), queue("b")]
    jobs = [
        job("a1", "a", cpu=2),
        running("b1", "b", cpu=2, admitted=1),
        running("b2", "b", cpu=4, admitted=2),
        running("b3", "b", cpu=4, admitted=3),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=8)]))
    assert decisions(result)[-1] == ("admit", "ns/a1")
    assert {d.job for d in result.decisions if d.action == "reclaim"} <= {"ns/b2", "ns/b3"}


def test_a_victim_may_take_its_queue_below_deserved_but_not_below_guarantee() -> None:
    # b deserves 4 and holds 5: above its share, so its newest job (3) may go, leaving it 2.
    capacity = {"tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "capacity"}]}]}
    queues = [queue("a", deserved={"cpu": 4}), queue("b", deserved={"cpu": 4})]
    jobs = [
        job("a1", "a", cpu=3),
        running("b-old", "b", cpu=2, admitted=10),
        running("b-new", "b", cpu=3, admitted=20),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=5)], config=capacity))
    assert decisions(result) == [("reclaim", "ns/b-new"), ("admit", "ns/a1")]


CAPACITY = {"tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "capacity"}]}]}


def test_a_victim_qualifies_only_when_its_parents_below_the_common_ancestor_are_over() -> None:
    # c holds twice its deserved, but its parent d2 is exactly at its own: nothing in d2 is
    # taken for a (the lowest common ancestor of c and a is root, so d2 must be over too).
    def run(d2_deserved: int) -> list[tuple[str, str]]:
        queues = [
            queue("d1", deserved={"cpu": 4}),
            queue("d2", deserved={"cpu": d2_deserved}),
            queue("a", "d1", deserved={"cpu": 4}),
            queue("c", "d2", deserved={"cpu": 2}),
            queue("e", "d2", deserved={"cpu": d2_deserved - 2}),
        ]
        jobs = [
            running("c1", "c", cpu=2, admitted=1),
            running("c2", "c", cpu=2, admitted=2),
            running("e1", "e", cpu=4, admitted=3, preemptable=False),
            job("a1", "a", cpu=2),
        ]
        return decisions(run_cycle(snapshot(queues, jobs, [node(cpu=8)], config=CAPACITY)))

    assert run(8) == []
    assert run(6) == [("reclaim", "ns/c2"), ("admit", "ns/a1")]


def test_qualifying_victims_that_cannot_make_room_together_are_left_alone() -> None:
    # a is owed 6 and b borrows 4 beyond its 2, but only b1 may go: 3 cpu is not the 6 a1 needs.
    queues = [queue("a", deserved={"cpu": 6}), queue("b", deserved={"cpu": 2})]
    jobs = [
        running("b1", "b", cpu=3, admitted=10),
        running("b2", "b", cpu=3, admitted=5, preemptable=False),
        job("a1", "a", cpu=6),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=6)], config=CAPACITY))
    assert result.decisions == ()
    assert result.queues["b"].running == 2


def test_a_fifo_queue_reclaims_only_for_its_first_waiting_job() -> None:
    # a-big would take a past its deserved share, so it cannot reclaim; in a fifo queue a-small
    # waits behind it instead of taking the room first. A traverse queue skips a-big.
    def run(strategy: str) -> list[tuple[str, str]]:
        queues = [
            queue("a", deserved={"cpu": 4}, dequeue=strategy),
            queue("b", deserved={"cpu": 4}),
        ]
        jobs = [
            *(running(f"b{i}", "b", cpu=2, admitted=i) for i in range(4)),
            job("a-big", "a", cpu=6, created=1),
            job("a-small", "a", cpu=2, created=2),
        ]
        return decisions(run_cycle(snapshot(queues, jobs, [node(cpu=8)], config=CAPACITY)))

    assert run("traverse") == [("reclaim", "ns/b3"), ("admit", "ns/a-small")]
    assert run("fifo") == []


def test_a_fifo_queue_preempts_only_for_its_first_waiting_job() -> None:
    def run(strategy: str) -> list[tuple[str, str]]:
        config = {"actions": "enqueue, allocate, preempt"}
        jobs = [
            running("low", "q", cpu=4, admitted=5),
            job("too-big", "q", cpu=8, created=1, priority_class="hi"),
            job("urgent", "q", cpu=4, created=2, priority_class="hi"),
        ]
        queues = [queue("q", dequeue=strategy)]
        snap = snapshot(queues, jobs, [node(cpu=4)], config=config, priority_classes={"hi": 100})
        return decisions(run_cycle(snap))

    assert run("traverse") == [("preempt", "ns/low"), ("admit", "ns/urgent")]
    assert run("fifo") == []


def test_a_queue_owed_its_share_under_a_full_parent_reclaims_from_its_sibling() -> None:
    # p's capability is 4 and s borrows all of it; r is owed 2 inside p. Only a victim below p
    # frees p's limit: t is over its share too, but taking from t would not let r1 in.
    def run(s_preemptable: bool, cluster_cpu: int) -> list[tuple[str, str]]:
        queues = [
            queue("p", capability={"cpu": 4}, deserved={"cpu": 4}),
            queue("r", "p", deserved={"cpu": 2}),
            queue("s", "p", deserved={"cpu": 2}),
            queue("t", deserved={"cpu": 2}),
        ]
        jobs = [
            running("s1", "s", cpu=2, admitted=1, preemptable=s_preemptable),
            running("s2", "s", cpu=2, admitted=2, preemptable=s_preemptable),
            running("t1", "t", cpu=4, admitted=3),
            job("r1", "r", cpu=2),
        ]
        snap = snapshot(queues, jobs, [node(cpu=cluster_cpu)], config=CAPACITY)
        return decisions(run_cycle(snap))

    assert run(True, 8) == [("reclaim", "ns/s2"), ("admit", "ns/r1")]  # the cluster is full
    assert run(True, 10) == [("reclaim", "ns/s2"), ("admit", "ns/r1")]  # only p is full
    assert run(False, 8) == []  # t's jobs would free the cluster, not p: nothing is taken
