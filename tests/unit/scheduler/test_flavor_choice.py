"""A flavor for each pod set, chosen at admission (sluice/scheduler/flavor_choice.py), and
reclaim and preempt in that flavor (sluice/scheduler/actions/flavor_victims.py)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from builders import gang, node, queue, res, snapshot

from sluice.api.constraints import PodSpecView
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import FlavorAssignment
from sluice.api.views import JobPhase, NodeView, PodSet, WorkloadView
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.decision_pass import DecisionPass
from sluice.scheduler.model import CycleResult

GPU = "nvidia.com/gpu"
MODEL = "gpu.example.com/model"
H100 = FlavorView("h100", {MODEL: "H100"})
A100 = FlavorView("a100", {MODEL: "A100"})
ONLY_ADMIT = {"actions": "enqueue, allocate, backfill"}
CAPACITY = {"tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "capacity"}]}]}


def gpu_node(name: str, model: str, gpus: int = 8) -> NodeView:
    return node(name, labels={MODEL: model}, cpu=64, nvidia_com_gpu=gpus)


NODES = [gpu_node("h1", "H100"), gpu_node("h2", "H100"), gpu_node("a1", "A100")]


def entry(name: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    for key, value in fields.items():
        out[key] = {"resource": value} if key == "guarantee" else value
    return out


def team(name: str = "team-a", *flavors: dict[str, Any], **spec: Any) -> Any:
    return queue(name, flavors=list(flavors) or [entry("h100"), entry("a100")], **spec)


def gpus(name: str, count: int, each: int = 1, **kw: Any) -> WorkloadView:
    return gang(name, kw.pop("queue_name", "team-a"), count, nvidia_com_gpu=each, **kw)


def holding(view: WorkloadView, flavor: str) -> WorkloadView:
    """Admitted into ``flavor``: running, its pods selecting the flavor's nodes."""
    model = {"h100": "H100", "a100": "A100"}[flavor]
    pods = tuple(
        replace(p, pod=PodSpecView(p.pod.request, node_selector=((MODEL, model),)))
        for p in view.pod_sets
    )
    record = tuple(FlavorAssignment(p.name, flavor) for p in pods)
    return replace(view, phase=JobPhase.RUNNING, pod_sets=pods, flavors=record)


def cycle(
    queues: list[Any],
    jobs: list[WorkloadView],
    nodes: list[NodeView] = NODES,
    flavors: tuple[FlavorView, ...] = (H100, A100),
    **config: Any,
) -> CycleResult:
    built = snapshot(queues, jobs, nodes, config=config or None)
    return run_cycle(replace(built, flavors=list(flavors)))


def admitted(result: CycleResult) -> dict[str, tuple[tuple[str, str], ...]]:
    return {d.job: d.flavors for d in result.decisions if d.action == "admit"}


def reason(result: CycleResult, job: str) -> str:
    return next(p.reason for p in result.pending if p.job == job)


def admit_reason(result: CycleResult, job: str) -> str:
    return next(d.reason for d in result.decisions if d.job == job and d.action == "admit")


def test_the_first_flavor_is_taken_when_it_fits() -> None:
    result = cycle([team()], [gpus("j", 2, 2)])
    assert admitted(result) == {"ns/j": (("main", "h100"),)}
    assert admit_reason(result, "ns/j").endswith("fits in queue team-a, in flavor h100")


def test_the_next_flavor_is_taken_when_the_first_is_full() -> None:
    full = holding(gpus("full", 2, 8), "h100")
    result = cycle([team()], [full, gpus("j", 2, 2)])
    assert admitted(result) == {"ns/j": (("main", "a100"),)}


def test_jobs_alike_are_each_given_a_flavor_on_the_room_the_ones_before_left() -> None:
    # The choice for jobs alike is made once only while the room stays as it was.
    jobs = [gpus(f"j{i}", 1, 8) for i in range(1, 5)]
    result = cycle([team()], jobs)
    h100, a100 = (("main", "h100"),), (("main", "a100"),)
    assert admitted(result) == {"ns/j1": h100, "ns/j2": h100, "ns/j3": a100}


