"""A dump's Flavors reach the snapshot simulate runs over (`sluice simulate` reads Flavors
from `kubectl get flavors -o yaml`, as from the rest of the dump)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dump_objects import job, node, queue, write
from rich.console import Console

from sluice.api.flavor import FlavorView, Taint
from sluice.cli.queue_view import queue_tree
from sluice.cli.render import render_table, to_json
from sluice.cli.simulate import simulate_file, write_report
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


def spot_dump(tmp_path: Path) -> Path:
    """A queue with cpu deserved 4 in flavor spot, one node of it, and a Job asking cpu 2."""
    labelled = node("n1", "8")
    labelled["metadata"]["labels"] = {"pool": "spot"}
    team = queue("team", "root", flavors=[{"name": "spot", "deserved": {"cpu": "4"}}])
    objects = [queue("root"), team, labelled, flavor("spot", nodeLabels={"pool": "spot"})]
    return write(tmp_path, [*objects, job("j", "team", "2")])


def test_simulate_shows_each_queues_figures_per_flavor(tmp_path: Path) -> None:
    sim = simulate_file(spot_dump(tmp_path), now=NOW)
    assert sim.decisions[0][1].flavors == (("main", "spot"),)
    assert to_json(sim)["queues"]["team"]["flavors"] == [
        {
            "name": "spot",
            "allocated": {"cpu": "2"},
            "deserved": {"cpu": "2"},  # proportion: no more than it asks
            "realCapability": {"cpu": "8"},
        }
    ]
    out = io.StringIO()
    render_table(sim, Console(file=out, width=200))
    assert "spot cpu 2/2" in out.getvalue()


def test_the_queue_tree_has_a_line_per_flavor() -> None:
    status = {
        "state": "Open",
        "flavors": [
            {
                "name": "spot",
                "allocated": {"cpu": "2"},
                "deserved": {"cpu": "4"},
                "realCapability": {"cpu": "8"},
            },
            {"name": "h100", "allocated": {"cpu": "1"}},
        ],
    }
    items = [queue("root"), {**queue("team", "root"), "status": status}]
    out = io.StringIO()
    Console(file=out, width=200).print(queue_tree(items))
    lines = out.getvalue().splitlines()
    assert any(
        "flavor spot deserved=cpu=4 allocated=cpu=2 realCapability=cpu=8" in line for line in lines
    )
    assert any(line.strip().endswith("flavor h100 allocated=cpu=1") for line in lines)


def test_the_page_simulate_html_writes_draws_a_bar_per_flavor(tmp_path: Path) -> None:
    sim = simulate_file(spot_dump(tmp_path), now=NOW, report=True)
    out = tmp_path / "report.html"
    write_report(sim, out, "spot")
    html = out.read_text()
    data = json.loads(html.split("window.SLUICE_DATA = ", 1)[1].split(";</script>", 1)[0])
    shown = {q["name"]: q for q in data["tree"]["queues"]}
    # The bars the dashboard draws for the same queue once its status says the same.
    (spot,) = shown["team"]["flavors"]
    assert (spot["name"], spot["resources"]) == ("spot", ["cpu"])
    assert (spot["allocated"]["cpu"]["s"], spot["deserved"]["cpu"]["s"]) == ("2", "2")
    assert shown["root"]["flavors"] == []
