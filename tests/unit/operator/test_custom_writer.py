"""The custom objects' writer: every kind (Queues, Topologies) gets the same policy, and its
answer and its metric label by its own record."""

from __future__ import annotations

import pytest
from operator_fakes import fake_custom_writer, queue

from sluice.operator import metrics
from sluice.operator.custom_writer import QUEUES, TOPOLOGIES, Retry
from sluice.operator.state import ClusterState

TOPOLOGY = {
    "apiVersion": "scheduling.sluice.dev/v1beta1",
    "kind": "Topology",
    "metadata": {"name": "racks", "generation": 1, "uid": "t1", "resourceVersion": "1"},
    "spec": {"levels": [{"nodeLabel": "example.com/rack"}]},
}


def writes(label: str) -> float:
    return metrics.API_WRITES.labels(label)._value.get()


def stored_topology(state: ClusterState) -> dict[str, object]:
    ((obj, _),) = state.topology_views()[0]
    return dict(obj)


async def test_each_kind_keeps_its_answer_and_its_metric_label() -> None:
    writer, cluster, state = fake_custom_writer()
    queue(cluster, state, "team")
    state.on_topology("ADDED", cluster.add("topologies/racks", dict(TOPOLOGY)))
    queue_writes, topology_writes = writes("status"), writes("topology-status")

    assert await writer.patch_status(QUEUES, "team", {"pending": 3})
    assert await writer.patch_status(TOPOLOGIES, "racks", {"levels": []})

    assert state.queues["team"]["status"] == {"pending": 3}
    assert stored_topology(state)["status"] == {"levels": []}
    assert writes("status") == queue_writes + 1
    assert writes("topology-status") == topology_writes + 1


async def test_no_kind_is_written_without_the_lease() -> None:
    writer, cluster, state = fake_custom_writer()
    queue(cluster, state, "team")
    state.on_topology("ADDED", cluster.add("topologies/racks", dict(TOPOLOGY)))
    writer.may_write = lambda: False
    calls = list(cluster.calls)
    with pytest.raises(Retry, match="status of queue team: the Lease is not held"):
        await writer.patch_status(QUEUES, "team", {"pending": 3})
    with pytest.raises(Retry, match="status of topology racks: the Lease is not held"):
        await writer.patch_status(TOPOLOGIES, "racks", {"levels": []})
    assert cluster.calls == calls


async def test_a_refusal_is_not_raised_and_nothing_is_stored_for_any_kind() -> None:
    writer, cluster, state = fake_custom_writer()
    queue(cluster, state, "team")
    state.on_topology("ADDED", cluster.add("topologies/racks", dict(TOPOLOGY)))
    cluster.refuse.update({"queue/team", "topologies/racks"})
    assert not await writer.patch_status(QUEUES, "team", {"pending": 3})
    assert not await writer.patch_status(TOPOLOGIES, "racks", {"levels": []})
    assert "status" not in state.queues["team"]
    assert "status" not in stored_topology(state)
