"""status.flavors and status.flavorSummary (the FLAVORS column): written from the cycle's
figures per flavor, removed once the queue has none, read back as the Queue's status."""

from __future__ import annotations

from datetime import UTC, datetime

from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.operator.status import status_patch
from sluice.scheduler.model import CycleResult, FlavorFigures, QueueResult

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def flavored(*figures: FlavorFigures) -> CycleResult:
    found = QueueResult(state="Open", parent="root", weight=1, priority=0, flavors=figures)
    return CycleResult(queue_order=("team",), queues={"team": found})


H100 = FlavorFigures(
    "h100",
    allocated=Resources({"nvidia.com/gpu": 4000, "cpu": 8000}),
    deserved=Resources({"nvidia.com/gpu": 8000}),
    real_capability=Resources({"nvidia.com/gpu": 16000}),
    resources=("nvidia.com/gpu",),
)


def test_the_flavors_are_written_with_a_summary_and_read_back() -> None:
    held = FlavorFigures("a100", allocated=Resources({"nvidia.com/gpu": 2000}), named=False)
    patch = status_patch({"metadata": {"name": "team"}}, "team", flavored(H100, held), NOW)
    assert patch is not None
    assert patch["flavors"] == [
        {
            "name": "h100",
            "allocated": {"cpu": "8", "nvidia.com/gpu": "4"},
            "deserved": {"nvidia.com/gpu": "8"},
            "realCapability": {"nvidia.com/gpu": "16"},
        },
        {"name": "a100", "allocated": {"nvidia.com/gpu": "2"}},
    ]
    assert patch["flavorSummary"] == "h100 nvidia.com/gpu 4/8; a100 nvidia.com/gpu 2"
    stored = {key: value for key, value in patch.items() if value is not None}
    queue = Queue.from_object({"metadata": {"name": "team"}, "status": stored})
    assert [f.name for f in queue.status.flavors] == ["h100", "a100"]
    assert queue.status.flavor_summary == patch["flavorSummary"]


def test_flavors_gone_are_removed_and_a_queue_without_them_writes_none() -> None:
    obj = {"metadata": {"name": "team"}}
    written = status_patch(obj, "team", flavored(H100), NOW)
    assert written is not None
    patch = status_patch({**obj, "status": written}, "team", flavored(), NOW)
    assert patch is not None
    assert patch["flavors"] is None and patch["flavorSummary"] is None
    stored = {k: v for k, v in patch.items() if v is not None}
    assert status_patch({**obj, "status": stored}, "team", flavored(), NOW) is None
