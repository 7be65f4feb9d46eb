"""The dashboard's view: jobs and queues as their watch events arrive, the decisions they
make, one queue's jobs a page at a time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sluice.dashboard.view import DashboardView, decision, job_row

NOW = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def job(
    name: str, *, suspend: bool = True, queue: str = "team", **annotations: str
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"sluice.dev/queue-name": queue},
            "annotations": {f"sluice.dev/{k.replace('_', '-')}": v for k, v in annotations.items()},
        },
        "spec": {
            "suspend": suspend,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
            },
        },
        "status": {} if suspend else {"active": 1},
    }


def queue(name: str, parent: str | None = "root", **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"capability": {"cpu": "8"}, "guarantee": {"resource": {"cpu": "2"}}}
    if parent:
        spec["parent"] = parent
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def test_a_job_row_reads_position_and_cause_from_the_reason() -> None:
    row = job_row(
        job("a", pending_reason="position 3 in team; team would use cpu 9 > capability 8")
    )
    assert row is not None
    assert (row.state, row.position, row.reason) == (
        "pending",
        3,
        "team would use cpu 9 > capability 8",
    )
    unmanaged = job("b")
    unmanaged["metadata"]["labels"] = {}
    assert job_row(unmanaged) is None


def test_decisions_are_the_transitions_that_matter() -> None:
    waiting = job_row(job("a", pending_reason="position 1 in team; cluster has cpu 0 free"))
    running = job_row(job("a", suspend=False, admitted_at="2026-11-23T08:00:00Z"))
    victim = job_row(job("a", pending_reason="reclaimed for other/big"))
    requeued = job_row(job("a", pending_reason="position 1 in team; something else"))
    assert decision(waiting, running, "t") == {
        "time": "t",
        "action": "Admitted",
        "job": "ml/a",
        "queue": "team",
    }
    assert decision(running, victim, "t") == {
        "time": "t",
        "action": "Reclaimed",
        "job": "ml/a",
        "queue": "team",
        "for": "other/big",
    }
    assert decision(running, requeued, "t")["action"] == "Requeued"  # type: ignore[index]
    assert decision(waiting, waiting, "t") is None
    assert decision(None, running, "t") is None  # first seen: not a decision we watched


def test_the_view_keeps_the_timeline_newest_first_and_counts_jobs_per_queue() -> None:
    view = DashboardView(clock=lambda: NOW)
    seen: list[int] = []
    view.listeners.append(lambda: seen.append(view.version))
    view.load([queue("root", None), queue("team")], [job("a")])
    view.on_job("MODIFIED", job("a", suspend=False, admitted_at="2026-11-23T08:00:00Z"))
    view.on_job("MODIFIED", job("a", pending_reason="preempted for ml/urgent"))
    tree = view.tree()
    assert [q["name"] for q in tree["queues"]] == ["root", "team"]
    team = tree["queues"][1]
    assert (team["jobs"], team["guarantee"], team["capability"]) == (
        1,
        {"cpu": {"m": 2000, "s": "2"}},
        {"cpu": {"m": 8000, "s": "8"}},
    )
    assert [t["action"] for t in tree["timeline"]] == ["Preempted", "Admitted"]
    assert tree["timeline"][0]["time"] == "2026-11-23T08:00:00Z"
    assert seen == sorted(seen) and seen[-1] == view.version
    view.on_job("DELETED", job("a"))
    assert view.tree()["queues"][1]["jobs"] == 0


def test_a_queue_pages_its_jobs_running_first_then_the_line_in_order() -> None:
    view = DashboardView()
    jobs = [job(f"p{i}", pending_reason=f"position {i} in team; waiting") for i in range(1, 121)]
    jobs.append(job("r", suspend=False))
    view.load([queue("team")], jobs)
    first = view.jobs_page("team", 0, 50)
    assert first["total"] == 121
    assert [j["name"] for j in first["jobs"][:3]] == ["r", "p1", "p2"]
    last = view.jobs_page("team", 100, 50)
    assert [j["position"] for j in last["jobs"]] == list(range(100, 121))
    assert view.jobs_page("nowhere")["total"] == 0


def test_an_unreadable_queue_is_shown_as_such() -> None:
    view = DashboardView()
    view.on_queue("ADDED", {"metadata": {"name": "bad"}, "spec": {"weight": 0}})
    (bad,) = view.tree()["queues"]
    assert bad["name"] == "bad" and "weight" in bad["unreadable"]


def test_a_queue_over_its_capability_says_what_puts_it_there() -> None:
    over = "memory 5Gi > capability 4Gi; pods ask more than admitted: ml/train memory 1Gi"
    view = DashboardView()
    view.on_queue("ADDED", queue("team", state="Open", overCapability=over))
    view.on_queue("ADDED", queue("calm", state="Open"))
    shown = {q["name"]: q for q in view.tree()["queues"]}
    assert shown["team"]["overCapability"] == over
    assert shown["calm"]["overCapability"] == ""


def test_a_queues_usage_over_time_is_shown_when_it_has_any() -> None:
    usage = {"sampledAt": "2026-01-01T00:00:00Z", "dominant": "nvidia.com/gpu 310h"}
    view = DashboardView()
    view.on_queue("ADDED", queue("heavy", state="Open", usage=usage))
    view.on_queue("ADDED", queue("calm", state="Open"))
    shown = {q["name"]: q for q in view.tree()["queues"]}
    assert shown["heavy"]["usage"] == "nvidia.com/gpu 310h"
    assert shown["calm"]["usage"] == ""


def test_a_queue_with_flavors_has_a_bar_per_flavor_and_resource_its_entry_counts() -> None:
    obj = queue(
        "team",
        flavors=[
            {
                "name": "h100",
                "allocated": {"nvidia.com/gpu": "4", "cpu": "8"},
                "deserved": {"nvidia.com/gpu": "8"},
                "realCapability": {"nvidia.com/gpu": "16"},
            },
            {"name": "a100", "allocated": {"nvidia.com/gpu": "2"}},
        ],
    )
    obj["spec"]["flavors"] = [
        {
            "name": "h100",
            "deserved": {"nvidia.com/gpu": "8"},
            "capability": {"nvidia.com/gpu": "12"},
        }
    ]
    view = DashboardView()
    view.load([obj], [])
    (shown,) = [q for q in view.tree()["queues"] if q["name"] == "team"]
    h100, a100 = shown["flavors"]
    assert (h100["name"], h100["resources"]) == ("h100", ["nvidia.com/gpu"])
    assert h100["allocated"]["nvidia.com/gpu"] == {"m": 4000, "s": "4"}
    assert h100["deserved"]["nvidia.com/gpu"]["s"] == "8"
    assert h100["capability"]["nvidia.com/gpu"]["s"] == "12"
    assert (a100["resources"], a100["capability"]) == (["nvidia.com/gpu"], {})


def test_a_queue_without_flavors_has_no_flavor_bars() -> None:
    view = DashboardView()
    view.load([queue("team")], [])
    (shown,) = [q for q in view.tree()["queues"] if q["name"] == "team"]
    assert shown["flavors"] == []


def test_a_resizable_jobs_row_shows_its_pods_admitted_of_those_asked() -> None:
    view = DashboardView(clock=lambda: NOW)
    grown = job(
        "grown",
        suspend=False,
        admitted_at="2026-11-23T08:00:00Z",
        min_parallelism="4",
        admitted_size='{"main":{"admitted":6,"asked":6,"fields":{}}}',
    )
    grown["spec"]["parallelism"] = 8
    view.load([], [grown, job("plain", suspend=False, admitted_at="2026-11-23T08:00:00Z")])
    rows = {j["name"]: j for j in view.jobs_page("team")["jobs"]}
    assert rows["grown"]["size"] == "6/8"
    assert rows["grown"]["sizeWords"] == (
        "admitted 6 of 8 pods (min 4), growth of 2 pods waiting in its queue"
    )
    assert (rows["plain"]["size"], rows["plain"]["sizeWords"]) == ("", "")
    waits = "growth of 2 pods waiting: position 1 in team; team would use cpu 8 > capability 6"
    grown["metadata"]["annotations"]["sluice.dev/pending-reason"] = waits
    view.on_job("MODIFIED", grown)
    row = next(j for j in view.jobs_page("team")["jobs"] if j["name"] == "grown")
    assert row["sizeWords"] == f"admitted 6 of 8 pods (min 4); {waits}"
