"""What simulate and `job why` say of Topologies: the domain chosen, or what the job asks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dump_objects import job, node, queue, write
from test_job_why import QUEUE
from test_job_why import job as stored_job
from typer.testing import CliRunner

from sluice.cli.job_report import explain
from sluice.cli.main import _register, app

_register()
runner = CliRunner()
RACK = "example.com/rack"
NOW = "2026-03-02T09:00:00Z"


def racked(name: str, rack: str) -> dict[str, Any]:
    obj = node(name, "4")
    obj["metadata"]["labels"] = {RACK: rack}
    return obj


def topology() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": RACK}]},
    }


def dump(tmp_path: Path, *extra: dict[str, Any]) -> Path:
    train = job("train", "q", "2")
    train["spec"]["parallelism"] = 2
    train["metadata"]["annotations"] = {"sluice.dev/topology-required": RACK}
    busy = job("busy", "q", "2", admitted_at="2026-03-02T08:00:00Z", nodeSelector={RACK: "a"})
    nodes = [racked("a1", "a"), racked("a2", "a"), racked("b1", "b"), racked("b2", "b")]
    return write(tmp_path, [queue("root"), queue("q"), busy, train, *nodes, *extra])


def test_simulate_reads_the_topology_of_a_dump_and_shows_the_domain(tmp_path: Path) -> None:
    path = dump(tmp_path, topology())
    out = runner.invoke(app, ["simulate", str(path), "--now", NOW, "--output", "json"])
    assert out.exit_code == 0, out.output
    (admit,) = json.loads(out.output)["decisions"]
    # a has 6 free of 8, b 8: a is left with the least room once the 2 x 2 are in it.
    assert (admit["job"], admit["domain"]) == ("ns/train", f"{RACK}=a")
    table = runner.invoke(app, ["simulate", str(path), "--now", NOW], env={"COLUMNS": "200"})
    assert "DOMAIN" in table.output and f"{RACK}=a" in table.output


def test_without_the_topology_simulate_says_the_level_is_none(tmp_path: Path) -> None:
    out = runner.invoke(app, ["simulate", str(dump(tmp_path)), "--now", NOW, "--output", "json"])
    (pending,) = json.loads(out.output)["pending"]
    assert pending["reason"] == f"position 1 in q; no Topology has the level {RACK}"
    assert (
        "DOMAIN" not in runner.invoke(app, ["simulate", str(dump(tmp_path)), "--now", NOW]).output
    )


def test_job_why_names_the_domain_of_an_admitted_job_and_the_ask_of_a_waiting_one() -> None:
    running = stored_job(suspend=False, admitted_at="2026-03-02T09:00:00Z")
    running["metadata"]["annotations"]["sluice.dev/topology-assignment"] = f"{RACK}=r7"
    running["spec"]["template"]["metadata"] = {
        "annotations": {"sluice.dev/topology-required": RACK}
    }
    lines = explain(running, QUEUE, [])
    assert lines[1] == f"  in {RACK}=r7, as it asks (required {RACK})"
    waiting = stored_job(pending_reason=f"position 1 in team-a; no {RACK} holds 2 x cpu 2: ...")
    waiting["metadata"]["annotations"]["sluice.dev/topology-preferred"] = RACK
    lines = explain(waiting, QUEUE, [])
    assert lines[2] == f"  it asks preferred {RACK}"
