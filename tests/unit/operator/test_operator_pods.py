"""The operator's pods: read once as they arrive, in every snapshot, and a requeue written."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from operator_fakes import apply_result, fake_executor, job

from sluice.operator.state import ClusterState
from sluice.scheduler.model import CycleResult, Decision

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def pod(version: int, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": str(version)},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec},
        "status": {"phase": "Pending"},
    }


def test_pods_are_in_every_snapshot_and_only_a_change_placement_sees_wakes_the_loop() -> None:
    state = ClusterState()
    state.on_pod("ADDED", pod(1))
    assert state.wake.is_set()
    state.wake.clear()
    running = pod(2)
    running["status"] = {"phase": "Running"}  # not bound yet, as far as placement is told
    state.on_pod("MODIFIED", running)
    assert not state.wake.is_set()
    state.on_pod("MODIFIED", pod(3, nodeName="n1"))
    assert state.wake.is_set()
    [view] = state.snapshot(NOW, 5).snapshot.pods or []
    assert view.node == "n1" and view.namespace == "ns"
    state.on_pod("MODIFIED", pod(2, nodeName="elsewhere"))  # older: ignored
    assert (state.snapshot(NOW, 5).snapshot.pods or [])[0].node == "n1"
    state.on_pod("DELETED", pod(4, nodeName="n1"))
    assert state.snapshot(NOW, 5).snapshot.pods == []


def test_a_pod_deleted_while_a_finalizer_holds_it_still_holds_its_node() -> None:
    state = ClusterState()
    going = pod(5, nodeName="n1")
    going["metadata"] |= {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x"]}
    state.on_pod("MODIFIED", going)
    [view] = state.snapshot(NOW, 5).snapshot.pods or []
    assert view.terminating and view.node == "n1"


def test_an_unreadable_pod_is_reported_not_counted() -> None:
    state = ClusterState()
    bad = pod(1)
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    state.on_pod("ADDED", bad)
    taken = state.snapshot(NOW, 5)
    assert taken.snapshot.pods == []
    assert "pod/ns/p" in taken.unreadable


async def test_a_requeue_suspends_the_job_and_says_how_often_when_and_why() -> None:
    executor, cluster, state = fake_executor()
    job(cluster, state, "stuck", **{"admitted-at": "2026-01-01T11:50:00Z"})
    cluster.objects["job/ns/stuck"]["spec"]["suspend"] = False
    state.on_workload("MODIFIED", dict(cluster.objects["job/ns/stuck"]))
    why = "1 of its pods not scheduled within 5m: stuck-x (Unschedulable: 0/1 nodes are available)"
    done = apply_result(
        executor,
        CycleResult(
            queue_order=(),
            queues={},
            decisions=(Decision("requeue", "ns/stuck", "q", why, requeues=2),),
        ),
        NOW,
    )
    assert done
    written = cluster.objects["job/ns/stuck"]
    annotations = written["metadata"]["annotations"]
    assert written["spec"]["suspend"] is True
    assert "sluice.dev/admitted-at" not in annotations
    assert annotations["sluice.dev/requeues"] == "2"
    assert annotations["sluice.dev/requeued-at"] == "2026-01-01T12:00:00Z"
    assert annotations["sluice.dev/requeue-reason"] == why
    waits = f"requeued 2 times, waits until 2026-01-01T12:02:00Z: {why}"
    assert annotations["sluice.dev/pending-reason"] == waits
    [event] = cluster.events
    assert event["type"] == "Warning" and event["reason"] == "Requeued"
    assert event["message"] == f"suspended by sluice: {waits}"
