"""Topology: a workload that asks for one domain of a level is placed whole into one."""

from __future__ import annotations

from dataclasses import replace

from builders import gang, node, queue, snapshot

from sluice.api.constraints import PodSpecView, interned
from sluice.api.resources import Resources
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase, NodeView, WorkloadView
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult, Snapshot
from sluice.scheduler.placement import Placement
from sluice.scheduler.topology import Domains

BLOCK, RACK = "example.com/block", "example.com/rack"
TOPOLOGY = TopologyView("default", (BLOCK, RACK, "kubernetes.io/hostname"))
ONLY_ADMIT = {"actions": "enqueue"}


def cluster(racks: dict[str, tuple[str, int]], per_rack: int = 2) -> list[NodeView]:
    """Nodes ``<rack>-<i>``: rack -> (its block, gpus per node)."""
    return [
        node(
            f"{rack}-{i}",
            labels={BLOCK: block, RACK: rack, "kubernetes.io/hostname": f"{rack}-{i}"},
            cpu=64,
            **{"nvidia.com/gpu": gpus},
        )
        for rack, (block, gpus) in sorted(racks.items())
        for i in range(per_rack)
    ]


def asking(job: WorkloadView, level: str = RACK, *, required: bool = True) -> WorkloadView:
    return replace(job, topology=TopologyRequest(level, required))


def gpus(name: str, pods: int, per_pod: int, **kw: object) -> WorkloadView:
    return gang(name, "q", pods, cpu=1, **{"nvidia.com/gpu": per_pod}, **kw)  # type: ignore[arg-type]


def on(host: str) -> dict[str, str]:
    return {"kubernetes.io/hostname": host}


def with_topology(snap: Snapshot) -> Snapshot:
    return replace(snap, topologies=(TOPOLOGY,))


def admissions(result: CycleResult) -> dict[str, str]:
    return {d.job.split("/")[1]: d.domain for d in result.decisions if d.action == "admit"}


def reason(result: CycleResult, job: str) -> str:
    return next(p.reason for p in result.pending if p.job == f"ns/{job}").partition("; ")[2]


EIGHT = {f"r{i}": (f"b{i // 4}", 8) for i in range(8)}  # 2 blocks x 4 racks x 2 nodes of 8


def test_a_rack_required_job_goes_whole_into_the_rack_left_with_least_room() -> None:
    # r0 has 8 gpus free (one node busy), every other rack 16: 4 x 2 fits r0 exactly.
    busy = gpus("busy", 1, 8, phase=JobPhase.RUNNING, selector={RACK: "r0"})
    train = asking(gpus("train", 4, 2, created=1))
    snap = with_topology(snapshot([queue("q")], [busy, train], cluster(EIGHT), config=ONLY_ADMIT))
    assert admissions(run_cycle(snap)) == {"train": f"{RACK}=r0"}


def test_equal_racks_go_by_name() -> None:
    snap = snapshot([queue("q")], [asking(gpus("train", 2, 8))], cluster(EIGHT), config=ONLY_ADMIT)
    assert admissions(run_cycle(with_topology(snap))) == {"train": f"{RACK}=r0"}


def test_a_job_that_fits_in_total_but_in_no_rack_waits_naming_the_best_rack() -> None:
    busy = [
        gpus(f"busy{i}", 1, 8, phase=JobPhase.RUNNING, selector=on(f"r{i}-0")) for i in range(8)
    ]
    train = asking(gpus("train", 3, 8, created=1))  # 24 gpus: 64 free in total, 8 per rack
    snap = with_topology(snapshot([queue("q")], [*busy, train], cluster(EIGHT), config=ONLY_ADMIT))
    result = run_cycle(snap)
    assert admissions(result) == {}
    assert reason(result, "train") == (
        f"no {RACK} holds 3 x cpu 1, nvidia.com/gpu 8: best rack r0 has cpu 127 free of 128,"
        " nvidia.com/gpu 8 free of 16 (nodes r0-0, r0-1)"
    )


