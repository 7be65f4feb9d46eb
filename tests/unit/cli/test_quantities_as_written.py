"""Amounts come back as people write them, and every surface writes them the same way:
pending reasons, Queue status, `sluice simulate` and the CLI's queue views."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dump_objects import job, node, queue, write
from rich.console import Console

from sluice.cli.queue_view import queue_tree
from sluice.cli.render import to_json
from sluice.cli.simulate import simulate_file
from sluice.operator.status import queue_status

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


def _dump(tmp_path: Path) -> Path:
    def memory_job(name: str, memory: str, admitted_at: str | None = None) -> dict[str, Any]:
        requests = {"cpu": "1500m", "memory": memory}
        return job(name, "team", requests=requests, admitted_at=admitted_at)

    team = queue("team", "root", capability={"memory": "2G"}, deserved={"memory": "1500M"})
    objects = [
        queue("root"),
        team,
        memory_job("small", "1G", admitted_at="2026-03-01T01:00:00Z"),
        memory_job("big", "3G"),
        node("n1", "8", memory="16Gi"),
    ]
    return write(tmp_path, objects)


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
