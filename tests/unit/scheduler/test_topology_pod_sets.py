"""Topology per pod set: each pod set whose template asks a level goes whole into one domain
of its own; the workload's own ask puts all its pod sets in one together; all of it fits at
once or nothing is admitted."""

from __future__ import annotations

from dataclasses import replace

from builders import node, queue, snapshot
from test_topology import (
    EIGHT,
    ONLY_ADMIT,
    RACK,
    admissions,
    cluster,
    gpus,
    on,
    reason,
    with_topology,
)

from sluice.api.resources import EMPTY
from sluice.api.topology import TopologyRequest
from sluice.api.views import JobPhase, PodSet, WorkloadView
from sluice.scheduler.cycle import run_cycle

IN_RACK = TopologyRequest(RACK, True)
GPU = "nvidia.com/gpu"


def sets(
    name: str, *pod_sets: tuple[str, int, int, TopologyRequest | None], **kw: object
) -> WorkloadView:
    """A workload of these pod sets: (name, pods, gpus per pod, what its template asks)."""
    base = gpus(name, 1, 1, **kw)
    out = tuple(
        PodSet(set_name, pods, gpus(set_name, 1, per_pod).pod_sets[0].pod, topology=ask)
        for set_name, pods, per_pod, ask in pod_sets
    )
    request = EMPTY
    for s in out:
        request = request + s.request
    return replace(base, pod_sets=out, request=request)


def waits(racks: dict[str, tuple[str, int]], jobs: list[WorkloadView]) -> str:
    """Why train waits, admitted on these racks' nodes with nothing else."""
    snap = snapshot([queue("q")], jobs, cluster(racks), config=ONLY_ADMIT)
    result = run_cycle(with_topology(snap))
    assert admissions(result) == {}
    return reason(result, "train")


def test_two_pod_sets_asking_a_rack_each_go_in_two_racks() -> None:
    job = sets("train", ("a", 2, 8, IN_RACK), ("b", 2, 8, IN_RACK))
    snap = with_topology(snapshot([queue("q")], [job], cluster(EIGHT), config=ONLY_ADMIT))
    assert admissions(run_cycle(snap)) == {"train": f"a: {RACK}=r0, b: {RACK}=r1"}


def test_the_largest_pod_set_chooses_first_and_each_takes_the_rack_left_with_least_room() -> None:
    """r0 has one node (8) free: the small set, listed first, would fit there but the big one
    (16) chooses first, r1; then the small one goes where least room is left, r0."""
    busy = gpus("busy", 1, 8, phase=JobPhase.RUNNING, selector=on("r0-0"))
    job = sets("train", ("small", 1, 4, IN_RACK), ("big", 2, 8, IN_RACK), created=1)
    snap = snapshot([queue("q")], [busy, job], cluster(EIGHT), config=ONLY_ADMIT)
    result = run_cycle(with_topology(snap))
    assert admissions(result) == {"train": f"small: {RACK}=r0, big: {RACK}=r1"}


def test_the_workloads_own_ask_puts_all_its_pod_sets_in_one_rack() -> None:
    job = replace(sets("train", ("a", 1, 8, None), ("b", 1, 8, None)), topology=IN_RACK)
    snap = with_topology(snapshot([queue("q")], [job], cluster(EIGHT), config=ONLY_ADMIT))
    assert admissions(run_cycle(snap)) == {"train": f"{RACK}=r0"}


def test_a_pod_set_no_rack_holds_keeps_the_workload_out_naming_it() -> None:
    job = sets("train", ("launcher", 1, 0, None), ("workers", 3, 8, IN_RACK))
    snap = with_topology(snapshot([queue("q")], [job], cluster(EIGHT), config=ONLY_ADMIT))
    result = run_cycle(snap)
    assert admissions(result) == {}
    assert reason(result, "train") == (
        f"pod set workers: no {RACK} holds 3 x cpu 1, nvidia.com/gpu 8: best rack r0 has"
        " cpu 128 free of 128, nvidia.com/gpu 16 free of 16 (nodes r0-0, r0-1)"
    )


def test_a_pod_set_that_fits_alone_but_not_beside_the_others_is_named_with_them() -> None:
    """32 gpus free, 16 of them in r0 and 8 in each other rack: a takes r0, and b finds no
    rack left that holds it."""
    racks = {"r0": ("b0", 8), "r1": ("b0", 8), "r2": ("b0", 8)}
    busy = [gpus(f"busy{i}", 1, 8, phase=JobPhase.RUNNING, selector=on(f"r{i}-0")) for i in (1, 2)]
    job = sets("train", ("a", 2, 8, IN_RACK), ("b", 2, 8, IN_RACK), created=1)
    assert waits(racks, [*busy, job]) == (
        f"pod set b: no {RACK} holds 2 x cpu 1, nvidia.com/gpu 8 beside the pod sets placed"
        f" before it (a: {RACK}=r0)"
    )


def test_the_pod_sets_that_ask_nothing_must_fit_too_on_the_room_left() -> None:
    """24 gpus free: r0's 16 and 4 on each node of r1. The workers take r0, and no node is
    left with room for the launcher's 8."""
    racks = {"r0": ("b0", 8), "r1": ("b0", 8)}
    busy = [gpus(f"busy{i}", 1, 4, phase=JobPhase.RUNNING, selector=on(f"r1-{i}")) for i in (0, 1)]
    job = sets("train", ("launcher", 1, 8, None), ("workers", 2, 8, IN_RACK), created=1)
    assert waits(racks, [*busy, job]) == (
        f"its pod sets fit in their domains (workers: {RACK}=r0), not the others with them:"
        " 1 x cpu 1, nvidia.com/gpu 8 (launcher)"
    )
    fits = sets("train", ("launcher", 1, 4, None), ("workers", 2, 8, IN_RACK), created=1)
    snap = snapshot([queue("q")], [*busy, fits], cluster(racks), config=ONLY_ADMIT)
    assert admissions(run_cycle(with_topology(snap))) == {"train": f"workers: {RACK}=r0"}