def test_preferred_widens_to_a_block_then_to_anywhere() -> None:
    nodes = cluster(EIGHT)
    in_block = asking(gpus("block", 4, 8), required=False)  # 32 gpus: a block, no rack
    snap = snapshot([queue("q")], [in_block], nodes, config=ONLY_ADMIT)
    assert admissions(run_cycle(with_topology(snap))) == {"block": f"{BLOCK}=b0"}
    anywhere = asking(gpus("any", 12, 8), required=False)  # 96 gpus: more than a block
    snap = snapshot([queue("q")], [anywhere], nodes, config=ONLY_ADMIT)
    assert admissions(run_cycle(with_topology(snap))) == {"any": ""}
    required = asking(gpus("strict", 4, 8))
    snap = snapshot([queue("q")], [required], nodes, config=ONLY_ADMIT)
    assert admissions(run_cycle(with_topology(snap))) == {}


def test_a_label_that_is_no_level_or_a_topology_that_does_not_nest_admits_nothing() -> None:
    job = asking(gpus("train", 1, 1), "example.com/row")
    snap = snapshot([queue("q")], [job], cluster(EIGHT), config=ONLY_ADMIT)
    result = run_cycle(with_topology(snap))
    assert admissions(result) == {}
    assert reason(result, "train") == "no Topology has the level example.com/row"
    nodes = cluster(EIGHT)
    nodes[-1] = replace(nodes[-1], labels={**nodes[-1].labels, BLOCK: "b0"})  # r7 in two blocks
    snap = snapshot([queue("q")], [asking(gpus("train", 1, 1))], nodes, config=ONLY_ADMIT)
    result = run_cycle(with_topology(snap))
    assert admissions(result) == {}
    assert reason(result, "train") == (
        f"Topology default is not nested: {RACK}=r7 is in two {BLOCK} domains:"
        " b1 (node r7-0) and b0 (node r7-1)"
    )


def test_reclaim_for_a_rack_required_job_takes_victims_in_one_rack_only() -> None:
    """b borrowed everything; a's 2 x 8 job needs one whole rack: the rack with one victim
    (r1, whose second node is idle) rather than r0, whose two nodes hold two."""
    queues = [queue("a", deserved={"nvidia.com/gpu": 16}), queue("b")]
    racks = {"r0": ("b0", 8), "r1": ("b0", 8)}
    running = [
        replace(
            gpus(f"v{n}", 1, 8, phase=JobPhase.RUNNING, admitted=n, selector=on(host)), queue="b"
        )
        for n, host in enumerate(["r0-0", "r0-1", "r1-0"])
    ]
    train = replace(asking(gpus("train", 2, 8, created=10)), queue="a")
    snap = with_topology(snapshot(queues, [*running, train], cluster(racks)))
    result = run_cycle(snap)
    assert [(d.action, d.job, d.domain) for d in result.decisions] == [
        ("reclaim", "ns/v2", ""),
        ("admit", "ns/train", f"{RACK}=r1"),
    ]


def test_preempt_for_a_rack_required_job_stays_in_one_rack() -> None:
    racks = {"r0": ("b0", 8), "r1": ("b0", 8)}
    low = [
        gpus(f"low{n}", 1, 8, phase=JobPhase.RUNNING, admitted=n, selector=on(host))
        for n, host in enumerate(["r0-0", "r1-0", "r1-1"])
    ]
    high = asking(gpus("high", 2, 8, created=10, priority_class="high"))
    config = {"actions": "enqueue, allocate, preempt"}
    classes = {"high": 100}
    snap = snapshot(
        [queue("q")], [*low, high], cluster(racks), config=config, priority_classes=classes
    )
    result = run_cycle(with_topology(snap))
    assert [(d.action, d.job, d.domain) for d in result.decisions] == [
        ("preempt", "ns/low0", ""),
        ("admit", "ns/high", f"{RACK}=r0"),
    ]


def test_a_pod_that_selects_another_domain_fits_on_no_node_of_this_one() -> None:
    """Even after a pod of the same request that selects nothing was placed in the domain:
    the two are not taken for the same pod."""
    placement = Placement([node(f"n{i}", labels={RACK: f"r{i % 2}"}, cpu=4) for i in range(4)])
    domains = Domains([TopologyView("racks", (RACK,))], placement)
    r0, r1 = domains.domains(RACK)
    request = Resources({"cpu": 1000})
    anywhere = interned(PodSpecView(request=request, node_selector=()))
    in_r0 = interned(PodSpecView(request=request, node_selector=((RACK, "r0"),)))
    assert placement.eligible(domains.pod_in(anywhere, r1)) == [1, 3]
    assert placement.eligible(domains.pod_in(in_r0, r1)) == []
    assert placement.eligible(domains.pod_in(in_r0, r0)) == [0, 2]
