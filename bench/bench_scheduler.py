"""Scheduler benchmark: one full cycle (requeue, enqueue, allocate, reclaim, preempt, backfill,
with placement) on generated clusters with pods, at the base size of the targets and at ten
times that size.

Each size runs in its own process so that its peak memory (maxrss) is its own. Beside the cycle
time it prints two floors measured in the same run, and the cycle's ratio to them: a bare
``sorted()`` of the same jobs' order keys (no scheduler can order jobs faster), and a bare tally
of every pod's request on its node (no scheduler can know what is free on the nodes faster).
It also times reading the same cluster as a ``kubectl get -o json`` dump through the reader of
``sluice simulate``.

With ``--devices``, the base size only, its GPUs handed out through Dynamic Resource Allocation
(``gen_cluster.to_device_objects``: room from ResourceSlices, pods holding allocated claims)
against the same cluster with ``nvidia.com/gpu`` as an extended resource, the floor, in the same
run. Each cluster is read as the operator reads it, once, and every cycle is what the operator's
is: ``build_snapshot`` of the reads (where the devices are counted in) and ``run_cycle``.
Target: the devices' cycle within 1.2 times the floor's.

With ``--flavors``, the base size only, its nodes split into three zones, each a Flavor, and
the departments holding quota in each (``gen_cluster.with_flavors``), against the same nodes
without flavors, in the same run. Target: within 1.5 times the run without them.

With ``--resizable``, the base size only, a quarter of its jobs declaring a minimum of half
their pods and the admitted ones recorded (``gen_cluster.with_resizable``), against the same
cluster without a minimum, in the same run. Target: within 1.3 times the run without them.
The three clusters (without, resizable, and with one in four of the admitted ones grown
beyond its record, its growth waiting in its queue: more to decide, shown beside it without
a target) run in one process, one cycle of each in turn, so that the load of a shared
machine, which moves from one minute to the next, weighs on all alike; the CPU time of the
cycles is printed beside their wall time.

Run: ``.venv/bin/python -m bench.bench_scheduler`` (``--quick`` for sizes 20 times smaller).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.gen_cluster import (
    BASE,
    DEVICE_MAPPING,
    START,
    Size,
    generate,
    to_device_objects,
    to_objects,
    with_flavors,
    with_resizable,
    zoned,
)
from sluice.scheduler.model import Snapshot

QUICK = Size(departments=1, teams=9, leaves=5, pending=1_000, admitted=1_000, nodes=100)
TARGET_SECONDS = 1.0
LARGE_CYCLES = 3
TARGET_BYTES = 1024**3
TARGET_DEVICES = 1.2
TARGET_FLAVORS = 1.5
TARGET_RESIZABLE = 1.3


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def measure(size: Size, repeat: int) -> dict[str, Any]:
    """Everything for one size; runs in a child process."""
    from sluice.cli.snapshot_io import build_snapshot, load_objects
    from sluice.operator.memory import paused
    from sluice.scheduler.cycle import run_cycle

    started = time.perf_counter()
    snapshot = generate(size)
    generated = time.perf_counter() - started
    times: list[float] = []
    decisions = 0
    for i in range(repeat):
        gc.collect()
        started = time.perf_counter()
        result = paused(run_cycle, snapshot)
        times.append(time.perf_counter() - started)
        decisions = len(result.decisions)
        _progress(f"  {size.queues:,} queues: cycle {i + 1}/{repeat} {times[-1]:.3f}s")
        del result
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    priority = {pc.name: pc.value for pc in snapshot.priority_classes}
    keys = [
        (-priority.get(j.priority_class_name or "", 0), j.creation_timestamp, j.namespace, j.name)
        for j in snapshot.workloads
    ]
    floors = []
    for _ in range(repeat):
        started = time.perf_counter()
        sorted(keys)
        floors.append(time.perf_counter() - started)
    tallies = []
    for _ in range(repeat):
        started = time.perf_counter()
        tally(snapshot)
        tallies.append(time.perf_counter() - started)

    snapshot_pods = snapshot.pods or ()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dump.json"
        path.write_text(json.dumps(to_objects(snapshot)))
        del snapshot
        gc.collect()
        started = time.perf_counter()
        build_snapshot(load_objects(path), START + timedelta(days=1))
        parse = time.perf_counter() - started
    return {
        "size": asdict(size),
        "queues": size.queues,
        "jobs": size.pending + size.admitted,
        "generate": generated,
        "times": times,
        "decisions": decisions,
        "peak_bytes": peak,
        "sort_floor": statistics.median(floors),
        "tally_floor": statistics.median(tallies),
        "pods": len(snapshot_pods),
        "parse": parse,
    }


def measure_read(size: Size, repeat: int, devices: bool) -> dict[str, Any]:
    """Cycles of the operator's path over the cluster read from its objects, its GPUs through
    DRA (``devices``) or as an extended resource; runs in a child process."""
    from sluice.api.config import load_scheduler_config
    from sluice.api.device_claims import read_claim_template, read_resource_claim
    from sluice.api.device_context import device_contexts
    from sluice.api.devices import read_device_class
    from sluice.api.pod_defaults import defaults_for, pod_defaults
    from sluice.operator.memory import paused
    from sluice.scheduler.cycle import run_cycle
    from sluice.scheduler.snapshot import KINDS, build_snapshot, read, readers

    snapshot = generate(size)
    config = replace(
        snapshot.config, device_mapping=load_scheduler_config(DEVICE_MAPPING).device_mapping
    )
    items = (to_device_objects if devices else to_objects)(snapshot)["items"]
    del snapshot
    by_kind: dict[str, list[Any]] = {kind: [] for kind in KINDS}
    for obj in items:
        by_kind[obj["kind"]].append(obj)
    table = pod_defaults(
        (),
        (),
        device_contexts(
            [read_device_class(o) for o in by_kind["DeviceClass"]],
            [read_claim_template(o) for o in by_kind["ResourceClaimTemplate"]],
            [read_resource_claim(o) for o in by_kind["ResourceClaim"]],
            config.device_mapping,
        ),
    )
    using = readers({}, defaults_of=lambda ns: defaults_for(table, ns))
    reads = [
        read(kind, f"{kind}/{i}", obj, using)
        for kind in KINDS
        for i, obj in enumerate(by_kind[kind])
    ]
    del items, by_kind
    now = START + timedelta(days=1)
    builds: list[float] = []
    cycles: list[float] = []
    decisions = 0
    for i in range(repeat):
        gc.collect()
        started = time.perf_counter()
        built = build_snapshot(reads, now, strict=True, config=config)
        builds.append(time.perf_counter() - started)
        result = paused(run_cycle, built.snapshot)
        cycles.append(time.perf_counter() - started)
        decisions = len(result.decisions)
        mode = "devices" if devices else "extended"
        _progress(f"  {mode}: cycle {i + 1}/{repeat} {cycles[-1]:.3f}s")
        del result, built
    return {"builds": builds, "times": cycles, "decisions": decisions}


def _devices(size: Size, repeat: int) -> None:
    """The base size's cycle with the GPUs through DRA beside the extended-resource floor."""
    _versus(
        size,
        repeat,
        ("extended", "devices"),
        f"cycle (build_snapshot of the reads + run_cycle) of {size.pending + size.admitted:,}"
        f" jobs on {size.nodes:,} nodes, GPUs through DRA",
        "the same cluster with nvidia.com/gpu as an extended resource",
        TARGET_DEVICES,
    )


