"""What a workload holds per flavor, and adding it up (sluice/scheduler/flavor_quota.py)."""

from __future__ import annotations

from typing import Any

from builders import queue

from sluice.api.constraints import PodSpecView
from sluice.api.resources import Resources
from sluice.api.views import PodSet
from sluice.queues.tree import QueueTree
from sluice.scheduler.flavor_quota import FlavorAmounts, add_in, counted, flavor_capabilities

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
