"""Admission (enqueue/allocate/backfill), fifo vs traverse, pending reasons, invalid trees."""

from __future__ import annotations

import gc

from builders import job, node, queue, running, snapshot

from sluice.scheduler.actions.admit import try_admit
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.session import Session

ONLY_ADMIT = {"actions": "enqueue, allocate, backfill"}


def admitted(result: object) -> list[str]:
    return [d.job for d in result.decisions if d.action == "admit"]  # type: ignore[attr-defined]


def reasons(result: object) -> dict[str, str]:
    return {p.job: p.reason for p in result.pending}  # type: ignore[attr-defined]


def test_admits_within_capability_and_explains_the_rest_with_numbers() -> None:
    queues = [queue("team-a", capability={"cpu": 4})]
    jobs = [job(f"j{i}", "team-a", cpu=2, created=i) for i in range(4)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=100)], config=ONLY_ADMIT))
    assert admitted(result) == ["ns/j0", "ns/j1"]
    assert reasons(result) == {
        "ns/j2": "position 1 in team-a; team-a would use cpu 6 > capability 4",
        "ns/j3": "position 2 in team-a; team-a would use cpu 6 > capability 4",
    }


def test_a_capability_of_zero_allows_none_of_that_resource() -> None:
    # A named 0 is a limit (no GPUs in this queue); an absent resource is unlimited.
    queues = [queue("cpu-only", capability={"nvidia.com/gpu": "0"})]
    jobs = [job("gpu", "cpu-only", cpu=1, nvidia_com_gpu=1), job("plain", "cpu-only", cpu=64)]
    nodes = [node(cpu=100, nvidia_com_gpu=8)]
    result = run_cycle(snapshot(queues, jobs, nodes, config=ONLY_ADMIT))
    assert admitted(result) == ["ns/plain"]
    assert reasons(result) == {
        "ns/gpu": "position 1 in cpu-only; cpu-only would use nvidia.com/gpu 1 > capability 0"
    }


def test_the_limiting_level_of_the_tree_is_named() -> None:
    queues = [queue("dept", capability={"nvidia.com/gpu": 2}), queue("team", "dept")]
    jobs = [
        running("r", "team", cpu=1, nvidia_com_gpu=2),
        job("p", "team", cpu=1, nvidia_com_gpu=1),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10, nvidia_com_gpu=8)], config=ONLY_ADMIT))
    assert reasons(result)["ns/p"] == (
        "position 1 in team; dept (parent of team) would use nvidia.com/gpu 3 > capability 2"
    )


def test_cluster_room_is_the_last_limit() -> None:
    jobs = [running("r", "a", cpu=3), job("p", "a", cpu=2, memory="1Gi")]
    result = run_cycle(snapshot([queue("a")], jobs, [node(cpu=4, memory="8Gi")], config=ONLY_ADMIT))
    assert reasons(result)["ns/p"] == "position 1 in a; cluster has cpu 1 free, job requests cpu 2"


def test_deserved_never_blocks_admission_idle_quota_is_lent() -> None:
    queues = [queue("a", weight=1), queue("b", weight=1)]
    jobs = [job(f"a{i}", "a", cpu=1, created=i) for i in range(8)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=8)], config=ONLY_ADMIT))
    assert len(admitted(result)) == 8


def test_traverse_skips_a_job_that_does_not_fit_fifo_stops_there() -> None:
    def run(strategy: str) -> list[str]:
        queues = [queue("q", dequeue=strategy)]
        jobs = [job("big", "q", cpu=8, created=1), job("small", "q", cpu=1, created=2)]
        return admitted(run_cycle(snapshot(queues, jobs, [node(cpu=4)], config=ONLY_ADMIT)))

    assert run("traverse") == ["ns/small"]
    assert run("fifo") == []


def test_fifo_reason_names_the_job_in_front() -> None:
    queues = [queue("q", dequeue="fifo")]
    jobs = [job("big", "q", cpu=8, created=1), job("small", "q", cpu=1, created=2)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=4)], config=ONLY_ADMIT))
    assert reasons(result)["ns/small"] == (
        "position 2 in q; waiting behind ns/big, the first job of fifo queue q"
    )


def test_backfill_admits_jobs_that_request_nothing_even_behind_a_fifo_head() -> None:
    queues = [queue("q", dequeue="fifo")]
    jobs = [job("big", "q", cpu=8, created=1), job("zero", "q", cpu=0, created=2)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=4)], config=ONLY_ADMIT))
    assert admitted(result) == ["ns/zero"]
    assert result.decisions[0].reason.startswith("backfill")


def test_jobs_only_run_in_leaf_queues() -> None:
    queues = [queue("parent"), queue("child", "parent")]
    result = run_cycle(snapshot(queues, [job("stray", "parent")], [node(cpu=4)]))
    assert admitted(result) == []
    assert "has child queues; jobs run only in leaf queues" in reasons(result)["ns/stray"]


def test_a_job_of_a_missing_queue_waits_with_a_reason() -> None:
    result = run_cycle(snapshot([queue("a")], [job("lost", "nope")], [node(cpu=4)]))
    assert reasons(result)["ns/lost"] == "position 1 in nope; queue nope does not exist"


