"""status.usage: written at most every 30 s, read back as the Queue's usage (a new leader
resumes from it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sluice.api.queue import Queue, QueueUsage
from sluice.operator.status import status_patch
from sluice.scheduler.model import CycleResult, QueueResult

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def result_with(sampled: datetime) -> CycleResult:
    usage = QueueUsage(
        sampled_at=sampled,
        resources={"nvidia.com/gpu": 7200.04},
        namespaces={"ml": {"nvidia.com/gpu": 7200.04}},
        dominant="nvidia.com/gpu 2h",
    )
    found = QueueResult(state="Open", parent="root", weight=1, priority=0, usage=usage)
    return CycleResult(queue_order=("team",), queues={"team": found})


def test_usage_is_written_then_not_again_within_30_seconds() -> None:
    obj = {"metadata": {"name": "team"}, "status": {}}
    patch = status_patch(obj, "team", result_with(NOW), NOW)
    assert patch is not None
    assert patch["usage"] == {
        "sampledAt": "2026-03-02T09:00:00Z",
        "resources": {"nvidia.com/gpu": 7200.0},
        "namespaces": {"ml": {"nvidia.com/gpu": 7200.0}},
        "dominant": "nvidia.com/gpu 2h",
    }
    written = {**obj, "status": patch}
    soon = NOW + timedelta(seconds=29)
    assert status_patch(written, "team", result_with(soon), soon) is None
    later = NOW + timedelta(seconds=30)
    again = status_patch(written, "team", result_with(later), later)
    assert again is not None and again["usage"]["sampledAt"] == "2026-03-02T09:00:30Z"


def test_what_is_written_reads_back_as_the_queues_usage() -> None:
    patch = status_patch({"metadata": {"name": "team"}}, "team", result_with(NOW), NOW)
    assert patch is not None
    stored = {key: value for key, value in patch.items() if value is not None}  # merge patch
    queue = Queue.from_object({"metadata": {"name": "team"}, "status": stored})
    assert queue.status.usage == QueueUsage(
        sampled_at=NOW,
        resources={"nvidia.com/gpu": 7200.0},
        namespaces={"ml": {"nvidia.com/gpu": 7200.0}},
        dominant="nvidia.com/gpu 2h",
    )


def test_without_the_plugin_nothing_about_usage_is_written() -> None:
    found = QueueResult(state="Open", parent="root", weight=1, priority=0)
    result = CycleResult(queue_order=("team",), queues={"team": found})
    patch = status_patch({"metadata": {"name": "team"}}, "team", result, NOW)
    assert patch is not None and "usage" not in patch
