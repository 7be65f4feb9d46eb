"""The benchmark cluster with its GPUs through DRA (bench/gen_cluster.py, ``to_device_objects``)
is the same cluster as with ``nvidia.com/gpu`` as an extended resource: the floor the DRA
benchmarks compare against decides exactly as it does."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gen_cluster import (
    DEVICE_MAPPING,
    GPU,
    GPU_CLASS,
    Size,
    generate,
    to_device_objects,
    to_objects,
)
from sluice.cli.render import to_json
from sluice.cli.simulate import simulate_file

SMALL = Size(departments=1, teams=3, leaves=3, pending=600, admitted=600, nodes=40)
NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _simulate(tmp_path: Path, name: str, dump: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(dump))
    config = tmp_path / "scheduler.yaml"
    config.write_text(DEVICE_MAPPING)
    return dict(to_json(simulate_file(path, config, now=NOW)))


def test_the_dra_cluster_decides_as_the_extended_resource_one(tmp_path: Path) -> None:
    snapshot = generate(SMALL)
    dra = to_device_objects(snapshot)
    # The GPUs are asked and offered through DRA alone (the taint keeps its key).
    asked = [
        c["resources"]["requests"]
        for o in dra["items"]
        if o["kind"] in ("Job", "Pod")
        for c in (o["spec"].get("template") or o)["spec"]["containers"]
    ]
    offered = [o["status"]["allocatable"] for o in dra["items"] if o["kind"] == "Node"]
    assert not [r for r in asked + offered if GPU in r]
    allocated = [o for o in dra["items"] if o["kind"] == "ResourceClaim" and o["status"]]
    assert allocated
    extended = _simulate(tmp_path, "extended", to_objects(snapshot))
    devices = _simulate(tmp_path, "devices", dra)
    assert devices["decisions"] == extended["decisions"]
    assert devices["queues"] == extended["queues"]
    assert any(GPU in q["allocated"] for q in devices["queues"].values())
    # The pending jobs wait for the same reasons; a reason on GPUs says they are asked
    # through claims.
    note = f" (devices of {GPU_CLASS} asked through claims)"
    assert [(p["job"], p["reason"].replace(note, "")) for p in devices["pending"]] == [
        (p["job"], p["reason"]) for p in extended["pending"]
    ]


def test_the_benchmarks_read_path_decides_the_same_through_dra_as_extended() -> None:
    # bench_scheduler --devices reads the cluster as the operator does, DRA objects included.
    from bench.bench_scheduler import measure_read

    tiny = Size(departments=1, teams=2, leaves=2, pending=120, admitted=120, nodes=12)
    through_dra = measure_read(tiny, 1, devices=True)
    extended = measure_read(tiny, 1, devices=False)
    assert through_dra["decisions"] == extended["decisions"] > 0


def test_the_reading_benchmark_reads_a_dump_with_its_dra_objects(tmp_path: Path) -> None:
    from bench.bench_reading import views

    tiny = Size(departments=1, teams=2, leaves=2, pending=60, admitted=60, nodes=8)
    path = tmp_path / "dra.json"
    path.write_text(json.dumps(to_device_objects(generate(tiny))))
    assert "cached" in views(path, uncached=False)