def _versus(
    size: Size, repeat: int, modes: tuple[str, str], what: str, floor: str, target: float
) -> None:
    """Runs the floor's child and the measured one (``modes``, in that order) and prints the
    measured median beside the floor's, their ratio and whether it meets ``target``."""
    _progress(f"{size.pending + size.admitted:,} jobs, {size.nodes:,} nodes: {repeat} cycles each")
    run = {mode: _run_child(size, repeat, mode=mode) for mode in modes}
    low, high = run[modes[0]], run[modes[1]]
    assert low is not None and high is not None
    ratio = statistics.median(high["times"]) / statistics.median(low["times"])
    print(
        f"{what}: {_side(high)}; floor {floor}: {_side(low)}; x{ratio:.2f}"
        f" (target <= x{target:.1f}: {'met' if ratio <= target else 'NOT met'})"
    )


def _side(run: dict[str, Any]) -> str:
    """One side of a comparison: its median cycle, the build's when it has one, its first
    cycle and its decisions."""
    times = run["times"]
    build = f"build {statistics.median(run['builds']):.3f}s, " if "builds" in run else ""
    return (
        f"median {statistics.median(times):.3f}s ({build}first cycle {times[0]:.3f}s,"
        f" {run['decisions']:,} decisions)"
    )


VARIANTS: dict[str, Callable[[Snapshot], Snapshot]] = {
    "plain": zoned,
    "flavors": with_flavors,
    "whole": lambda snapshot: snapshot,
    "resizable": with_resizable,
    "grown": lambda snapshot: with_resizable(snapshot, grown=True),
}
"""The clusters a comparison's child measures, from the generated one: zoned without and with
three flavors (``--flavors``); as generated and with a quarter of its jobs resizable
(``--resizable``)."""


