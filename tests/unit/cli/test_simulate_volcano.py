"""`sluice simulate` with what a Volcano user brings: Volcano's own scheduler configurations,
GPU-only quotas, preemptionPolicy Never, guarantees a parent cannot hold, weighted drf, and
victims admitted together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dump_objects import job, node, queue, write
from typer.testing import CliRunner

from sluice.cli.main import _register, app

EXAMPLES = Path(__file__).parents[3] / "examples"
NOW = "2026-03-02T09:00:00Z"

_register()
runner = CliRunner()


def test_volcano_configs_load_and_each_ignored_name_is_one_line_on_stderr() -> None:
    for name, count in (("volcano-scheduler.conf", 7), ("capacity.conf", 7)):
        config = EXAMPLES / "volcano" / name
        args = ["simulate", str(EXAMPLES / "cluster.yaml"), "--config", str(config)]
        result = runner.invoke(app, [*args, "--now", NOW, "-o", "json"])
        assert result.exit_code == 0, result.output
        json.loads(result.stdout)  # warnings never reach the output itself
        lines = result.stderr.splitlines()
        assert len(lines) == count, lines
        assert all(line.startswith(f"warning: {config}: ") for line in lines)
        assert any("plugin binpack is ignored: kube-scheduler places" in line for line in lines)


def _simulate(tmp_path: Path, objects: list[dict[str, Any]], *args: str) -> dict[str, Any]:
    dump = write(tmp_path, [queue("root"), *objects])
    result = runner.invoke(app, ["simulate", str(dump), "--now", NOW, "-o", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_priority_class_with_preemption_policy_never_waits_in_simulate(tmp_path: Path) -> None:
    polite = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "polite"},
        "value": 1000,
        "preemptionPolicy": "Never",
    }
    objects = [
        polite,
        queue("a", "root"),
        queue("b", "root"),
        job("b1", "b", "2", admitted_at="2026-03-01T01:00:00Z"),
        job("b2", "b", "2", admitted_at="2026-03-01T02:00:00Z"),
        job("polite", "a", "2", priorityClassName="polite"),
        node("n1", "4"),
    ]
    out = _simulate(tmp_path, objects)
    assert out["decisions"] == []
    assert out["pending"][0]["reason"].endswith(
        "its preemptionPolicy is Never: it waits for room and takes none back"
    )
    objects.append(job("eager", "a", "2"))
    out = _simulate(tmp_path, objects)
    assert [(d["action"], d["job"]) for d in out["decisions"]] == [
        ("reclaim", "ns/b2"),
        ("admit", "ns/eager"),
    ]


def test_gpu_only_quotas_reclaim_in_the_example_dump_with_volcanos_capacity_config() -> None:
    args = [
        "simulate",
        str(EXAMPLES / "volcano" / "gpu-quotas.yaml"),
        "--config",
        str(EXAMPLES / "volcano" / "capacity.conf"),
        "--now",
        NOW,
        "-o",
        "json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(d["action"], d["job"], d.get("for")) for d in out["decisions"]] == [
        ("reclaim", "nlp/llm-sft-7", "vision/detr-train"),
        ("reclaim", "nlp/llm-sft-6", "vision/detr-train"),
        ("admit", "vision/detr-train", None),
    ]
    vision = out["queues"]["vision"]
    assert vision["deserved"] == {"nvidia.com/gpu": "8"}
    assert vision["allocated"] == {"cpu": "48", "memory": "384Gi", "nvidia.com/gpu": "6"}
    assert out["queues"]["nlp"]["share"] == 1.25  # its GPUs only: 10 of 8
    assert out["pending"][0] == {
        "job": "batch/etl-backfill",
        "queue": "batch",
        "reason": "position 1 in batch; cluster has cpu 16 free, job requests cpu 32",
    }


def test_guarantees_a_parent_can_never_hold_mark_it_not_valid_in_simulate(tmp_path: Path) -> None:
    objects = [
        queue("dept", "root", capability={"cpu": "6"}),
        queue("a", "dept", guarantee={"resource": {"cpu": "4"}}),
        queue("b", "dept", guarantee={"resource": {"cpu": "4"}}),
        job("j", "a", "1"),
        node("n1", "16"),
    ]
    out = _simulate(tmp_path, objects)
    reason = (
        "queue dept: the children of dept would have guarantee cpu 8 in total,"
        " more than all dept can ever hold, its capability cpu 6"
    )
    assert out["queues"]["dept"]["valid"] is False and out["decisions"] == []
    assert out["queues"]["dept"]["invalidReason"] == reason
    assert out["pending"][0]["reason"] == f"position 1 in a; queue a is not valid: {reason}"


def test_drf_weights_split_the_first_cycle_right_over_several_cycles(tmp_path: Path) -> None:
    objects: list[dict[str, Any]] = [
        queue("a", "root", weight=2),
        queue("b", "root"),
        queue("c", "root"),
        node("n1", "8"),
    ]
    objects += [job(f"{q}{i}", q, "1") for q in "abc" for i in range(8)]
    out = _simulate(tmp_path, objects, "--cycles", "3")
    by_cycle = {c: [d for d in out["decisions"] if d["cycle"] == c] for c in (1, 2, 3)}
    assert all(d["action"] == "admit" for d in by_cycle[1]) and not by_cycle[2] + by_cycle[3]
    counts = {q: sum(d["queue"] == q for d in by_cycle[1]) for q in "abc"}
    assert counts == {"a": 4, "b": 2, "c": 2}
    assert {q: out["queues"][q]["deserved"] for q in "abc"} == {
        "a": {"cpu": "4"},
        "b": {"cpu": "2"},
        "c": {"cpu": "2"},
    }


def test_victims_admitted_together_go_newest_created_first_in_simulate(tmp_path: Path) -> None:
    at = "2026-03-01T05:00:00Z"
    older = job("aa-older", "b", "2", admitted_at=at)
    newer = job("zz-newer", "b", "2", admitted_at=at, created="2026-03-01T04:00:00Z")
    objects = [queue("a", "root"), queue("b", "root"), older, newer, job("want", "a", "2")]
    out = _simulate(tmp_path, [*objects, node("n1", "4")])
    assert [(d["action"], d["job"]) for d in out["decisions"]] == [
        ("reclaim", "ns/zz-newer"),
        ("admit", "ns/want"),
    ]
