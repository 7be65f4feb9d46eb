"""What `sluice job list` and `sluice job why` make of what the operator published: the
job's annotations, its Events and its queue (no cluster, no recomputation)."""

from __future__ import annotations

from typing import Any

from sluice.api.views import PublishedJob
from sluice.cli.common import table_console
from sluice.cli.job_report import explain, job_line, job_table


def job(name: str = "train", *, suspend: bool = True, **annotations: str) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "labels": {"sluice.dev/queue-name": "team-a"},
            "annotations": {f"sluice.dev/{k.replace('_', '-')}": v for k, v in annotations.items()},
        },
        "spec": {"suspend": suspend, "template": {"spec": {"containers": containers}}},
        "status": {} if suspend else {"active": 1},
    }


QUEUE = {
    "apiVersion": "scheduling.sluice.dev/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "team-a"},
    "spec": {"capability": {"cpu": "4"}, "namespaceSelector": {"matchLabels": {"team": "a"}}},
    "status": {"state": "Open", "allocated": {"cpu": "4"}, "deserved": {"cpu": "2"}, "pending": 3},
}


def event(reason: str, message: str, when: str, uid: str = "uid-train") -> dict[str, Any]:
    return {
        "type": "Warning" if reason == "Pending" else "Normal",
        "reason": reason,
        "message": message,
        "lastTimestamp": when,
        "involvedObject": {"kind": "Job", "name": "train", "uid": uid},
    }


def test_a_pending_job_reads_its_position_and_cause_from_the_operators_reason() -> None:
    line = job_line(
        job(pending_reason="position 2 in team-a; team-a would use cpu 6 > capability 4")
    )
    assert line is not None
    assert (line.queue, line.state, line.position, line.reason) == (
        "team-a",
        "pending",
        2,
        "team-a would use cpu 6 > capability 4",
    )


def test_a_victims_reason_has_no_position() -> None:
    line = job_line(job(pending_reason="reclaimed for other/big"))
    assert line is not None and (line.position, line.reason) == (None, "reclaimed for other/big")
    fresh = job_line(job())
    assert fresh is not None and fresh.reason == "not yet considered by the operator"


def test_an_admitted_job_shows_when() -> None:
    line = job_line(job(suspend=False, admitted_at="2026-11-23T08:00:00Z"))
    assert line is not None
    assert (line.state, line.position, line.reason, line.admitted_at) == (
        "running",
        None,
        "",
        "2026-11-23T08:00:00Z",
    )


def test_unmanaged_jobs_are_left_out() -> None:
    plain = job()
    plain["metadata"]["labels"] = {}
    assert job_line(plain) is None


def test_the_list_puts_running_jobs_first_then_the_line_in_order() -> None:
    lines = [
        job_line(job("c", pending_reason="position 2 in team-a; behind")),
        job_line(job("a", suspend=False, admitted_at="2026-11-23T08:00:00Z")),
        job_line(job("b", pending_reason="position 1 in team-a; cluster full")),
    ]
    console = table_console()
    with console.capture() as captured:
        console.print(job_table([x for x in lines if x], all_namespaces=False))
    rows = [r.split()[0] for r in captured.get().splitlines()]
    assert rows == ["NAME", "a", "b", "c"]


def test_why_tells_the_reason_the_queue_and_the_events_newest_last() -> None:
    obj = job(
        pending_reason="position 1 in team-a; team-a would use cpu 6 > capability 4",
        reclaimed_by="other/big",
    )
    events = [
        event("Pending", "position 3 in team-a; later", "2026-11-23T08:05:00Z"),
        event("Reclaimed", "reclaimed for other/big", "2026-11-23T08:01:00Z"),
        event("Admitted", "someone else's", "2026-11-23T08:09:00Z", uid="uid-old-train"),
    ]
    assert explain(obj, QUEUE, events) == [
        "job ml/train is pending, position 1 in queue team-a",
        "  reason: team-a would use cpu 6 > capability 4",
        "  it was suspended to make room for other/big",
        "  queue team-a: state Open, allocated cpu 4, deserved cpu 2, capability cpu 4,"
        " namespaces team=a; 3 pending",
        "  events:",
        "    2026-11-23T08:01:00Z  Normal  Reclaimed: reclaimed for other/big",
        "    2026-11-23T08:05:00Z  Warning  Pending: position 3 in team-a; later",
    ]


