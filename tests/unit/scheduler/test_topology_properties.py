"""Properties of topology placement on random clusters of blocks and racks."""

from __future__ import annotations

from dataclasses import replace

from builders import gang, node, queue, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase, NodeView, WorkloadView
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import Snapshot
from sluice.scheduler.session import Session

BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
TOPOLOGY = TopologyView("default", (BLOCK, RACK, HOST))
GPU = "nvidia.com/gpu"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeView], list[WorkloadView]]:
    """Nodes in blocks and racks, and jobs already running on some of them."""
    nodes: list[NodeView] = []
    running: list[WorkloadView] = []
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 4))):
            for n in range(draw(st.integers(1, 3))):
                name = f"b{b}-r{r}-n{n}"
                size = draw(st.sampled_from([4, 8]))
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOST: name}
                nodes.append(node(name, labels=labels, cpu=32, **{GPU: size}))
                used = draw(st.integers(0, size))
                if used:
                    busy = gang(f"busy-{name}", "q", 1, selector={HOST: name}, cpu=1, **{GPU: used})
                    running.append(replace(busy, phase=JobPhase.RUNNING))
    return nodes, running


def free_pods(session: Session, nodes: tuple[int, ...], per_pod: int) -> int:
    """How many pods of ``per_pod`` gpus (cpu 1) the nodes hold, counted node by node."""
    free = session.placement.free
    return sum(
        min(free[i].get(GPU, 0) // (per_pod * 1000), free[i].get("cpu", 0) // 1000) for i in nodes
    )


def left(session: Session, nodes: tuple[int, ...], pods: int, per_pod: int) -> float:
    free = session.placement.free
    total = session.placement.total
    # The room left once the pods are in, less what they ask: the same for every domain.
    gpu = sum(free[i].get(GPU, 0) for i in nodes)
    cpu = sum(free[i].get("cpu", 0) for i in nodes)
    return cpu / total["cpu"] + gpu / total[GPU]


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(1, 6), st.sampled_from([1, 2, 4, 8]), st.booleans())
def test_a_domain_is_chosen_only_when_it_holds_every_pod_and_is_left_with_least_room(
    cluster: tuple[list[NodeView], list[WorkloadView]], pods: int, per_pod: int, required: bool
) -> None:
    nodes, running = cluster
    job = gang("train", "q", pods, created=1, cpu=1, **{GPU: per_pod})
    job = replace(job, topology=TopologyRequest(RACK, required))
    snap = replace(snapshot([queue("q")], [*running, job], nodes), topologies=(TOPOLOGY,))
    session = Session(snap)
    racks = session.domains.domains(RACK)
    holding = [d for d in racks if free_pods(session, d.nodes, per_pod) >= pods]
    blocks = session.domains.domains(BLOCK)
    in_block = [d for d in blocks if free_pods(session, d.nodes, per_pod) >= pods]
    decision = next((d for d in run_cycle(snap).decisions if d.job == "ns/train"), None)
    if holding:
        best = min(holding, key=lambda d: (left(session, d.nodes, pods, per_pod), d.value))
        assert decision is not None and decision.domain == best.text
    elif required:
        assert decision is None
    elif in_block:
        best = min(in_block, key=lambda d: (left(session, d.nodes, pods, per_pod), d.value))
        assert decision is not None and decision.domain == best.text
    else:
        anywhere = free_pods(session, tuple(range(len(nodes))), per_pod) >= pods
        assert (decision is not None and decision.domain == "") == anywhere


def equal_results(snap: Snapshot) -> None:
    plain, topology = run_cycle(snap), run_cycle(replace(snap, topologies=(TOPOLOGY,)))
    assert not plain.domains_free and topology.domains_free  # the one thing that differs
    assert plain == replace(topology, domains_free={})


@settings(max_examples=100, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 8])), max_size=8))
def test_workloads_that_ask_no_topology_are_placed_as_without_one(
    cluster: tuple[list[NodeView], list[WorkloadView]], asks: list[tuple[int, int]]
) -> None:
    nodes, running = cluster
    jobs = [
        gang(f"j{i}", "q", pods, created=i + 1, cpu=1, **{GPU: per_pod})
        for i, (pods, per_pod) in enumerate(asks)
    ]
    equal_results(snapshot([queue("q")], [*running, *jobs], nodes))