def test_the_next_flavor_is_taken_when_the_first_is_at_its_capability() -> None:
    capped = team("team-a", entry("h100", capability={GPU: "4"}), entry("a100"))
    result = cycle([capped], [holding(gpus("held", 1, 2), "h100"), gpus("j", 1, 4)])
    assert admitted(result) == {"ns/j": (("main", "a100"),)}


BORROWER = team("team-a", entry("h100", deserved={GPU: "4"}), entry("a100", deserved={GPU: "8"}))


def test_when_can_borrow_borrow_stops_at_the_flavor_it_borrows_in() -> None:
    result = cycle([BORROWER], [gpus("j", 6)], **CAPACITY)
    assert admitted(result) == {"ns/j": (("main", "h100"),)}


def test_when_can_borrow_try_next_flavor_takes_one_it_fits_in() -> None:
    fungible = team(
        "team-a",
        entry("h100", deserved={GPU: "4"}),
        entry("a100", deserved={GPU: "8"}),
        flavorFungibility={"whenCanBorrow": "TryNextFlavor"},
    )
    result = cycle([fungible], [gpus("j", 6)], **CAPACITY)
    assert admitted(result) == {"ns/j": (("main", "a100"),)}
    # Borrowing is still taken when no flavor fits without it.
    result = cycle([fungible], [gpus("j", 10)], **CAPACITY)
    assert admitted(result) == {"ns/j": (("main", "h100"),)}


# team-a is owed 8 H100 GPUs; team-b, owed 4, holds all 16; the A100 node is free.
OWED = [
    entry("h100", deserved={GPU: "8"}),
    entry("a100", deserved={GPU: "8"}),
]
LENDER = [
    team("team-b", entry("h100", deserved={GPU: "4"}), entry("a100", deserved={GPU: "4"})),
    holding(gpus("b1", 1, 8, queue_name="team-b", admitted=0), "h100"),
    holding(gpus("b2", 1, 8, queue_name="team-b", admitted=10), "h100"),  # goes first
]


def test_when_can_reclaim_try_next_flavor_takes_a_flavor_it_fits_in() -> None:
    lender, *held = LENDER
    result = cycle([team("team-a", *OWED), lender], [*held, gpus("j", 1, 4)], **CAPACITY)
    assert admitted(result) == {"ns/j": (("main", "a100"),)}
    assert not [d for d in result.decisions if d.action == "reclaim"]


def test_when_can_reclaim_reclaim_takes_back_in_that_flavor() -> None:
    lender, *held = LENDER
    mine = team("team-a", *OWED, flavorFungibility={"whenCanReclaim": "Reclaim"})
    result = cycle([mine, lender], [*held, gpus("j", 1, 4)], **CAPACITY)
    assert [(d.action, d.job) for d in result.decisions] == [
        ("reclaim", "ns/b2"),
        ("admit", "ns/j"),
    ]
    assert admitted(result) == {"ns/j": (("main", "h100"),)}
    assert admit_reason(result, "ns/j") == (
        "reclaim: room taken back for queue team-a, in flavor h100"
    )


def test_reclaim_in_a_flavor_takes_only_workloads_holding_in_it() -> None:
    # team-b borrows in a100 and h100; team-a reclaims in h100 (its pods select it), and the
    # a100 workload, though newer, is left alone.
    lender, *held = LENDER
    newer = holding(gpus("b3", 1, 8, queue_name="team-b", admitted=100), "a100")
    selects = gpus("j", 1, 4, selector={MODEL: "H100"})
    result = cycle([team("team-a", *OWED), lender], [*held, newer, selects], **CAPACITY)
    reclaimed = [d.job for d in result.decisions if d.action == "reclaim"]
    assert reclaimed == ["ns/b2"]
    assert admitted(result) == {"ns/j": (("main", "h100"),)}


def test_no_victim_is_taken_when_freeing_them_cannot_make_it_fit() -> None:
    # Owed 8 H100 GPUs, it asks 12: within nothing it is owed, freeing all cannot place it.
    lender, *held = LENDER
    owed = team("team-a", entry("h100", deserved={GPU: "16"}), flavorFungibility={})
    big = gpus("j", 1, 12, selector={MODEL: "H100"})  # no node has 12 GPUs
    result = cycle([owed, lender], [*held, big], **CAPACITY)
    assert [d for d in result.decisions if d.action != "admit"] == []
    assert admitted(result) == {}


