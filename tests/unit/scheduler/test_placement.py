"""Placement: what is really free on each node, and whether every pod of a job fits at once."""

from __future__ import annotations

import pytest
from builders import gang, node, pod, queue, snapshot

from sluice.api.constraints import NodeRequirement, PodSpecView, Taint, Toleration
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, NodeView
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult
from sluice.scheduler.placement import Placement, refusal

ONLY_ADMIT = {"actions": "enqueue"}
JUST_NOW = 3590  # seconds after T0: NOW is an hour after it


def admitted(result: CycleResult) -> list[str]:
    return [d.job.split("/")[1] for d in result.decisions if d.action == "admit"]


def reason(result: CycleResult, job: str) -> str:
    return next(p.reason for p in result.pending if p.job == f"ns/{job}").partition("; ")[2]


# -- what is free --------------------------------------------------------------------------


def test_pods_outside_sluice_take_room_from_what_it_admits() -> None:
    """A Deployment's pods on the node are nobody's quota, and still hold the node."""
    serving = [pod(f"web-{i}", "n1", cpu=2) for i in range(3)]
    jobs = [gang("a", "q", 1, cpu=2), gang("b", "q", 1, cpu=2, created=1)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=8)], config=ONLY_ADMIT, pods=serving))
    assert admitted(result) == ["a"]
    assert reason(result, "b") == "cluster has cpu 0 free, job requests cpu 2"
    # Root's capacity stays the nodes'; the pods are not anyone's allocation.
    assert result.cluster_total == Resources({"cpu": 8000})
    assert result.queues["q"].allocated == Resources({"cpu": 2000})


def test_finished_pods_and_pods_not_bound_hold_no_room() -> None:
    pods = [pod("done", "n1", cpu=4, finished=True), pod("waiting", None, cpu=4)]
    result = run_cycle(snapshot([queue("q")], [gang("a", "q", 1, cpu=4)], [node(cpu=4)], pods=pods))
    assert admitted(result) == ["a"]


def test_a_suspended_jobs_pods_still_terminating_hold_their_node() -> None:
    victim = gang("old", "q", 1, cpu=4)  # suspended: its pod is going away, not gone yet
    pods = [pod("old-0", "n1", owner=victim, terminating=True)]
    jobs = [victim, gang("new", "q", 1, cpu=4, created=1)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=4)], config=ONLY_ADMIT, pods=pods))
    assert admitted(result) == []
    assert reason(result, "new") == "cluster has cpu 0 free, job requests cpu 4"


def test_an_admitted_jobs_own_pods_replace_its_reservation_never_add_to_it() -> None:
    train = gang("train", "q", 2, cpu=2, phase=JobPhase.RUNNING)
    pods = [pod("train-0", "n1", owner=train), pod("train-1", "n1", owner=train)]
    jobs = [train, gang("next", "q", 1, cpu=4, created=1), gang("last", "q", 1, cpu=1, created=2)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=8)], config=ONLY_ADMIT, pods=pods))
    assert admitted(result) == ["next"]  # 8 - 4 (its two pods, counted once) = 4
    assert reason(result, "last") == "cluster has cpu 0 free, job requests cpu 1"


def test_an_admitted_job_holds_its_whole_request_before_its_pods_exist() -> None:
    """Admitted a moment ago, no pod yet: its room is kept on a node all the same."""
    train = gang("train", "q", 1, cpu=6, phase=JobPhase.INQUEUE, admitted=JUST_NOW)
    jobs = [train, gang("big", "q", 1, cpu=6, created=1)]
    nodes = [node("n1", cpu=8), node("n2", cpu=4)]
    result = run_cycle(snapshot([queue("q")], jobs, nodes, config=ONLY_ADMIT, pods=[]))
    assert admitted(result) == []  # 6 free in total, not on one node
    assert reason(result, "big") == (
        "no node can hold a pod of cpu 6: the most free on one node is cpu 4 (n2)"
    )


