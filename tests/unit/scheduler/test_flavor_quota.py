"""What a workload holds per flavor, and adding it up (sluice/scheduler/flavor_quota.py)."""

from __future__ import annotations

from sluice.api.constraints import PodSpecView
from sluice.api.resources import Resources
from sluice.api.views import PodSet
from sluice.scheduler.flavor_quota import FlavorAmounts, add_in, counted

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
