"""`sluice simulate --minutes`: the dump's jobs over simulated time, each running its known
duration, with the usage plugin's order, and each queue's wait."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dump_objects import job, node, queue, write
from typer.testing import CliRunner

from sluice.cli.main import _register, app

_register()
runner = CliRunner()
NOW = "2026-03-02T09:00:00Z"
USAGE = (
    "actions: enqueue, allocate\n"
    "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
    "- plugins: [{name: drf}, {name: proportion}, {name: usage}]\n"
)
PLAIN = "actions: enqueue, allocate\n"


def timed(name: str, queue_name: str, created: str, duration: str = "10m") -> dict[str, Any]:
    made = job(name, queue_name, "1", created=created)
    made["metadata"]["annotations"] = {"sluice.dev/duration": duration}
    return made


def scenario(tmp_path: Path) -> Path:
    """A's 12 jobs fill the 2 cpus from 09:00; B's 4 arrive at 09:25."""
    objects = [queue("root"), queue("a", "root"), queue("b", "root"), node("n1", "2")]
    objects += [timed(f"a{i:02d}", "a", "2026-03-02T09:00:00Z") for i in range(12)]
    objects += [timed(f"b{i}", "b", "2026-03-02T09:25:00Z") for i in range(4)]
    return write(tmp_path, objects)


def run(dump: Path, config: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    path = tmp_path / "scheduler.yaml"
    path.write_text(config)
    args = ["simulate", str(dump), "--config", str(path), "--now", NOW, "-o", "json", *extra]
    result = runner.invoke(app, [*args, "--minutes", "120"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_with_usage_b_runs_at_the_next_completions(tmp_path: Path) -> None:
    dump = scenario(tmp_path)
    on = run(dump, USAGE, tmp_path)
    off = run(dump, PLAIN, tmp_path)
    # A held both cpus for 25 minutes: at 09:30 both go to B, and again at 09:40.
    assert on["order"][6:10] == ["ns/b0", "ns/b1", "ns/b2", "ns/b3"]
    assert on["queues"]["b"]["medianWaitSeconds"] == 600
    # Without it the two are even whenever both slots free (neither holds anything), and
    # A, the older queue, goes first: B gets one slot of two every ten minutes.
    assert off["order"][6:10] == ["ns/a06", "ns/b0", "ns/a07", "ns/b1"]
    assert off["queues"]["b"]["medianWaitSeconds"] == 1200


def test_usage_is_taken_from_the_dumps_status(tmp_path: Path) -> None:
    objects = [queue("root"), queue("a", "root"), queue("b", "root"), node("n1", "1")]
    objects[1]["status"] = {
        "usage": {"sampledAt": NOW, "resources": {"cpu": 36000.0}, "dominant": "cpu 10h"}
    }
    objects += [timed("a0", "a", NOW), timed("b0", "b", NOW)]
    out = run(write(tmp_path, objects), USAGE, tmp_path)
    assert out["order"] == ["ns/b0", "ns/a0"]
    assert out["queues"]["a"]["medianWaitSeconds"] == 600


def test_table_output_names_each_queues_wait(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(USAGE)
    objects = [queue("root"), queue("a", "root"), queue("b", "root"), node("n1", "1")]
    objects += [job("a0", "a", "1", created=NOW), job("a1", "a", "1", created=NOW)]
    objects += [job("b0", "b", "1", created="2026-03-02T09:01:00Z")]
    args = ["simulate", str(write(tmp_path, objects)), "--config", str(path), "--now", NOW]
    result = runner.invoke(app, [*args, "--minutes", "12", "--job-duration", "5m"])
    assert result.exit_code == 0, result.output
    # a0 runs 09:00-09:05; then b0 (A has used, B has not) 09:05-09:10; then a1.
    assert result.stdout.splitlines() == [
        "12 simulated minutes:",
        "  queue a: 2 admitted, median wait 5m, longest 10m; 0 still waiting",
        "  queue b: 1 admitted, median wait 4m, longest 4m; 0 still waiting",
        "order of admission: ns/a0, ns/b0, ns/a1",
    ]
