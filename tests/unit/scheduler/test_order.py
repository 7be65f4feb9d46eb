"""Queue order (seed 003, seed 000's QueueScoreOrder) and job order (seed 000's global order)."""

from __future__ import annotations

import pytest
from builders import job, node, queue, res, running, snapshot

from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.model import CycleResult, Snapshot
from sluice.scheduler.order import weighted_score


def test_seed_000_queue_score_table_orders_b_then_c_then_a() -> None:
    weights = {"priority": 1.0, "drf": 1.0, "share": 1.0}
    table = {  # queue: (priority, drf share, proportion share), priorities 0..100
        "A": (40, 0.3, 1.2),
        "B": (80, 0.4, 0.5),
        "C": (0, 0.5, 0.3),
    }
    scores = {
        name: weighted_score(weights, priority=p / 100, drf_share=d, share=s)
        for name, (p, d, s) in table.items()
    }
    assert scores == pytest.approx({"A": 0.9, "B": 1.9, "C": 1.2})
    assert sorted(scores, key=lambda n: -scores[n]) == ["B", "C", "A"]


def test_score_weights_change_the_winner() -> None:
    heavy_priority = {"priority": 10.0, "drf": 1.0, "share": 1.0}
    a = weighted_score(heavy_priority, priority=1.0, drf_share=0.9, share=1.0)
    b = weighted_score(heavy_priority, priority=0.0, drf_share=0.0, share=0.0)
    assert a > b
    assert weighted_score({"priority": 0.0}, priority=1.0, drf_share=0.9, share=1.0) < b


def test_queue_score_order_in_a_cycle_uses_priority_drf_and_share() -> None:
    config = {
        "actions": "enqueue, allocate",
        "configurations": [{"name": "enqueue", "arguments": {"QueueScoreOrderEnable": True}}],
        "tiers": [
            {"plugins": [{"name": "priority"}]},
            {"plugins": [{"name": "drf"}, {"name": "capacity"}]},
        ],
    }
    queues = [
        queue("a", priority=40, deserved={"cpu": 25}),
        queue("b", priority=80, deserved={"cpu": 80}),
        queue("c", priority=0, deserved={"cpu": 100}),
    ]
    jobs = [running("a-r", "a", cpu=30), running("b-r", "b", cpu=40), running("c-r", "c", cpu=30)]
    # priority over 0..80: a: 0.5 + (1 - 0.3) + (1 - 1.2) = 1.0; b: 1 + 0.6 + 0.5 = 2.1;
    # c: 0 + 0.7 + 0.7 = 1.4
    result = run_cycle(snapshot(queues, jobs, [node(cpu=100)], config=config))
    assert list(result.queue_order) == ["b", "c", "a"]


def test_without_score_order_queue_priority_comes_before_share() -> None:
    queues = [queue("low", priority=1), queue("high", priority=5)]
    jobs = [running("h", "high", cpu=5), job("l1", "low", cpu=1), job("h1", "high", cpu=1)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10)]))
    assert list(result.queue_order) == ["high", "low"]
    assert [d.job for d in result.decisions] == ["ns/h1", "ns/l1"]


def test_equal_queues_take_turns_by_share() -> None:
    queues = [queue("a"), queue("b")]
    jobs = [job(f"a{i}", "a", created=i) for i in range(4)] + [
        job(f"b{i}", "b", created=i) for i in range(4)
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=4)]))
    assert [d.job for d in result.decisions] == ["ns/a0", "ns/b0", "ns/a1", "ns/b1"]


def test_hierarchy_compares_departments_before_teams() -> None:
    # dept-x is busier than dept-y, so y's team goes first although x-1 is the emptier team.
    queues = [
        queue("x"),
        queue("y"),
        queue("x-1", "x", created=1),
        queue("x-2", "x", created=2),
        queue("y-1", "y", created=3),
    ]
    jobs = [
        running("x2-r", "x-2", cpu=6),
        running("y1-r", "y-1", cpu=2),
        job("x1-p", "x-1", cpu=1),
        job("y1-p", "y-1", cpu=1),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=12)]))
    assert result.queue_order[0] == "y-1"
    assert result.decisions[0].job == "ns/y1-p"


def test_seed_000_global_job_order_is_b2_a2_a1_b1() -> None:
    config = {"configurations": [{"name": "enqueue", "arguments": {"jobOrder": "global"}}]}
    queues = [queue("A", priority=10), queue("B", priority=8)]
    jobs = [
        job("A1", "A", created=1),
        job("A2", "A", created=2, priority_class="p12"),
        job("B1", "B", created=3),
        job("B2", "B", created=4, priority_class="p13"),
    ]
    result = run_cycle(
        snapshot(
            queues, jobs, [node(cpu=10)], config=config, priority_classes={"p12": 12, "p13": 13}
        )
    )
    assert [d.job for d in result.decisions] == ["ns/B2", "ns/A2", "ns/A1", "ns/B1"]


def test_per_queue_job_order_serves_queue_a_first() -> None:
    queues = [queue("A", priority=10), queue("B", priority=8)]
    jobs = [
        job("A1", "A", created=1),
        job("A2", "A", created=2, priority_class="p12"),
        job("B1", "B", created=3),
        job("B2", "B", created=4, priority_class="p13"),
    ]
    result = run_cycle(
        snapshot(queues, jobs, [node(cpu=10)], priority_classes={"p12": 12, "p13": 13})
    )
    assert [d.job for d in result.decisions][:2] == ["ns/A2", "ns/A1"]


