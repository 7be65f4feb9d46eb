"""Admission at a smaller size (docs/elastic.md, *Admitted smaller*): a resizable workload
whose whole size does not fit is admitted at the largest size at or above its minimum that
fits its queues, the cluster and the nodes; the decision carries the sizes, the reason says
what stopped more, and the session books what was admitted."""

from __future__ import annotations

from dataclasses import replace

from builders import NOW, gang, job, node, queue, running, snapshot

from sluice.api.admitted_size import SizeRecord
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import PodSet, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.model import CycleResult, Decision

ONLY_ADMIT = {"actions": "enqueue, allocate, backfill"}


def resizable(
    name: str, queue_name: str, pods: int, minimum: int, cpu: int = 1, **kw: object
) -> WorkloadView:
    """A Job of ``pods`` pods of ``cpu`` each that may run with ``minimum`` of them."""
    base = gang(name, queue_name, pods, cpu=cpu, **kw)
    (pod_set,) = base.pod_sets
    return replace(base, pod_sets=(replace(pod_set, min_count=minimum),))


def admissions(result: CycleResult) -> dict[str, Decision]:
    return {d.job: d for d in result.decisions if d.action == "admit"}


def test_a_job_is_admitted_at_what_its_queue_has_room_for() -> None:
    queues = [queue("team", capability={"cpu": 6})]
    result = run_cycle(
        snapshot(queues, [resizable("train", "team", 8, 4)], [node(cpu=64)], config=ONLY_ADMIT)
    )
    decision = admissions(result)["ns/train"]
    assert decision.sizes == (("main", 8, 6),)
    assert decision.reason == (
        "enqueue: admitted 6 of 8 workers (min 4): no room for more in queue team's capability"
    )
    assert result.queues["team"].allocated.get_amount("cpu") == 6000


def test_a_job_is_admitted_at_what_the_nodes_have_room_for() -> None:
    nodes = [node("n1", cpu=3), node("n2", cpu=2)]
    result = run_cycle(
        snapshot([queue("team")], [resizable("train", "team", 8, 4)], nodes, config=ONLY_ADMIT)
    )
    decision = admissions(result)["ns/train"]
    assert decision.sizes == (("main", 8, 5),)
    assert decision.reason.endswith("5 of 8 workers (min 4): no room for more in the cluster")


def test_the_nodes_name_what_stops_more_when_the_cluster_has_room() -> None:
    # 6 cpus free in all, but a pod of 2 cpus fits on each node only once.
    nodes = [node(f"n{i}", cpu=3) for i in range(2)]
    train = resizable("train", "team", 4, 1, cpu=2)
    result = run_cycle(snapshot([queue("team")], [train], nodes, config=ONLY_ADMIT))
    decision = admissions(result)["ns/train"]
    assert decision.sizes == (("main", 4, 2),)
    assert decision.reason.endswith("2 of 4 workers (min 1): no room for more on the nodes")


def test_a_job_that_fits_whole_is_admitted_whole() -> None:
    result = run_cycle(
        snapshot([queue("team")], [resizable("train", "team", 8, 4)], [node(cpu=64)])
    )
    decision = admissions(result)["ns/train"]
    assert decision.sizes == (("main", 8, 8),)  # recorded whole: its growth counts from it
    assert not decision.smaller
    assert "fits in queue team" in decision.reason
    whole = run_cycle(snapshot([queue("team")], [gang("g", "team", 8, cpu=1)], [node(cpu=64)]))
    assert admissions(whole)["ns/g"].sizes == ()  # no minimum: nothing recorded


def test_a_job_whose_minimum_is_its_size_is_recorded_whole_to_grow_from_it() -> None:
    base = gang("train", "team", 4, cpu=1)
    (pod_set,) = base.pod_sets
    train = replace(base, pod_sets=(replace(pod_set, min_declared=True),))
    result = run_cycle(snapshot([queue("team")], [train], [node(cpu=64)]))
    assert admissions(result)["ns/train"].sizes == (("main", 4, 4),)


def test_nothing_below_the_minimum_and_nothing_for_a_job_that_cannot_shrink() -> None:
    queues = [queue("team", capability={"cpu": 3})]
    jobs = [resizable("train", "team", 8, 4), gang("whole", "team", 8, cpu=1, created=1)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=64)], config=ONLY_ADMIT))
    assert admissions(result) == {}
    reasons = {p.job: p.cause for p in result.pending}
    assert reasons["ns/train"] == "team would use cpu 8 > capability 3"


