"""The issue's scenario over simulated time: team A fills the cluster with many jobs, team B
arrives with a few; with the usage plugin B's jobs run within a few completions of A's."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from builders import T0, job, node, queue, snapshot
from test_usage import usage_config

from sluice.api.views import WorkloadView
from sluice.scheduler.timeline import Timeline, median_waits, run_for

SLOTS = 4
RUNS = timedelta(minutes=10)
STEP = timedelta(minutes=1)


def scenario(config: dict[str, Any] | None) -> tuple[Timeline, list[WorkloadView]]:
    a = [job(f"a{i:03d}", "a", created=i) for i in range(60)]
    b = [job(f"b{i}", "b", created=30 * 60 + i) for i in range(5)]  # after 30 minutes
    jobs = [replace(j, namespace="team-a") for j in a] + [replace(j, namespace="team-b") for j in b]
    durations = {j.key: RUNS for j in jobs}
    start = snapshot([queue("a"), queue("b")], jobs, [node(cpu=SLOTS)], config=config, now=T0)
    return run_for(start, T0 + timedelta(hours=3), STEP, durations), jobs


def test_with_usage_b_goes_ahead_of_a_at_the_next_completions() -> None:
    timeline, jobs = scenario(usage_config())
    arrived = T0 + timedelta(minutes=30)
    after = [key for key in timeline.order if timeline.admitted[key] >= arrived]
    # A has held the whole cluster for half an hour; every slot that frees goes to B until
    # B's five jobs run.
    assert after[:5] == [f"team-b/b{i}" for i in range(5)]
    waits = median_waits(timeline, jobs)
    assert waits["b"] <= RUNS.total_seconds()


def test_without_it_b_waits_turn_by_turn_with_a() -> None:
    plain = usage_config()
    plain["tiers"][1]["plugins"].pop()
    without, jobs = scenario(plain)
    with_usage, _ = scenario(usage_config())
    assert median_waits(without, jobs)["b"] > median_waits(with_usage, jobs)["b"]
