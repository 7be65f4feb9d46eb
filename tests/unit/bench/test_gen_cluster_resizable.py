"""The benchmark's cluster with a quarter of its jobs resizable (bench/gen_cluster.py,
``with_resizable``): the same jobs, pods and nodes with a minimum on a quarter of the jobs and
a record on those admitted; grown, some of them asking more than their record, their growth
gated and waiting in their queues."""

from __future__ import annotations

from bench.bench_scheduler import QUICK
from bench.gen_cluster import generate, with_resizable
from sluice.scheduler.cycle import run_cycle


def test_a_quarter_of_the_jobs_may_shrink_and_the_admitted_ones_are_recorded() -> None:
    plain = generate(QUICK)
    snapshot = with_resizable(plain)
    resizable = [w for w in snapshot.workloads if w.pod_sets[0].resizable]
    assert 0.2 < len(resizable) / len(snapshot.workloads) < 0.3
    assert all(bool(w.sized) == w.phase.admitted for w in resizable)
    assert all(w.sized[0].admitted == w.pod_sets[0].count for w in resizable if w.sized)
    asked = [(w.key, w.request, w.pod_sets[0].count) for w in snapshot.workloads]
    assert asked == [(w.key, w.request, w.pod_sets[0].count) for w in plain.workloads]
    assert snapshot.nodes == plain.nodes and snapshot.pods == plain.pods


def test_grown_some_admitted_ones_ask_more_and_their_growth_waits_gated() -> None:
    snapshot = with_resizable(generate(QUICK), grown=True)
    grown = [w for w in snapshot.workloads if w.sized and w.pod_sets[0].count > w.sized[0].admitted]
    assert grown
    gated = [p for p in snapshot.pods or () if p.gated]
    assert gated and all(p.resizable and p.node is None for p in gated)
    assert {p.job_uid for p in gated} == {w.uid for w in grown}
    result = run_cycle(snapshot)
    entries = {d.job for d in result.decisions} | {p.job for p in result.pending}
    assert any(key.endswith(" (growth)") for key in entries)
