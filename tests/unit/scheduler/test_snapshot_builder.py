"""One builder of a Snapshot from objects, two policies for an object it cannot read: strict
(a file: an error naming it) and tolerant (a live cluster: left out and reported)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sluice.api.views import WorkloadView
from sluice.scheduler.snapshot import READERS, UnreadableObject, build_snapshot, read, readers

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LABEL = "sluice.dev/queue-name"


def job(name: str, labels: dict[str, str], cpu: str = "1") -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"suspend": True, "template": {"spec": {"containers": [container]}}},
    }


READS = [
    read("Queue", "queue/root", {"metadata": {"name": "root"}}),
    read("Queue", "queue/bad", {"metadata": {"name": "bad"}, "spec": {"weight": 0}}),
    read("Job", "job/ns/a", job("a", {LABEL: "root"})),
    read("Job", "job/ns/free", job("free", {})),  # no queue manages it
    read("Job", "job/ns/b", job("b", {LABEL: "root"}, cpu="lots")),
]


def test_tolerant_leaves_unreadable_objects_out_and_reports_them() -> None:
    built = build_snapshot(READS, NOW, strict=False)
    assert [q.name for q in built.snapshot.queues] == ["root"]
    assert [j.key for j in built.snapshot.workloads] == ["ns/a"]
    assert set(built.unreadable) == {"queue/bad", "job/ns/b"}
    assert built.unreadable["job/ns/b"].startswith("Job ns/b: field spec.template.spec")
    assert built.snapshot.pods == []


def test_strict_refuses_the_first_unreadable_object_naming_it() -> None:
    with pytest.raises(UnreadableObject) as raised:
        build_snapshot(READS, NOW, strict=True)
    assert str(raised.value).startswith("queue/bad: Queue bad: field spec.weight: ")
    readable = [one for one in READS if not one.error]
    built = build_snapshot(readable, NOW, strict=True, pods_known=False)
    assert built.unreadable == {} and built.snapshot.pods is None


def test_an_unlabelled_job_takes_its_namespaces_default_queue_only_when_asked() -> None:
    unlabelled = job("c", {})
    assert read("Job", "job/ns/c", unlabelled, READERS).view is None
    view = read("Job", "job/ns/c", unlabelled, readers({"ns": "team"})).view
    assert isinstance(view, WorkloadView) and view.queue == "team" and view.queue_from_namespace
