"""What the Queue reconciler writes: cascades, subtree deletion, reserved queues and statuses,
and only while the Lease is held."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from operator_fakes import fake_queue_writer, fake_reconciler, queue

from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.operator import queue_reconciler
from sluice.operator.queue_reconciler import (
    Retry,
    TreeReader,
    cascades_of,
    subtree_deletions,
)
from sluice.operator.status import status_patch
from sluice.queues.lifecycle import QueueAction, lifecycle_actions
from sluice.queues.tree import QueueTree
from sluice.scheduler.model import CycleResult, QueueResult

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def tree(*queues: tuple[str, str | None, str, str | None]) -> QueueTree:
    """(name, parent, spec.state, closed-by-parent annotation)"""
    objects = {}
    for name, parent, state, closer in queues:
        spec: dict[str, object] = {"state": state}
        if parent:
            spec["parent"] = parent
        meta: dict[str, object] = {"name": name}
        if closer:
            meta["annotations"] = {"sluice.dev/closed-by-parent": closer}
        objects[name] = Queue.from_object({"metadata": meta, "spec": spec})
    return QueueTree(objects)


def test_a_queue_closed_by_hand_closes_its_open_subtree_and_only_that() -> None:
    queues = tree(
        ("root", None, "Open", None),
        ("default", "root", "Open", None),
        ("dept", "root", "Closed", None),
        ("team", "dept", "Open", None),
        ("lab", "team", "Open", None),
        ("other", "root", "Open", None),
    )
    assert cascades_of(lifecycle_actions(queues), "dept") == [
        QueueAction("close", "team", "dept"),
        QueueAction("close", "lab", "dept"),
    ]
    # A queue created under it (its own handler) closes itself, naming the same queue.
    assert cascades_of(lifecycle_actions(queues), "lab") == [QueueAction("close", "lab", "dept")]
    assert cascades_of(lifecycle_actions(queues), "other") == []


def test_reopening_reopens_what_it_closed_not_what_was_closed_by_hand() -> None:
    queues = tree(
        ("root", None, "Open", None),
        ("default", "root", "Open", None),
        ("dept", "root", "Open", None),
        ("team", "dept", "Closed", "dept"),
        ("lab", "dept", "Closed", None),
    )
    assert cascades_of(lifecycle_actions(queues), "dept") == [QueueAction("reopen", "team", "dept")]


def test_a_deleted_queue_deletes_its_descendants_deepest_first() -> None:
    objects = {
        name: Queue.from_object(
            {
                "metadata": {"name": name, **extra},
                "spec": {"parent": parent} if parent else {},
            }
        )
        for name, parent, extra in (
            ("root", None, {}),
            ("default", "root", {}),
            ("dept", "root", {"deletionTimestamp": "2026-01-01T00:00:00Z"}),
            ("team", "dept", {}),
            ("lab", "team", {}),
            ("other", "root", {}),
        )
    }
    queues = QueueTree(objects)
    deletions = subtree_deletions(queues, lifecycle_actions(queues), "dept")
    assert [(a.action, a.queue) for a in deletions] == [("delete", "lab"), ("delete", "team")]


async def test_close_marks_the_child_with_the_ancestor_and_reopen_clears_it() -> None:
    writer, cluster, state = fake_queue_writer()
    queue(cluster, state, "team")
    await writer.act(QueueAction("close", "team", "dept"))
    team = cluster.objects["queue/team"]
    assert team["spec"]["state"] == "Closed"
    assert team["metadata"]["annotations"] == {"sluice.dev/closed-by-parent": "dept"}
    assert state.queues["team"]["spec"]["state"] == "Closed"  # the answer is remembered
    await writer.act(QueueAction("reopen", "team", "dept"))
    assert team["spec"]["state"] == "Open" and team["metadata"]["annotations"] == {}


async def test_reserved_queues_are_created_and_a_repeat_is_harmless() -> None:
    writer, cluster, _ = fake_queue_writer()
    for _ in range(2):
        await writer.act(QueueAction("create", "root"))
        await writer.act(QueueAction("create", "default"))
    assert cluster.objects["queue/root"]["spec"] == {}
    assert cluster.objects["queue/default"]["spec"] == {"parent": "root"}


async def test_a_refused_write_is_not_retried_one_that_may_succeed_is() -> None:
    writer, cluster, state = fake_queue_writer()
    queue(cluster, state, "team")
    cluster.refuse.add("queue/team")
    await writer.act(QueueAction("close", "team", "dept"))  # refused: logged, not raised
    assert cluster.objects["queue/team"]["spec"] == {"parent": "root"}
    cluster.refuse.clear()
    stale = {"metadata": {"resourceVersion": "1"}, "spec": {"state": "Closed"}}
    with pytest.raises(Retry, match="conflict"):
        await writer.patch("team", stale, "close")
    await writer.act(QueueAction("delete", "gone", "parent dept is being deleted"))  # 404: done


async def test_default_is_not_created_before_root_is_stored() -> None:
    queues, cluster, _ = fake_reconciler(lambda: True)
    with pytest.raises(Retry, match="created once its parent root is stored"):
        await queues.reconcile("default")
    assert cluster.calls == []
    await queues.reconcile("root")
    assert queues.due == {"default"}  # due at once, not a retry later
    await queues.reconcile("default")
    assert [key for _, key in cluster.calls] == ["queue/root", "queue/default"]


async def test_a_refused_create_of_a_reserved_queue_raises_retry() -> None:
    queues, cluster, state = fake_reconciler(lambda: True)
    queue(cluster, state, "root")
    cluster.webhook = lambda body: "queue default: parent root does not exist"
    with pytest.raises(Retry, match=r"refused .*parent root does not exist"):
        await queues.reconcile("default")
    cluster.webhook = lambda body: None
    await queues.reconcile("default")
    assert cluster.objects["queue/default"]["spec"] == {"parent": "root"}


async def test_reserved_queues_are_created_in_order_and_retried_until_the_webhook_agrees(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The webhook's Queue cache lags behind the API server: it refuses default until it has
    seen root, which here is after three refusals."""
    monkeypatch.setattr(queue_reconciler, "RETRY_SECONDS", 0.01)
    queues, cluster, _ = fake_reconciler(lambda: True)
    seen: set[str] = set()  # the queues the webhook's cache holds
    refused: list[str] = []

    def webhook(body: dict[str, Any]) -> str | None:
        name, parent = body["metadata"]["name"], body["spec"].get("parent")
        if parent is None or parent in seen:
            return None
        refused.append(name)
        if len(refused) == 3:
            seen.update(key.removeprefix("queue/") for key in cluster.objects)
        return f"queue {name}: parent {parent} does not exist"

    cluster.webhook = webhook

    caplog.set_level(logging.INFO, logger="sluice.operator.queues")
    running = asyncio.create_task(queues.run())
    for _ in range(500):
        if "queue/default" in cluster.objects:
            break
        await asyncio.sleep(0.01)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    creates = [key for verb, key in cluster.calls if verb == "create"]
    assert creates == ["queue/root", *["queue/default"] * 4]
    assert refused == ["default"] * 3
    assert cluster.objects["queue/default"]["spec"] == {"parent": "root"}
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "event=queue-write-refused queue=default" in m]) == 1
    assert len([m for m in said if "queue-retry queue=default reason=create of" in m]) == 1


