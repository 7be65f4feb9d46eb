"""Every object is read once, as its event arrives; a cycle's Snapshot is a copy of the views
read, shared between cycles, which never change them."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from sluice.api.views import WorkloadView
from sluice.operator.state import ClusterState
from sluice.scheduler import snapshot as builder
from sluice.scheduler.cycle import run_cycle

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LABEL = "sluice.dev/queue-name"


def job(name: str, version: int, cpu: str, admitted: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "resourceVersion": str(version),
        "labels": {LABEL: "q"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if admitted:
        meta["annotations"] = {"sluice.dev/admitted-at": "2026-01-01T01:00:00Z"}
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return {
        "metadata": meta,
        "spec": {"suspend": not admitted, "template": {"spec": {"containers": [container]}}},
        "status": {"active": 1} if admitted else {},
    }


def cluster() -> ClusterState:
    state = ClusterState()
    state.on_queue("ADDED", {"metadata": {"name": "root", "resourceVersion": "1"}})
    state.on_queue("ADDED", {"metadata": {"name": "q", "resourceVersion": "2"}, "spec": {}})
    state.on_node(
        "ADDED",
        {
            "metadata": {"name": "n1", "resourceVersion": "3", "labels": {"zone": "a"}},
            "status": {
                "allocatable": {"cpu": "4"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    state.on_namespace("ADDED", {"metadata": {"name": "ns", "labels": {"team": "a"}}})
    state.on_workload("ADDED", job("running", 4, "2", admitted=True))
    state.on_workload("ADDED", job("fits", 5, "1"))
    state.on_workload("ADDED", job("too-big", 6, "8"))
    return state


def test_an_object_is_read_once_and_snapshots_share_its_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []
    job_reader = builder.READERS["Job"]

    def counted(obj: Any) -> Any:
        reads.append(obj["metadata"]["name"])
        return job_reader(obj)

    monkeypatch.setitem(builder.READERS, "Job", counted)  # type: ignore[index]
    state = cluster()
    first, second = state.snapshot(NOW, 5).snapshot, state.snapshot(NOW, 5).snapshot
    assert reads == ["running", "fits", "too-big"]
    assert all(a is b for a, b in zip(first.workloads, second.workloads, strict=True))
    assert first.workloads is not second.workloads  # each cycle its own lists
    state.on_workload("MODIFIED", job("fits", 7, "2"))
    assert reads[-1] == "fits" and len(reads) == 4
    changed = [j for j in state.snapshot(NOW, 5).snapshot.workloads if j.name == "fits"]
    assert [j.request for j in changed] == [{"cpu": 2000}]
    assert (
        state.workloads["ns/fits"]["metadata"]["resourceVersion"] == "7"
    )  # the object is kept too


def test_a_cycle_leaves_the_views_it_shares_as_they_were_read() -> None:
    state = cluster()
    snapshot = state.snapshot(NOW, 5).snapshot
    views = [*snapshot.queues, *snapshot.workloads, *snapshot.nodes, *snapshot.namespaces]
    as_read = copy.deepcopy(views)
    result = run_cycle(snapshot)
    # The cycle did decide: one admission, and a requeue of the job whose pods never came.
    decided = {(d.action, d.job) for d in result.decisions}
    assert decided == {("admit", "ns/fits"), ("requeue", "ns/running")}
    assert views == as_read
    assert all(isinstance(j, WorkloadView) for j in snapshot.workloads)