def test_what_is_admitted_smaller_is_what_the_next_job_sees() -> None:
    # The first takes 7 of the 9 left; the next sees 2 + 7 held, not 2 + 8.
    queues = [queue("team", capability={"cpu": 9})]
    jobs = [
        running("old", "team", cpu=2),
        resizable("first", "team", 8, 4, created=1),
        resizable("second", "team", 4, 2, created=2),
    ]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=64)], config=ONLY_ADMIT))
    assert {k: d.sizes for k, d in admissions(result).items()} == {"ns/first": (("main", 8, 7),)}
    assert result.queues["team"].allocated.get_amount("cpu") == 9000
    reasons = {p.job: p.cause for p in result.pending}
    assert reasons["ns/second"] == "team would use cpu 13 > capability 9"


def test_pod_sets_shrink_together_and_the_reason_names_them() -> None:
    worker = PodSet("Worker", 8, gang("x", "team", 1, cpu=1).pod_sets[0].pod, min_count=2)
    other = replace(worker, name="group", count=4, min_count=2)
    base = job("ray", "team", cpu=12)
    ray = replace(base, uid="uid-ray", pod_sets=(worker, other))
    queues = [queue("team", capability={"cpu": 9})]
    result = run_cycle(snapshot(queues, [ray], [node(cpu=64)], config=ONLY_ADMIT))
    decision = admissions(result)["ns/ray"]
    assert decision.sizes == (("Worker", 8, 6), ("group", 4, 3))
    assert "admitted Worker 6 of 8 (min 2), group 3 of 4 (min 2):" in decision.reason


def test_a_fifo_head_admitted_smaller_lets_the_next_job_through() -> None:
    queues = [queue("team", capability={"cpu": 7}, dequeue="fifo")]
    jobs = [resizable("head", "team", 8, 4), job("next", "team", cpu=0, memory="1Gi", created=1)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=64, memory="8Gi")], config=ONLY_ADMIT))
    decided = admissions(result)
    assert decided["ns/head"].sizes == (("main", 8, 7),)
    assert "ns/next" in decided


def test_the_next_cycle_sees_it_at_its_admitted_size_and_whole_once_evicted() -> None:
    # What ``sluice simulate`` plays: the operator's writes, as apply_decisions makes them.
    queues = [queue("team", capability={"cpu": 6})]
    state = snapshot(queues, [resizable("train", "team", 8, 4)], [node(cpu=64)])
    state = apply_decisions(state, run_cycle(state), NOW)
    (train,) = state.workloads
    assert (train.pod_sets[0].count, train.request.get_amount("cpu")) == (6, 6000)
    assert train.sized == (SizeRecord("main", 8, 6),)
    reclaim = CycleResult((), {}, (Decision("reclaim", "ns/train", "team"),))
    (back,) = apply_decisions(state, reclaim, NOW).workloads
    assert (back.pod_sets[0].count, back.pod_sets[0].min_count) == (8, 4)
    assert (back.request.get_amount("cpu"), back.sized) == (8000, ())


def test_a_job_that_asks_a_rack_is_admitted_at_what_one_rack_holds() -> None:
    # Two racks of two nodes of 8 gpus: 8 pods of 4 gpus fit the cluster, not one rack.
    rack, host = "example.com/rack", "kubernetes.io/hostname"
    nodes = [
        node(f"{r}-{i}", labels={rack: r, host: f"{r}-{i}"}, cpu=64, nvidia_com_gpu=8)
        for r in ("r0", "r1")
        for i in range(2)
    ]
    whole = gang("train", "team", 8, cpu=1, nvidia_com_gpu=4)
    train = replace(
        whole,
        pod_sets=(replace(whole.pod_sets[0], min_count=2),),
        topology=TopologyRequest(rack, True),
    )
    state = replace(
        snapshot([queue("team")], [train], nodes, config=ONLY_ADMIT),
        topologies=(TopologyView("default", (rack, host)),),
    )
    decision = admissions(run_cycle(state))["ns/train"]
    assert (decision.sizes, decision.domain) == ((("main", 8, 4),), f"{rack}=r0")
    assert decision.reason == (
        f"enqueue: admitted 4 of 8 workers (min 2): no room for more on the nodes, in {rack}=r0"
    )
