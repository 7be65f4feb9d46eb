"""Victims above a minimum (docs/scheduler.md, *Victims above a minimum*): reclaim and
preempt take a resizable workload's pods above its minimum one by one, the newest first,
before the workload itself, which stays admitted at a lower size; below its minimum only the
whole workload goes."""

from __future__ import annotations

from dataclasses import replace

from builders import gang, job, node, pod, queue, running, snapshot

from sluice.api.admitted_size import SizeRecord
from sluice.api.constraints import PodSpecView
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import FlavorAssignment
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.model import CycleResult

PREEMPT = {"actions": "enqueue, allocate, preempt, backfill"}


def resizable(
    name: str, queue_name: str, pods: int, minimum: int, admitted: int = 5, **kw: object
) -> WorkloadView:
    """A Job running ``pods`` pods of 1 cpu (or as ``kw`` ask), minimum ``minimum``,
    recorded as admitted whole."""
    each = kw or {"cpu": 1}
    base = gang(name, queue_name, pods, phase=JobPhase.RUNNING, admitted=admitted, **each)
    (pod_set,) = base.pod_sets
    return replace(
        base,
        pod_sets=(replace(pod_set, min_count=minimum),),
        sized=(SizeRecord("main", pods, pods),),
    )


def two_queues() -> list:
    return [queue("a"), queue("b")]


def decided(result: CycleResult) -> list[tuple[str, str, tuple[tuple[str, int, int], ...]]]:
    return [(d.action, d.job, d.sizes) for d in result.decisions]


def test_reclaim_takes_only_the_pods_above_the_minimum_it_needs() -> None:
    big = resizable("big", "b", 8, 4)
    result = run_cycle(snapshot(two_queues(), [big, job("a1", "a", cpu=2)], [node(cpu=8)]))
    shrink, admit = result.decisions
    assert (shrink.action, shrink.job, shrink.sizes) == ("reclaim", "ns/big", (("main", 8, 6),))
    assert shrink.shrinks and shrink.for_job == "ns/a1"
    assert "runs at main 6 of 8" in shrink.reason
    assert (admit.action, admit.job) == ("admit", "ns/a1")
    # The workload stays admitted, holding 6 cpus; nothing of it waits.
    assert result.queues["b"].allocated.get_amount("cpu") == 6000
    assert result.queues["b"].running == 1 and result.queues["b"].pending == 0
    assert all(p.job != "ns/big" for p in result.pending)


def test_below_its_minimum_the_whole_workload_is_suspended() -> None:
    big = resizable("big", "b", 8, 4)
    queues = [queue("a", weight=3), queue("b")]  # a deserves 6 of the 8 cpus
    result = run_cycle(snapshot(queues, [big, job("a1", "a", cpu=6)], [node(cpu=8)]))
    assert decided(result) == [("reclaim", "ns/big", ()), ("admit", "ns/a1", ())]
    assert not result.decisions[0].shrinks
    assert any(p.job == "ns/big" for p in result.pending)


def test_a_workload_at_its_minimum_is_taken_whole() -> None:
    small = resizable("small", "b", 4, 4)
    other = running("other", "b", cpu=4, admitted=1)
    result = run_cycle(snapshot(two_queues(), [small, other, job("a1", "a", cpu=1)], [node(cpu=8)]))
    assert decided(result)[0] == ("reclaim", "ns/small", ())


def test_a_rayjob_is_taken_whole() -> None:
    # KubeRay deletes on a lowered replicas only the workers it is told to: not shrunk.
    ray = replace(resizable("ray", "b", 8, 4), kind="RayJob")
    result = run_cycle(snapshot(two_queues(), [ray, job("a1", "a", cpu=2)], [node(cpu=8)]))
    assert decided(result) == [("reclaim", "ns/ray", ()), ("admit", "ns/a1", ())]


def test_a_growth_victim_is_ordered_as_its_workload_just_before_it() -> None:
    # b's resizable job was admitted before its plain job: the plain one, admitted last,
    # goes first; the resizable job's pods above its minimum before the job itself.
    big = resizable("big", "b", 6, 4, admitted=5)
    late = running("late", "b", cpu=2, admitted=50)
    jobs = [big, late, job("a1", "a", cpu=3)]
    result = run_cycle(snapshot(two_queues(), jobs, [node(cpu=8)]))
    assert decided(result) == [
        ("reclaim", "ns/late", ()),
        ("reclaim", "ns/big", (("main", 6, 5),)),
        ("admit", "ns/a1", ()),
    ]


def test_each_part_taken_lowers_the_same_decision() -> None:
    big = resizable("big", "b", 10, 2)
    jobs = [big, job("a1", "a", cpu=2, created=1), job("a2", "a", cpu=1, created=2)]
    result = run_cycle(snapshot(two_queues(), jobs, [node(cpu=10)]))
    shrinks = [d for d in result.decisions if d.shrinks]
    assert [(d.job, d.sizes, d.for_job) for d in shrinks] == [
        ("ns/big", (("main", 10, 7),), "ns/a2")
    ]
    assert result.queues["b"].allocated.get_amount("cpu") == 7000
    # In the place of the first shrink: before both admissions it made room for.
    assert [d.job for d in result.decisions] == ["ns/big", "ns/a1", "ns/a2"]


def test_reclaim_keeps_the_guarantee_of_the_queue_it_shrinks() -> None:
    queues = [queue("a"), queue("b", guarantee={"cpu": 7})]
    big = resizable("big", "b", 8, 4)
    result = run_cycle(snapshot(queues, [big, job("a1", "a", cpu=1)], [node(cpu=8)]))
    assert decided(result) == [
        ("reclaim", "ns/big", (("main", 8, 7),)),
        ("admit", "ns/a1", ()),
    ]
    # Two cpus would take b below its guarantee: nothing is taken at all.
    result = run_cycle(snapshot(queues, [big, job("a1", "a", cpu=2)], [node(cpu=8)]))
    assert result.decisions == ()


