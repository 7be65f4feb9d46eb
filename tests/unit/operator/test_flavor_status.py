"""A Flavor's status: how many Ready, schedulable nodes carry its labels and the condition
Matched, written by the reconciler that writes the Topologies' only when a reader would see a
difference (sluice/scheduler/flavor_status.py, sluice/operator/topology_status.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from operator_fakes import FakeCluster, fake_custom_writer

from sluice.api.flavor import FlavorView
from sluice.api.resources import Resources
from sluice.api.views import NodeView
from sluice.operator.custom_writer import Retry
from sluice.operator.state import ClusterState
from sluice.operator.topology_status import TopologyReconciler
from sluice.scheduler.flavor_status import flavor_status, flavor_status_patch

MODEL = "gpu.example.com/model"
NOW = datetime(2026, 11, 28, tzinfo=UTC)
H100 = FlavorView("h100", {MODEL: "H100"})


def node(name: str, model: str, ready: bool = True, schedulable: bool = True) -> NodeView:
    return NodeView(name, Resources({}), ready, schedulable, {MODEL: model, "zone": "z1"})


def test_only_ready_schedulable_nodes_with_every_label_count() -> None:
    nodes = [
        node("a", "H100"),
        node("b", "H100"),
        node("c", "H100", ready=False),
        node("d", "H100", schedulable=False),
        node("e", "A100"),
    ]
    status = flavor_status({"metadata": {"generation": 3}}, H100, nodes, NOW)
    assert status["nodes"] == 2
    assert status["observedGeneration"] == 3
    (matched,) = status["conditions"]
    assert (matched["type"], matched["status"], matched["reason"]) == (
        "Matched",
        "True",
        "NodesMatch",
    )
    assert (
        matched["message"]
        == "2 Ready, schedulable nodes carry its labels (gpu.example.com/model=H100)"
    )
    two = FlavorView("h100-z2", {MODEL: "H100", "zone": "z2"})
    (none,) = flavor_status({}, two, nodes, NOW)["conditions"]
    assert (none["status"], none["reason"]) == ("False", "NoNodes")
    assert none["message"] == (
        "no Ready, schedulable node carries its labels (gpu.example.com/model=H100, zone=z2)"
    )
    # Every node is the flavor's when it names no label.
    assert flavor_status({}, FlavorView("all", {}), nodes, NOW)["nodes"] == 3


def test_a_status_that_says_the_same_is_not_written_again() -> None:
    nodes = [node("a", "H100")]
    obj: dict[str, Any] = {"metadata": {"generation": 1}}
    first = flavor_status_patch(obj, H100, nodes, NOW)
    assert first is not None
    later = datetime(2026, 11, 29, tzinfo=UTC)
    assert flavor_status_patch({**obj, "status": first}, H100, nodes, later) is None
    assert flavor_status_patch({**obj, "status": first}, H100, [], later) is not None


def flavor(cluster: FakeCluster, state: ClusterState) -> None:
    body = {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Flavor",
        "metadata": {"name": "h100", "generation": 1, "uid": "u1"},
        "spec": {"nodeLabels": {MODEL: "H100"}},
    }
    state.on_flavor("ADDED", cluster.add("flavors/h100", body))


def labelled(state: ClusterState, name: str, model: str, version: int) -> None:
    state.on_node(
        "MODIFIED",
        {
            "metadata": {"name": name, "resourceVersion": str(version), "labels": {MODEL: model}},
            "status": {
                "allocatable": {"cpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )


def test_the_reconciler_writes_the_count_as_the_nodes_change() -> None:
    writer, cluster, state = fake_custom_writer()
    reconciler = TopologyReconciler(writer, state)
    flavor(cluster, state)
    labelled(state, "n0", "H100", 1)
    labelled(state, "n1", "A100", 1)
    asyncio.run(reconciler.reconcile())
    status = cluster.objects["flavors/h100"]["status"]
    assert status["nodes"] == 1
    assert status["conditions"][0]["status"] == "True"
    writes = [c for c in cluster.calls if c[0] == "status"]
    asyncio.run(reconciler.reconcile())  # the answer was stored: nothing more to write
    assert [c for c in cluster.calls if c[0] == "status"] == writes
    labelled(state, "n0", "A100", 2)
    asyncio.run(reconciler.reconcile())
    status = cluster.objects["flavors/h100"]["status"]
    assert (status["nodes"], status["conditions"][0]["status"]) == (0, "False")


def test_no_flavor_status_is_written_without_the_lease() -> None:
    writer, cluster, state = fake_custom_writer()
    writer.may_write = lambda: False
    flavor(cluster, state)
    labelled(state, "n0", "H100", 1)
    with pytest.raises(Retry):
        asyncio.run(TopologyReconciler(writer, state).reconcile())
    assert "status" not in cluster.objects["flavors/h100"]
