"""Reading benchmark: Kubernetes objects into the scheduler's views, and ``sluice simulate`` of a
dump, each beside a floor measured in the same run.

The dump is the scheduler benchmark's base cluster (bench/gen_cluster.py: 1,000 queues, 40,000
Jobs, their pods, 2,000 nodes) written as ``kubectl get -o json`` prints it.

1. Views: every Job of the dump read by its adapter and every Pod into a PodView, from objects
   already parsed (the loaded objects are left to the old generation of the garbage collector,
   as in a process that holds them), through memo tables that start empty; beside it the same
   reads without any table (``sluice.api.memo.uncached``) and the floor: ``json.loads`` of the
   same objects' text. Best of several passes.
2. ``sluice simulate <dump> -o json`` as a command, beside the floor: a Python process that only
   ``json.load``\\ s the same file. Best of three each, run in turn.

Run: ``.venv/bin/python -m bench.bench_reading [--quick]``.
Targets: views at least 3 times as fast as without the tables; simulate within 3 times the
json.load floor.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.gen_cluster import BASE, Size, generate, to_objects

QUICK = Size(departments=1, teams=9, leaves=5, pending=2_000, admitted=2_000, nodes=200)
PASSES = 5
TARGET_VIEWS = 3.0
TARGET_SIMULATE = 3.0


def _best(run: Callable[[], object], passes: int = PASSES) -> float:
    times = []
    for _ in range(passes):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def views(path: Path) -> dict[str, float]:
    """Seconds to read the dump's Jobs and Pods into views, with and without the tables, and
    to parse their text."""
    from sluice.api import memo
    from sluice.api.pod_views import pod_from_object
    from sluice.api.workloads import POD_LABELS
    from sluice.scheduler.snapshot import readers

    items = json.loads(path.read_text())["items"]
    jobs = [o for o in items if o["kind"] == "Job"]
    pods = [o for o in items if o["kind"] == "Pod"]
    text = json.dumps(jobs + pods)
    read_job = readers({})["Job"]
    gc.collect()
    gc.freeze()

    def read_all() -> None:
        memo.clear_all()
        for job in jobs:
            read_job(job)
        for pod in pods:
            pod_from_object(pod, POD_LABELS)

    def read_all_uncached() -> None:
        with memo.uncached():
            read_all()

    return {
        "objects": len(jobs) + len(pods),
        "cached": _best(read_all),
        "uncached": _best(read_all_uncached),
        "json": _best(lambda: json.loads(text)),
    }


def simulate(path: Path) -> dict[str, float]:
    """Wall seconds of ``sluice simulate`` and of a bare json.load of the same file."""
    sluice = [sys.executable, "-m", "sluice.cli.main", "simulate", str(path), "-o", "json"]
    sluice += ["--now", "2026-01-02T00:00:00Z"]
    bare = [sys.executable, "-c", f"import json; json.load(open({str(path)!r}))"]
    times: dict[str, list[float]] = {"simulate": [], "json": []}
    for _ in range(3):
        for name, command in (("json", bare), ("simulate", sluice)):
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - started)
    return {name: min(values) for name, values in times.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Reading benchmark")
    parser.add_argument("--quick", action="store_true", help="a cluster 10 times smaller")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # the views in a process of their own, its heap only the dump's
        print(json.dumps(views(Path(args.child))))
        return 0
    size = QUICK if args.quick else BASE
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dump.json"
        path.write_text(json.dumps(to_objects(generate(size))))
        command = [sys.executable, "-m", "bench.bench_reading", "--child", str(path)]
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        read: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        run = simulate(path)
    n = read["objects"]
    jobs = size.pending + size.admitted
    speedup = read["uncached"] / read["cached"]
    print(
        f"views of {n:,} objects ({jobs:,} Jobs and their Pods): {n / read['cached']:,.0f}/s"
        f" ({read['cached'] / n * 1e6:.1f} us each); without the memo tables"
        f" {n / read['uncached']:,.0f}/s: x{speedup:.1f} (target >= x{TARGET_VIEWS:.0f}:"
        f" {'met' if speedup >= TARGET_VIEWS else 'NOT met'}); floor json.loads of their text"
        f" {n / read['json']:,.0f}/s, views x{read['cached'] / read['json']:.1f} the floor"
    )
    ratio = run["simulate"] / run["json"]
    print(
        f"sluice simulate of the {jobs:,}-job dump: {run['simulate']:.2f}s; floor python -c"
        f" json.load: {run['json']:.2f}s; x{ratio:.1f} (target <= x{TARGET_SIMULATE:.0f}:"
        f" {'met' if ratio <= TARGET_SIMULATE else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