def test_why_without_the_right_to_read_the_queue_still_answers() -> None:
    lines = explain(job(suspend=False, admitted_at="2026-11-23T08:00:00Z"), None, [], "forbidden")
    assert lines == [
        "job ml/train is admitted in queue team-a (2026-11-23T08:00:00Z); running",
        "  queue team-a: forbidden",
    ]


def test_a_workload_of_another_kind_is_read_through_its_adapter() -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "uid": "uid-train",
            "labels": {"sluice.dev/queue-name": "team-a"},
            "annotations": {
                "sluice.dev/pending-reason": "position 1 in team-a; cluster has cpu 0 free,"
                " job requests cpu 2"
            },
        },
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod},
                "Worker": {"replicas": 1, "template": pod},
            },
        },
    }
    lines = explain(obj, QUEUE, [])
    assert lines[:2] == [
        "pytorchjob ml/train is pending, position 1 in queue team-a",
        "  reason: cluster has cpu 0 free, job requests cpu 2",
    ]
    obj["spec"]["runPolicy"] = {"suspend": False}
    obj["metadata"]["annotations"] = {"sluice.dev/admitted-at": "2026-03-02T09:00:00Z"}
    assert explain(obj, QUEUE, [])[0] == (
        "pytorchjob ml/train is admitted in queue team-a (2026-03-02T09:00:00Z); inqueue"
    )


def test_a_job_admitted_smaller_shows_its_sizes_in_the_list_and_in_why() -> None:
    record = '{"main":{"admitted":6,"asked":8,"fields":{"spec.parallelism":8}}}'
    obj = job(suspend=False, admitted_at="2026-11-23T08:00:00Z", admitted_size=record)
    obj["metadata"]["annotations"]["sluice.dev/min-parallelism"] = "4"
    obj["spec"]["parallelism"] = 6
    line = job_line(obj)
    assert line is not None and line.sizes == "6/8"
    assert admitted_column(line) == "6/8"
    assert "  admitted 6 of 8 pods (min 4)" in explain(obj, QUEUE, [])
    waiting = job_line(job(admitted_size=record))
    assert waiting is not None and waiting.sizes == ""


def admitted_column(line: PublishedJob) -> str:
    """The ADMITTED cell of ``line``'s row in `sluice job list` (every cell of the row is
    one word here)."""
    console = table_console()
    with console.capture() as captured:
        console.print(job_table([line], all_namespaces=False))
    header, row = captured.get().splitlines()
    return row.split()[header.split().index("ADMITTED")]


def sized_job(
    parallelism: int, record: str = "", *, suspend: bool = False, **more: str
) -> dict[str, Any]:
    """A Job of minimum 4 asking ``parallelism`` pods, admitted with ``record`` (or waiting)."""
    annotations = {"min_parallelism": "4", **more}
    if record:
        annotations |= {"admitted_size": record, "admitted_at": "2026-11-23T08:00:00Z"}
    obj = job(suspend=suspend, **annotations)
    obj["spec"]["parallelism"] = parallelism
    return obj


def test_a_resizable_job_admitted_whole_shows_its_size_and_no_growth() -> None:
    obj = sized_job(6, '{"main":{"admitted":6,"asked":6,"fields":{}}}')
    line = job_line(obj)
    assert line is not None and line.sizes == "6/6"
    lines = explain(obj, QUEUE, [])
    assert "  admitted 6 of 6 pods (min 4)" in lines
    assert not any("growth" in text for text in lines)


def test_a_grown_job_shows_its_growth_waiting_in_the_list_and_in_why() -> None:
    obj = sized_job(8, '{"main":{"admitted":6,"asked":6,"fields":{}}}')
    line = job_line(obj)
    assert line is not None and line.sizes == "6/8"
    assert "  admitted 6 of 8 pods (min 4), growth of 2 pods waiting in its queue" in explain(
        obj, QUEUE, []
    )


def test_a_waiting_resizable_job_shows_what_it_asks_and_its_minimum() -> None:
    obj = sized_job(8, suspend=True, pending_reason="position 1 in team-a; team-a would use cpu 16")
    line = job_line(obj)
    assert line is not None and line.sizes == "0/8"
    lines = explain(obj, QUEUE, [])
    assert "  it asks 8 pods (min 4): admitted smaller when that is all that fits" in lines