def test_job_priority_inherits_queue_priority_class_then_global_default() -> None:
    from sluice.api.views import PriorityClassView
    from sluice.scheduler.session import Session

    snap = snapshot(
        [
            queue("q", priority_class_name="team"),
            queue("plain"),
            queue("odd", priority_class_name="gone"),
        ],
        [
            job("inherit", "q"),
            job("own", "q", priority_class="top"),
            job("unknown-own", "q", priority_class="gone"),
            job("dflt", "plain"),
            job("unknown-queue-class", "odd"),
        ],
        [node(cpu=1)],
        priority_classes={"team": 50, "top": 90},
    )
    snap = type(snap)(
        queues=snap.queues,
        workloads=snap.workloads,
        nodes=snap.nodes,
        now=snap.now,
        priority_classes=[*snap.priority_classes, PriorityClassView("base", 7, True)],
        config=snap.config,
    )
    session = Session(snap)
    priorities = {j.name: session.job_priority(j) for j in snap.workloads}
    assert priorities == {
        "inherit": 50,
        "own": 90,
        "unknown-own": 50,  # a class that does not exist: the queue's priority
        "dflt": 7,
        "unknown-queue-class": 7,  # the queue's class does not exist: the global default
    }


SCORE_ORDER = {
    "actions": "enqueue, allocate",
    "configurations": [{"name": "enqueue", "arguments": {"QueueScoreOrderEnable": True}}],
    "tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "capacity"}]}],
}


def score_order(lo_priority: int, hi_priority: int) -> list[str]:
    queues = [
        queue("lo", priority=lo_priority, deserved={"cpu": 4}),
        queue("hi", priority=hi_priority, deserved={"cpu": 4}),
    ]
    jobs = [running("h", "hi", cpu=3), job("l1", "lo"), job("h1", "hi")]
    return list(run_cycle(snapshot(queues, jobs, [node(cpu=10)], config=SCORE_ORDER)).queue_order)


def test_score_priority_is_normalised_over_the_queues_own_lowest_and_highest() -> None:
    # 10 and 11 become 0 and 1: hi scores 1 + (1 - 0.75), lo scores 0 + (1 - 0).
    assert score_order(10, 11) == ["hi", "lo"]


def test_score_priority_counts_nothing_when_every_queue_has_the_same() -> None:
    # No division by zero, and the share alone decides: lo uses nothing.
    assert score_order(10, 10) == ["lo", "hi"]


def test_drf_score_divides_the_dominant_share_by_the_weight() -> None:
    config = {
        "actions": "enqueue, allocate",
        "configurations": [{"name": "enqueue", "arguments": {"QueueScoreOrderEnable": True}}],
        "tiers": [{"plugins": [{"name": "drf"}]}],
    }
    # heavy uses twice what light uses, but its weight is four times light's.
    queues = [queue("light", weight=1), queue("heavy", weight=4)]
    jobs = [running("l", "light", cpu=2), running("h", "heavy", cpu=4), job("p", "light")]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10)], config=config))
    assert list(result.queue_order) == ["heavy", "light"]


def _cycles(snap: Snapshot, count: int) -> list[CycleResult]:
    results = []
    for _ in range(count):
        result = run_cycle(snap)
        results.append(result)
        snap = apply_decisions(snap, result, snap.now)
    return results


def _admitted(result: CycleResult) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in result.decisions:
        if d.action == "admit":
            counts[d.queue] = counts.get(d.queue, 0) + 1
    return counts


def test_drf_weights_split_the_first_cycle_as_proportion_does_and_nothing_is_reclaimed() -> None:
    queues = [queue("a", weight=2, created=1), queue("b", created=2), queue("c", created=3)]
    jobs = [job(f"{q}{i}", q, created=i) for q in "abc" for i in range(8)]
    results = _cycles(snapshot(queues, jobs, [node(cpu=8)]), 3)
    assert _admitted(results[0]) == {"a": 4, "b": 2, "c": 2}
    first = results[0].queues
    assert {q: first[q].allocated for q in "abc"} == {q: first[q].deserved for q in "abc"}
    assert [r.decisions for r in results[1:]] == [(), ()]


def test_drf_weights_hold_at_every_level_of_the_tree() -> None:
    queues = [
        queue("x", weight=2, created=1),
        queue("y", created=2),
        queue("x1", "x", weight=3, created=3),
        queue("x2", "x", created=4),
        queue("y1", "y", created=5),
    ]
    jobs = [job(f"{q}-{i}", q, created=i) for q in ("x1", "x2", "y1") for i in range(12)]
    results = _cycles(snapshot(queues, jobs, [node(cpu=12)]), 3)
    assert _admitted(results[0]) == {"x1": 6, "x2": 2, "y1": 4}
    deserved = [results[0].queues[q].deserved for q in ("x1", "x2", "y1")]
    assert deserved == [res(cpu=6), res(cpu=2), res(cpu=4)]
    assert not any(d.action == "reclaim" for r in results for d in r.decisions)
    assert [r.decisions for r in results[1:]] == [(), ()]