def test_pods_an_admitted_job_has_beyond_its_request_count_too() -> None:
    """A pod that names the job as its controller cannot smuggle room past its quota."""
    train = gang("train", "q", 1, cpu=2, phase=JobPhase.RUNNING)
    pods = [pod("train-0", "n1", owner=train), pod("extra", "n1", owner=train, cpu=4)]
    jobs = [train, gang("next", "q", 1, cpu=4, created=1)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=8)], config=ONLY_ADMIT, pods=pods))
    assert admitted(result) == []
    assert reason(result, "next") == "cluster has cpu 2 free, job requests cpu 4"


@pytest.mark.parametrize(
    "broken",
    [node("n2", cpu=8, ready=False), node("n2", cpu=8, cordoned=True)],
    ids=["not Ready", "cordoned"],
)
def test_nodes_not_ready_or_cordoned_hold_no_room(broken: NodeView) -> None:
    jobs = [gang("a", "q", 1, cpu=8), gang("b", "q", 1, cpu=8, created=1)]
    stray = [pod("stray", "n2", cpu=8)]  # on the broken node: counts for nothing
    result = run_cycle(
        snapshot([queue("q")], jobs, [node("n1", cpu=8), broken], config=ONLY_ADMIT, pods=stray)
    )
    assert admitted(result) == ["a"]
    assert result.cluster_total == Resources({"cpu": 8000})
    assert reason(result, "b") == "cluster has cpu 0 free, job requests cpu 8"


# -- whether the pods fit at once ----------------------------------------------------------


def test_eight_free_gpus_spread_four_and_four_hold_no_eight_gpu_pod() -> None:
    nodes = [node("gpu-1", nvidia_com_gpu=4), node("gpu-2", nvidia_com_gpu=4)]
    alone = run_cycle(snapshot([queue("q")], [gang("big", "q", 1, nvidia_com_gpu=8)], nodes))
    assert admitted(alone) == []
    assert reason(alone, "big") == (
        "no node can hold a pod of nvidia.com/gpu 8: the most free on one node is"
        " nvidia.com/gpu 4 (gpu-1)"
    )
    # Two pods of four fit, behind it; the reason then says what is left.
    jobs = [
        gang("big", "q", 1, nvidia_com_gpu=8),
        gang("pair", "q", 2, nvidia_com_gpu=4, created=1),
    ]
    result = run_cycle(snapshot([queue("q")], jobs, nodes, config=ONLY_ADMIT))
    assert admitted(result) == ["pair"]
    assert reason(result, "big") == (
        "cluster has nvidia.com/gpu 0 free, job requests nvidia.com/gpu 8"
    )


def test_a_gang_that_fits_in_total_but_not_per_node_waits_and_says_how_many_fit() -> None:
    nodes = [node("a", nvidia_com_gpu=5), node("b", nvidia_com_gpu=5)]
    result = run_cycle(
        snapshot([queue("q")], [gang("gang", "q", 3, nvidia_com_gpu=3)], nodes, pods=[])
    )
    assert admitted(result) == []
    assert reason(result, "gang") == (
        "only 2 of its 3 pods of nvidia.com/gpu 3 fit on the nodes at once (a 1, b 1)"
    )


def test_every_resource_of_a_pod_must_fit_on_one_node() -> None:
    nodes = [node("cpus", cpu=16, nvidia_com_gpu=0), node("gpus", cpu=1, nvidia_com_gpu=8)]
    result = run_cycle(snapshot([queue("q")], [gang("j", "q", 1, cpu=4, nvidia_com_gpu=1)], nodes))
    assert reason(result, "j") == (
        "no node can hold a pod of cpu 4, nvidia.com/gpu 1 at once: the closest is cpus with"
        " cpu 16, nvidia.com/gpu 0 free"
    )


def test_a_resource_no_node_has() -> None:
    result = run_cycle(
        snapshot([queue("q")], [gang("j", "q", 1, cpu=1, fpga=1)], [node(cpu=8, fpga=0)])
    )
    assert "cluster has fpga 0 free" in reason(result, "j")
    placement = Placement([node(cpu=8)])
    assert placement.explain(PodSpecView(Resources.parse({"fpga": "1"})), 1) == "no node has fpga"


