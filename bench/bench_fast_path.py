"""The fast pass against the full cycle, in the pure core: the time from an event to its
decisions, at 1,000 queues / 40,000 jobs and at ten times that.

Two clusters, each at both sizes:

- ``stored``: the shape of bench_operator_scale, jobs from templates: 40,000 (400,000)
  waiting jobs spread over the leaves, of two kinds that ask a resource no node offers;
  each event creates one job that fits, in a leaf, of a kind of its own.
- ``generated``: bench.gen_cluster's cluster (half the jobs admitted with their pods, every
  waiting job drawn at random, so nearly each is of a kind of its own), settled by one full
  cycle first; each event finishes one running job, which frees its room.

For each event both the fast pass (one FastPath kept across the events) and the full cycle
decide on the same snapshot; the decisions must be the same (checked), and the cluster moves
on by them. Printed: the median time of each per event, the ratio, and the jobs the fast pass
listed. The first fast pass files every stored job (once per operator term): shown apart.

Run: ``.venv/bin/python -m bench.bench_fast_path`` (``--quick``: 1,000 queues only).
Target: the fast pass's median at 1,000 queues / 40,000 jobs at most a fifth of the full
cycle's on the stored cluster (the living bench_operator_scale then meets its 0.2 s).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from bench.gen_cluster import BASE, START, Size, generate
from sluice.api.constraints import PodSpecView
from sluice.api.resources import Resources
from sluice.api.views import MAIN_POD_SET, JobPhase, PodSet, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.fast import FastPath
from sluice.scheduler.model import Snapshot

EVENTS = 7
TARGET_RATIO = 0.2
NOWHERE = "bench.sluice.dev/none"


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def stored(size: Size) -> Snapshot:
    """1,000 queues, 2,000 nodes, 40,000 waiting jobs of two kinds per leaf (at BASE)."""
    empty = generate(replace(size, pending=0, admitted=0))
    leaves = [q.name for q in empty.queues if q.name.count("-") == 2]
    kinds = [PodSpecView(Resources({NOWHERE: 1000, "cpu": cpu})) for cpu in (500, 1000)]
    jobs = []
    for i in range(size.pending + size.admitted):
        pod = kinds[i % 2]
        jobs.append(
            WorkloadView(
                namespace=f"team-{i % 100}",
                name=f"stored-{i}",
                uid=f"uid-{i}",
                queue=leaves[i % len(leaves)],
                request=pod.request,
                phase=JobPhase.PENDING,
                creation_timestamp=START + timedelta(seconds=i),
                pod_sets=(PodSet(MAIN_POD_SET, 1, pod),),
            )
        )
    return replace(empty, workloads=jobs)


def created(snapshot: Snapshot, i: int) -> Snapshot:
    """One more job, that fits, in the i-th leaf."""
    leaves = sorted({j.queue for j in snapshot.workloads})
    pod = PodSpecView(Resources({"cpu": 1000}))
    single = WorkloadView(
        namespace="singles",
        name=f"single-{i}",
        uid=f"single-{i}",
        queue=leaves[i * 37 % len(leaves)],
        request=pod.request,
        phase=JobPhase.PENDING,
        creation_timestamp=snapshot.now,
        pod_sets=(PodSet(MAIN_POD_SET, 1, pod),),
    )
    return replace(snapshot, workloads=[*snapshot.workloads, single])


def finished(snapshot: Snapshot, i: int) -> Snapshot:
    """The i-th running job (from the end) completes; its pods finish."""
    jobs = list(snapshot.workloads)
    running = [n for n, j in enumerate(jobs) if j.phase is JobPhase.RUNNING]
    at = running[-1 - i * 101 % len(running)]
    done = jobs[at]
    jobs[at] = replace(done, phase=JobPhase.COMPLETED)
    pods = [replace(p, finished=True) if p.job_uid == done.uid else p for p in snapshot.pods or ()]
    return replace(snapshot, workloads=jobs, pods=pods)


def measure(cluster: str, size: Size) -> dict[str, Any]:
    """Everything for one cluster at one size; runs in a child process."""
    snapshot = stored(size) if cluster == "stored" else generate(size)
    event = created if cluster == "stored" else finished
    if cluster == "generated":
        _progress(f"  {cluster} {size.queues:,} queues: settling")
        snapshot = apply_decisions(snapshot, run_cycle(snapshot), snapshot.now)
    fast = FastPath()
    gc.collect()
    started = time.perf_counter()
    fast.decide(snapshot)
    first = time.perf_counter() - started
    quick: list[float] = []
    full: list[float] = []
    listed: list[int] = []
    runs: list[int] = []
    decisions = 0
    for i in range(EVENTS):
        snapshot = replace(event(snapshot, i), now=snapshot.now + timedelta(seconds=1))
        gc.collect()
        started = time.perf_counter()
        result = fast.decide(snapshot)
        quick.append(time.perf_counter() - started)
        gc.collect()
        started = time.perf_counter()
        cycle = run_cycle(snapshot)
        full.append(time.perf_counter() - started)
        mine = sorted((d.action, d.job) for d in result.decisions)
        assert mine == sorted((d.action, d.job) for d in cycle.decisions), "decisions differ"
        listed.append(result.listed)
        runs.append(result.runs)
        decisions += len(result.decisions)
        _progress(f"  {cluster} {size.queues:,} queues: event {i + 1}: fast {quick[-1]:.3f}s"
                  f" full {full[-1]:.3f}s")  # fmt: skip
        snapshot = apply_decisions(snapshot, cycle, snapshot.now)
    return {
        "cluster": cluster,
        "queues": size.queues,
        "jobs": len(snapshot.workloads),
        "first": first,
        "fast": statistics.median(quick),
        "full": statistics.median(full),
        "listed": statistics.median(listed),
        "runs": max(runs),
        "decisions": decisions,
    }


def _child(cluster: str, size: Size) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_fast_path", "--child", cluster]
    command += ["--scale", str(size.departments // BASE.departments)]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Fast pass against full cycle")
    parser.add_argument("--quick", action="store_true", help="1,000 queues only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, BASE.scaled(args.scale))))
        return 0
    rows = []
    for scale in (1,) if args.quick else (1, 10):
        for cluster in ("stored", "generated"):
            size = BASE.scaled(scale)
            _progress(f"{cluster}: {size.queues:,} queues, {size.pending + size.admitted:,} jobs")
            rows.append(_child(cluster, size))
    header = (
        f"{'cluster':<10} {'queues':>7} {'jobs':>8} | {'fast':>8} {'full':>8} {'ratio':>6} | "
        f"{'listed':>7} {'runs':>4} {'decided':>7} | {'first fast':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['cluster']:<10} {row['queues']:>7,} {row['jobs']:>8,} | "
            f"{row['fast']:>7.3f}s {row['full']:>7.3f}s {row['fast'] / row['full']:>6.2f} | "
            f"{row['listed']:>7,.0f} {row['runs']:>4} {row['decisions']:>7,} | "
            f"{row['first']:>9.3f}s"
        )
    print("(median per event of", EVENTS, "events; the same decisions from both, checked;")
    print(" full: the whole cycle on the same snapshot, today's path and the floor to beat;")
    print(" first fast: the first pass of a term, which files every stored job)")
    base = rows[0]
    ratio = base["fast"] / base["full"]
    print(
        f"\ntarget: fast pass <= {TARGET_RATIO:g} x the full cycle, stored cluster at "
        f"{base['queues']:,} queues: {ratio:.2f}: {'met' if ratio <= TARGET_RATIO else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