def test_preempt_in_a_flavor_takes_lower_priority_workloads_holding_in_it() -> None:
    # team-a holds one H100 node, team-c (not reclaimable) the other: the high-priority job,
    # within team-a's deserved in h100, finds no room but by preempting there.
    mine = team("team-a", entry("h100", deserved={GPU: "16"}))
    other = team("team-c", entry("h100"), reclaimable=False)
    low_h = holding(gpus("low-h", 1, 8, admitted=10), "h100")
    low_a = holding(gpus("low-a", 1, 8, admitted=20), "a100")  # newer, in a100
    theirs = holding(gpus("c", 1, 8, queue_name="team-c"), "h100")
    high = gpus("high", 1, 8, priority_class="hi", selector={MODEL: "H100"})
    result = run_cycle(
        replace(
            snapshot(
                [mine, other],
                [low_h, low_a, theirs, high],
                NODES,
                config={**CAPACITY, "actions": "enqueue, allocate, preempt"},
                priority_classes={"hi": 100},
            ),
            flavors=[H100, A100],
        )
    )
    assert [(d.action, d.job) for d in result.decisions] == [
        ("preempt", "ns/low-h"),
        ("admit", "ns/high"),
    ]
    assert admitted(result) == {"ns/high": (("main", "h100"),)}


def preempting(queues: list[Any], jobs: list[WorkloadView]) -> CycleResult:
    config = {**CAPACITY, "actions": "enqueue, allocate, preempt"}
    built = snapshot(queues, jobs, NODES, config=config, priority_classes={"hi": 100})
    return run_cycle(replace(built, flavors=[H100, A100]))


@pytest.mark.parametrize("quota", ["capability", "deserved"])
def test_preempt_acts_in_a_flavor_where_the_queue_is_at_its_quota(quota: str) -> None:
    # team-a is at its capability (or its deserved) in h100, so h100 is no flavor it could
    # reclaim in; its own lower-priority workload there frees the room. team-c's in h100 and
    # team-a's own, newer, in a100 are left alone.
    mine = team("team-a", entry("h100", **{quota: {GPU: "8"}}), entry("a100"))
    other = team("team-c", entry("h100"), entry("a100"), reclaimable=False)
    low_h = holding(gpus("low-h", 1, 8, admitted=10), "h100")
    low_a = holding(gpus("low-a", 1, 8, admitted=20), "a100")
    theirs = holding(gpus("c", 1, 8, queue_name="team-c"), "h100")
    high = gpus("high", 1, 8, priority_class="hi", selector={MODEL: "H100"})
    result = preempting([mine, other], [low_h, low_a, theirs, high])
    assert [(d.action, d.job) for d in result.decisions] == [
        ("preempt", "ns/low-h"),
        ("admit", "ns/high"),
    ]
    assert admitted(result) == {"ns/high": (("main", "h100"),)}
    assert admit_reason(result, "ns/high") == (
        "preempt: higher priority in queue team-a, in flavor h100"
    )


def test_preempt_in_a_flavor_never_takes_an_equal_priority_or_another_queues_workload() -> None:
    # At its capability in h100 with only an equal-priority workload of its own there, and
    # team-c's lower-priority one beside it: nothing is preempted, the job waits.
    mine = team("team-a", entry("h100", capability={GPU: "8"}), entry("a100"))
    other = team("team-c", entry("h100"), entry("a100"), reclaimable=False)
    same = holding(gpus("same", 1, 8, priority_class="hi", admitted=10), "h100")
    theirs = holding(gpus("c", 1, 8, queue_name="team-c"), "h100")
    high = gpus("high", 1, 8, priority_class="hi", selector={MODEL: "H100"})
    result = preempting([mine, other], [same, theirs, high])
    assert [d for d in result.decisions if d.action != "admit"] == []
    assert admitted(result) == {}
    assert "capability 8 in flavor h100" in reason(result, "ns/high")


# team-a holds 12 GPUs in h100, over its capability of 8 there (lowered since they were
# admitted): nothing more that asks GPUs goes into h100 for it.
OVER = [
    holding(gpus("big", 1, 8, admitted=10), "h100"),
    holding(gpus("small", 1, 4, admitted=20), "h100"),
]