def test_node_selector_affinity_and_taints_pick_the_nodes() -> None:
    nodes = [
        node("plain", cpu=8),
        node("ssd", cpu=8, labels={"disk": "ssd"}),
        node("ssd-tainted", cpu=8, labels={"disk": "ssd"}, taints=(Taint("team", "x"),)),
    ]
    tolerant = (Toleration("team", "Equal", "x", "NoSchedule"),)
    on_ssd = gang("on-ssd", "q", 2, cpu=8, selector={"disk": "ssd"})
    result = run_cycle(snapshot([queue("q")], [on_ssd], nodes, config=ONLY_ADMIT))
    assert admitted(result) == []  # its second pod has nowhere to go
    assert reason(result, "on-ssd") == (
        "only 1 of its 2 pods of cpu 8 fit on the nodes at once (ssd 1)"
        " (among the 1 of 3 nodes its pods may go on)"
    )
    jobs = [on_ssd, gang("tolerant", "q", 2, cpu=8, selector={"disk": "ssd"}, tolerations=tolerant)]
    assert admitted(run_cycle(snapshot([queue("q")], jobs, nodes, config=ONLY_ADMIT))) == [
        "tolerant"
    ]


def test_a_pod_no_node_may_take_says_why_node_by_node() -> None:
    nodes = [
        node("a", cpu=8),
        node("b", cpu=8, labels={"pool": "x"}, taints=(Taint("gpu", "", "NoExecute"),)),
        node("c", cpu=8, labels={"pool": "x"}, ready=False),
        node("d", cpu=8, labels={"pool": "x"}, cordoned=True),
    ]
    result = run_cycle(
        snapshot([queue("q")], [gang("j", "q", 1, cpu=1, selector={"pool": "x"})], nodes)
    )
    assert reason(result, "j") == (
        "no node may take its pods: 1 cordoned, 1 not Ready, 1 not matching its nodeSelector,"
        " 1 with taint gpu:NoExecute it does not tolerate"
    )


def test_a_pod_that_requests_nothing_still_needs_a_node_that_takes_it() -> None:
    jobs = [gang("nothing", "q", 1, selector={"pool": "none"}), gang("free", "q", 1, created=1)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=1)], config={"actions": "backfill"}))
    assert admitted(result) == ["free"]
    assert reason(result, "nothing") == "no node may take its pods: 1 not matching its nodeSelector"


def term(*requirements: NodeRequirement) -> tuple[NodeRequirement, ...]:
    return requirements


LABELLED = node("n7", labels={"gpu": "a100", "gen": "4"})


@pytest.mark.parametrize(
    ("requirement", "takes"),
    [
        (NodeRequirement("gpu", "In", ("a100", "h100")), True),
        (NodeRequirement("gpu", "In", ("h100",)), False),
        (NodeRequirement("gpu", "NotIn", ("h100",)), True),
        (NodeRequirement("gpu", "NotIn", ("a100",)), False),
        (NodeRequirement("zone", "NotIn", ("a",)), True),  # absent: not in
        (NodeRequirement("gpu", "Exists"), True),
        (NodeRequirement("zone", "Exists"), False),
        (NodeRequirement("zone", "DoesNotExist"), True),
        (NodeRequirement("gpu", "DoesNotExist"), False),
        (NodeRequirement("gen", "Gt", ("3",)), True),
        (NodeRequirement("gen", "Gt", ("4",)), False),
        (NodeRequirement("gen", "Lt", ("5",)), True),
        (NodeRequirement("gen", "Lt", ("4",)), False),
        (NodeRequirement("gpu", "Gt", ("1",)), False),  # not an integer
        (NodeRequirement("zone", "Lt", ("9",)), False),  # absent
        (NodeRequirement("metadata.name", "In", ("n7",), on_field=True), True),
        (NodeRequirement("metadata.name", "NotIn", ("n7",), on_field=True), False),
    ],
)
def test_node_affinity_operators(requirement: NodeRequirement, takes: bool) -> None:
    pod_spec = PodSpecView(Resources(), affinity=(term(requirement),))
    assert (refusal(pod_spec, LABELLED) is None) is takes