def test_status_removes_resources_no_longer_allocated_and_is_not_rewritten() -> None:
    obj = {
        "metadata": {"name": "team", "generation": 3},
        "status": {"allocated": {"cpu": "2", "nvidia.com/gpu": "1"}},
    }
    found = QueueResult(
        state="Open", parent="root", weight=1, priority=0, allocated=Resources.parse({"cpu": "1"})
    )
    result = CycleResult(queue_order=("team",), queues={"team": found})
    patch = status_patch(obj, "team", result, NOW)
    assert patch is not None
    assert patch["allocated"] == {"cpu": "1", "nvidia.com/gpu": None}
    assert patch["state"] == "Open" and patch["observedGeneration"] == 3
    assert patch["conditions"][0]["type"] == "Valid"
    written = {**obj, "status": {**patch, "allocated": {"cpu": "1"}}}
    assert status_patch(written, "team", result, NOW) is None
    assert status_patch(None, "team", result, NOW) is None  # deleted meanwhile


def test_root_is_open_and_shows_nothing_else() -> None:
    result = CycleResult(queue_order=(), queues={})
    assert status_patch({"metadata": {"name": "root"}}, "root", result, NOW) == {"state": "Open"}
    assert status_patch({"status": {"state": "Open"}}, "root", result, NOW) is None


def test_the_tree_is_walked_once_per_state_of_the_queues_and_a_newer_object_counts() -> None:
    _, cluster, state = fake_queue_writer()
    for name in ("root", "default", "dept"):
        queue(cluster, state, name)
    queue(cluster, state, "team", spec={"parent": "dept"})
    read = TreeReader(state)
    first, actions = read()
    assert read()[0] is first and read()[1] is actions  # nothing changed: the same walk

    def changed(name: str, version: str, **fields: object) -> dict[str, object]:
        meta = {**state.queues[name]["metadata"], "resourceVersion": version}
        return {**state.queues[name], "metadata": meta, **fields}

    state.on_queue("MODIFIED", changed("team", "900", status={"state": "Open", "running": 3}))
    assert state.queues["team"]["status"]["running"] == 3
    assert read()[0] is first  # a status written after a cycle: not a new walk
    state.on_queue("MODIFIED", changed("team", "901", spec={"parent": "dept", "weight": 3}))
    again = read()[0]
    assert again is not first and again.queues["team"].spec.weight == 3  # its spec: a new walk
    closed = {**state.queues["dept"], "spec": {"parent": "root", "state": "Closed"}}
    closed["metadata"] = {**closed["metadata"], "resourceVersion": "999"}
    _, seen = read(closed)  # newer than what the watch stored
    assert cascades_of(seen, "dept") == [QueueAction("close", "team", "dept")]


