"""The Topology reconciler: it writes what the nodes say, only when that changes, tells the
Event once the write is accepted, and writes nothing without the Lease."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from operator_fakes import FakeCluster, fake_custom_writer

from sluice.operator.custom_writer import Retry
from sluice.operator.state import ClusterState
from sluice.operator.topology_status import TopologyReconciler

BLOCK, RACK = "example.com/block", "example.com/rack"


def topology(cluster: FakeCluster, state: ClusterState) -> None:
    body = {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Topology",
        "metadata": {"name": "default", "generation": 1, "uid": "u1"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]},
    }
    state.on_topology("ADDED", cluster.add("topologies/default", body))


def label(state: ClusterState, name: str, block: str, rack: str, version: int) -> None:
    state.on_node(
        "MODIFIED",
        {
            "metadata": {
                "name": name,
                "resourceVersion": str(version),
                "labels": {BLOCK: block, RACK: rack},
            },
            "status": {"allocatable": {"cpu": "8"}},
        },
    )


def nested(cluster: FakeCluster) -> dict[str, Any]:
    (found,) = cluster.objects["topologies/default"]["status"]["conditions"]
    return dict(found)


def test_status_and_events_follow_the_nodes_labels() -> None:
    writer, cluster, state = fake_custom_writer()
    reconciler = TopologyReconciler(writer, state)
    topology(cluster, state)
    label(state, "n0", "b0", "r0", 1)
    label(state, "n1", "b1", "r0", 1)  # r0 in two blocks
    asyncio.run(reconciler.reconcile())
    writer.events.join()
    assert nested(cluster)["status"] == "False"
    assert "example.com/rack=r0 is in two example.com/block domains" in nested(cluster)["message"]
    assert [(e["reason"], e["type"]) for e in cluster.events] == [("NotNested", "Warning")]
    assert cluster.events[0]["involvedObject"]["kind"] == "Topology"
    writes = [c for c in cluster.calls if c[0] == "status"]
    asyncio.run(reconciler.reconcile())  # the answer was stored: nothing more to write or tell
    writer.events.join()
    assert [c for c in cluster.calls if c[0] == "status"] == writes
    assert len(cluster.events) == 1
    label(state, "n1", "b0", "r0", 2)  # fixed
    asyncio.run(reconciler.reconcile())
    writer.events.join()
    assert nested(cluster)["status"] == "True"
    assert cluster.objects["topologies/default"]["status"]["levels"] == [
        {"nodeLabel": BLOCK, "domains": 1, "nodes": 2},
        {"nodeLabel": RACK, "domains": 1, "nodes": 2},
    ]
    assert [(e["reason"], e["type"]) for e in cluster.events][1:] == [("Nested", "Normal")]


def test_nothing_is_written_or_told_without_the_lease() -> None:
    writer, cluster, state = fake_custom_writer()
    writer.may_write = lambda: False
    reconciler = TopologyReconciler(writer, state)
    topology(cluster, state)
    label(state, "n0", "b0", "r0", 1)
    label(state, "n1", "b1", "r0", 1)
    with pytest.raises(Retry):
        asyncio.run(reconciler.reconcile())
    writer.events.join()
    assert "status" not in cluster.objects["topologies/default"]
    assert cluster.events == []
