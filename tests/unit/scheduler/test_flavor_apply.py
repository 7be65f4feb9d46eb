"""A simulation's next cycle sees the flavors the last one admitted into
(sluice/scheduler/flavor_apply.py, ``cycle.apply_decisions``)."""

from __future__ import annotations

from dataclasses import replace

from builders import NOW, gang, node, queue, snapshot

from sluice.api.constraints import Toleration
from sluice.api.flavor import FlavorView, Taint
from sluice.api.flavor_assignment import FlavorAssignment
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.flavor_apply import admitted_into, suspended_from

MODEL = "gpu.example.com/model"
TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
H100 = FlavorView("h100", {MODEL: "H100"}, (TAINT,))
A100 = FlavorView("a100", {MODEL: "A100"})
OWN = Toleration("own", "Exists")


def test_admitted_into_a_flavor_and_suspended_gives_the_pods_back_as_they_were() -> None:
    view = gang("j", "q", 2, selector={"zone": "a"}, tolerations=(OWN,), nvidia_com_gpu=1)
    inside = admitted_into(view, (("main", "h100"),), [H100, A100])
    pod = inside.pod_sets[0].pod
    assert dict(pod.node_selector) == {"zone": "a", MODEL: "H100"}
    assert pod.tolerations == (OWN, Toleration(TAINT.key, "Equal", TAINT.value, TAINT.effect))
    assert inside.flavors == (FlavorAssignment("main", "h100", ((MODEL, "H100"),), (TAINT,)),)
    assert suspended_from(inside) == view


def test_the_next_cycle_counts_what_the_last_admitted_in_each_flavor() -> None:
    nodes = [
        node("h1", labels={MODEL: "H100"}, cpu=8, nvidia_com_gpu=8),
        node("h2", labels={MODEL: "H100"}, cpu=8, nvidia_com_gpu=8),
        node("a1", labels={MODEL: "A100"}, cpu=8, nvidia_com_gpu=8),
    ]
    flavors = [{"name": "h100", "capability": {"nvidia.com/gpu": "8"}}, {"name": "a100"}]
    first = gang("first", "q", 1, nvidia_com_gpu=8)
    state = replace(snapshot([queue("q", flavors=flavors)], [first], nodes), flavors=[H100, A100])
    result = run_cycle(state)
    assert [d.flavors for d in result.decisions] == [(("main", "h100"),)]
    state = apply_decisions(state, result, NOW)
    state = replace(state, workloads=(*state.workloads, gang("second", "q", 1, nvidia_com_gpu=8)))
    result = run_cycle(state)
    # h100 is at team q's capability there: the second goes to a100.
    assert [(d.job, d.flavors) for d in result.decisions] == [("ns/second", (("main", "a100"),))]