def test_a_queue_over_its_capability_in_a_flavor_admits_nothing_more_asking_it_there() -> None:
    capped = team("team-a", entry("h100", capability={GPU: "8"}))
    cpu_only = gang("cpu", "team-a", 1, cpu=1)
    result = cycle([capped], [*OVER, gpus("j", 1, 1), cpu_only])
    assert reason(result, "ns/j") == (
        "position 1 in team-a; no flavor fits: flavor h100: queue team-a is over its capability"
        " in nvidia.com/gpu in flavor h100, and admits nothing more that asks for it there"
        " until it fits again: nvidia.com/gpu 12 > capability 8"
    )
    # A job asking none of it is admitted there as ever; with a second flavor, the next.
    assert admitted(result) == {"ns/cpu": (("main", "h100"),)}
    both = team("team-a", entry("h100", capability={GPU: "8"}), entry("a100"))
    assert admitted(cycle([both], [*OVER, gpus("j", 1, 1)])) == {"ns/j": (("main", "a100"),)}


def test_a_queue_over_its_capability_in_a_flavor_preempts_nothing_there() -> None:
    # Were its own lower-priority workloads gone, it would fit: held back all the same, as a
    # queue over its own capability takes no victim.
    capped = team("team-a", entry("h100", capability={GPU: "8"}), entry("a100"))
    high = gpus("high", 1, 4, priority_class="hi", selector={MODEL: "H100"})
    result = preempting([capped], [*OVER, high])
    assert [d for d in result.decisions if d.action != "admit"] == []
    assert "over its capability in nvidia.com/gpu in flavor h100" in reason(result, "ns/high")


def test_a_pod_set_whose_selector_names_one_flavor_gets_it_or_waits() -> None:
    result = cycle([team()], [gpus("j", 1, 2, selector={MODEL: "A100"})])
    assert admitted(result) == {"ns/j": (("main", "a100"),)}
    l4 = cycle([team()], [gpus("j", 1, 2, selector={MODEL: "L4"})])
    assert admitted(l4) == {}
    assert reason(l4, "ns/j") == (
        "position 1 in team-a; pod set main selects none of queue team-a's flavors:"
        f" flavor h100 has {MODEL}=H100, its nodeSelector asks {MODEL}=L4;"
        f" flavor a100 has {MODEL}=A100, its nodeSelector asks {MODEL}=L4"
    )


def two_sets(name: str, launcher: PodSpecView, worker: PodSpecView, workers: int) -> WorkloadView:
    sets = (PodSet("launcher", 1, launcher), PodSet("worker", workers, worker))
    request = launcher.request + worker.request.scale(workers)
    base = gpus(name, 1)
    return replace(base, request=request, pod_sets=sets)


def pod(model: str | None = None, **each: Any) -> PodSpecView:
    selector = ((MODEL, model),) if model else ()
    return PodSpecView(res(**each), node_selector=selector)


def test_two_pod_sets_in_two_flavors() -> None:
    job = two_sets("j", pod("A100", cpu=1), pod(None, nvidia_com_gpu=8), 2)
    result = cycle([team()], [job])
    assert admitted(result) == {"ns/j": (("launcher", "a100"), ("worker", "h100"))}
    assert admit_reason(result, "ns/j").endswith(
        "fits in queue team-a, in flavors launcher: a100, worker: h100"
    )


def test_a_job_needing_victims_in_two_flavors_takes_none_and_waits() -> None:
    # Its launcher is owed h100, its worker a100, and team-b borrows in both: victims are
    # taken in one flavor only (docs/scheduler.md, *Victims in one flavor only*), and those
    # in h100 alone leave the worker short in a100, so none is taken.
    lender, *held = LENDER
    in_a100 = holding(gpus("b3", 1, 8, queue_name="team-b", admitted=100), "a100")
    job = two_sets("j", pod("H100", nvidia_com_gpu=8), pod("A100", nvidia_com_gpu=8), 1)
    result = cycle([team("team-a", *OWED), lender], [*held, in_a100, job], **CAPACITY)
    assert [d.action for d in result.decisions] == []
    # With a100 free, the same job takes its victim in h100 and is admitted.
    result = cycle([team("team-a", *OWED), lender], [*held, job], **CAPACITY)
    assert [(d.action, d.job) for d in result.decisions] == [
        ("reclaim", "ns/b2"),
        ("admit", "ns/j"),
    ]