def measure_variant(size: Size, repeat: int, mode: str) -> dict[str, Any]:
    """The cycle on the cluster ``VARIANTS[mode]`` makes; runs in a child process."""
    from sluice.operator.memory import paused
    from sluice.scheduler.cycle import run_cycle

    snapshot = VARIANTS[mode](generate(size))
    times: list[float] = []
    cpu: list[float] = []  # what the load of a shared machine moves less
    decisions = 0
    smaller = 0
    for i in range(repeat):
        gc.collect()
        started, used = time.perf_counter(), time.process_time()
        result = paused(run_cycle, snapshot)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
        decisions = len(result.decisions)
        smaller = sum(1 for d in result.decisions if d.smaller)
        _progress(f"  {mode}: cycle {i + 1}/{repeat} {times[-1]:.3f}s")
        del result
    return {"times": times, "cpu": cpu, "decisions": decisions, "smaller": smaller}


RESIZABLE_MODES = ("whole", "resizable", "grown")
"""The clusters of ``--resizable``, measured in one process, their cycles interleaved."""


def measure_interleaved(size: Size, repeat: int) -> dict[str, Any]:
    """The cycles of the ``RESIZABLE_MODES`` clusters, in one process, one cycle of each in
    turn, the order rotated every round: a load that changes while they run weighs on all
    alike, as it would not on children run one after the other."""
    from sluice.operator.memory import paused
    from sluice.scheduler.cycle import run_cycle

    base = generate(size)
    snapshots = {mode: VARIANTS[mode](base) for mode in RESIZABLE_MODES}
    out: dict[str, dict[str, Any]] = {
        mode: {"times": [], "cpu": [], "decisions": 0, "smaller": 0} for mode in RESIZABLE_MODES
    }
    for i in range(repeat):
        turn = RESIZABLE_MODES[i % 3 :] + RESIZABLE_MODES[: i % 3]
        for mode in turn:
            gc.collect()
            started, used = time.perf_counter(), time.process_time()
            result = paused(run_cycle, snapshots[mode])
            out[mode]["times"].append(time.perf_counter() - started)
            out[mode]["cpu"].append(time.process_time() - used)
            out[mode]["decisions"] = len(result.decisions)
            out[mode]["smaller"] = sum(1 for d in result.decisions if d.smaller)
            _progress(f"  {mode}: cycle {i + 1}/{repeat} {out[mode]['times'][-1]:.3f}s")
            del result
    return out


def _flavors(size: Size, repeat: int) -> None:
    """The base size's cycle with three flavors beside the same cluster without them."""
    _versus(
        size,
        repeat,
        ("plain", "flavors"),
        f"cycle of {size.pending + size.admitted:,} jobs on {size.nodes:,} nodes, three flavors",
        "the same nodes without flavors",
        TARGET_FLAVORS,
    )


