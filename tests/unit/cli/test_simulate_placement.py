"""`sluice simulate` over a dump with pods: the operator's placement answers, offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from dump_objects import node, queue, write
from typer.testing import CliRunner

from sluice.cli.main import _register, app

EXAMPLE = Path(__file__).parents[3] / "examples" / "placement.yaml"
NOW = "2026-03-02T09:00:00Z"

_register()
runner = CliRunner()


def simulate(path: Path, *args: str) -> dict[str, Any]:
    done = runner.invoke(app, ["simulate", str(path), "--output", "json", "--now", NOW, *args])
    assert done.exit_code == 0, done.output
    return dict(json.loads(done.output))


def reasons(out: dict[str, Any]) -> dict[str, str]:
    return {p["job"]: p["reason"] for p in out["pending"]}


SCHEDULER_SAYS = (
    "Unschedulable: 0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't"
    " match Pod's node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is"
    " not helpful for scheduling."
)


def test_the_placement_example_gives_the_operators_answers_and_reasons() -> None:
    out = simulate(EXAMPLE)
    why = f"1 of its pods not scheduled within 5m: eval-x2k9p ({SCHEDULER_SAYS})"
    assert out["decisions"] == [
        {
            "cycle": 1,
            "action": "requeue",
            "job": "nlp/eval",
            "queue": "nlp",
            "requeues": 1,
            "reason": why,
        },
        {
            "cycle": 1,
            "action": "admit",
            "job": "etl/dedupe",
            "queue": "etl",
            "reason": "enqueue: fits in queue etl",
        },
    ]
    assert reasons(out) == {
        "etl/shuffle": "position 1 in etl; only 1 of its 3 pods of cpu 24, memory 64Gi fit on"
        " the nodes at once (cpu-1 1) (among the 1 of 4 nodes its pods may go on)",
        "vision/train-big": "position 1 in vision; no node can hold a pod of nvidia.com/gpu 8:"
        " the most free on one node is nvidia.com/gpu 4 (gpu-1) (among the 3 of 4 nodes its"
        " pods may go on)",
        "vision/label-h100": "position 2 in vision; no node may take its pods: 3 not matching"
        " its nodeSelector, 1 cordoned",
        "nlp/eval": f"position 1 in nlp; requeued once, waits until 2026-03-02T09:01:00Z: {why}",
    }


def test_a_later_cycle_keeps_the_requeued_job_waiting_and_decides_nothing_new() -> None:
    out = simulate(EXAMPLE, "--cycles", "3")
    assert [(d["cycle"], d["action"], d["job"]) for d in out["decisions"]] == [
        (1, "requeue", "nlp/eval"),
        (1, "admit", "etl/dedupe"),
    ]
    assert reasons(out)["nlp/eval"].startswith("position 1 in nlp; requeued once, waits until")


def test_without_pods_in_the_dump_nodes_hold_only_admitted_jobs(tmp_path: Path) -> None:
    """The same dump without its pods: the inference pods are unknown, so the 8-GPU pod fits,
    and nothing is said of pods that were never seen."""
    objects = [o for o in yaml.safe_load_all(EXAMPLE.read_text()) if o["kind"] != "Pod"]
    out = simulate(write(tmp_path, objects))
    admitted = {d["job"] for d in out["decisions"] if d["action"] == "admit"}
    assert "vision/train-big" in admitted
    assert not any(d["action"] == "requeue" for d in out["decisions"])


def test_a_pods_bad_field_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "many"}}}]},
    }
    done = runner.invoke(
        app, ["simulate", str(write(tmp_path, [queue("root"), node("n", "4"), bad]))]
    )
    assert done.exit_code == 2
    assert "Pod ns/p: field spec.containers[0].resources.requests" in done.output