def test_pod_sets_that_fit_alone_but_not_together_wait() -> None:
    # Each set alone fits the two H100 nodes; together they do not.
    job = two_sets("j", pod("H100", nvidia_com_gpu=8), pod("H100", nvidia_com_gpu=8), 2)
    result = cycle([team()], [job])
    assert admitted(result) == {}
    assert "its pod sets fit on the nodes one by one, not all at once" in reason(result, "ns/j")


def test_no_flavor_fits_names_each_flavor_and_what_stopped_it() -> None:
    capped = team("team-a", entry("h100", capability={GPU: "8"}), entry("a100"))
    result = cycle([capped], [gpus("j", 2, 5)])
    assert reason(result, "ns/j") == (
        "position 1 in team-a; no flavor fits: flavor h100: team-a would use"
        " nvidia.com/gpu 10 > capability 8 in flavor h100; flavor a100: only 1 of its 2 pods"
        " of nvidia.com/gpu 5 fit on the nodes at once (a1 1)"
        " (among the 1 of 3 nodes its pods may go on)"
    )


def test_a_parents_limit_and_a_selector_in_the_reason_of_one_pod_set() -> None:
    org = queue("org", flavors=[entry("h100", capability={GPU: "16"}), entry("a100")])
    child = queue("team-a", "org", flavors=[entry("h100"), entry("a100")])
    held = holding(gpus("held", 1, 8, queue_name="other"), "h100")
    other = queue("other", "org", flavors=[entry("h100")])
    job = two_sets("j", pod(None, cpu=1), pod("H100", nvidia_com_gpu=8), 2)
    result = cycle([org, child, other], [held, job])
    assert reason(result, "ns/j") == (
        "position 1 in team-a; pod set worker: no flavor fits: flavor h100: org (parent of"
        " team-a) would use nvidia.com/gpu 24 > capability 16 in flavor h100; flavor a100:"
        f" flavor a100 has {MODEL}=A100, its nodeSelector asks {MODEL}=H100"
    )


def test_a_flavor_that_does_not_exist_is_passed_over() -> None:
    result = cycle([team()], [gpus("j", 1, 2)], flavors=(A100,))
    assert admitted(result) == {"ns/j": (("main", "a100"),)}
    none = cycle([team("team-a", entry("h100"))], [gpus("j", 1, 2)], flavors=(A100,))
    assert reason(none, "ns/j") == (
        "position 1 in team-a; pod set main selects none of queue team-a's flavors:"
        " flavor h100 does not exist"
    )


def test_a_queue_without_flavors_admits_as_before_on_any_node() -> None:
    result = cycle([queue("team-a")], [gpus("j", 3, 8)])
    assert admitted(result) == {"ns/j": ()}
    assert admit_reason(result, "ns/j").endswith("fits in queue team-a")


# On random clusters ------------------------------------------------------------------------


def random_cluster(seed: int) -> tuple[list[Any], list[WorkloadView], list[NodeView]]:
    rng = random.Random(seed)
    queues, leaves = [], []
    for d in range(rng.randint(1, 2)):
        mine = [entry(f, capability={GPU: str(rng.randint(4, 16))}) for f in ("h100", "a100")]
        rng.shuffle(mine)
        queues.append(queue(f"d{d}", flavors=mine))
        for q in range(rng.randint(1, 3)):
            name = f"d{d}q{q}"
            own = [entry("h100", capability={GPU: str(rng.randint(2, 12))})]
            queues.append(queue(name, f"d{d}", flavors=own if rng.random() < 0.4 else []))
            leaves.append(name)
    jobs: list[WorkloadView] = []
    for i in range(rng.randint(5, 20)):
        where = rng.choice(leaves)
        selector = rng.choice((None, None, {MODEL: "H100"}, {MODEL: "A100"}))
        view = gpus(f"j{i}", rng.randint(1, 3), rng.randint(1, 4), queue_name=where)
        if selector is not None:
            view = gpus(f"j{i}", 1, rng.randint(1, 4), queue_name=where, selector=selector)
        jobs.append(view)
    nodes = [gpu_node(f"h{n}", "H100") for n in range(rng.randint(1, 3))]
    nodes += [gpu_node(f"a{n}", "A100") for n in range(rng.randint(1, 2))]
    return queues, jobs, nodes


