"""A flavor and a Topology together: a pod set that asks for one domain is placed in a domain
of the nodes of the flavor it is given, since its pods carry the flavor's labels when they
are placed (docs/scheduler.md, *Flavors*)."""

from __future__ import annotations

from dataclasses import replace

from builders import gang, node, queue, snapshot

from sluice.api.flavor import FlavorView
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase, NodeView, WorkloadView
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult

GPU = "nvidia.com/gpu"
MODEL = "gpu.example.com/model"
BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
FABRIC = TopologyView("fabric", (BLOCK, RACK, HOST))
H100 = FlavorView("h100", {MODEL: "H100"}, topology="fabric")
A100 = FlavorView("a100", {MODEL: "A100"}, topology="fabric")
# Racks r0 and r1 hold H100 nodes, r2 A100 ones: two nodes of 8 GPUs each, one block.
MODELS = {"r0": "H100", "r1": "H100", "r2": "A100"}
NODES = [
    node(
        f"{rack}-{i}",
        labels={MODEL: model, BLOCK: "b0", RACK: rack, HOST: f"{rack}-{i}"},
        cpu=64,
        nvidia_com_gpu=8,
    )
    for rack, model in MODELS.items()
    for i in range(2)
]


def rack_job(name: str, pods: int, each: int) -> WorkloadView:
    job = gang(name, "team-a", pods, nvidia_com_gpu=each)
    return replace(job, topology=TopologyRequest(RACK, True))


def busy(host: str) -> WorkloadView:
    """A running job of a queue without flavors filling one node."""
    return gang(
        f"busy-{host}", "other", 1, nvidia_com_gpu=8, phase=JobPhase.RUNNING, selector={HOST: host}
    )


def cycle(
    flavors: list[str], jobs: list[WorkloadView], nodes: list[NodeView] = NODES
) -> CycleResult:
    team = queue("team-a", flavors=[{"name": f} for f in flavors])
    built = snapshot([team, queue("other")], jobs, nodes, config={"actions": "enqueue, allocate"})
    return run_cycle(replace(built, flavors=[H100, A100], topologies=(FABRIC,)))


def admitted(result: CycleResult) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    return {d.job: (d.domain, d.flavors) for d in result.decisions if d.action == "admit"}


def test_a_rack_asked_for_is_one_of_the_flavors_racks() -> None:
    # Without flavors the racks are equal and r0 comes first by name; a100 holds only r2.
    result = cycle(["a100"], [rack_job("train", 2, 8)])
    assert admitted(result) == {"ns/train": (f"{RACK}=r2", (("main", "a100"),))}


def test_a_flavor_with_room_in_no_single_rack_is_passed_over_for_the_next() -> None:
    # h100 has 16 GPUs free, 8 in each of its racks: a job of 2 x 8 in one rack goes to a100.
    jobs = [busy("r0-0"), busy("r1-0"), rack_job("train", 2, 8)]
    result = cycle(["h100", "a100"], jobs)
    assert admitted(result)["ns/train"] == (f"{RACK}=r2", (("main", "a100"),))
    # A job that fits in one of h100's racks stays in h100.
    jobs = [busy("r0-0"), busy("r1-0"), rack_job("small", 1, 8)]
    domain, flavors = admitted(cycle(["h100", "a100"], jobs))["ns/small"]
    assert flavors == (("main", "h100"),) and domain in (f"{RACK}=r0", f"{RACK}=r1")


def test_with_no_rack_left_in_its_only_flavor_the_job_waits() -> None:
    jobs = [busy("r2-0"), rack_job("train", 2, 8)]
    result = cycle(["a100"], jobs)
    assert "ns/train" not in admitted(result)
    reason = next(p.reason for p in result.pending if p.job == "ns/train")
    assert "flavor a100" in reason, reason
