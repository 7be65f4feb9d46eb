"""Amounts come back as people write them, and every surface writes them the same way:
pending reasons, Queue status, `sluice simulate` and the CLI's queue views."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from sluice.cli.queue_view import queue_tree
from sluice.cli.render import to_json
from sluice.cli.simulate import simulate_file
from sluice.operator.status import queue_status

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


def _dump(tmp_path: Path) -> Path:
    def job(name: str, memory: str, admitted: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "team"},
            "creationTimestamp": "2026-03-01T00:00:00Z",
        }
        if admitted:
            meta["annotations"] = {"sluice.dev/admitted-at": "2026-03-01T01:00:00Z"}
        request = {"cpu": "1500m", "memory": memory}
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": {
                "suspend": not admitted,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": request}}]}
                },
            },
            "status": {"active": 1} if admitted else {},
        }

    objects = [
        {"kind": "Queue", "metadata": {"name": "root"}, "spec": {}},
        {
            "kind": "Queue",
            "metadata": {"name": "team"},
            "spec": {
                "parent": "root",
                "capability": {"memory": "2G"},
                "deserved": {"memory": "1500M"},
            },
        },
        job("small", "1G", admitted=True),
        job("big", "3G", admitted=False),
        {
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {
                "allocatable": {"cpu": "8", "memory": "16Gi"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    ]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def test_pending_reason_status_simulate_and_cli_write_the_amounts_as_given(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("tiers:\n- plugins: [{name: priority}]\n- plugins: [{name: capacity}]\n")
    sim = simulate_file(_dump(tmp_path), config, now=NOW)
    out = to_json(sim)
    # The pending reason: the job's 3G and the queue's 2G, not 2929688Ki and 1953125Ki.
    assert out["pending"] == [
        {
            "job": "ns/big",
            "queue": "team",
            "reason": "position 1 in team; team would use memory 4G > capability 2G",
        }
    ]
    assert out["queues"]["team"]["allocated"] == {"cpu": "1500m", "memory": "1G"}
    assert out["queues"]["team"]["deserved"] == {"memory": "1500M"}
    # The Queue status the operator writes, and the CLI's tree drawn from that status.
    status = queue_status({"metadata": {"name": "team"}}, sim.final.queues["team"], NOW)
    assert status["allocated"] == {"cpu": "1500m", "memory": "1G"}
    assert status["deserved"] == {"memory": "1500M"}
    buffer = io.StringIO()
    items = [
        {"metadata": {"name": "root"}, "spec": {}, "status": {}},
        {"metadata": {"name": "team"}, "spec": {"parent": "root"}, "status": status},
    ]
    Console(file=buffer, width=200).print(queue_tree(items, "root"))
    assert "deserved=memory=1500M allocated=cpu=1500m,memory=1G" in buffer.getvalue()
    assert sim.final.cluster_total.describe() == "cpu 8, memory 16Gi"