def test_an_invalid_subtree_is_isolated_and_the_rest_schedules() -> None:
    queues = [
        queue("dept", capability={"cpu": 2}),
        queue("bad", "dept", capability={"cpu": 5}),  # over its parent's capability
        queue("good"),
    ]
    jobs = [job("b", "bad", cpu=1), job("g", "good", cpu=1)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10)]))
    assert admitted(result) == ["ns/g"]
    assert not result.queues["bad"].valid
    assert "capability cpu 5 exceeds the capability cpu 2 of its ancestor dept" in (
        result.queues["bad"].invalid_reason
    )
    assert "is not valid" in reasons(result)["ns/b"]
    assert [name for name, q in result.queues.items() if not q.valid] == ["bad"]


def test_children_guarantees_over_the_parent_mark_the_parent_invalid() -> None:
    queues = [
        queue("dept", guarantee={"cpu": 2}),
        queue("x", "dept", guarantee={"cpu": 2}),
        queue("y", "dept", guarantee={"cpu": 1}),
    ]
    result = run_cycle(snapshot(queues, [job("j", "x")], [node(cpu=10)]))
    assert not result.queues["dept"].valid and result.queues["x"].valid
    assert admitted(result) == []


def test_guarantees_a_parent_can_never_hold_stop_its_subtree_and_only_it() -> None:
    queues = [
        queue("dept", capability={"cpu": 6}),
        queue("x", "dept", guarantee={"cpu": 4}),
        queue("y", "dept", guarantee={"cpu": 4}),
        queue("other"),
    ]
    result = run_cycle(snapshot(queues, [job("j", "x"), job("k", "other")], [node(cpu=10)]))
    assert not result.queues["dept"].valid
    assert "more than all dept can ever hold, its capability cpu 6" in (
        result.queues["dept"].invalid_reason
    )
    assert admitted(result) == ["ns/k"]
    reasons = {p.job: p.reason for p in result.pending}
    assert reasons["ns/j"].startswith("position 1 in x; queue x is not valid: queue dept: ")


def test_same_snapshot_same_result() -> None:
    queues = [queue(f"q{i}", weight=i + 1) for i in range(5)]
    jobs = [job(f"j{i}", f"q{i % 5}", cpu=1 + i % 3, created=i % 4) for i in range(40)]
    snap = snapshot(queues, jobs, [node(cpu=30)])
    assert run_cycle(snap) == run_cycle(snap)


def test_apply_decisions_then_next_cycle_has_nothing_left_to_admit() -> None:
    jobs = [job(f"j{i}", "a", cpu=1, created=i) for i in range(3)]
    snap = snapshot([queue("a")], jobs, [node(cpu=2)])
    first = run_cycle(snap)
    second = run_cycle(apply_decisions(snap, first, snap.now))
    assert admitted(first) == ["ns/j0", "ns/j1"]
    assert second.decisions == ()
    assert second.queues["a"].inqueue == 2 and second.queues["a"].pending == 1


def test_a_parent_cycle_is_isolated_and_does_not_stop_the_cycle() -> None:
    queues = [queue("a", "b"), queue("b", "a"), queue("c", "a"), queue("ok")]
    jobs = [running("r", "a"), job("p", "c"), job("q", "b"), job("fine", "ok")]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=4)]))
    assert admitted(result) == ["ns/fine"]
    assert {n for n, q in result.queues.items() if not q.valid} == {"a", "b", "c"}
    assert "cycle" in result.queues["a"].invalid_reason
    assert result.queues["c"].parent == "a"  # the stored parent is still reported
    assert "is not valid" in reasons(result)["ns/p"]


def test_a_missing_parent_or_too_deep_a_queue_admits_nothing_below_it() -> None:
    chain = [queue("l1"), queue("l2", "l1"), queue("l3", "l2"), queue("l4", "l3")]
    queues = [*chain, queue("l5", "l4"), queue("l6", "l5"), queue("lost", "nowhere")]
    queues.append(queue("side", "l4"))  # five levels deep: the maximum, still valid
    jobs = [job("deep", "l6"), job("stray", "lost"), job("fine", "side")]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=4)]))
    assert admitted(result) == ["ns/fine"]
    assert "6 levels deep" in result.queues["l6"].invalid_reason
    assert "parent nowhere does not exist" in result.queues["lost"].invalid_reason
    assert "is not valid" in reasons(result)["ns/deep"]


def test_the_garbage_collector_is_left_as_the_caller_had_it() -> None:
    snap = snapshot([queue("a")], [job("j", "a")], [node(cpu=1)])
    assert gc.isenabled()
    run_cycle(snap)
    assert gc.isenabled()
    gc.disable()
    try:
        run_cycle(snap)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_job_alike_to_one_that_did_not_fit_is_looked_at_again_once_room_came_back() -> None:
    """Jobs alike share the answer of the first that did not fit only while nothing was
    admitted or evicted since."""
    queues = [queue("a", capability={"cpu": 4})]
    jobs = [running("r", "a", cpu=4), job("p1", "a", cpu=2, created=1), job("p2", "a", cpu=2)]
    session = Session(snapshot(queues, jobs, [node(cpu=100)], config=ONLY_ADMIT))
    outcome = Outcome()
    p2, p1 = session.queues["a"].pending_jobs
    assert not try_admit(session, outcome, p1, "allocate")
    assert not try_admit(session, outcome, p2, "allocate")
    assert outcome.reasons[p2.key] == outcome.reasons[p1.key] == "a would use cpu 6 > capability 4"
    [r] = session.queues["a"].admitted_jobs
    session.evict(r)
    assert try_admit(session, outcome, p2, "allocate")
