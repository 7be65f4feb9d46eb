"""The decision pass against the full cycle, in the pure core: the time from an event to its
decisions, at 1,000 queues / 40,000 jobs and at ten times that.

Two clusters, each at both sizes:

- ``stored``: the shape of bench_operator_scale, jobs from templates: 40,000 (400,000)
  waiting jobs spread over the leaves, of two kinds that ask a resource no node offers;
  each event creates one job that fits, in a leaf, of a kind of its own.
- ``generated``: bench.gen_cluster's cluster (half the jobs admitted with their pods, every
  waiting job drawn at random, so nearly each is of a kind of its own), settled by one full
  cycle first; each event finishes one running job, which frees its room.

For each event the decision pass decides twice, each with its own DecisionPass kept across the
events: ``whole``, handed every stored job and comparing them with those it filed, and
``told``, handed only the jobs that changed, as the operator's decision pass is (its change
log, ``ClusterState.decision_snapshot``); the full cycle decides on the same snapshot. The
decisions must be the same (checked), and the cluster moves on by them. The snapshot each
takes from a ClusterState holding the same views is timed too: ``copy``, every stored view
copied (``ClusterState.snapshot``), and ``log``, every view but the workloads' and the
workloads that changed. Printed: the median per event of each (wall; the told pass's and the
full cycle's CPU beside them), the ratio told/full, and the jobs the told pass listed. The
first decision pass files every stored job (once per operator term): shown apart.

Run: ``.venv/bin/python -m bench.bench_decision_pass`` (``--quick``: 1,000 queues only;
``--clusters stored``: one of the two).
Target: the told decision pass's median at 1,000 queues / 40,000 jobs at most a fifth of the
full cycle's on the stored cluster (the living bench_operator_scale then meets its 0.2 s).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from bench.gen_cluster import BASE, START, Size, generate
from sluice.api.constants import TOPOLOGY_KIND
from sluice.api.constraints import PodSpecView
from sluice.api.resources import Resources
from sluice.api.views import JOB_KIND, MAIN_POD_SET, JobPhase, PodSet, WorkloadView
from sluice.operator.memory import paused
from sluice.operator.state import ClusterState
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.decision_pass import DecisionPass
from sluice.scheduler.model import Snapshot
from sluice.scheduler.snapshot import Read, View

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


def holding(snapshot: Snapshot) -> ClusterState:
    """A ClusterState whose reads are the snapshot's views (as if each object was read)."""
    state = ClusterState(config=snapshot.config)
    kinds: dict[str, Sequence[View]] = {
        "Queue": snapshot.queues,
        "Node": snapshot.nodes,
        "Pod": snapshot.pods or (),
        "PriorityClass": snapshot.priority_classes,
        "Namespace": snapshot.namespaces,
        TOPOLOGY_KIND: snapshot.topologies,
    }
    for kind, views in kinds.items():
        for i, view in enumerate(views):
            state.reads[kind][f"{kind}/{i}"] = Read(kind, f"{kind}/{i}", view)
    for job in snapshot.workloads:
        state.reads[JOB_KIND][job.key] = Read(JOB_KIND, job.key, job)
    return state


def changes(before: Snapshot, after: Snapshot) -> dict[str, WorkloadView | None]:
    """The jobs whose view is not the one before, by key (None: gone)."""
    was = {j.key: j for j in before.workloads}
    now = {j.key: j for j in after.workloads}
    return {k: now.get(k) for k in was.keys() | now.keys() if now.get(k) is not was.get(k)}


def told_by(state: ClusterState, changed: dict[str, WorkloadView | None]) -> None:
    """The state takes in the changed jobs, as its watch handlers would."""
    for key, view in changed.items():
        if view is None:
            state.reads[JOB_KIND].pop(key, None)
        else:
            state.reads[JOB_KIND][key] = Read(JOB_KIND, key, view)
        state.stores.workloads.changes.note(key)


