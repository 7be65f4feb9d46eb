"""Usage over time (the usage plugin): decay, the order it gives queues and namespaces, and
the numbers a cycle hands back (docs/scheduler.md, *Usage over time*)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from builders import NOW, T0, job, node, queue, running, snapshot
from hypothesis import given
from hypothesis import strategies as st

from sluice.api.config import UsageSettings, parse_scheduler_config
from sluice.api.errors import ConfigError
from sluice.api.queue import Queue, QueueUsage
from sluice.scheduler import usage
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.decision_pass import DecisionPass

HOUR = 3600.0


def usage_config(**arguments: Any) -> dict[str, Any]:
    return {
        "actions": "enqueue, allocate",
        "tiers": [
            {"plugins": [{"name": "priority"}]},
            {
                "plugins": [
                    {"name": "drf"},
                    {"name": "proportion"},
                    {"name": "usage", "arguments": arguments},
                ]
            },
        ],
    }


def used(q: Queue, seconds_ago: float, **amounts: float) -> Queue:
    """The queue with status.usage as a previous leader wrote it."""
    stored = QueueUsage(sampled_at=NOW - timedelta(seconds=seconds_ago), resources=amounts)
    return q.model_copy(update={"status": q.status.model_copy(update={"usage": stored})})


# Decay ------------------------------------------------------------------------------------


def test_usage_decays_to_half_in_one_half_life() -> None:
    assert usage.advance({"cpu": 100.0}, {}, HOUR, HOUR) == {"cpu": pytest.approx(50.0)}
    assert usage.advance({"cpu": 100.0}, {}, 2 * HOUR, HOUR) == {"cpu": pytest.approx(25.0)}


def test_a_constant_rate_tends_to_rate_times_half_life_over_ln2() -> None:
    long = usage.advance({}, {"cpu": 2.0}, 50 * HOUR, HOUR)
    assert long["cpu"] == pytest.approx(2.0 * HOUR / math.log(2))
    # Over a short interval it is nearly the plain integral.
    assert usage.advance({}, {"cpu": 2.0}, 10.0, HOUR)["cpu"] == pytest.approx(20.0, rel=1e-2)


@given(
    start=st.floats(0, 1e9),
    rate=st.floats(0, 1e4),
    first=st.floats(0, 1e5),
    second=st.floats(0, 1e5),
    half_life=st.floats(1, 1e6),
)
def test_sampling_more_often_changes_nothing(
    start: float, rate: float, first: float, second: float, half_life: float
) -> None:
    """The closed form is exact: two samples give what one over the whole interval gives."""
    once = usage.advance({"cpu": start}, {"cpu": rate}, first + second, half_life)
    twice = usage.advance(
        usage.advance({"cpu": start}, {"cpu": rate}, first, half_life),
        {"cpu": rate},
        second,
        half_life,
    )
    assert twice.get("cpu", 0.0) == pytest.approx(once.get("cpu", 0.0), rel=1e-9, abs=1e-6)


def test_dominant_usage_is_normalized_by_the_cluster_and_weighted() -> None:
    total = {"cpu": 64_000, "nvidia.com/gpu": 8_000}
    plain = UsageSettings()
    # 8 gpu-hours are the whole cluster's GPUs for an hour; 32 cpu-hours are half its cpus'.
    amounts = {"cpu": 32 * HOUR, "nvidia.com/gpu": 8 * HOUR}
    assert usage.dominant(amounts, total, plain) == (pytest.approx(HOUR), "nvidia.com/gpu")
    cpu_heavy = UsageSettings(resource_weights={"cpu": 4.0})
    assert usage.dominant(amounts, total, cpu_heavy) == (pytest.approx(2 * HOUR), "cpu")
    assert usage.dominant({"example.com/fpga": 5.0}, total, plain) == (0.0, "")


# Configuration --------------------------------------------------------------------------


def test_configuration_defaults_and_arguments() -> None:
    config = parse_scheduler_config(usage_config())
    assert config.usage == UsageSettings(
        half_life=timedelta(hours=1), entry_penalty=timedelta(minutes=1)
    )
    config = parse_scheduler_config(
        usage_config(halfLife="30m", entryPenalty="0", resourceWeights={"nvidia.com/gpu": 2})
    )
    assert config.usage == UsageSettings(
        half_life=timedelta(minutes=30),
        entry_penalty=timedelta(0),
        resource_weights={"nvidia.com/gpu": 2.0},
    )


def test_half_life_zero_or_no_plugin_turns_it_off() -> None:
    assert parse_scheduler_config(usage_config(halfLife="0")).usage is None
    assert parse_scheduler_config({"actions": "enqueue"}).usage is None


def test_bad_arguments_are_refused_and_volcanos_are_ignored() -> None:
    with pytest.raises(ConfigError, match="halfLife"):
        parse_scheduler_config(usage_config(halfLife="soon"))
    with pytest.raises(ConfigError, match="resourceWeights"):
        parse_scheduler_config(usage_config(resourceWeights=[1]))
    with pytest.raises(ConfigError, match="unknown argument of usage"):
        parse_scheduler_config(usage_config(decay=1))
    config = parse_scheduler_config(usage_config(**{"usage.weight": 5}))
    assert any("usage.weight" in w and "ignored" in w for w in config.warnings)


# Queue order ------------------------------------------------------------------------------


def test_the_queue_that_used_less_goes_first_though_it_holds_more_now() -> None:
    queues = [used(queue("a"), 0, cpu=10 * HOUR), queue("b")]
    jobs = [running("b-r", "b", cpu=2), job("a1", "a"), job("b1", "b", created=5)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=3)], config=usage_config()))
    # drf alone would pick a (it holds nothing); a used 10 cpu-hours, b none: b goes first.
    assert list(result.queue_order) == ["b", "a"]
    assert [d.job for d in result.decisions] == ["ns/b1"]
    without = run_cycle(snapshot(queues, jobs, [node(cpu=3)]))
    assert [d.job for d in without.decisions] == ["ns/a1"]


def test_order_follows_usage_divided_by_weight() -> None:
    heavy = used(queue("heavy", weight=4), 0, cpu=8 * HOUR)  # 2 per unit of weight
    light = used(queue("light", weight=1), 0, cpu=3 * HOUR)  # 3 per unit of weight
    result = run_cycle(snapshot([heavy, light], [], [node(cpu=4)], config=usage_config()))
    assert list(result.queue_order) == ["heavy", "light"]
    assert result.queues["heavy"].usage_key < result.queues["light"].usage_key


def test_queue_priority_still_comes_first() -> None:
    queues = [used(queue("a", priority=10), 0, cpu=100 * HOUR), queue("b")]
    result = run_cycle(snapshot(queues, [], [node(cpu=4)], config=usage_config()))
    assert list(result.queue_order) == ["a", "b"]


def test_equal_usage_falls_back_to_todays_keys() -> None:
    queues = [queue("a", created=1), queue("b", created=2)]
    jobs = [running("a-r", "a", cpu=2), job("a1", "a"), job("b1", "b")]
    on = run_cycle(snapshot(queues, jobs, [node(cpu=3)], config=usage_config(entryPenalty="0")))
    # Both start at zero and nothing has been sampled over time yet: drf decides, as today.
    assert [d.job for d in on.decisions] == ["ns/b1"]


def test_entry_penalty_makes_a_burst_alternate() -> None:
    queues = [used(queue("a"), 0, cpu=1.0), queue("b")]
    jobs = [job(f"a{i}", "a", created=i) for i in range(4)]
    jobs += [job(f"b{i}", "b", created=i) for i in range(4)]
    nodes = [node(cpu=4)]
    alternate = run_cycle(snapshot(queues, jobs, nodes, config=usage_config()))
    assert [d.job for d in alternate.decisions] == ["ns/b0", "ns/a0", "ns/b1", "ns/a1"]
    greedy = run_cycle(snapshot(queues, jobs, nodes, config=usage_config(entryPenalty="0")))
    assert [d.job for d in greedy.decisions] == ["ns/b0", "ns/b1", "ns/b2", "ns/b3"]


# What a cycle hands back ----------------------------------------------------------------


def test_a_cycle_carries_usage_to_now_and_counts_what_is_held() -> None:
    queues = [used(queue("a"), HOUR, cpu=100.0), queue("b")]
    jobs = [running("a-r", "a", cpu=2), job("b1", "b")]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=3)], config=usage_config()))
    a, b = result.queues["a"].usage, result.queues["b"].usage
    assert a is not None and b is not None
    assert a.sampled_at == NOW
    # Half of it decayed; two cpus held for the hour since, decayed as they were held.
    assert a.resources["cpu"] == pytest.approx(50.0 + 2 * HOUR / math.log(2) / 2)
    assert a.namespaces["ns"]["cpu"] == pytest.approx(2 * HOUR / math.log(2) / 2)
    assert a.dominant == "cpu 1.5h"
    # A queue with no usage yet starts at zero; its admission counts the entry penalty.
    assert b.resources == {"cpu": pytest.approx(60.0)}


def test_the_decision_pass_samples_what_the_cycle_samples_its_penalties_included() -> None:
    # The operator carries usage from one decision pass to the next: the sample the fast
    # pass hands back must be the cycle's own, with the entry penalties of its admissions.
    queues = [used(queue("a"), HOUR, cpu=100.0), queue("b")]
    jobs = [running("a-r", "a", cpu=2), job("a1", "a"), job("b1", "b")]
    snap = snapshot(queues, jobs, [node(cpu=4)], config=usage_config())
    fast = DecisionPass().decide(snap)
    full = run_cycle(snap)
    assert fast.decisions == full.decisions and len(fast.decisions) == 2
    assert fast.usage == {n: q.usage for n, q in full.queues.items() if q.usage is not None}
    assert fast.usage["b"].resources == {"cpu": pytest.approx(60.0)}  # b1's entry penalty
    off = DecisionPass().decide(snapshot(queues, jobs, [node(cpu=4)]))
    assert off.usage == {} and off.decisions


def test_the_operators_last_sample_comes_before_the_status() -> None:
    queues = [used(queue("a"), 0, cpu=1e6), queue("b")]
    memory = {"a": QueueUsage(sampled_at=NOW, resources={})}
    base = snapshot(queues, [job("a1", "a"), job("b1", "b")], [node(cpu=1)], config=usage_config())
    result = run_cycle(replace(base, usage=memory))
    assert [d.job for d in result.decisions] == ["ns/a1"]  # by creation: neither used anything


def test_off_means_no_usage_in_the_result() -> None:
    result = run_cycle(snapshot([queue("a")], [running("r", "a")], [node(cpu=2)]))
    assert result.queues["a"].usage is None
    assert result.queues["a"].usage_key == 0.0


# Namespaces inside a leaf ---------------------------------------------------------------


def test_within_a_queue_the_namespace_that_used_least_goes_first() -> None:
    stored = QueueUsage(sampled_at=NOW, namespaces={"x": {"cpu": 5 * HOUR}})
    q = queue("a")
    q = q.model_copy(update={"status": q.status.model_copy(update={"usage": stored})})
    jobs = [
        replace(job("x1", "a", created=1), namespace="x"),
        replace(job("x2", "a", created=2), namespace="x"),
        replace(job("y1", "a", created=3), namespace="y"),
        replace(job("urgent", "a", created=4, priority_class="high"), namespace="x"),
    ]
    config = usage_config()
    result = run_cycle(
        replace(
            snapshot([q], jobs, [node(cpu=2)], config=config, priority_classes={"high": 100}),
        )
    )
    # Priority first; then y, which used nothing, before x's older jobs.
    assert [d.job for d in result.decisions] == ["x/urgent", "y/y1"]
    assert [p.job for p in result.pending] == ["x/x1", "x/x2"]


def test_namespaces_take_turns_by_entry_penalty() -> None:
    jobs = [replace(job(f"x{i}", "a", created=i), namespace="x") for i in range(3)]
    jobs += [replace(job(f"y{i}", "a", created=10 + i), namespace="y") for i in range(3)]
    order = usage.job_order(
        sorted(jobs, key=lambda j: j.creation_timestamp),
        lambda j: j.namespace,
        lambda j: j.request.amounts,
        lambda j: 0,
        {"x": {"cpu": 1.0}},
        {"cpu": 4000},
        UsageSettings(),
    )
    assert [j.name for j in order] == ["y0", "x0", "y1", "x1", "y2", "x2"]


# Victims ------------------------------------------------------------------------------------


def test_reclaim_takes_from_the_queue_that_used_more() -> None:
    config = usage_config()
    config["actions"] = "enqueue, allocate, reclaim"
    queues = [queue("a"), used(queue("b"), 0, cpu=50 * HOUR), queue("c")]
    jobs = [running(f"a{i}", "a", admitted=100 + i) for i in range(3)]
    jobs += [running(f"b{i}", "b", admitted=i) for i in range(3)]
    jobs += [job("c1", "c")]
    on = run_cycle(snapshot(queues, jobs, [node(cpu=6)], config=config))
    assert [(d.action, d.job) for d in on.decisions] == [("reclaim", "ns/b2"), ("admit", "ns/c1")]
    config["tiers"][1]["plugins"].pop()  # without usage: the most recently admitted goes
    off = run_cycle(snapshot(queues, jobs, [node(cpu=6)], config=config))
    assert [(d.action, d.job) for d in off.decisions] == [("reclaim", "ns/a2"), ("admit", "ns/c1")]


def test_preempt_takes_from_the_namespace_that_used_more() -> None:
    config = usage_config()
    config["actions"] = "enqueue, allocate, preempt"
    stored = QueueUsage(sampled_at=NOW, namespaces={"heavy": {"cpu": 9 * HOUR}})
    q = queue("a")
    q = q.model_copy(update={"status": q.status.model_copy(update={"usage": stored})})
    jobs = [
        replace(running("h", "a", admitted=0), namespace="heavy"),
        replace(running("l", "a", admitted=50), namespace="light"),
        job("urgent", "a", priority_class="high"),
    ]
    classes = {"high": 100}
    on = run_cycle(snapshot([q], jobs, [node(cpu=2)], config=config, priority_classes=classes))
    assert [(d.action, d.job) for d in on.decisions] == [
        ("preempt", "heavy/h"),
        ("admit", "ns/urgent"),
    ]
    config["tiers"][1]["plugins"].pop()
    off = run_cycle(snapshot([q], jobs, [node(cpu=2)], config=config, priority_classes=classes))
    assert off.decisions[0].action == "preempt" and off.decisions[0].job == "light/l"


def test_a_job_waiting_behind_a_sibling_that_used_less_says_so() -> None:
    queues = [used(queue("a"), 0, cpu=10 * HOUR), queue("b")]
    jobs = [job("a1", "a"), job("b1", "b"), job("b2", "b")]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=1)], config=usage_config()))
    reasons = {p.job: p.reason for p in result.pending}
    assert reasons["ns/a1"].endswith(
        "; queue b goes first: queue a has used more over time (half-life 1h)"
    )
    assert "goes first" not in reasons["ns/b2"]
    # Without the plugin nobody says it.
    plain = run_cycle(snapshot(queues, jobs, [node(cpu=1)]))
    assert not any("goes first" in p.reason for p in plain.pending)


def test_a_queue_created_again_under_the_same_name_starts_at_zero() -> None:
    recreated = queue("a", created=7200)  # created after the sample below was taken
    memory = {"a": QueueUsage(sampled_at=T0 + timedelta(hours=1), resources={"cpu": 1e6})}
    base = snapshot([recreated, queue("b", created=7300)], [], [node(cpu=1)], config=usage_config())
    result = run_cycle(replace(base, now=T0 + timedelta(hours=3), usage=memory))
    assert result.queues["a"].usage is not None
    assert result.queues["a"].usage.resources == {}