def test_a_preferred_pod_set_no_rack_holds_goes_anywhere_and_is_not_recorded() -> None:
    wide = TopologyRequest(RACK, False)
    job = sets("train", ("a", 2, 8, IN_RACK), ("b", 20, 1, wide))  # b: 20 gpus, no rack has
    nodes = cluster({"r0": ("b0", 8), "r1": ("b0", 8)})
    snap = with_topology(snapshot([queue("q")], [job], nodes, config=ONLY_ADMIT))
    result = run_cycle(replace(snap, topologies=(replace(snap.topologies[0], levels=(RACK,)),)))
    assert admissions(result) == {}  # 16 + 20 gpus: more than the 32 there are
    job = sets("train", ("a", 1, 8, IN_RACK), ("b", 20, 1, wide))
    snap = with_topology(snapshot([queue("q")], [job], nodes, config=ONLY_ADMIT))
    result = run_cycle(replace(snap, topologies=(replace(snap.topologies[0], levels=(RACK,)),)))
    assert admissions(result) == {"train": f"a: {RACK}=r0"}


def test_reclaim_for_a_pod_set_takes_victims_in_its_rack_only() -> None:
    """b borrowed every gpu but r1-1's; a's workers (2 x 8) need one whole rack: the victim
    in r1, not v2 (the first in victim order, on r0-1, which any two nodes would have taken);
    the launcher (cpu only) fits beside."""
    queues = [queue("a", deserved={"nvidia.com/gpu": 16}), queue("b")]
    racks = {"r0": ("b0", 8), "r1": ("b0", 8)}
    running = [
        replace(
            gpus(f"v{n}", 1, 8, phase=JobPhase.RUNNING, admitted=n, selector=on(host)), queue="b"
        )
        for n, host in enumerate(["r1-0", "r0-0", "r0-1"])
    ]
    job = sets("train", ("launcher", 1, 0, None), ("workers", 2, 8, IN_RACK), created=10)
    snap = with_topology(snapshot(queues, [*running, replace(job, queue="a")], cluster(racks)))
    result = run_cycle(snap)
    assert [(d.action, d.job, d.domain) for d in result.decisions] == [
        ("reclaim", "ns/v0", ""),
        ("admit", "ns/train", f"workers: {RACK}=r1"),
    ]


def test_preempt_for_a_pod_set_stays_in_its_rack() -> None:
    racks = {"r0": ("b0", 8), "r1": ("b0", 8)}
    low = [
        gpus(f"low{n}", 1, 8, phase=JobPhase.RUNNING, admitted=n, selector=on(host))
        for n, host in enumerate(["r0-0", "r1-0", "r1-1"])
    ]
    high = sets(
        "high",
        ("launcher", 1, 0, None),
        ("workers", 2, 8, IN_RACK),
        created=10,
        priority_class="high",
    )
    config = {"actions": "enqueue, allocate, preempt"}
    snap = snapshot(
        [queue("q")], [*low, high], cluster(racks), config=config, priority_classes={"high": 100}
    )
    result = run_cycle(with_topology(snap))
    assert [(d.action, d.job, d.domain) for d in result.decisions] == [
        ("preempt", "ns/low0", ""),
        ("admit", "ns/high", f"workers: {RACK}=r0"),
    ]


def test_victims_are_looked_for_where_the_pod_set_that_asks_fits_not_the_others() -> None:
    """The helper (cpu only) may only go on a node of no rack: no rack could ever hold the
    whole workload, yet the workers' rack is freed for the workers alone (reclaim, then
    preempt)."""
    loose = node("loose", labels={"pool": "loose"}, cpu=64)  # in no rack
    nodes = [*cluster({"r0": ("b0", 8), "r1": ("b0", 8)}), loose]
    helper = PodSet("helper", 1, gpus("helper", 1, 0, selector={"pool": "loose"}).pod_sets[0].pod)

    def with_helper(name: str, **kw: object) -> WorkloadView:
        job = sets(name, ("workers", 2, 8, IN_RACK), created=10, **kw)
        return replace(job, pod_sets=(*job.pod_sets, helper), request=job.request + helper.request)

    job = with_helper("train")
    hosts = ["r0-0", "r1-0", "r1-1"]
    reclaimed = [
        replace(gpus(f"v{n}", 1, 8, phase=JobPhase.RUNNING, admitted=n, selector=on(h)), queue="b")
        for n, h in enumerate(hosts)
    ]
    queues = [queue("a", deserved={GPU: 16}), queue("b")]
    snap = snapshot(queues, [*reclaimed, replace(job, queue="a")], nodes)
    assert [(d.action, d.job, d.domain) for d in run_cycle(with_topology(snap)).decisions] == [
        ("reclaim", "ns/v0", ""),
        ("admit", "ns/train", f"workers: {RACK}=r0"),
    ]
    low = [
        gpus(f"low{n}", 1, 8, phase=JobPhase.RUNNING, admitted=n, selector=on(h))
        for n, h in enumerate(hosts)
    ]
    high = with_helper("high", priority_class="high")
    config = {"actions": "enqueue, allocate, preempt"}
    snap = snapshot(
        [queue("q")], [*low, high], nodes, config=config, priority_classes={"high": 100}
    )
    assert [(d.action, d.job, d.domain) for d in run_cycle(with_topology(snap)).decisions] == [
        ("preempt", "ns/low0", ""),
        ("admit", "ns/high", f"workers: {RACK}=r0"),
    ]
