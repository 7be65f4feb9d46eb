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

With ``--devices``, the same dump with its GPUs asked through Dynamic Resource Allocation
(``gen_cluster.to_device_objects``: the share of Jobs that ask GPUs, about one in twenty, each
naming a ResourceClaimTemplate; their pods' allocated claims; a DeviceClass; a ResourceSlice per
GPU node) against the floor of the dump asking the same GPUs as the extended resource
``nvidia.com/gpu``, in the same run: 1 and 2 above, each dump read the same way (its DRA
objects too, into the namespaces' device contexts the Jobs are read with), simulate with the
scheduler configuration that maps the DeviceClass to ``nvidia.com/gpu``. The views of the two
dumps are read in turn, twice, each in a process of its own (without the run without tables).

Run: ``.venv/bin/python -m bench.bench_reading [--quick] [--devices]``.
Targets: views at least 3 times as fast as without the tables; simulate within 3 times the
json.load floor; with devices, views and simulate each within 1.2 times the extended-resource
dump's.
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

from bench.gen_cluster import BASE, DEVICE_MAPPING, Size, generate, to_device_objects, to_objects

QUICK = Size(departments=1, teams=9, leaves=5, pending=2_000, admitted=2_000, nodes=200)
PASSES = 5
TARGET_VIEWS = 3.0
TARGET_SIMULATE = 3.0
TARGET_DEVICES = 1.2
DEVICE_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")


def _best(run: Callable[[], object], passes: int = PASSES) -> float:
    times = []
    for _ in range(passes):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def views(path: Path, uncached: bool = True) -> dict[str, float]:
    """Seconds to read the dump's Jobs and Pods (and its DRA objects, into the device contexts
    the Jobs are read with) into views, with and (``uncached``) without the tables, and to
    parse their text."""
    from sluice.api import memo
    from sluice.api.config import load_scheduler_config
    from sluice.api.device_claims import read_claim_template, read_resource_claim
    from sluice.api.device_context import device_contexts
    from sluice.api.devices import read_device_class, read_resource_slice
    from sluice.api.pod_defaults import defaults_for, pod_defaults
    from sluice.api.pod_views import pod_from_object
    from sluice.api.workloads import POD_LABELS
    from sluice.scheduler.snapshot import readers

    items = json.loads(path.read_text())["items"]
    by_kind: dict[str, list[Any]] = {kind: [] for kind in ("Job", "Pod", *DEVICE_KINDS)}
    for obj in items:
        if obj["kind"] in by_kind:
            by_kind[obj["kind"]].append(obj)
    read = [o for kind in by_kind for o in by_kind[kind]]
    text = json.dumps(read)
    mapping = load_scheduler_config(DEVICE_MAPPING).device_mapping
    gc.collect()
    gc.freeze()

    def read_all() -> None:
        memo.clear_all()
        claims = [read_resource_claim(o) for o in by_kind["ResourceClaim"]]
        contexts = device_contexts(
            [read_device_class(o) for o in by_kind["DeviceClass"]],
            [read_claim_template(o) for o in by_kind["ResourceClaimTemplate"]],
            claims,
            mapping,
        )
        for obj in by_kind["ResourceSlice"]:
            read_resource_slice(obj)
        table = pod_defaults((), (), contexts)
        read_job = readers({}, defaults_of=lambda ns: defaults_for(table, ns))["Job"]
        for job in by_kind["Job"]:
            read_job(job)
        for pod in by_kind["Pod"]:
            pod_from_object(pod, POD_LABELS)

    def read_all_uncached() -> None:
        with memo.uncached():
            read_all()

    return {
        "objects": len(read),
        "cached": _best(read_all),
        "uncached": _best(read_all_uncached) if uncached else 0.0,
        "json": _best(lambda: json.loads(text)),
    }


def simulate(path: Path) -> dict[str, float]:
    """Wall seconds of ``sluice simulate`` and of a bare json.load of the same file."""
    bare = [sys.executable, "-c", f"import json; json.load(open({str(path)!r}))"]
    return _in_turn({"json": bare, "simulate": _simulate_command(path)})


def _simulate_command(path: Path, config: Path | None = None) -> list[str]:
    command = [sys.executable, "-m", "sluice.cli.main", "simulate", str(path), "-o", "json"]
    command += ["--now", "2026-01-02T00:00:00Z"]
    return command + (["--config", str(config)] if config else [])


def _in_turn(commands: dict[str, list[str]]) -> dict[str, float]:
    """Best wall seconds of each command of three runs, run in turn."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(3):
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - started)
    return {name: min(values) for name, values in times.items()}


def _views_child(path: Path, *more: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_reading", "--child", str(path), *more]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _met(ratio: float, target: float) -> str:
    return f"target <= x{target:.1f}: {'met' if ratio <= target else 'NOT met'}"


def devices(size: Size) -> None:
    """The dump with its GPUs asked through DRA beside the same dump asking them as an
    extended resource: views, then simulate."""
    snapshot = generate(size)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"extended": Path(tmp) / "extended.json", "devices": Path(tmp) / "devices.json"}
        paths["extended"].write_text(json.dumps(to_objects(snapshot)))
        dump = to_device_objects(snapshot)
        paths["devices"].write_text(json.dumps(dump))
        del snapshot
        config = Path(tmp) / "scheduler.yaml"
        config.write_text(DEVICE_MAPPING)
        # Each dump's views in a process of its own, in turn, twice: the best of each, so
        # that a change of the machine's load does not fall on one of them alone.
        read: dict[str, dict[str, Any]] = {}
        for _ in range(2):
            for name, path in paths.items():
                got = _views_child(path, "--devices")
                if name not in read or got["cached"] < read[name]["cached"]:
                    read[name] = got
        run = _in_turn({name: _simulate_command(path, config) for name, path in paths.items()})
    kinds: dict[str, int] = {}
    for obj in dump["items"]:
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    jobs = size.pending + size.admitted
    print(
        f"the {jobs:,}-job dump with its GPUs through DRA ({kinds['DeviceClass']} DeviceClass,"
        f" {kinds['ResourceSlice']:,} ResourceSlices, {kinds['ResourceClaimTemplate']:,}"
        f" ResourceClaimTemplates, {kinds['ResourceClaim']:,} ResourceClaims) against the same"
        " dump with nvidia.com/gpu as an extended resource (the floor):"
    )
    dev, ext = read["devices"], read["extended"]
    ratio = dev["cached"] / ext["cached"]
    print(
        f"  views of {dev['objects']:,} objects: {dev['cached']:.3f}s; floor the extended dump's"
        f" {ext['objects']:,}: {ext['cached']:.3f}s; x{ratio:.2f} ({_met(ratio, TARGET_DEVICES)})"
    )
    ratio = run["devices"] / run["extended"]
    print(
        f"  sluice simulate: {run['devices']:.2f}s; floor the extended dump's:"
        f" {run['extended']:.2f}s; x{ratio:.2f} ({_met(ratio, TARGET_DEVICES)})"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Reading benchmark")
    parser.add_argument("--quick", action="store_true", help="a cluster 10 times smaller")
    parser.add_argument(
        "--devices", action="store_true", help="the GPUs through DRA against extended resources"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # the views in a process of their own, its heap only the dump's
        print(json.dumps(views(Path(args.child), uncached=not args.devices)))
        return 0
    size = QUICK if args.quick else BASE
    if args.devices:
        devices(size)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dump.json"
        path.write_text(json.dumps(to_objects(generate(size))))
        read = _views_child(path)
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