async def test_a_queue_being_deleted_keeps_its_finalizer_until_its_children_are_gone() -> None:
    queues, cluster, state = fake_reconciler(lambda: True)
    for name in ("root", "default"):
        queue(cluster, state, name)
    queue(cluster, state, "dept")
    queue(cluster, state, "team", spec={"parent": "dept"})
    await queues.reconcile("dept")
    assert cluster.objects["queue/dept"]["metadata"]["finalizers"] == ["sluice.dev/subtree"]
    deleting = {
        **cluster.objects["queue/dept"]["metadata"],
        "deletionTimestamp": "2026-01-01T00:00:00Z",
    }
    queue(cluster, state, "dept", metadata=deleting)
    with pytest.raises(Retry, match="waiting for its child queues to be deleted: team"):
        await queues.reconcile("dept")
    assert ("delete", "queue/team") in cluster.calls
    assert cluster.objects["queue/dept"]["metadata"]["finalizers"] == ["sluice.dev/subtree"]
    state.on_queue("DELETED", cluster.objects.pop("queue/team"))
    await queues.reconcile("dept")
    assert cluster.objects["queue/dept"]["metadata"]["finalizers"] == []
    assert "dept" not in state.queues  # deleting, no finalizer left: gone


async def test_a_new_leader_reconciles_every_queue() -> None:
    """The manager starts the reconciler once the Lease is held (test_operator_manager.py):
    from then on every queue is brought to what the tree says, reserved queues included."""
    queues, cluster, state = fake_reconciler(lambda: True)
    queue(cluster, state, "root")
    queue(cluster, state, "dept", spec={"parent": "root", "state": "Closed"})
    queue(cluster, state, "team", spec={"parent": "dept"})
    found = QueueResult(state="Open", parent="root", weight=1, priority=0)
    queues.publish(CycleResult(queue_order=("team",), queues={"team": found}), NOW)

    running = asyncio.create_task(queues.run())
    for _ in range(200):
        if "queue/default" in cluster.objects and cluster.calls.count(("status", "queue/team")):
            break
        await asyncio.sleep(0.01)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    team = cluster.objects["queue/team"]
    assert team["spec"]["state"] == "Closed"  # the cascade it had missed
    assert team["metadata"]["annotations"] == {"sluice.dev/closed-by-parent": "dept"}
    assert cluster.objects["queue/default"]["spec"] == {"parent": "root"}  # a reserved queue
    assert team["metadata"]["finalizers"] == ["sluice.dev/subtree"]
    assert team["status"]["state"] == "Open"


async def test_a_replica_that_no_longer_holds_the_lease_writes_nothing() -> None:
    holding = [True]
    queues, cluster, state = fake_reconciler(lambda: holding[0])
    queue(cluster, state, "team")
    holding[0] = False
    with pytest.raises(Retry, match="the Lease is not held"):
        await queues.reconcile("team")
    assert cluster.calls == []


def test_a_pass_makes_due_only_the_queues_it_changes_and_an_older_pass_is_dropped() -> None:
    queues, _, _ = fake_reconciler(lambda: True)
    one = QueueResult(state="Open", parent="root", weight=1, priority=0, pending=1)
    two = QueueResult(state="Open", parent="root", weight=1, priority=0, pending=2)
    queues.publish(CycleResult(queue_order=(), queues={"a": one, "b": one}), NOW)
    assert queues.due == {"a", "b"}
    queues.due.clear()
    later = NOW.replace(second=5)
    decided = CycleResult(queue_order=(), queues={"a": one, "b": two})
    queues.publish(decided, later)
    assert queues.due == {"b"}  # a's status shows the same
    queues.due.clear()
    # A full pass whose snapshot was taken before the decision pass above: out of date.
    queues.publish(CycleResult(queue_order=(), queues={"a": two, "b": one}), NOW.replace(second=3))
    assert queues.due == set()
    assert queues.cycle == (decided, later)


def test_a_queues_usage_alone_makes_it_due_only_once_the_usage_may_be_written_again() -> None:
    from datetime import timedelta

    from sluice.api.queue import QueueUsage
    from sluice.operator.status import USAGE_WRITE_SECONDS

    queues, _, _ = fake_reconciler(lambda: True)

    def used(at: datetime, amount: float) -> CycleResult:
        usage = QueueUsage(sampled_at=at, resources={"cpu": amount})
        found = QueueResult(state="Open", parent="root", weight=1, priority=0, usage=usage)
        return CycleResult(queue_order=(), queues={"a": found})

    queues.publish(used(NOW, 1.0), NOW)
    assert queues.due == {"a"}
    queues.due.clear()
    soon = NOW + timedelta(seconds=1)
    queues.publish(used(soon, 2.0), soon)  # only its usage moved, and it was just written
    assert queues.due == set()
    later = NOW + timedelta(seconds=USAGE_WRITE_SECONDS)
    queues.publish(used(later, 3.0), later)
    assert queues.due == {"a"}
