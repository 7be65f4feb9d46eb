"""Usage over time as people see it: `sluice queue list`'s USAGE column and `sluice job why`'s
comparison of the queue with the sibling that goes first (from the queues' status)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from test_job_why import job

from sluice.cli.job_report import explain, usage_queues
from sluice.cli.queue_view import queue_table


def team(name: str, **usage: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"state": "Open"}
    if usage:
        status["usage"] = usage
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {},
        "status": status,
    }


A = team(
    "team-a",
    sampledAt="2026-01-01T01:00:00Z",
    resources={"nvidia.com/gpu": 1_116_000.0, "cpu": 10.0},
    dominant="nvidia.com/gpu 310h",
)
B = team("team-b", sampledAt="2026-01-01T01:00:00Z", resources={"nvidia.com/gpu": 43_200.0})


def test_queue_list_shows_usage_only_when_a_queue_has_some() -> None:
    def header(items: list[dict[str, Any]]) -> list[str]:
        buffer = io.StringIO()
        Console(file=buffer, width=200).print(
            queue_table(items, now=datetime(2026, 1, 1, 2, tzinfo=UTC))
        )
        return buffer.getvalue().splitlines()

    lines = header([A, B])
    assert lines[0].split()[-2:] == ["USAGE", "AGE"]
    assert lines[1].split()[-3:] == ["nvidia.com/gpu", "310h", "2h"]
    assert "USAGE" not in header([team("team-a")])[0]


def test_job_why_compares_the_queue_with_the_sibling_that_goes_first() -> None:
    reason = (
        "position 1 in team-a; cluster has nvidia.com/gpu 0 free, job requests nvidia.com/gpu 1;"
        " queue team-b goes first: queue team-a has used more over time (half-life 1h)"
    )
    waiting = job(pending_reason=reason)
    assert usage_queues(waiting) == ("team-a", "team-b")
    lines = explain(waiting, A, [], others={"team-a": A, "team-b": B})
    assert (
        "  usage: queue team-a has used nvidia.com/gpu 310h (half-life 1h) against team-b's 12h;"
        " team-b goes first"
    ) in lines
    # Without the queues' statuses it still says which goes first.
    bare = explain(waiting, A, [])
    assert "  usage: queue team-a has used more over time than team-b; team-b goes first" in bare


def test_no_usage_line_without_the_note() -> None:
    waiting = job(pending_reason="position 1 in team-a; cluster has cpu 0 free, job requests cpu 2")
    assert usage_queues(waiting) is None
    assert not any("usage:" in line for line in explain(waiting, A, [], others={"team-a": A}))
