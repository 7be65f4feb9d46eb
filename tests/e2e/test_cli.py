"""The `sluice queue` and `sluice job why` commands against the real API server, with the
webhooks and the operator running."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .components import sluice_system
from .helpers import Kubectl, controlplane, wait_for
from .scenario import Scenario


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    workdir = tmp_path_factory.mktemp("cli")
    with sluice_system(control_plane, kubectl, workdir, "cli-operator"):
        yield control_plane.kubeconfig


def sluice(kubeconfig: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "sluice.cli.main", *args, f"--kubeconfig={kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def test_a_queue_tree_through_the_cli(system: Path, kubectl: Kubectl, namespace: str) -> None:
    s = Scenario(kubectl, namespace)
    dept, team = s.name("dept"), s.name("team")
    wait_for(
        lambda: (
            sluice(
                system, "queue", "create", dept, "--guarantee=cpu=4", "--weight=2", ok=False
            ).returncode
            == 0
        ),
        timeout=20,
        what="the webhooks to take effect",
    )
    out = sluice(
        system, "queue", "create", team, f"--parent={dept}", "--capability=cpu=2,memory=4Gi"
    ).stdout
    assert team in out
    got = json.loads(sluice(system, "queue", "get", team, "-o", "json").stdout)
    assert got["spec"]["capability"] == {"cpu": "2", "memory": "4Gi"}
    assert got["spec"]["parent"] == dept
    listing = sluice(system, "queue", "list").stdout
    assert "NAME" in listing and dept in listing and team in listing
    sluice(system, "queue", "update", team, "--weight=5")
    assert kubectl.get("queue", team)["spec"]["weight"] == 5
    drawn = wait_for(
        lambda: (out := sluice(system, "queue", "tree", dept).stdout) and "Open" in out and out,
        what="statuses in the tree",
    )
    assert dept in drawn and team in drawn and "weight=5" in drawn

    refused = sluice(
        system,
        "queue",
        "create",
        s.name("greedy"),
        f"--parent={dept}",
        "--guarantee=cpu=9",
        ok=False,
    )
    assert refused.returncode == 1
    assert f"the children of {dept} would have guarantee cpu 9 in total" in refused.stderr

    sluice(system, "queue", "close", dept, "--recursive")
    wait_for(lambda: s.queue_status("dept").get("state") == "Closed", what="dept Closed")
    sluice(system, "queue", "delete", dept, "--recursive")
    wait_for(
        lambda: team not in kubectl.run("get", "queues", "-o", "name"), what="the subtree gone"
    )


def test_clear_errors(system: Path) -> None:
    bad = sluice(system, "queue", "create", "x-bad", "--capability=cpu=four", ok=False)
    assert bad.returncode == 1 and "--capability: cpu:" in bad.stderr and "four" in bad.stderr
    missing = sluice(system, "queue", "get", "no-such-queue", ok=False)
    assert missing.stderr.strip() == "error: queue no-such-queue not found"
    open_delete = sluice(system, "queue", "delete", "default", ok=False)
    assert "only a Closed queue can be deleted" in open_delete.stderr
    nothing = sluice(system, "queue", "update", "default", ok=False)
    assert "nothing to update" in nothing.stderr


def test_job_why(system: Path, kubectl: Kubectl, namespace: str) -> None:
    s = Scenario(kubectl, namespace)
    s.node(4)
    s.queue("small", capability={s.resource: "1"})
    s.job("first", "small", 1)
    s.job("second", "small", 1)
    s.wait_admitted("first")
    wait_for(lambda: s.annotation("second", "pending-reason"), what="second's reason")
    pending = sluice(system, "job", "why", f"{namespace}/second").stdout
    assert f"job {namespace}/second is pending, position 1 in queue {s.name('small')}" in pending
    assert f"  reason: {s.name('small')} would use {s.resource} 2 > capability 1" in pending
    assert f"queue {s.name('small')}: state Open, allocated {s.resource} 1" in pending
    assert "Warning  Pending: position 1 in" in pending
    admitted = sluice(system, "job", "why", f"{namespace}/first").stdout
    assert "is admitted" in admitted
    lost = sluice(system, "job", "why", f"{namespace}/ghost", ok=False)
    assert lost.stderr.strip() == f"error: job {namespace}/ghost not found"