def test_affinity_terms_are_alternatives_and_requirements_of_a_term_all_hold() -> None:
    yes, no = NodeRequirement("gpu", "Exists"), NodeRequirement("zone", "Exists")
    assert refusal(PodSpecView(Resources(), affinity=(term(no), term(yes))), LABELLED) is None
    assert refusal(PodSpecView(Resources(), affinity=(term(yes, no),)), LABELLED) is not None
    # An empty term matches no node, as in Kubernetes.
    assert refusal(PodSpecView(Resources(), affinity=(term(),)), LABELLED) is not None


TAINT = Taint("gpu", "a100", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "takes"),
    [
        (None, False),
        (Toleration("gpu", "Equal", "a100", "NoSchedule"), True),
        (Toleration("gpu", "Equal", "h100", "NoSchedule"), False),
        (Toleration("gpu", "Exists", "", "NoSchedule"), True),
        (Toleration("gpu", "Exists", "", ""), True),  # every effect
        (Toleration("gpu", "Exists", "", "NoExecute"), False),
        (Toleration("", "Exists", "", ""), True),  # every taint
        (Toleration("other", "Exists", "", ""), False),
    ],
)
def test_tolerations_against_a_taint(toleration: Toleration | None, takes: bool) -> None:
    tainted = node("t", taints=(TAINT,))
    pod_spec = PodSpecView(Resources(), tolerations=(toleration,) if toleration else ())
    assert (refusal(pod_spec, tainted) is None) is takes


def test_prefer_no_schedule_keeps_no_pod_off() -> None:
    soft = node("t", taints=(Taint("gpu", "", "PreferNoSchedule"),))
    assert refusal(PodSpecView(Resources()), soft) is None


def test_admitted_jobs_pods_not_bound_yet_are_kept_on_the_nodes_largest_first() -> None:
    """Two admitted jobs without pods: the 6-cpu one is kept first, on n1, the 3-cpu one then
    on n2, so a 4-cpu pod fits nowhere (in the order they came, 3 on n1 and 6 on n2 would
    have left n1 room for it)."""
    jobs = [
        gang("three", "q", 1, cpu=3, phase=JobPhase.INQUEUE, admitted=JUST_NOW),
        gang("six", "q", 1, cpu=6, phase=JobPhase.INQUEUE, created=1, admitted=JUST_NOW),
        gang("four", "q", 1, cpu=4, created=2),
    ]
    nodes = [node("n1", cpu=8), node("n2", cpu=6)]
    result = run_cycle(snapshot([queue("q")], jobs, nodes, config=ONLY_ADMIT, pods=[]))
    assert admitted(result) == []
    assert reason(result, "four") == (
        "no node can hold a pod of cpu 4: the most free on one node is cpu 3 (n2)"
    )


def test_the_failure_memo_forgets_when_room_comes_back() -> None:
    placement = Placement([node("n1", cpu=4)])
    big = PodSpecView(Resources.parse({"cpu": "4"}))
    placement.hold({0: {"cpu": 2000}})
    assert placement.place(big, 1) is None and placement.place(big, 2) is None
    placement.release({0: {"cpu": 2000}})
    assert placement.place(big, 1) == [(0, 1)]


# -- taking room back ----------------------------------------------------------------------


def test_reclaim_takes_the_victim_on_the_node_the_pods_can_use_and_spares_the_other() -> None:
    """a3 comes first in victim order, but freeing its 4 GPUs on n1 cannot hold an 8-GPU pod
    while a2's node can: only a2 goes."""
    a1 = gang("a1", "a", 1, nvidia_com_gpu=4, phase=JobPhase.RUNNING, admitted=0)
    a2 = gang("a2", "a", 1, nvidia_com_gpu=8, phase=JobPhase.RUNNING, admitted=10)
    a3 = gang("a3", "a", 1, nvidia_com_gpu=4, phase=JobPhase.RUNNING, admitted=20)
    pods = [pod("a1-0", "n1", owner=a1), pod("a2-0", "n2", owner=a2), pod("a3-0", "n1", owner=a3)]
    jobs = [a1, a2, a3, gang("b1", "b", 1, nvidia_com_gpu=8)]
    nodes = [node("n1", nvidia_com_gpu=8), node("n2", nvidia_com_gpu=8)]
    result = run_cycle(snapshot([queue("a"), queue("b")], jobs, nodes, pods=pods))
    assert [(d.action, d.job) for d in result.decisions] == [
        ("reclaim", "ns/a2"),
        ("admit", "ns/b1"),
    ]


