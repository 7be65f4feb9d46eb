"""Topology benchmark: the scheduler's full cycle at the base size (bench_scheduler's), its
2,000 nodes labelled in 8 blocks x 25 racks (10 nodes a rack) under one Topology, and every
other pending job annotated rack-required; beside it, the very same cluster and jobs without
the Topology and the annotations (the floor). Targets: reclaim plus preempt within 1.3x of
theirs in the floor, the whole cycle within 1.6x, in CPU. Beside them, for information, the
same jobs asking per pod set (their workers a rack each). Each variant prints its CPU time
beside the wall-clock (the machine may be shared), the CPU of admission and of reclaim plus
preempt, and a digest of its decisions and pending jobs (a change that must decide nothing
differently keeps it).

``--against-exact`` also runs each domain search of one cycle of the rack-required cluster a
second time with no bound on the domains ranked and searched (``maxDomains`` unlimited: the
exact choice over every domain) on the same state, and counts how often the bounded choice
differs and by how many victims.

Run: ``.venv/bin/python -m bench.bench_topology`` (``--quick`` for bench_scheduler's quick size).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import sluice.scheduler.actions.preempt as preempt_module
import sluice.scheduler.actions.reclaim_domain as reclaim_module
import sluice.scheduler.cycle as cycle_module
from bench.bench_scheduler import QUICK
from bench.gen_cluster import BASE, generate
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase, WorkloadView
from sluice.operator.memory import paused
from sluice.scheduler.actions.domain_search import best_domain
from sluice.scheduler.actions.victims import Victims
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import Snapshot

BLOCK, RACK = "example.com/block", "example.com/rack"
BLOCKS, RACKS_PER_BLOCK = 8, 25
TARGET_RATIO = 1.3  # reclaim plus preempt
CYCLE_TARGET_RATIO = 1.6
PHASES = {"admit": "admission", "reclaim": "taking back", "preempt": "taking back"}
"""The cycle's actions timed apart: admission (enqueue, allocate), reclaim plus preempt."""


