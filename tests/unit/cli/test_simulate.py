"""`sluice simulate` end to end through the command line: output contract and bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from dump_objects import job, node, queue, write
from rich.console import Console
from typer.testing import CliRunner

from sluice.cli.main import _register, app
from sluice.cli.render import render_table
from sluice.cli.simulate import parse_now, simulate_file

EXAMPLES = Path(__file__).parents[3] / "examples"
NOW = "2026-03-02T09:00:00Z"

_register()
runner = CliRunner()


def run(*args: str, columns: str | None = None) -> Any:
    """Output as when piped, with or without an inherited $COLUMNS."""
    return runner.invoke(app, ["simulate", *args], env={"COLUMNS": columns})


def reclaim_cluster() -> list[dict[str, Any]]:
    """a borrows all 4 cpus; b is owed 2 of them and waits for a 2-cpu job."""
    return [
        queue("root"),
        queue("a", "root", deserved={"cpu": "2"}),
        queue("b", "root", deserved={"cpu": "2"}),
        job("a1", "a", "2", admitted_at="2026-01-01T00:00:00Z"),
        job("a2", "a", "2", admitted_at="2026-01-01T08:00:00Z"),
        job("b1", "b", "2"),
        node("n1", "4"),
    ]


CAPACITY = (
    "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
    "- plugins: [{name: drf}, {name: capacity}]\n"
)


def test_json_output_contract(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(CAPACITY)
    dump = write(tmp_path, reclaim_cluster(), "dump.json")
    result = run(str(dump), "--config", str(config), "--now", NOW, "--output", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) == {"queueOrder", "queues", "decisions", "pending", "queueActions"}
    assert out["queueOrder"] == ["b", "a"]  # b uses nothing, a is at twice its deserved
    assert set(out["queues"]) == {"a", "b"}
    b = out["queues"]["b"]
    assert b["deserved"] == {"cpu": "2"} and b["allocated"] == {"cpu": "2"}
    assert {k: b[k] for k in ("state", "parent", "pending", "inqueue", "running")} == {
        "state": "Open",
        "parent": "root",
        "pending": 0,
        "inqueue": 1,
        "running": 0,
    }
    decisions = [{k: d[k] for k in ("cycle", "action", "job", "queue")} for d in out["decisions"]]
    assert decisions == [
        {"cycle": 1, "action": "reclaim", "job": "ns/a2", "queue": "a"},
        {"cycle": 1, "action": "admit", "job": "ns/b1", "queue": "b"},
    ]
    assert out["decisions"][0]["for"] == "ns/b1"
    assert "for" not in out["decisions"][1]
    assert [p["job"] for p in out["pending"]] == ["ns/a2"]
    assert out["pending"][0]["reason"].startswith("position 1 in a")
    assert {"action": "create", "queue": "default"} in [
        {"action": a["action"], "queue": a["queue"]} for a in out["queueActions"]
    ]


def test_min_runtime_protects_recent_jobs(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        CAPACITY + "configurations:\n- name: reclaim\n  arguments: {minRuntime: 10h}\n"
    )
    dump = write(tmp_path, reclaim_cluster())
    early = run(str(dump), "--config", str(config), "--now", "2026-01-01T09:00:00Z", "-o", "json")
    late = run(str(dump), "--config", str(config), "--now", "2026-01-01T19:00:00Z", "-o", "json")
    assert early.exit_code == 0 and late.exit_code == 0
    assert json.loads(early.stdout)["decisions"] == []
    assert [d["action"] for d in json.loads(late.stdout)["decisions"]] == ["reclaim", "admit"]


def test_config_from_configmap_in_dump(tmp_path: Path) -> None:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "sluice-scheduler", "namespace": "sluice-system"},
        "data": {"scheduler.yaml": 'actions: "enqueue, allocate, backfill"\n'},
    }
    dump = write(tmp_path, [*reclaim_cluster(), configmap])
    result = run(str(dump), "--now", NOW, "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["decisions"] == []  # no reclaim action configured


def test_a_releases_own_configmap_is_read_when_named(tmp_path: Path) -> None:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "team-b-sluice-scheduler", "namespace": "sluice-system"},
        "data": {"scheduler.yaml": 'actions: "enqueue, allocate, backfill"\n'},
    }
    dump = write(tmp_path, [*reclaim_cluster(), configmap])
    default = json.loads(run(str(dump), "--now", NOW, "-o", "json").stdout)
    assert default["decisions"], "another release's ConfigMap is not read: the default reclaims"
    named = run(
        str(dump), "--now", NOW, "-o", "json", "--config-map-name", "team-b-sluice-scheduler"
    )
    assert named.exit_code == 0, named.output
    assert json.loads(named.stdout)["decisions"] == []  # no reclaim action configured


def test_multi_cycle_applies_decisions(tmp_path: Path) -> None:
    objects = [queue("root"), queue("a"), job("j1", "a", "2"), job("j2", "a", "2"), node("n", "2")]
    dump = write(tmp_path, objects)
    result = run(str(dump), "--cycles", "2", "--now", NOW, "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(d["cycle"], d["job"]) for d in out["decisions"]] == [(1, "ns/j1")]
    assert out["queues"]["a"]["inqueue"] == 1 and out["queues"]["a"]["pending"] == 1
    assert "cpu" in out["pending"][0]["reason"]


def test_missing_root_is_created(tmp_path: Path) -> None:
    dump = write(tmp_path, [queue("a"), node("n", "1")])
    out = json.loads(run(str(dump), "--now", NOW, "-o", "json").stdout)
    assert {"action": "create", "queue": "root"} in [
        {"action": a["action"], "queue": a["queue"]} for a in out["queueActions"]
    ]


def test_example_table(tmp_path: Path) -> None:
    result = run(str(EXAMPLES / "cluster.yaml"), "--now", NOW, "--output", "table")
    assert result.exit_code == 0, result.output
    text = result.stdout
    for title in ("Queues", "Decisions", "Pending jobs"):
        assert title in text
    assert "  vision" in text  # indented under research
    assert "reclaim" in text


@pytest.mark.parametrize("columns", [None, "80"])
def test_piped_table_cuts_nothing_whatever_columns_says(columns: str | None) -> None:
    result = run(str(EXAMPLES / "cluster.yaml"), "--now", NOW, "-o", "table", columns=columns)
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    # One line per pending job, its whole reason on it.
    reasons = json.loads(run(str(EXAMPLES / "cluster.yaml"), "--now", NOW, "-o", "json").stdout)
    for pending in reasons["pending"]:
        assert pending["reason"] in result.stdout


def test_a_narrow_terminal_folds_cells_instead_of_cutting_them() -> None:
    sim = simulate_file(EXAMPLES / "cluster.yaml", None, 1, parse_now(NOW))
    buffer = io.StringIO()
    render_table(sim, Console(file=buffer, width=60, soft_wrap=False))
    text = buffer.getvalue()
    assert "…" not in text
    assert max(map(len, text.splitlines())) <= 60
    top = next(line for line in text.splitlines() if line.startswith("┏"))
    assert top.count("┳") == 10  # all eleven queue columns are still there


def test_example_json_reclaims_within_research() -> None:
    result = run(str(EXAMPLES / "cluster.yaml"), "--now", NOW, "-o", "json")
    out = json.loads(result.stdout)
    reclaims = [d for d in out["decisions"] if d["action"] == "reclaim"]
    assert reclaims and all(d["queue"] == "nlp" for d in reclaims)
    assert all(p["reason"].startswith("position ") for p in out["pending"])


def test_example_with_scheduler_config() -> None:
    result = run(
        str(EXAMPLES / "cluster.yaml"),
        "--config",
        str(EXAMPLES / "scheduler.yaml"),
        "--now",
        NOW,
        "-o",
        "json",
    )
    assert result.exit_code == 0, result.output


BAD = {
    "unknown kind": (
        [
            queue("root"),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "x", "namespace": "default"},
            },
        ],
        ["document 2", "Service default/x", "unsupported kind Service"],
    ),
    "malformed quantity": (
        [queue("root"), queue("a", capability={"cpu": "4x"})],
        ["Queue a", "spec.capability: cpu", "'4x' is not a quantity"],
    ),
    "missing parent": (
        [queue("root"), queue("a", "dept")],
        ["Queue a", "spec.parent", "dept is not in the dump", "truncated"],
    ),
    "cycle": (
        [queue("root"), queue("a", "b"), queue("b", "a")],
        ["Queue a", "spec.parent", "cycle", "a -> b -> a"],
    ),
    "malformed job quantity": (
        [queue("root"), queue("a"), job("j", "a", "lots")],
        ["Job ns/j", "containers[0].resources.requests", "cpu"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line(tmp_path: Path, case: str) -> None:
    objects, expected = BAD[case]
    result = run(str(write(tmp_path, objects)), "--now", NOW)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: dump.yaml")
    for part in expected:
        assert part in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('actions: "enqueue, teleport"\n', "actions.teleport: unknown action"),
        ("tiers:\n- plugins: [{name: magic}]\n", "tiers[0].plugins[0].name: unknown plugin"),
        ("configurations:\n- name: reclaim\n  arguments: {minRuntime: soon}\n", "minRuntime"),
    ],
)
def test_bad_config_is_one_line(tmp_path: Path, config: str, expected: str) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(config)
    result = run(str(write(tmp_path, [queue("root")])), "--config", str(path))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "scheduler.yaml" in line and expected in line


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("a: [unclosed\n", "not valid YAML"),
        ("- 3\n", "expected a Kubernetes object"),
    ],
)
def test_unreadable_dump(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "dump.yaml"
    path.write_text(content)
    result = run(str(path))
    assert result.exit_code == 2
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_bad_now(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, [queue("root")])), "--now", "yesterday")
    assert result.exit_code == 2
    assert "--now" in result.stderr and "RFC 3339" in result.stderr


def test_now_defaults_to_the_current_time(tmp_path: Path) -> None:
    # a2 was admitted in 2000: long past any minRuntime today, so without --now it is reclaimed.
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        CAPACITY + "configurations:\n- name: reclaim\n  arguments: {minRuntime: 1h}\n"
    )
    objects = reclaim_cluster()
    objects[3] = job("a1", "a", "2", admitted_at="2999-01-01T00:00:00Z")
    objects[4] = job("a2", "a", "2", admitted_at="2000-01-01T00:00:00Z")
    result = run(str(write(tmp_path, objects)), "--config", str(config), "-o", "json")
    assert result.exit_code == 0, result.output
    decisions = [(d["action"], d["job"]) for d in json.loads(result.stdout)["decisions"]]
    assert decisions == [("reclaim", "ns/a2"), ("admit", "ns/b1")]


def test_a_yaml_list_dump_reads_like_separate_documents(tmp_path: Path) -> None:
    as_list = tmp_path / "list.yaml"
    as_list.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": reclaim_cluster()})
    )
    separate = write(tmp_path, reclaim_cluster())
    outputs = [
        json.loads(run(str(path), "--now", NOW, "-o", "json").stdout)
        for path in (as_list, separate)
    ]
    assert outputs[0] == outputs[1]
    assert [d["action"] for d in outputs[0]["decisions"]] == ["reclaim", "admit"]


def test_the_workloads_example_reads_every_kind_through_its_adapter() -> None:
    result = run(str(EXAMPLES / "workloads.yaml"), "--now", NOW, "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    admitted = sorted(d["job"] for d in out["decisions"] if d["action"] == "admit")
    assert admitted == [
        "analytics/count-to-ten",  # RayJob
        "analytics/pod-group/render",  # plain pods: a leader and its workers
        "hpc/estimate-pi",  # MPIJob
        "research/fanout",  # JobSet
        "vision/mnist-nccl",  # PyTorchJob
    ]
    (waiting,) = out["pending"]
    assert waiting["job"] == "vision/three-node-ddp"  # TrainJob
    assert waiting["reason"] == (
        "position 1 in vision; cluster has nvidia.com/gpu 4 free, job requests nvidia.com/gpu 6"
    )


def test_a_workload_of_another_api_version_is_named(tmp_path: Path) -> None:
    jobset = yaml.safe_load_all((EXAMPLES / "workloads.yaml").read_text())
    objects = [d for d in jobset if d and d["kind"] in ("Queue", "Node", "JobSet")]
    objects[-1]["apiVersion"] = "jobset.x-k8s.io/v1alpha1"
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = run(str(path), "--now", NOW)
    assert result.exit_code != 0
    assert "field apiVersion: expected jobset.x-k8s.io/v1alpha2, got jobset.x-k8s.io/v1alpha1" in (
        result.output
    )


def test_a_dumps_limit_ranges_and_runtime_classes_give_what_its_pods_would_ask(
    tmp_path: Path,
) -> None:
    # Each job's container names no memory; the namespace's LimitRange gives it 1Gi and the
    # RuntimeClass 512Mi of overhead, so on a node of 3Gi only two of the three go in.
    limits = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": "ns"},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "1Gi"}}]},
    }
    kata = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kata"},
        "handler": "kata",
        "overhead": {"podFixed": {"memory": "512Mi"}},
    }
    jobs = [
        job(f"j{i}", "q", "1", runtimeClassName="kata", created=f"2026-01-01T00:0{i}:00Z")
        for i in range(3)
    ]
    objects = [queue("q"), *jobs, node("n1", "8", memory="3Gi"), limits, kata]
    result = run(str(write(tmp_path, objects)), "--now", NOW, "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [d["job"] for d in out["decisions"]] == ["ns/j0", "ns/j1"]
    assert out["queues"]["q"]["allocated"] == {"cpu": "2", "memory": "3Gi"}
    bad = {**limits, "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "x"}}]}}
    refused = run(str(write(tmp_path, [*objects[:-2], bad])), "--now", NOW, "-o", "json")
    assert refused.exit_code != 0
    assert "LimitRange ns/defaults: field spec.limits[0].defaultRequest" in refused.output