def test_preempt_takes_a_lower_priority_workloads_pods_above_its_minimum() -> None:
    queues = [queue("a")]
    big = resizable("big", "a", 8, 4)
    urgent = job("urgent", "a", cpu=3, priority_class="high")
    classes = {"high": 10}
    result = run_cycle(
        snapshot(queues, [big, urgent], [node(cpu=8)], config=PREEMPT, priority_classes=classes)
    )
    assert decided(result) == [
        ("preempt", "ns/big", (("main", 8, 5),)),
        ("admit", "ns/urgent", ()),
    ]


def test_the_newest_pods_go_and_free_their_nodes() -> None:
    # Two nodes of 4: the job's 4 oldest pods on n1, its 4 newest on n2. A pod of 2 cpus
    # fits once the 2 newest are gone from n2, as the part victims' room says.
    big = resizable("big", "b", 8, 4)
    pods = [pod(f"big-{i}", "n1" if i < 4 else "n2", owner=big, created=10 + i) for i in range(8)]
    wide = gang("wide", "a", 1, cpu=2)
    snap = snapshot(two_queues(), [big, wide], [node("n1", cpu=4), node("n2", cpu=4)], pods=pods)
    result = run_cycle(snap)
    assert decided(result) == [
        ("reclaim", "ns/big", (("main", 8, 6),)),
        ("admit", "ns/wide", ()),
    ]
    after = apply_decisions(snap, result, snap.now)
    (shrunk,) = [w for w in after.workloads if w.key == "ns/big"]
    assert shrunk.phase.admitted and shrunk.pod_sets[0].count == 6
    assert [(r.asked, r.admitted) for r in shrunk.sized] == [(8, 6)]
    assert after.pods is not None
    assert sorted(p.name for p in after.pods if p.job_uid == big.uid) == [
        f"big-{i}" for i in range(6)
    ]
    # The next cycle sees it at 6, nothing more to decide.
    assert run_cycle(after).decisions == ()


def test_a_shrink_frees_room_in_the_workloads_topology_domain() -> None:
    # Rack r1 is full of a's own job; the 2 pods asked together fit in r2 once 2 of the
    # resizable job's 4 pods there are gone (its minimum is 2).
    rack = TopologyView("racks", ("rack",))
    nodes = [node("r1", cpu=4, labels={"rack": "r1"}), node("r2", cpu=4, labels={"rack": "r2"})]
    mine = gang("mine", "a", 1, cpu=4, phase=JobPhase.RUNNING, admitted=1)
    big = resizable("big", "b", 4, 2)
    pods = [pod(f"big-{i}", "r2", owner=big, created=10 + i) for i in range(4)]
    pods.append(pod("mine-0", "r1", owner=mine))
    together = replace(gang("together", "a", 2, cpu=1), topology=TopologyRequest("rack", True))
    queues = [queue("a", weight=3), queue("b")]
    snap = snapshot(queues, [mine, big, together], nodes, pods=pods)
    result = run_cycle(replace(snap, topologies=(rack,)))
    assert decided(result) == [
        ("reclaim", "ns/big", (("main", 4, 2),)),
        ("admit", "ns/together", ()),
    ]
    assert result.decisions[1].domain == "rack=r2"


def test_reclaim_in_a_flavor_takes_the_pods_above_the_minimum_held_there() -> None:
    # team-b holds all 16 H100 GPUs with one job of 16 pods, minimum 8; team-a, owed 8 there,
    # takes back the 4 it asks: the job runs on at 12, in h100 still.
    gpu, model = "nvidia.com/gpu", "gpu.example.com/model"
    h100, a100 = FlavorView("h100", {model: "H100"}), FlavorView("a100", {model: "A100"})
    nodes = [
        node(name, labels={model: kind}, cpu=64, nvidia_com_gpu=8)
        for name, kind in (("h1", "H100"), ("h2", "H100"), ("a1", "A100"))
    ]

    def team(name: str, h: int, a: int, **spec: object) -> object:
        entries = [{"name": "h100", "deserved": {gpu: h}}, {"name": "a100", "deserved": {gpu: a}}]
        return queue(name, flavors=entries, **spec)

    def on(view: WorkloadView, kind: str) -> WorkloadView:
        pods = tuple(
            replace(s, pod=PodSpecView(s.pod.request, node_selector=((model, kind),)))
            for s in view.pod_sets
        )
        return replace(view, pod_sets=pods)

    big = on(resizable("big", "team-b", 16, 8, nvidia_com_gpu=1), "H100")
    big = replace(big, flavors=(FlavorAssignment("main", "h100"),))
    mine = team("team-a", 8, 8, flavorFungibility={"whenCanReclaim": "Reclaim"})
    wanted = on(gang("j", "team-a", 4, nvidia_com_gpu=1), "H100")
    plugins = [{"name": "priority"}, {"name": "gang"}, {"name": "capacity"}]
    config = {"tiers": [{"plugins": plugins}]}
    built = snapshot([mine, team("team-b", 4, 4)], [big, wanted], nodes, config=config)
    result = run_cycle(replace(built, flavors=[h100, a100]))
    assert decided(result) == [
        ("reclaim", "ns/big", (("main", 16, 12),)),
        ("admit", "ns/j", ()),
    ]
    assert result.decisions[1].flavors == (("main", "h100"),)
    figures = {f.name: f for f in result.queues["team-b"].flavors}
    assert figures["h100"].allocated.get_amount(gpu) == 12000
