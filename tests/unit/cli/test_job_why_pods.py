"""`sluice job list --kind Pod` and `sluice job why --kind Pod`: workloads of plain pods, formed
from the pods as the operator forms them, told from what it wrote on them."""

from __future__ import annotations

from typing import Any

import pytest
from dump_objects import gated_pod
from kubernetes import client
from typer.testing import CliRunner

from sluice.cli import job as job_cli
from sluice.cli.job_report import pod_workload_name
from sluice.cli.main import _register, app

_register()
runner = CliRunner()

QUEUE = {
    "apiVersion": "scheduling.sluice.dev/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "team"},
    "spec": {},
    "status": {"state": "Open", "allocated": {"cpu": "4"}, "deserved": {"cpu": "4"}, "pending": 1},
}


class Listing:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items


class Cluster:
    """The API the commands call, over a list of pods and Events."""

    def __init__(self, pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
        self.pods, self.events = pods, events
        self.asked: list[str] = []

    def sanitize_for_serialization(self, obj: Any) -> Any:
        return obj

    def list_namespaced_pod(self, namespace: str, **selectors: str) -> Listing:
        self.asked.append(f"{namespace} {selectors}")
        key, _, value = selectors.get("label_selector", "").partition("=")
        return Listing(
            [
                p
                for p in self.pods
                if key in p["metadata"]["labels"] and value in ("", p["metadata"]["labels"][key])
            ]
        )

    def list_namespaced_event(self, namespace: str, **_: str) -> Listing:
        return Listing(self.events)

    def get_cluster_custom_object(self, *_: str) -> dict[str, Any]:
        return QUEUE


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    found = Cluster([], [])
    monkeypatch.setattr(job_cli, "_api", lambda *_: found)
    monkeypatch.setattr(client, "CoreV1Api", lambda _: found)
    monkeypatch.setattr(client, "CustomObjectsApi", lambda _: found)
    return found


def why(name: str) -> list[str]:
    result = runner.invoke(app, ["job", "why", name, "--kind", "Pod", "-n", "ns"])
    assert result.exit_code == 0, result.output
    return str(result.stdout).splitlines()


def group(name: str, count: int, total: int, reason: str = "") -> list[dict[str, Any]]:
    pods = [gated_pod(f"{name}-{i}", "team", "1", name, total) for i in range(count)]
    for pod in pods if reason else ():
        pod["metadata"]["annotations"]["sluice.dev/pending-reason"] = reason
    return pods


def test_why_tells_a_pod_groups_reason_and_the_events_on_its_pods(cluster: Cluster) -> None:
    cause = "team would use cpu 8 > capability 4"
    cluster.pods = group("g", 4, 4, reason=f"position 1 in team; {cause}")
    cluster.events = [
        {
            "type": "Warning",
            "reason": "Pending",
            "message": f"position 1 in team; {cause}",
            "lastTimestamp": "2026-03-02T09:00:00Z",
            "involvedObject": {"kind": "Pod", "name": "g-0", "uid": "uid-g-0"},
        },
        {
            "reason": "Admitted",
            "message": "another pod's",
            "lastTimestamp": "2026-03-02T09:01:00Z",
            "involvedObject": {"kind": "Pod", "name": "other", "uid": "uid-other"},
        },
    ]
    assert why("pod-group/g") == [
        "ns/pod-group/g is pending, position 1 in queue team",
        f"  reason: {cause}",
        "  queue team: state Open, allocated cpu 4, deserved cpu 4; 1 pending",
        "  events:",
        f"    2026-03-02T09:00:00Z  Warning  Pending: position 1 in team; {cause}",
    ]
    assert cluster.asked == ["ns {'label_selector': 'sluice.dev/pod-group=g'}"]


def test_why_tells_what_a_group_not_complete_waits_for(cluster: Cluster) -> None:
    cluster.pods = group("g", 3, 4)
    assert why("ns/pod-group/g")[:2] == [
        "ns/pod-group/g is pending, in queue team",
        "  reason: 3 of 4 pods of group g exist",
    ]


def test_why_names_a_workload_that_has_no_pod_of_sluices(cluster: Cluster) -> None:
    result = runner.invoke(app, ["job", "why", "pod-group/g", "--kind", "Pod", "-n", "ns"])
    assert result.exit_code == 1
    assert "ns/pod-group/g: no pod of it is held or admitted by sluice" in result.output


def test_list_shows_each_workload_the_pods_form(cluster: Cluster) -> None:
    cluster.pods = [*group("g", 4, 4, reason="position 1 in team; no room"), *group("h", 1, 2)]
    result = runner.invoke(app, ["job", "list", "--kind", "Pod", "-n", "ns"])
    assert result.exit_code == 0, result.output
    rows = [line.split("  ") for line in result.stdout.splitlines()[1:]]
    assert [[cell.strip() for cell in row if cell.strip()] for row in rows] == [
        ["pod-group/h", "team", "pending", "-", "1 of 2 pods of group h exist", "-", "-"],
        ["pod-group/g", "team", "pending", "1", "no room", "-", "-"],
    ]


def test_a_plain_pod_workload_is_named_by_its_pod_or_its_group() -> None:
    assert pod_workload_name("pod-group/g", "ns") == ("ns", "pod-group/g")
    assert pod_workload_name("other/pod/p", "ns") == ("other", "pod/p")
    for bad in ("g", "ns/g", "job/g", "pod/", "a/b/c/d"):
        assert pod_workload_name(bad, "ns") is None
