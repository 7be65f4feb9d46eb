"""What a workload holds per flavor, and adding it up (sluice/scheduler/flavor_quota.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from builders import gang, node, queue, snapshot

from sluice.api.constraints import PodSpecView
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import FlavorAssignment
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, NodeView, PodSet, WorkloadView
from sluice.queues.tree import QueueTree
from sluice.scheduler.flavor_quota import FlavorAmounts, add_in, counted, flavor_capabilities
from sluice.scheduler.session import Session

GPU = "nvidia.com/gpu"


def pods(
    name: str, count: int, claims: tuple[tuple[str, Resources], ...] = (), **each: str
) -> PodSet:
    return PodSet(name, count, PodSpecView(Resources.parse(each)), named_claims=claims)


LAUNCHER = pods("launcher", 1, cpu="2")
WORKERS = pods("worker", 4, cpu="8", **{GPU: "2"})


def test_each_pod_set_counts_whole_in_its_own_flavor() -> None:
    held = counted((LAUNCHER, WORKERS), {"launcher": "cpu-pool", "worker": "h100"})
    assert held == {"cpu-pool": {"cpu": 2000}, "h100": {"cpu": 32000, GPU: 8000}}


def test_pod_sets_in_one_flavor_add_up() -> None:
    held = counted((LAUNCHER, WORKERS), {"launcher": "h100", "worker": "h100"})
    assert held == {"h100": {"cpu": 34000, GPU: 8000}}


def test_a_pod_set_given_no_flavor_counts_in_none() -> None:
    assert counted((LAUNCHER, WORKERS), {"worker": "a100"}) == {"a100": {"cpu": 32000, GPU: 8000}}
    assert counted((LAUNCHER,), {}) == {}


def test_a_claim_named_by_two_pod_sets_counts_once_in_the_first_ones_flavor() -> None:
    shared = (("ns/fabric", Resources.parse({"example.com/nic": "1"})),)
    a = pods("a", 2, shared, cpu="1")
    b = pods("b", 2, shared, cpu="1")
    assert counted((a, b), {"a": "h100", "b": "a100"}) == {
        "h100": {"cpu": 2000, "example.com/nic": 1000},
        "a100": {"cpu": 2000},
    }
    assert counted((a, b), {"b": "a100"}) == {"a100": {"cpu": 2000, "example.com/nic": 1000}}


def test_adding_and_taking_off_leaves_nothing_behind() -> None:
    total: FlavorAmounts = {}
    one = counted((LAUNCHER, WORKERS), {"launcher": "cpu-pool", "worker": "h100"})
    two = counted((WORKERS,), {"worker": "h100"})
    add_in(total, one)
    add_in(total, two)
    assert total == {"cpu-pool": {"cpu": 2000}, "h100": {"cpu": 64000, GPU: 16000}}
    add_in(total, one, -1)
    assert total == {"h100": {"cpu": 32000, GPU: 8000}}
    add_in(total, two, -1)
    assert total == {}


def h100(**fields: Any) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"name": "h100"}
    for key, value in fields.items():
        entry[key] = {"resource": value} if key == "guarantee" else value
    return [entry]


def tree(*queues: Any) -> QueueTree:
    return QueueTree({q.name: q for q in (queue("root"), *queues)})


def test_real_capability_per_flavor_is_the_formula_over_the_flavors_own_tree() -> None:
    # mid names no flavor: leaf sits right under org in h100, beside team.
    real = flavor_capabilities(
        tree(
            queue("org", flavors=h100(guarantee={GPU: "4"}, capability={GPU: "16"})),
            queue("team", "org", flavors=h100(capability={GPU: "20"})),
            queue("mid", "org"),
            queue("leaf", "mid", flavors=h100(guarantee={GPU: "2"})),
            queue("other", capability={"cpu": "1"}),
        ),
        {"h100": {GPU: 24000}, "a100": {GPU: 8000}},
    )
    assert set(real) == {"h100"}
    assert real["h100"] == {
        "root": {GPU: 24000},
        "org": {GPU: 16000},  # min(16, 24 - 4 + 4)
        "team": {GPU: 14000},  # min(20, 16 - 2): leaf's guarantee beside it
        "leaf": {GPU: 16000},  # 16 - 2 + 2
    }


def test_roots_own_capability_in_a_flavor_caps_the_flavors_total() -> None:
    real = flavor_capabilities(
        QueueTree(
            {
                "root": queue("root", flavors=h100(capability={GPU: "10"})),
                "org": queue("org", flavors=h100(capability={GPU: "40"})),
            }
        ),
        {"h100": {GPU: 24000, "cpu": 64000}},
    )
    assert real["h100"]["root"] == {GPU: 10000, "cpu": 64000}
    assert real["h100"]["org"] == {GPU: 10000, "cpu": 64000}


def test_a_flavor_without_nodes_holds_nothing_but_guarantees() -> None:
    real = flavor_capabilities(
        tree(queue("org", flavors=h100(guarantee={GPU: "2"}, capability={GPU: "8"}))), {}
    )
    assert real["h100"] == {"root": {}, "org": {GPU: 2000}}


# In the Session ----------------------------------------------------------------------------

MODEL = "gpu.example.com/model"
H100 = FlavorView("h100", {MODEL: "H100"})
A100 = FlavorView("a100", {MODEL: "A100"})


def gpu_node(name: str, model: str, gpus: int = 8, **kw: Any) -> NodeView:
    return node(name, labels={MODEL: model}, cpu=64, nvidia_com_gpu=gpus, **kw)


def entry(name: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    for key, value in fields.items():
        out[key] = {"resource": value} if key == "guarantee" else value
    return out


def holding(name: str, queue_name: str, *given: tuple[str, str], **per_pod: Any) -> WorkloadView:
    """An admitted workload whose record says which flavor each pod set went to."""
    view = gang(name, queue_name, 1, phase=JobPhase.RUNNING, **per_pod)
    return replace(view, flavors=tuple(FlavorAssignment(p, f) for p, f in given))


def session_of(queues: list[Any], jobs: list[WorkloadView], **config: Any) -> Session:
    nodes = [gpu_node("h1", "H100"), gpu_node("h2", "H100"), gpu_node("a1", "A100")]
    nodes.append(gpu_node("h3", "H100", ready=False))  # not Ready: in no total
    built = snapshot(queues, jobs, nodes, config=config or None)
    return Session(replace(built, flavors=[H100, A100]))


ORG = queue(
    "org",
    flavors=[
        entry("h100", guarantee={GPU: "2"}, deserved={GPU: "8"}, capability={GPU: "12"}),
        entry("a100", deserved={GPU: "4"}),
    ],
)


def test_each_queue_knows_the_flavor_list_its_workloads_use() -> None:
    session = session_of(
        [ORG, queue("team", "org"), queue("own", "org", flavors=[entry("a100")]), queue("x")],
        [],
    )
    assert session.queues["org"].flavor_list == ("h100", "a100")
    assert session.queues["team"].flavor_list == ("h100", "a100")  # org's, inherited
    assert session.queues["own"].flavor_list == ("a100",)
    assert session.queues["x"].flavor_list == ()


def test_admitted_workloads_count_in_the_flavors_they_record_on_every_level() -> None:
    session = session_of(
        [ORG, queue("team", "org"), queue("x")],
        [
            holding("a", "team", ("main", "h100"), nvidia_com_gpu=3),
            holding("b", "team", ("main", "a100"), nvidia_com_gpu=1),
            holding("c", "team", nvidia_com_gpu=2),  # admitted before flavors: in none
        ],
    )
    for name in ("team", "org", "root"):
        assert session.queues[name].flavor_allocated == {
            "h100": {GPU: 3000},
            "a100": {GPU: 1000},
        }
        assert session.queues[name].allocated[GPU] == 6000  # the own fields count all
    assert session.queues["x"].flavor_allocated == {}
    held = {j.key: j.held_in for j in session.queues["team"].admitted_jobs}
    assert held == {"ns/a": {"h100": {GPU: 3000}}, "ns/b": {"a100": {GPU: 1000}}, "ns/c": {}}


def test_real_capability_per_flavor_rests_on_the_flavors_ready_nodes() -> None:
    beside = queue("other", "org", flavors=[entry("h100", guarantee={GPU: "3"})])
    session = session_of([ORG, queue("team", "org", flavors=[entry("h100")]), beside], [])
    h100 = {info.name: info.flavor_real_capability.get("h100") for info in session_infos(session)}
    # Two Ready H100 nodes: 16 GPUs, 128 cpu; org capped at 12 GPUs.
    assert h100["root"] == Resources.parse({GPU: "16", "cpu": "128"})
    assert h100["org"] == Resources.parse({GPU: "12", "cpu": "128"})
    assert h100["team"] == Resources.parse({GPU: "9", "cpu": "128"})  # 12 - 3 beside it
    assert session.queues["team"].flavor_real_capability.keys() == {"h100"}
    assert session.queues["org"].flavor_real_capability["a100"] == Resources.parse(
        {GPU: "8", "cpu": "64"}
    )


def session_infos(session: Session) -> list[Any]:
    return [session.queues[n] for n in ("root", "org", "team")]


def test_capacity_deserved_per_flavor_is_the_entry_capped_and_raised_to_its_guarantee() -> None:
    session = session_of(
        [ORG, queue("team", "org", flavors=[entry("h100", guarantee={GPU: "1"})])],
        [],
        tiers=[{"plugins": [{"name": "priority"}, {"name": "capacity"}]}],
    )
    assert session.queues["org"].flavor_deserved["h100"] == Resources.parse({GPU: "8"})
    assert session.queues["org"].flavor_deserved["a100"] == Resources.parse({GPU: "4"})
    assert session.queues["team"].flavor_deserved["h100"] == Resources.parse({GPU: "1"})


def test_proportion_splits_each_flavors_deserved_by_weight() -> None:
    both = [entry("h100"), entry("a100")]
    session = session_of(
        [queue("a", weight=3, flavors=both), queue("b", weight=1, flavors=both)],
        [
            gang("wa", "a", 8, nvidia_com_gpu=2),  # may go to either flavor
            gang("wb", "b", 8, nvidia_com_gpu=2, selector={MODEL: "H100"}),  # h100 only
        ],
        tiers=[{"plugins": [{"name": "priority"}, {"name": "proportion"}]}],
    )
    h100 = {n: session.queues[n].flavor_deserved["h100"].get_amount(GPU) for n in "ab"}
    a100 = {n: session.queues[n].flavor_deserved["a100"].get_amount(GPU) for n in "ab"}
    assert h100 == {"a": 12000, "b": 4000}  # 16 by weight 3:1
    assert a100 == {"a": 8000, "b": 0}  # b asks nothing it may be given in a100


def test_admit_and_evict_keep_flavor_allocated_as_built_from_the_views() -> None:
    queues = [ORG, queue("team", "org")]
    before = [holding("a", "team", ("main", "h100"), nvidia_com_gpu=3)]
    session = session_of(queues, [*before, gang("new", "team", 2, nvidia_com_gpu=1)])
    new = session.queues["team"].pending_jobs[0]
    session.admit(new, {}, (("main", "a100"),), {"a100": {GPU: 2000}})
    admitted = holding("new", "team", ("main", "a100"), nvidia_com_gpu=2)
    rebuilt = session_of(queues, [*before, admitted])
    for name in ("team", "org", "root"):
        assert session.queues[name].flavor_allocated == rebuilt.queues[name].flavor_allocated
    old = session.queues["team"].admitted_jobs[0]
    session.evict(old)
    session.evict(new)
    empty = session_of(queues, [])
    for name in ("team", "org", "root"):
        assert session.queues[name].flavor_allocated == empty.queues[name].flavor_allocated == {}
    assert new.held_in == {} and new.flavors == ()


def test_a_cluster_without_flavors_counts_nothing_per_flavor() -> None:
    session = session_of([queue("team")], [holding("a", "team", ("main", "h100"), cpu=1)])
    assert session.queues["team"].flavor_allocated == {}
    assert session.queues["team"].flavor_real_capability == {}
    assert session.queues["team"].admitted_jobs[0].held_in == {}
