"""The kinds of workload other than Jobs on a real API server (docs/workloads.md): held by the
webhook on create, admitted within quota by the operator releasing it, left waiting with a
reason beyond it, and held again when a queue owed its quota reclaims the room. Their CRDs
are the tests' own (tests/e2e/crds/); no controller runs them, so they never get pods."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sluice.api.workloads import ADAPTERS, Adapter
from sluice.api.workloads.job import JOB
from sluice.api.workloads.model import dig
from sluice.cli.main import _register, app

from .components import Operator, sluice_system
from .helpers import Kubectl, controlplane, wait_for
from .scenario import Scenario, kwok

CRDS = Path(__file__).parent / "crds"
_register()
KINDS = tuple(a for a in ADAPTERS if a is not JOB)


@pytest.fixture(scope="module")
def sluice(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    kubectl.run("apply", "-f", str(CRDS))
    for adapter in KINDS:
        crd = f"crd/{adapter.plural}.{adapter.group}"
        kubectl.run("wait", "--for=condition=Established", crd, "--timeout=30s")
    workdir = tmp_path_factory.mktemp("workload-kinds")
    try:
        with sluice_system(control_plane, kubectl, workdir, "e2e-kinds", workloads=KINDS) as op:
            yield op
    finally:
        kubectl.run("delete", "-f", str(CRDS), "--wait=false")


class Workloads:
    """Workloads of one kind in a Scenario: each asks `amount` of the scenario's resource, one
    unit per pod, over the pod sets its kind has."""

    def __init__(self, s: Scenario, adapter: Adapter, kubeconfig: Path) -> None:
        self.s = s
        self.adapter = adapter
        self.kubeconfig = kubeconfig
        self.resource = f"{adapter.plural}.{adapter.group}"

    def create(self, name: str, queue: str, amount: int) -> dict[str, Any]:
        """Create it, not held: the object as the API server stored it."""
        body = {
            "apiVersion": self.adapter.api_version,
            "kind": self.adapter.kind,
            "metadata": {
                "name": name,
                "namespace": self.s.namespace,
                "labels": {"sluice.dev/queue-name": self.s.name(queue)},
            },
            "spec": self._spec(amount),
        }
        created: dict[str, Any] = json.loads(self.s.kubectl.create(body, "-o", "json"))
        return created

    def _spec(self, amount: int) -> dict[str, Any]:
        pod = {"spec": kwok.pod_template({self.s.resource: 1})["spec"]}
        kind = self.adapter.kind
        if kind == "JobSet":
            job = {"spec": {"parallelism": 1, "completions": 1, "template": pod}}
            return {
                "replicatedJobs": [
                    {"name": "driver", "replicas": 1, "template": job},
                    {"name": "workers", "replicas": amount - 1, "template": job},
                ]
            }
        if kind == "TrainJob":
            per_node = {"requests": {self.s.resource: "1"}, "limits": {self.s.resource: "1"}}
            return {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": amount, "resourcesPerNode": per_node},
            }
        if kind in ("PyTorchJob", "MPIJob"):
            first, rest = ("Master", "Worker") if kind == "PyTorchJob" else ("Launcher", "Worker")
            field = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "mpiReplicaSpecs"
            return {
                field: {
                    first: {"replicas": 1, "template": pod},
                    rest: {"replicas": amount - 1, "template": pod},
                }
            }
        assert kind == "RayJob"
        workers = amount - 1
        group = {
            "groupName": "workers",
            "replicas": workers,
            "minReplicas": workers,
            "maxReplicas": workers,
            "template": pod,
        }
        return {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            "submissionMode": "HTTPMode",
            "rayClusterSpec": {"headGroupSpec": {"template": pod}, "workerGroupSpecs": [group]},
        }

    def get(self, name: str) -> dict[str, Any]:
        return self.s.kubectl.get(self.resource, name, self.s.namespace)

    def held(self, name: str) -> bool:
        return bool(dig(self.get(name), self.adapter.hold.path))

    def annotation(self, name: str, key: str) -> str | None:
        annotations = self.get(name)["metadata"].get("annotations") or {}
        return annotations.get(f"sluice.dev/{key}")


@pytest.fixture(params=KINDS, ids=lambda a: a.kind)
def w(
    request: pytest.FixtureRequest,
    sluice: Operator,
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    namespace: str,
) -> Workloads:
    return Workloads(Scenario(kubectl, namespace), request.param, control_plane.kubeconfig)


def test_held_admitted_left_waiting_and_reclaimed(w: Workloads) -> None:
    s = w.s
    # cpu and memory besides the test's resource: the containers their controllers add to
    # the pods (a PyTorchJob worker's init container, a RayJob's submitter) ask for them.
    s.node(4, allocatable={"cpu": "64", "memory": "256Gi"})
    low = s.queue("low", priority=1)
    s.queue("high", priority=10)
    first = w.create("first", "low", 2)
    assert dig(first, w.adapter.hold.path) is True  # held by the webhook on create
    w.create("second", "low", 2)
    wait_for(lambda: not w.held("first") and not w.held("second"), what="both admitted")
    assert w.annotation("first", "admitted-at")
    w.create("third", "low", 2)
    reason = wait_for(lambda: w.annotation("third", "pending-reason"), what="third's reason")
    assert reason == (
        f"position 1 in {low}; cluster has {s.resource} 0 free, job requests {s.resource} 2"
    )
    assert w.held("third")
    args = ["job", "why", "third", "-n", s.namespace, "--kind", w.adapter.kind]
    why = CliRunner().invoke(app, [*args, f"--kubeconfig={w.kubeconfig}"])
    assert why.exit_code == 0, why.output
    kind = w.adapter.kind.lower()
    assert why.output.splitlines()[:2] == [
        f"{kind} {s.namespace}/third is pending, position 1 in queue {low}",
        f"  reason: cluster has {s.resource} 0 free, job requests {s.resource} 2",
    ]
    # high is owed half of the room low took all of: one of low's gives it back.
    w.create("urgent", "high", 2)
    wait_for(lambda: not w.held("urgent"), what="urgent admitted")
    victims = [n for n in ("first", "second") if w.held(n)]
    assert len(victims) == 1
    assert w.annotation(victims[0], "reclaimed-by") == f"{s.namespace}/urgent"
