"""A dump's Flavors reach the snapshot simulate runs over (`sluice simulate` reads Flavors
from `kubectl get flavors -o yaml`, as from the rest of the dump)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from dump_objects import node, queue, write

from sluice.api.flavor import FlavorView, Taint
from sluice.cli.snapshot_io import SnapshotError, build_snapshot, load_objects

NOW = datetime(2026, 11, 28, tzinfo=UTC)


def flavor(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Flavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_the_flavors_of_a_dump_are_in_its_snapshot(tmp_path: Path) -> None:
    h100 = flavor(
        "h100",
        nodeLabels={"gpu.example.com/model": "H100"},
        nodeTaints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )
    path = write(tmp_path, [queue("root"), node("n1", "4"), h100, flavor("any")])
    snapshot = build_snapshot(load_objects(path), NOW).snapshot
    assert sorted(snapshot.flavors, key=lambda f: f.name) == [
        FlavorView("any", {}),
        FlavorView(
            "h100",
            {"gpu.example.com/model": "H100"},
            (Taint("nvidia.com/gpu", "present", "NoSchedule"),),
        ),
    ]


def test_a_flavor_the_door_would_refuse_is_named(tmp_path: Path) -> None:
    bad = flavor("h100", nodeTaints=[{"key": "gpu", "effect": "NoWait"}])
    path = write(tmp_path, [queue("root"), bad])
    with pytest.raises(SnapshotError, match="h100"):
        build_snapshot(load_objects(path), NOW)
