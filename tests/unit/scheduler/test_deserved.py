"""Deserved shares: proportion (water-filling), capacity, proportion_optimize (seed 001)."""

from __future__ import annotations

from builders import job, node, queue, res, running, snapshot

from sluice.api.resources import Resources
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.plugins.deserved import Claim, proportion_optimize, water_fill

BIG = Resources({"cpu": 10**9})


def test_water_fill_gives_capped_claims_their_need_and_splits_the_rest_by_weight() -> None:
    assert water_fill(10_000, [("a", 1, 2_000), ("b", 1, 10**9), ("c", 2, 10**9)]) == {
        "a": 2_000,
        "b": 2_666,
        "c": 5_333,
    }


def test_water_fill_never_gives_more_than_the_amount_or_a_cap() -> None:
    shares = water_fill(7_000, [("a", 3, 1_000), ("b", 1, 0), ("c", 5, 50_000)])
    assert shares["b"] == 0 and shares["a"] == 1_000
    assert sum(shares.values()) <= 7_000


def test_seed_001_guarantee_priority_raises_the_weight_to_meet_the_guarantee() -> None:
    claims = [Claim("A", 1, BIG, res(cpu=6)), Claim("B", 1, BIG, Resources())]
    out = proportion_optimize(res(cpu=10), claims, guarantee_enable=True, priority_type="Guarantee")
    assert out["A"].get_amount("cpu") >= 6_000
    assert out["A"].get_amount("cpu") + out["B"].get_amount("cpu") <= 10_000


def test_seed_001_weight_priority_keeps_the_weighted_split_when_nothing_is_left() -> None:
    claims = [Claim("A", 1, BIG, res(cpu=6)), Claim("B", 1, BIG, Resources())]
    out = proportion_optimize(res(cpu=10), claims, guarantee_enable=True, priority_type="Weight")
    assert out == {"A": res(cpu=5), "B": res(cpu=5)}


def test_seed_001_weight_priority_tops_up_guarantees_from_what_is_left() -> None:
    claims = [Claim("A", 1, res(cpu=3), res(cpu=6)), Claim("B", 1, res(cpu=2), Resources())]
    out = proportion_optimize(res(cpu=10), claims, guarantee_enable=True, priority_type="Weight")
    assert out == {"A": res(cpu=6), "B": res(cpu=2)}


def test_guarantee_disabled_ignores_guarantees() -> None:
    claims = [Claim("A", 1, BIG, res(cpu=6)), Claim("B", 1, BIG, Resources())]
    out = proportion_optimize(
        res(cpu=10), claims, guarantee_enable=False, priority_type="Guarantee"
    )
    assert out == {"A": res(cpu=5), "B": res(cpu=5)}


def test_proportion_splits_the_cluster_by_weight_among_queues_that_ask() -> None:
    queues = [queue("a", weight=3), queue("b", weight=1), queue("idle", weight=4)]
    jobs = [job("a1", "a", cpu=100), job("b1", "b", cpu=100)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=8)]))
    assert result.queues["a"].deserved == res(cpu=6)
    assert result.queues["b"].deserved == res(cpu=2)
    assert result.queues["idle"].deserved == Resources()


def test_proportion_is_hierarchical_and_raised_to_guarantees() -> None:
    queues = [
        queue("d1", weight=1),
        queue("d2", weight=1),
        queue("t1", "d1", guarantee={"cpu": 3}),
        queue("t2", "d1"),
        queue("t3", "d2"),
    ]
    jobs = [job("j1", "t1", cpu=1), job("j2", "t2", cpu=50), job("j3", "t3", cpu=50)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10)]))
    assert result.queues["d1"].deserved == res(cpu=5)
    assert result.queues["t1"].deserved == res(cpu=3)  # needs 1, guaranteed 3
    assert result.queues["t2"].deserved == res(cpu=4)
    assert result.queues["t3"].deserved == res(cpu=5)


def test_capacity_deserved_is_spec_capped_by_real_capability_and_raised_to_guarantee() -> None:
    config = {"tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "capacity"}]}]}
    queues = [
        queue("a", deserved={"cpu": 20}, capability={"cpu": 6}),
        queue("b", deserved={"cpu": 1}, guarantee={"cpu": 2}),
    ]
    result = run_cycle(snapshot(queues, [], [node(cpu=10)], config=config))
    assert result.queues["a"].deserved == res(cpu=6)
    assert result.queues["b"].deserved == res(cpu=2)


def test_real_capability_subtracts_the_siblings_guarantees() -> None:
    queues = [
        queue("d", capability={"cpu": 8}),
        queue("x", "d", guarantee={"cpu": 3}),
        queue("y", "d", guarantee={"cpu": 1}, capability={"cpu": 20}),
    ]
    result = run_cycle(snapshot(queues, [running("r", "x", cpu=1)], [node(cpu=10)]))
    assert result.queues["d"].real_capability == res(cpu=8)
    assert result.queues["x"].real_capability == res(cpu=7)  # 8 - (3 + 1) + 3
    assert result.queues["y"].real_capability == res(cpu=5)  # 8 - 4 + 1, below its capability


def test_share_counts_only_the_resources_deserved_names() -> None:
    config = {"tiers": [{"plugins": [{"name": "capacity"}]}]}
    queues = [
        queue("a", deserved={"cpu": 4}),
        queue("b"),
        queue("g", deserved={"nvidia.com/gpu": 4}),
    ]
    jobs = [
        running("a1", "a", cpu=2),
        running("a2", "a", cpu=1, nvidia_com_gpu=1),
        running("g1", "g", cpu=6, nvidia_com_gpu=1),
    ]
    nodes = [node(cpu=10, nvidia_com_gpu=6)]
    result = run_cycle(snapshot(queues, jobs, nodes, config=config))
    assert result.queues["a"].share == 0.75  # the gpu it uses is not part of its share
    assert result.queues["g"].share == 0.25  # nor the cpu of a GPU-only queue
    assert result.queues["b"].share == 1.0  # best effort: nothing deserved