@contextmanager
def phases_timed(into: dict[str, float]) -> Iterator[None]:
    """The CPU time of the cycle's actions, added up by ``PHASES`` while inside."""
    originals = {name: getattr(cycle_module, name) for name in PHASES}

    def timed(name: str, action: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            started = time.process_time()
            try:
                action(*args)
            finally:
                phase = PHASES[name]
                into[phase] = into.get(phase, 0.0) + time.process_time() - started

        return run

    for name, action in originals.items():
        setattr(cycle_module, name, timed(name, action))
    try:
        yield
    finally:
        for name, action in originals.items():
            setattr(cycle_module, name, action)


def clusters(base: Snapshot) -> tuple[Snapshot, Snapshot, Snapshot]:
    """(without topology, with it, with it per pod set): the same nodes, labelled in all,
    and the same jobs; per pod set, each rack-required job of more than one pod is a
    launcher of one pod that asks nothing and its other pods as workers that ask a rack."""
    per_rack = max(len(base.nodes) // (BLOCKS * RACKS_PER_BLOCK), 1)
    nodes = []
    for n, node in enumerate(base.nodes):
        rack = min(n // per_rack, BLOCKS * RACKS_PER_BLOCK - 1)
        labels = {**node.labels, BLOCK: f"b{rack // RACKS_PER_BLOCK}", RACK: f"r{rack}"}
        nodes.append(replace(node, labels=labels))
    plain = replace(base, nodes=nodes)
    jobs = []
    waiting = 0
    for job in base.workloads:
        if job.phase is JobPhase.PENDING:
            waiting += 1
            if waiting % 2 == 0:
                job = replace(job, topology=TopologyRequest(RACK, True))
        jobs.append(job)
    topologies = (TopologyView("racks", (BLOCK, RACK)),)
    racked = replace(plain, workloads=jobs, topologies=topologies)
    return plain, racked, replace(racked, workloads=[_per_pod_set(job) for job in jobs])


def _per_pod_set(job: WorkloadView) -> WorkloadView:
    (pods,) = job.pod_sets
    if job.topology is None or pods.count < 2:
        return job
    launcher = replace(pods, name="launcher", count=1, pod_count=1)
    workers = replace(pods, name="workers", count=pods.count - 1, pod_count=pods.pod_count - 1)
    workers = replace(workers, topology=job.topology)
    return replace(job, topology=None, pod_sets=(launcher, workers))


@dataclass
class Run:
    """One variant's cycles: wall-clock and CPU times, and what the last cycle decided."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)
    decisions: int = 0
    in_domain: int = 0
    digest: str = ""
    """Of the decisions and the pending jobs, in order: equal before and after a change
    that must decide nothing differently."""

    def cycle(self, snapshot: Snapshot) -> None:
        gc.collect()
        phases: dict[str, float] = {}
        started, cpu = time.perf_counter(), time.process_time()
        with phases_timed(phases):
            result = paused(run_cycle, snapshot)
        self.wall.append(time.perf_counter() - started)
        self.cpu.append(time.process_time() - cpu)
        self.phases.append(phases)
        self.decisions = len(result.decisions)
        self.in_domain = sum(1 for d in result.decisions if d.domain)
        listed = repr((list(result.decisions), list(result.pending))).encode()
        self.digest = hashlib.sha256(listed).hexdigest()[:16]

    def median(self) -> str:
        wall, cpu = statistics.median(self.wall), statistics.median(self.cpu)
        parts = ", ".join(f"{p} {self.phase(p):.3f}s" for p in ("admission", "taking back"))
        return f"median {wall:.3f}s (CPU {cpu:.3f}s: {parts})"

    def phase(self, name: str) -> float:
        """The median CPU time of one of ``PHASES``."""
        return statistics.median(p.get(name, 0.0) for p in self.phases)


def against_exact(snapshot: Snapshot) -> Counter[str]:
    """One cycle, each domain search made twice on the same state: unbounded (the exact
    choice over every domain of the level: ``maxDomains`` unlimited) and as configured; how
    often and by how much they differ. The cycle goes on with the bounded choice."""
    counts: Counter[str] = Counter()

    def compare(exact: Victims | None, found: Victims | None) -> None:
        if exact is None and found is None:
            return
        counts["decided"] += 1
        if found is None or exact is None:
            counts["found none" if found is None else "exact found none"] += 1
            return
        counts["victims"] += len(found.chosen)
        counts["exact victims"] += len(exact.chosen)
        extra = len(found.chosen) - len(exact.chosen)
        cost = sum(v.priority for v in found.chosen) - sum(v.priority for v in exact.chosen)
        if extra or cost:
            counts["differ"] += 1
            counts["more victims"] += extra > 0
            counts["extra victims"] += max(extra, 0)
            counts["same count, higher priorities"] += extra == 0 and cost > 0

    def both(ranked: Any, search: Any, limit: int) -> Any:
        ranked = list(ranked)
        exact, _ = best_domain(ranked, search, 1 << 30)
        found, could = best_domain(ranked, search, limit)
        compare(exact, found)
        return found, could

    bounded = reclaim_module.InLevel.best

    def best(self: reclaim_module.InLevel) -> Any:
        reclaim, limit = self.reclaim, self.reclaim.max_domains
        reclaim.max_domains = 1 << 30
        try:
            unbounded = reclaim_module.InLevel(
                reclaim, self.job, self.short, self.over, self.search, self.level
            )
            exact = bounded(unbounded)
        finally:
            reclaim.max_domains = limit
        found = bounded(self)
        compare(None if exact is None else exact[0], None if found is None else found[0])
        return found

    saved = preempt_module.best_domain
    preempt_module.best_domain = both
    reclaim_module.InLevel.best = best  # type: ignore[method-assign]
    try:
        run_cycle(snapshot)
    finally:
        preempt_module.best_domain = saved
        reclaim_module.InLevel.best = bounded  # type: ignore[method-assign]
    return counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Topology benchmark")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--against-exact", action="store_true")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else BASE
    plain, racked, per_set = clusters(generate(size))
    # Alternate, so that a busy neighbour slows all alike.
    floor, timed, split = Run(), Run(), Run()
    for _ in range(args.repeat):
        floor.cycle(plain)
        timed.cycle(racked)
        split.cycle(per_set)
    f, m = statistics.median(floor.wall), statistics.median(timed.wall)
    print(
        f"{size.queues:,} queues, {size.pending:,} pending + {size.admitted:,} admitted jobs,"
        f" {size.nodes:,} nodes in {BLOCKS} blocks x {RACKS_PER_BLOCK} racks,"
        f" {args.repeat} cycles each"
    )
    print(f"  without topology: {floor.median()}, {floor.decisions:,} decisions [{floor.digest}]")
    print(
        f"  half the pending rack-required: {timed.median()}, {timed.decisions:,} decisions,"
        f" {timed.in_domain:,} admitted into a rack [{timed.digest}]"
    )
    print(
        f"  the same per pod set (workers rack-required, launcher anywhere): {split.median()},"
        f" {split.decisions:,} decisions, {split.in_domain:,} admitted with their workers in a"
        f" rack [{split.digest}] (ratio {statistics.median(split.wall) / f:.2f})"
    )
    ratio = m / f
    cpu_ratio = statistics.median(timed.cpu) / statistics.median(floor.cpu)
    back = timed.phase("taking back") / max(floor.phase("taking back"), 1e-9)
    admission = timed.phase("admission") / max(floor.phase("admission"), 1e-9)
    print(f"  admission: CPU ratio {admission:.2f} (for information)")
    verdict = "met" if back <= TARGET_RATIO else "NOT met"
    print(f"  reclaim + preempt: CPU ratio {back:.2f} (target <= {TARGET_RATIO}): {verdict}")
    verdict = "met" if cpu_ratio <= CYCLE_TARGET_RATIO else "NOT met"
    print(
        f"  whole cycle: ratio {ratio:.2f}, CPU {cpu_ratio:.2f}"
        f" (target <= {CYCLE_TARGET_RATIO}): {verdict}"
    )
    if args.against_exact:
        counts = against_exact(racked)
        print(
            f"  against the exact search: {counts['decided']} searches that found victims,"
            f" {counts['differ']} chose differently ({counts['more victims']} with more victims,"
            f" {counts['extra victims']} more in all; {counts['same count, higher priorities']}"
            f" with as many of higher priorities), {counts['found none']} found none where the"
            f" exact one found some; {counts['victims']} victims in all where the exact"
            f" searches take {counts['exact victims']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