def test_a_job_without_a_minimum_or_a_record_has_no_size() -> None:
    obj = job(suspend=False, admitted_at="2026-11-23T08:00:00Z")
    obj["spec"]["parallelism"] = 8
    line = job_line(obj)
    assert line is not None and line.sizes == ""
    assert admitted_column(line) == "-"
    assert not any("pods" in text for text in explain(obj, QUEUE, []))


H100_RECORD = (
    '{"main":{"flavor":"h100","nodeSelector":{"gpu.example.com/model":"H100"},"tolerations":[]}}'
)


def test_why_names_the_flavor_an_admitted_job_runs_in() -> None:
    obj = job(suspend=False, admitted_at="2026-11-23T08:00:00Z", flavor_assignment=H100_RECORD)
    lines = explain(obj, None, [], "forbidden")
    assert lines[:2] == [
        "job ml/train is admitted in queue team-a (2026-11-23T08:00:00Z); running",
        "  in flavor h100",
    ]


def test_why_names_the_flavors_a_pending_job_tried() -> None:
    tried = (
        "position 1 in team-a; no flavor fits: flavor h100: team-a would use nvidia.com/gpu 10"
        " > capability 8 in flavor h100; flavor a100: flavor a100 does not exist"
    )
    lines = explain(job(pending_reason=tried), None, [], "forbidden")
    assert lines[1].startswith("  reason: no flavor fits: flavor h100: ")
    assert "flavor a100: flavor a100 does not exist" in lines[1]


def test_why_says_why_a_running_jobs_growth_waits() -> None:
    # Admitted at 6, raised to 8 by its owner: the operator wrote why its growth waits.
    record = '{"main":{"admitted":6,"asked":6,"fields":{}}}'
    waits = "growth of 2 pods waiting: position 1 in team-a; team-a would use cpu 8 > capability 6"
    obj = job(
        suspend=False,
        admitted_at="2026-11-23T08:00:00Z",
        admitted_size=record,
        pending_reason=waits,
    )
    obj["spec"]["parallelism"] = 8
    line = job_line(obj)
    assert line is not None and line.growth == waits
    assert line.position is None and line.reason == ""  # it runs: not in the line itself
    lines = explain(obj, QUEUE, [])
    assert lines[0].endswith("; running")
    assert f"  {waits}" in lines
    # Its sizes say the rest, once: the operator's words say why its growth waits.
    assert "  admitted 6 of 8 pods (min 8)" in lines
    assert sum("growth" in text for text in lines) == 1
    # A pending job's reason is its own, never read as a growth's.
    pending = job(pending_reason=waits)
    found = job_line(pending)
    assert found is not None and found.growth == ""


def listed(*lines: Any) -> list[list[str]]:
    """The table `job list` prints, split into words per row (an empty cell shows none)."""
    console = table_console()
    with console.capture() as captured:
        console.print(job_table([x for x in lines if x], all_namespaces=False))
    return [row.split() for row in captured.get().splitlines()]


def test_the_list_shows_the_flavor_an_admitted_job_runs_in() -> None:
    running = job_line(
        job("a", suspend=False, admitted_at="2026-11-23T08:00:00Z", flavor_assignment=H100_RECORD)
    )
    waiting = job_line(job("b", pending_reason="position 1 in team-a; cluster full"))
    assert running is not None and running.flavor_column == "h100"
    assert waiting is not None and waiting.flavor_column == ""
    header, first, second = listed(running, waiting)
    assert header[-1] == "FLAVOR"
    assert (first[0], first[-1]) == ("a", "h100")
    assert second[0] == "b" and "h100" not in second


def test_the_list_shows_each_pod_sets_flavor_of_a_jobset() -> None:
    def replicated(name: str) -> dict[str, Any]:
        spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
        return {"name": name, "replicas": 1, "template": {"spec": {"template": {"spec": spec}}}}

    record = (
        '{"driver":{"flavor":"h100","nodeSelector":{},"tolerations":[]},'
        '"workers":{"flavor":"a100","nodeSelector":{},"tolerations":[]}}'
    )
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "s",
            "namespace": "ml",
            "uid": "uid-s",
            "labels": {"sluice.dev/queue-name": "team-a"},
            "annotations": {"sluice.dev/flavor-assignment": record},
        },
        "spec": {"suspend": False, "replicatedJobs": [replicated("driver"), replicated("workers")]},
    }
    line = job_line(jobset)
    assert line is not None and line.flavor_column == "driver=h100,workers=a100"
    assert listed(line)[1][-1] == "driver=h100,workers=a100"