def _resizable(size: Size, repeat: int) -> None:
    """The base size's cycle with a quarter of its jobs resizable beside the same cluster
    without a minimum, their cycles interleaved in one process; then with some of them grown,
    which adds growth waiting in the queues (more to decide, so no target)."""
    _progress(f"{size.pending + size.admitted:,} jobs, {size.nodes:,} nodes: {repeat} cycles each")
    run = _run_child(size, repeat, mode="interleaved")
    assert run is not None
    whole, sized, grown = (run[mode] for mode in RESIZABLE_MODES)
    t_whole, t_sized = statistics.median(whole["times"]), statistics.median(sized["times"])
    c_whole, c_sized = statistics.median(whole["cpu"]), statistics.median(sized["cpu"])
    ratio = t_sized / t_whole
    met = "met" if ratio <= TARGET_RESIZABLE else "NOT met"
    print(
        f"cycle of {size.pending + size.admitted:,} jobs on {size.nodes:,} nodes, a quarter"
        f" resizable: median {t_sized:.3f}s, CPU {c_sized:.3f}s ({sized['decisions']:,}"
        f" decisions, {sized['smaller']:,} admitted smaller); none resizable: {t_whole:.3f}s,"
        f" CPU {c_whole:.3f}s ({whole['decisions']:,} decisions); x{ratio:.2f}, CPU"
        f" x{c_sized / c_whole:.2f} (target <= x{TARGET_RESIZABLE:.1f}: {met})"
    )
    t_grown, c_grown = statistics.median(grown["times"]), statistics.median(grown["cpu"])
    print(
        f"  and one in four of the admitted ones grown: median {t_grown:.3f}s, CPU"
        f" {c_grown:.3f}s ({grown['decisions']:,} decisions); x{t_grown / t_whole:.2f}, CPU"
        f" x{c_grown / c_whole:.2f} the run without"
    )


def tally(snapshot: Any) -> int:
    """Every pod's request added to its node's total, once: what knowing the nodes' free room
    costs at the very least."""
    used: dict[str, dict[str, int]] = {node.name: {} for node in snapshot.nodes}
    for pod in snapshot.pods or ():
        room = used.get(pod.node or "")
        if room is not None and not pod.finished:
            for r, a in pod.request.items():
                room[r] = room.get(r, 0) + a
    return len(used)


