"""Topology benchmark: the scheduler's full cycle at the base size (bench_scheduler's), its
2,000 nodes labelled in 8 blocks x 25 racks (10 nodes a rack) under one Topology, and every
other pending job annotated rack-required; beside it, the very same cluster and jobs without
the Topology and the annotations (the floor). Target: the median cycle within 1.3x the floor.
Beside them, for information, the same jobs asking per pod set (their workers a rack each).
Each variant prints its CPU time beside the wall-clock (the machine may be shared) and a digest
of its decisions and pending jobs (a change that must decide nothing differently keeps it).

Run: ``.venv/bin/python -m bench.bench_topology`` (``--quick`` for bench_scheduler's quick size).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import time
from dataclasses import dataclass, field, replace

from bench.bench_scheduler import QUICK
from bench.gen_cluster import BASE, generate
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase, WorkloadView
from sluice.operator.memory import paused
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import Snapshot

BLOCK, RACK = "example.com/block", "example.com/rack"
BLOCKS, RACKS_PER_BLOCK = 8, 25
TARGET_RATIO = 1.3


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
    decisions: int = 0
    in_domain: int = 0
    digest: str = ""
    """Of the decisions and the pending jobs, in order: equal before and after a change
    that must decide nothing differently."""

    def cycle(self, snapshot: Snapshot) -> None:
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        result = paused(run_cycle, snapshot)
        self.wall.append(time.perf_counter() - started)
        self.cpu.append(time.process_time() - cpu)
        self.decisions = len(result.decisions)
        self.in_domain = sum(1 for d in result.decisions if d.domain)
        listed = repr((list(result.decisions), list(result.pending))).encode()
        self.digest = hashlib.sha256(listed).hexdigest()[:16]

    def median(self) -> str:
        wall, cpu = statistics.median(self.wall), statistics.median(self.cpu)
        return f"median {wall:.3f}s (CPU {cpu:.3f}s)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Topology benchmark")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
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
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"  ratio {ratio:.2f}, CPU {cpu_ratio:.2f} (target <= {TARGET_RATIO}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