def test_reclaim_takes_nothing_when_the_pods_would_still_not_fit() -> None:
    """Each node keeps 4 GPUs of a Deployment: freeing every victim leaves 4 + 4, never 8."""
    victims = [
        gang(f"a{i}", "a", 1, nvidia_com_gpu=4, phase=JobPhase.RUNNING, admitted=i)
        for i in range(2)
    ]
    pods = [pod("a0-0", "n1", owner=victims[0]), pod("a1-0", "n2", owner=victims[1])]
    pods += [pod("web-1", "n1", nvidia_com_gpu=4), pod("web-2", "n2", nvidia_com_gpu=4)]
    jobs = [*victims, gang("b1", "b", 1, nvidia_com_gpu=8)]
    nodes = [node("n1", nvidia_com_gpu=8), node("n2", nvidia_com_gpu=8)]
    result = run_cycle(snapshot([queue("a"), queue("b")], jobs, nodes, pods=pods))
    assert result.decisions == ()
    assert (
        reason(result, "b1") == "cluster has nvidia.com/gpu 0 free, job requests nvidia.com/gpu 8"
    )


def test_reclaim_for_room_on_one_node_when_the_total_would_do() -> None:
    """4 GPUs free on each node: enough in total, not on one node. The borrower's job on n1
    goes, and b's pod gets n1 whole."""
    a1 = gang("a1", "a", 1, nvidia_com_gpu=4, phase=JobPhase.RUNNING)
    a2 = gang("a2", "a", 1, nvidia_com_gpu=4, phase=JobPhase.RUNNING)
    pods = [pod("a1-0", "n1", owner=a1), pod("a2-0", "n2", owner=a2)]
    nodes = [node("n1", nvidia_com_gpu=8), node("n2", nvidia_com_gpu=8)]
    queues = [
        queue("a", deserved={"nvidia.com/gpu": "4"}),
        queue("b", deserved={"nvidia.com/gpu": "12"}),
    ]
    config = {"actions": "enqueue, reclaim", "tiers": [{"plugins": [{"name": "capacity"}]}]}
    result = run_cycle(
        snapshot(
            queues, [a1, a2, gang("b1", "b", 1, nvidia_com_gpu=8)], nodes, pods=pods, config=config
        )
    )
    reclaimed = [d.job for d in result.decisions if d.action == "reclaim"]
    assert len(reclaimed) == 1 and [d.job for d in result.decisions if d.action == "admit"] == [
        "ns/b1"
    ]


def test_preempt_spares_a_lower_priority_job_on_a_node_the_pods_cannot_use() -> None:
    low_gpu = gang(
        "low-a", "q", 1, nvidia_com_gpu=8, phase=JobPhase.RUNNING, admitted=0, priority_class="low"
    )
    low_other = gang(
        "low-b", "q", 1, nvidia_com_gpu=8, phase=JobPhase.RUNNING, admitted=5, priority_class="low"
    )
    pods = [pod("a-0", "fast", owner=low_gpu), pod("b-0", "slow", owner=low_other)]
    nodes = [node("fast", nvidia_com_gpu=8, labels={"gpu": "h100"}), node("slow", nvidia_com_gpu=8)]
    urgent = gang(
        "urgent", "q", 1, nvidia_com_gpu=8, selector={"gpu": "h100"}, priority_class="high"
    )
    result = run_cycle(
        snapshot(
            [queue("q")],
            [low_gpu, low_other, urgent],
            nodes,
            pods=pods,
            config={"actions": "enqueue, preempt"},
            priority_classes={"low": 1, "high": 100},
        )
    )
    # low-b comes first (admitted last) but sits on a node urgent's pod may not use.
    assert [(d.action, d.job) for d in result.decisions] == [
        ("preempt", "ns/low-a"),
        ("admit", "ns/urgent"),
    ]