def _run_child(
    size: Size, repeat: int, timeout: float | None = None, mode: str = ""
) -> dict[str, Any] | None:
    """One size in its own process; None when it did not finish within ``timeout``.
    ``mode``: "devices" or "extended" for ``measure_read``, a ``VARIANTS`` key for
    ``measure_variant``."""
    command = [sys.executable, "-m", "bench.bench_scheduler", "--child", json.dumps(asdict(size))]
    command += ["--repeat", str(repeat)] + (["--mode", mode] if mode else [])
    try:
        done = subprocess.run(
            command, check=True, stdout=subprocess.PIPE, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def _table(rows: list[dict[str, Any]]) -> str:
    header = (
        f"{'queues':>7} {'pending':>8} {'admitted':>9} {'nodes':>6} {'pods':>7} | "
        f"{'median':>8} {'p90':>8} {'per job':>8} | {'sorted()':>8} {'x':>5} "
        f"{'pod tally':>9} {'x':>5} | {'peak RSS':>9} {'decisions':>9} {'dump read':>9}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        size = row["size"]
        median = statistics.median(row["times"])
        lines.append(
            f"{row['queues']:>7,} {size['pending']:>8,} {size['admitted']:>9,} "
            f"{size['nodes']:>6,} {row['pods']:>7,} | {median:>7.3f}s {_p90(row['times']):>7.3f}s "
            f"{median / row['jobs'] * 1e6:>6.1f}us | {row['sort_floor']:>7.3f}s "
            f"{median / row['sort_floor']:>4.0f}x {row['tally_floor']:>8.3f}s "
            f"{median / row['tally_floor']:>4.0f}x | "
            f"{row['peak_bytes'] / 1024**2:>7.0f}Mi {row['decisions']:>9,} {row['parse']:>8.2f}s"
        )
    return "\n".join(lines)


def _child(size: Size, mode: str | None, repeat: int) -> dict[str, Any]:
    """What one child process measures: ``mode`` picks the comparison it is a side of."""
    if mode in VARIANTS:
        return measure_variant(size, repeat, mode)
    if mode == "interleaved":
        return measure_interleaved(size, repeat)
    if mode:
        return measure_read(size, repeat, mode == "devices")
    return measure(size, repeat)


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Scheduler cycle benchmark")
    parser.add_argument("--quick", action="store_true", help="sizes 20 times smaller")
    parser.add_argument("--repeat", type=int, default=0, help="cycles per size")
    parser.add_argument(
        "--large-timeout", type=float, default=600, help="seconds allowed for the 10x run"
    )
    parser.add_argument(
        "--devices", action="store_true", help="the GPUs through DRA against extended resources"
    )
    parser.add_argument(
        "--flavors", action="store_true", help="three flavors against none, on the same nodes"
    )
    parser.add_argument(
        "--resizable",
        action="store_true",
        help="a quarter of the jobs resizable against none, on the same cluster",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    modes = ("devices", "extended", "interleaved", *VARIANTS)
    parser.add_argument("--mode", choices=modes, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    if args.child:
        print(json.dumps(_child(Size(**json.loads(args.child)), args.mode, args.repeat or 5)))
        return 0

    base = QUICK if args.quick else BASE
    if args.devices:
        _devices(base, args.repeat or 7)
        return 0
    if args.flavors:
        _flavors(base, args.repeat or 7)
        return 0
    if args.resizable:
        _resizable(base, args.repeat or 7)
        return 0
    large = base.scaled(10)
    _progress(
        f"{base.queues:,} queues, {base.pending:,} pending + {base.admitted:,} admitted "
        f"jobs, {base.nodes:,} nodes: {args.repeat or 7} cycles"
    )
    small = _run_child(base, args.repeat or 7)
    assert small is not None
    # Three cycles, not one: a single 10-second cycle on a shared machine varies by 15%.
    _progress(
        f"10x: {large.queues:,} queues, {large.pending + large.admitted:,} jobs: "
        f"{LARGE_CYCLES} cycles"
    )
    big = _run_child(large, LARGE_CYCLES, timeout=args.large_timeout)
    print(_table([small] + ([big] if big else [])))
    t_small = statistics.median(small["times"])
    n_small = small["jobs"]
    n_large = large.pending + large.admitted
    nlogn = (n_large * math.log(n_large)) / (n_small * math.log(n_small))
    if big is None:
        print(
            f"\n10x ({large.queues:,} queues, {n_large:,} jobs): {LARGE_CYCLES} cycles did not"
            f" finish within {args.large_timeout:.0f}s: growth over"
            f" x{args.large_timeout / LARGE_CYCLES / t_small:.0f}"
            f" against n log n x{nlogn:.1f}"
        )
    else:
        t_large = statistics.median(big["times"])
        ratio = t_large / t_small / nlogn
        print(
            f"\ngrowth x{n_large // n_small} jobs: median cycle time x{t_large / t_small:.1f}, "
            f"n log n x{nlogn:.1f} (ratio {ratio:.2f}; target <= 1, n log n or better):"
            f" {'met' if ratio <= 1 else 'NOT met'}"
        )
    if not args.quick:
        met = t_small <= TARGET_SECONDS and small["peak_bytes"] < TARGET_BYTES
        print(
            f"base size: median {t_small:.3f}s (target <= {TARGET_SECONDS:.0f}s), peak "
            f"{small['peak_bytes'] / 1024**2:.0f}Mi (target < 1Gi): {'met' if met else 'NOT met'};"
            f" floors in the same run: sorted() {small['sort_floor']:.3f}s"
            f" (x{t_small / small['sort_floor']:.0f}), pod tally {small['tally_floor']:.3f}s"
            f" (x{t_small / small['tally_floor']:.0f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
