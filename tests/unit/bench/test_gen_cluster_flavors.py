"""The benchmark's cluster with three flavors (bench/gen_cluster.py, ``with_flavors``): every
node in one zone, the departments holding quota in each flavor, and the cycle giving each
job it admits a flavor."""

from __future__ import annotations

from bench.bench_scheduler import QUICK
from bench.gen_cluster import generate, with_flavors, zoned
from sluice.scheduler.cycle import run_cycle


def test_three_flavors_split_the_nodes_and_every_admission_takes_one() -> None:
    snapshot = with_flavors(generate(QUICK))
    assert sorted(f.name for f in snapshot.flavors) == ["zone-x", "zone-y", "zone-z"]
    assert {n.labels["zone"] for n in snapshot.nodes} == {"x", "y", "z"}
    result = run_cycle(snapshot)
    admitted = [d for d in result.decisions if d.action == "admit"]
    assert admitted and all(d.flavors for d in admitted)
    assert all(q.valid for q in result.queues.values())


def test_the_run_without_flavors_reads_the_same_nodes() -> None:
    plain, flavored = zoned(generate(QUICK)), with_flavors(generate(QUICK))
    assert plain.nodes == flavored.nodes and not plain.flavors
