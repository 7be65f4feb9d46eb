"""`sluice simulate` over a dump of plain pods: the workloads they form, as the operator forms
them (docs/workloads.md, "Plain pods and pod groups")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dump_objects import gated_pod, node, queue, write
from typer.testing import CliRunner

from sluice.cli.main import _register, app

NOW = "2026-03-02T09:00:00Z"

_register()
runner = CliRunner()


def simulate(tmp_path: Path, objects: list[dict[str, Any]]) -> dict[str, Any]:
    result = runner.invoke(
        app, ["simulate", str(write(tmp_path, objects)), "--now", NOW, "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def group(
    name: str, cpus: list[str], total: int = 0, created: str = "2026-03-02T08:00:00Z"
) -> list[dict[str, Any]]:
    """Pods ``name-0``, ``name-1`` ... of group ``name``, each requesting its cpu."""
    count = total or len(cpus)
    return [
        gated_pod(f"{name}-{i}", "team", cpu, name, count, created) for i, cpu in enumerate(cpus)
    ]


def test_gated_groups_are_admitted_whole_or_wait_with_a_reason(tmp_path: Path) -> None:
    out = simulate(
        tmp_path,
        [
            queue("root"),
            queue("team", "root"),
            node("n1", "4"),
            node("n2", "4"),
            *group("fits", ["1", "1", "1", "1"]),
            *group("big", ["2", "2", "2", "2"], created="2026-03-02T08:01:00Z"),
            *group("short", ["1", "1", "1"], total=4),
        ],
    )
    assert [(d["action"], d["job"]) for d in out["decisions"]] == [("admit", "ns/pod-group/fits")]
    assert out["pending"] == [
        {
            "job": "ns/pod-group/big",
            "queue": "team",
            "reason": "position 1 in team; cluster has cpu 4 free, job requests cpu 8",
        },
        {
            "job": "ns/pod-group/short",
            "queue": "team",
            "reason": "3 of 4 pods of group short exist",
        },
    ]


def test_a_group_of_a_leader_and_workers_is_admitted_only_when_all_its_pods_fit_at_once(
    tmp_path: Path,
) -> None:
    cluster = [queue("root"), queue("team", "root"), node("n1", "3"), node("n2", "3")]
    leader_and_workers = group("lws", ["3", "1", "1", "1"])
    out = simulate(tmp_path, [*cluster, *leader_and_workers])
    assert [(d["action"], d["job"]) for d in out["decisions"]] == [("admit", "ns/pod-group/lws")]
    # 5.9 cpus of the 6, but the third worker finds no node with 1.3 left.
    too_big = group("lws", ["2", "1300m", "1300m", "1300m"])
    out = simulate(tmp_path, [*cluster, *too_big])
    assert out["decisions"] == []
    assert out["pending"] == [
        {
            "job": "ns/pod-group/lws",
            "queue": "team",
            "reason": "position 1 in team; its pod sets fit on the nodes one by one, not all at"
            " once: 1 x cpu 2 (lws-0), 3 x cpu 1300m (lws-1)",
        },
    ]


def test_a_group_pod_that_does_not_say_its_count_is_named(tmp_path: Path) -> None:
    pod = gated_pod("a", "team", "1", "g", 1)
    del pod["metadata"]["annotations"]
    objects = [queue("root"), queue("team", "root"), node("n1", "4"), pod]
    result = runner.invoke(app, ["simulate", str(write(tmp_path, objects)), "--now", NOW])
    assert result.exit_code == 2
    assert result.output == (
        "error: dump.yaml: document 4: Pod ns/a: field"
        " metadata.annotations[sluice.dev/pod-group-total-count]: missing: a pod of a group"
        " says how many it has\n"
    )