def test_every_admission_stays_within_each_flavor_quota_and_selector() -> None:
    for seed in range(40):
        queues, jobs, nodes = random_cluster(seed)
        result = cycle(queues, jobs, nodes)
        specs = {q.name: q.spec for q in queues}
        views = {j.key: j for j in jobs}
        held: dict[tuple[str, str], int] = {}
        for decision in result.decisions:
            view = views[decision.job]
            assert decision.flavors, (seed, decision)
            for pod_set, flavor in decision.flavors:
                pods = next(p for p in view.pod_sets if p.name == pod_set)
                wanted = dict(pods.pod.node_selector).get(MODEL)
                assert wanted in (None, {"h100": "H100", "a100": "A100"}[flavor]), seed
                name: str | None = decision.queue
                while name is not None:
                    held[(name, flavor)] = held.get((name, flavor), 0) + pods.request[GPU]
                    name = specs[name].parent if name in specs else None
        for (name, flavor), amount in held.items():
            entry_of = specs[name].flavor(flavor) if name in specs else None
            if entry_of is not None and GPU in entry_of.capability:
                assert amount <= entry_of.capability[GPU], (seed, name, flavor)


def test_the_decision_pass_decides_flavored_queues_as_the_full_cycle() -> None:
    for seed in range(20):
        queues, jobs, nodes = random_cluster(seed)
        proportion = {"tiers": [{"plugins": [{"name": "priority"}, {"name": "proportion"}]}]}
        built = snapshot(queues, jobs, nodes, config=proportion)
        state = replace(built, flavors=[H100, A100])
        full = run_cycle(state)
        quick = DecisionPass(first=1, whole=0).decide(state)
        made = sorted((d.action, d.job, d.flavors) for d in quick.decisions)
        assert made == sorted((d.action, d.job, d.flavors) for d in full.decisions), seed


def test_the_decision_pass_lists_every_waiting_job_of_a_queue_with_flavors() -> None:
    # Proportion splits each flavor by what the waiting pod sets that may be given it ask:
    # a sum per queue does not say which, so none of them is left out, nor filed as stuck.
    waiting = [gpus(f"j{i}", 1, 16, created=i) for i in range(10)]  # no node has 16
    plain = snapshot([queue("team-a")], waiting, NODES)
    assert DecisionPass(first=2).decide(plain).listed == 0
    flavored = replace(snapshot([team()], waiting, NODES), flavors=[H100, A100])
    assert DecisionPass(first=2).decide(flavored).listed == 10


def test_backfill_gives_a_job_that_requests_nothing_a_flavor_too() -> None:
    # Behind the head of a fifo queue, which waits.
    head = gpus("head", 1, 64, created=0)
    nothing = gang("j", "team-a", 1, selector={MODEL: "A100"}, cpu=0, created=1)
    result = cycle([team(dequeue="fifo")], [head, nothing])
    assert admitted(result) == {"ns/j": (("main", "a100"),)}
    assert admit_reason(result, "ns/j") == "backfill: requests nothing, in flavor a100"


def test_a_resizable_job_admitted_smaller_is_given_a_flavor_too() -> None:
    # h100's two nodes are full and a100's one node has 8 GPUs: a job of 12 single-GPU pods
    # (minimum 4) is admitted at 8, in a100.
    full = [holding(gpus(f"full{i}", 1, 8, created=i), "h100") for i in range(2)]
    base = gpus("j", 12, 1, created=5)
    (pod_set,) = base.pod_sets
    resizable = replace(base, pod_sets=(replace(pod_set, min_count=4),))
    result = cycle([team()], [*full, resizable], **ONLY_ADMIT)
    decision = next(d for d in result.decisions if d.job == "ns/j")
    assert decision.flavors == (("main", "a100"),)
    assert decision.sizes == (("main", 12, 8),)
    assert decision.reason.startswith("enqueue: admitted 8 of 12 workers (min 4): ")
    assert decision.reason.endswith(", in flavor a100")