def measure(cluster: str, size: Size) -> dict[str, Any]:
    """Everything for one cluster at one size; runs in a child process."""
    snapshot = stored(size) if cluster == "stored" else generate(size)
    event = created if cluster == "stored" else finished
    if cluster == "generated":
        _progress(f"  {cluster} {size.queues:,} queues: settling")
        snapshot = apply_decisions(snapshot, paused(run_cycle, snapshot), snapshot.now)
    fast, told = DecisionPass(), DecisionPass()
    state = holding(snapshot)
    gc.collect()
    started = time.perf_counter()
    paused(fast.decide, snapshot)
    first = time.perf_counter() - started
    paused(told.decide, snapshot)
    state.decision_snapshot(snapshot.now, 5, whole=True)
    times: dict[str, list[float]] = {
        k: [] for k in ("copy", "log", "fast", "told", "told_cpu", "full", "full_cpu")
    }
    listed: list[int] = []
    runs: list[int] = []
    decisions = 0

    def timed(name: str, call: Any, *args: Any) -> Any:
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        out = call(*args)
        times[name].append(time.perf_counter() - wall)
        if f"{name}_cpu" in times:
            times[f"{name}_cpu"].append(time.process_time() - cpu)
        return out

    seen = snapshot  # what the told pass and the state last took
    for i in range(EVENTS):
        snapshot = replace(event(snapshot, i), now=snapshot.now + timedelta(seconds=1))
        changed = changes(seen, snapshot)
        told_by(state, changed)
        timed("copy", state.snapshot, snapshot.now, 5)
        timed("log", state.decision_snapshot, snapshot.now, 5, False)
        result = timed("fast", paused, fast.decide, snapshot)
        by_log = timed("told", paused, told.decide, replace(snapshot, workloads=()), changed)
        cycle = timed("full", paused, run_cycle, snapshot)
        full = sorted((d.action, d.job) for d in cycle.decisions)
        assert sorted((d.action, d.job) for d in result.decisions) == full, "decisions differ"
        assert sorted((d.action, d.job) for d in by_log.decisions) == full, "decisions differ"
        listed.append(by_log.listed)
        runs.append(by_log.runs)
        decisions += len(by_log.decisions)
        _progress(f"  {cluster} {size.queues:,} queues: event {i + 1}: whole"
                  f" {times['fast'][-1]:.3f}s told {times['told'][-1]:.3f}s"
                  f" full {times['full'][-1]:.3f}s")  # fmt: skip
        seen = snapshot
        snapshot = apply_decisions(snapshot, cycle, snapshot.now)
    return {
        "cluster": cluster,
        "queues": size.queues,
        "jobs": len(snapshot.workloads),
        "first": first,
        **{name: statistics.median(values) for name, values in times.items()},
        "listed": statistics.median(listed),
        "runs": max(runs),
        "decisions": decisions,
    }


def _child(cluster: str, size: Size) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_decision_pass", "--child", cluster]
    command += ["--scale", str(size.departments // BASE.departments)]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="The decision pass against the full cycle")
    parser.add_argument("--quick", action="store_true", help="1,000 queues only")
    parser.add_argument(
        "--clusters", default="stored,generated", help="which, comma-separated (both)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, BASE.scaled(args.scale))))
        return 0
    rows = []
    for scale in (1,) if args.quick else (1, 10):
        for cluster in args.clusters.split(","):
            size = BASE.scaled(scale)
            _progress(f"{cluster}: {size.queues:,} queues, {size.pending + size.admitted:,} jobs")
            rows.append(_child(cluster, size))
    header = (
        f"{'cluster':<10} {'queues':>7} {'jobs':>8} | {'copy':>7} {'log':>7} | {'whole':>7} "
        f"{'told':>7} {'(cpu)':>7} {'full':>7} {'(cpu)':>7} {'ratio':>6} | "
        f"{'listed':>6} {'runs':>4} {'decided':>7} | {'first':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['cluster']:<10} {row['queues']:>7,} {row['jobs']:>8,} | "
            f"{row['copy']:>6.3f}s {row['log']:>6.3f}s | {row['fast']:>6.3f}s "
            f"{row['told']:>6.3f}s {row['told_cpu']:>6.3f}s {row['full']:>6.3f}s "
            f"{row['full_cpu']:>6.3f}s {row['told'] / row['full']:>6.3f} | "
            f"{row['listed']:>6,.0f} {row['runs']:>4} {row['decisions']:>7,} | "
            f"{row['first']:>6.3f}s"
        )
    print("(median per event of", EVENTS, "events, wall unless (cpu); the same decisions from")
    print(" all three, checked; copy/log: the snapshot from a ClusterState of the same views,")
    print(" every view copied / the workloads' change log; whole: the decision pass handed every")
    print(" stored job; told: handed the changed ones; full: the whole cycle on the same")
    print(" snapshot, the floor to beat; first: the first pass of a term, which files every job)")
    base = rows[0]
    ratio = base["told"] / base["full"]
    print(
        f"\ntarget: told decision pass <= {TARGET_RATIO:g} x the full cycle, stored cluster at "
        f"{base['queues']:,} queues: {ratio:.2f}: {'met' if ratio <= TARGET_RATIO else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
