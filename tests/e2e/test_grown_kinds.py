"""A RayJob and a PyTorchJob grown while they run, through their real controllers (KubeRay
v1.5.0, the training-operator; tests/e2e/controllers.py), on the living cluster
(docs/elastic.md, *Grown through the queue*): the new pods gated while the queue has no
room, then admitted as growth and run; what a tenant tries around it refused.

No Ray autoscaler runs on fake nodes, so the test raises a worker group's replicas on the
RayCluster the RayJob runs, as the autoscaler does."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from sluice.api.workloads import BY_KIND

from . import controllers
from .components import sluice_system
from .helpers import Kubectl, KubectlError, controlplane, unique_name, wait_for

kwok = controlplane.kwok
RAY_JOB, PYTORCH_JOB = BY_KIND["RayJob"], BY_KIND["PyTorchJob"]
GATE = "sluice.dev/admission"
QUEUE_LABEL = "sluice.dev/queue-name"


def resource(adapter: Any) -> str:
    return f"{adapter.plural}.{adapter.group}"


@pytest.fixture(scope="module")
def kinds_and_sluice(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    workdir = tmp_path_factory.mktemp("grown-kinds")
    with contextlib.ExitStack() as stack:
        crds: list[str] = []
        stack.callback(
            lambda: crds and kubectl.run("delete", "--ignore-not-found", "--timeout=60s", *crds)
        )
        for controller, adapter in (
            (controllers.KUBERAY, RAY_JOB),
            (controllers.TRAINING_OPERATOR, PYTORCH_JOB),
        ):
            # test_workload_kinds.py's stand-in CRDs may still be going when it ran first.
            kubectl.run("wait", "--for=delete", "--timeout=60s", f"crd/{resource(adapter)}",
                        check=False)  # fmt: skip
            running = stack.enter_context(
                controllers.running(controller, control_plane, kubectl, workdir)
            )
            crds.extend(n for n in running.crds if n not in crds)
        stack.enter_context(
            sluice_system(
                control_plane, kubectl, workdir, "e2e-grown-kinds", workloads=[RAY_JOB, PYTORCH_JOB]
            )
        )
        yield


@pytest.fixture
def node(kubectl: Kubectl, namespace: str, kinds_and_sluice: None) -> Iterator[str]:
    """A fake node of cpu 16. After the test, the namespace's workloads go while their
    controllers still run to take their finalizers off them."""
    name = unique_name("grown-node")
    kubectl.create(kwok.fake_node(name, {"cpu": "16", "memory": "64Gi"}))
    yield name
    for adapter in (RAY_JOB, PYTORCH_JOB):
        kubectl.run("delete", resource(adapter), "--all", "-n", namespace,
                    "--cascade=foreground", "--timeout=50s")  # fmt: skip
    kubectl.run("delete", "node", name, "--ignore-not-found", "--wait=false")


def queue(kubectl: Kubectl, cpu: str) -> str:
    name = unique_name("grown")
    kubectl.create(
        {
            "apiVersion": "scheduling.sluice.dev/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"parent": "root", "capability": {"cpu": cpu}},
        }
    )
    return name


def capability(kubectl: Kubectl, name: str, cpu: str) -> None:
    patch = {"spec": {"capability": {"cpu": cpu}}}
    kubectl.run("patch", "queue", name, "--type=merge", "-p", json.dumps(patch))


def pod(container: str, cpu: str, restart: str) -> dict[str, Any]:
    template = dict(kwok.pod_template({"cpu": cpu}, restart_policy=restart))
    template["spec"]["containers"][0]["name"] = container
    return template


def gated(p: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in p["spec"].get("schedulingGates") or ())


def live(kubectl: Kubectl, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = kubectl.json("get", "pods", "-n", namespace, "-l", selector)["items"]
    return [p for p in found if not p["metadata"].get("deletionTimestamp")]


def record(kubectl: Kubectl, what: str, name: str, namespace: str) -> Any:
    annotations = kubectl.get(what, name, namespace)["metadata"].get("annotations") or {}
    return json.loads(annotations.get("sluice.dev/admitted-size") or "null")


def counted(pods: list[dict[str, Any]], size: int, waiting: int) -> bool:
    return len(pods) == size and sum(gated(p) for p in pods) == waiting


def running(pods: list[dict[str, Any]]) -> bool:
    return all(not gated(p) and p["status"].get("phase") == "Running" for p in pods)


# RayJob ------------------------------------------------------------------------------------


def ray_job(kubectl: Kubectl, namespace: str, queue_name: str) -> str:
    """A RayJob with Ray's autoscaler on: a head of cpu 1 (and KubeRay's autoscaler
    container, 500m), one worker of cpu 1 in group workers (1 to 4), KubeRay's submitter
    pod of 500m: cpu 3 in all."""
    name = unique_name("ray")
    group = {
        "groupName": "workers",
        "replicas": 1,
        "minReplicas": 1,
        "maxReplicas": 4,
        "rayStartParams": {},
        "template": pod("ray-worker", "1", "Always"),
    }
    kubectl.create(
        {
            "apiVersion": RAY_JOB.api_version,
            "kind": "RayJob",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue_name}},
            "spec": {
                "entrypoint": "python -c 'print(1)'",
                "submissionMode": "K8sJobMode",
                "shutdownAfterJobFinishes": True,
                "rayClusterSpec": {
                    "enableInTreeAutoscaling": True,
                    "headGroupSpec": {
                        "rayStartParams": {},
                        "template": pod("ray-head", "1", "Always"),
                    },
                    "workerGroupSpecs": [group],
                },
            },
        }
    )
    return name


def scale_cluster(kubectl: Kubectl, namespace: str, cluster: str, **fields: int) -> None:
    """The worker group's fields on the RayCluster, as Ray's autoscaler writes replicas."""
    patch = [
        {"op": "replace", "path": f"/spec/workerGroupSpecs/0/{key}", "value": value}
        for key, value in fields.items()
    ]
    kubectl.run("patch", "raycluster", cluster, "-n", namespace, "--type=json",
                "-p", json.dumps(patch))  # fmt: skip


def test_a_ray_jobs_workers_raised_on_its_cluster_wait_gated_then_run_within_its_bounds(
    kubectl: Kubectl, namespace: str, node: str
) -> None:
    team = queue(kubectl, "3")
    name = ray_job(kubectl, namespace, team)
    what = resource(RAY_JOB)
    wait_for(
        lambda: kubectl.get(what, name, namespace).get("status", {}).get("rayClusterName"),
        timeout=60,
        what="the RayJob admitted and its RayCluster made",
    )
    cluster = kubectl.get(what, name, namespace)["status"]["rayClusterName"]
    workers = f"ray.io/cluster={cluster},ray.io/group=workers"
    wait_for(
        lambda: running(p := live(kubectl, namespace, workers)) and len(p) == 1,
        timeout=90,
        what="its one worker running",
    )
    assert record(kubectl, what, name, namespace)["workers"]["admitted"] == 1

    # The autoscaler raises the group to 3: KubeRay makes 2 workers, gated while the queue
    # is full, and nothing of the RayJob itself changes.
    scale_cluster(kubectl, namespace, cluster, replicas=3)
    wait_for(lambda: counted(live(kubectl, namespace, workers), 3, 2), timeout=60,
             what="2 new workers gated")  # fmt: skip
    assert record(kubectl, what, name, namespace)["workers"]["admitted"] == 1
    group = kubectl.get(what, name, namespace)["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 1

    # Room for two more workers: the growth is admitted and its workers run.
    capability(kubectl, team, "5")
    wait_for(lambda: record(kubectl, what, name, namespace)["workers"]["admitted"] == 3,
             timeout=60, what="growth admitted")  # fmt: skip
    wait_for(lambda: running(p := live(kubectl, namespace, workers)) and len(p) == 3,
             timeout=90, what="3 workers running")  # fmt: skip

    # The rest of the cluster is the RayJob's: a tenant may neither raise its bounds past
    # the RayJob's (maxReplicas 4) nor take the label that gates its workers off a template.
    for patch in (
        [{"op": "replace", "path": f"/spec/workerGroupSpecs/0/{k}", "value": 6}
         for k in ("maxReplicas", "replicas")],
        [{"op": "remove", "path": "/spec/workerGroupSpecs/0/template/metadata/labels/"
          "sluice.dev~1resizable"}],
    ):  # fmt: skip
        with pytest.raises(KubectlError) as refused:
            kubectl.run("patch", "raycluster", cluster, "-n", namespace, "--type=json",
                        "-p", json.dumps(patch))  # fmt: skip
        assert "raycluster-spec" in str(refused.value)

    # One more worker while the queue is full: gated, and the operator's alone to release.
    scale_cluster(kubectl, namespace, cluster, replicas=4)
    wait_for(lambda: counted(live(kubectl, namespace, workers), 4, 1), timeout=60,
             what="a 4th worker gated")  # fmt: skip
    waiting = next(p for p in live(kubectl, namespace, workers) if gated(p))["metadata"]["name"]
    for patch, rule in (
        ('{"spec":{"schedulingGates":null}}', "pod-ungate"),
        ('{"metadata":{"labels":{"sluice.dev/resizable":null}}}', "pod-job-label"),
    ):
        with pytest.raises(KubectlError) as refused:
            kubectl.run("patch", "pod", waiting, "-n", namespace, "--type=merge", "-p", patch)
        assert rule in str(refused.value)
    assert counted(live(kubectl, namespace, workers), 4, 1)
    assert record(kubectl, what, name, namespace)["workers"]["admitted"] == 3

    # Scaling down as the autoscaler does: replicas lowered with the pods to delete named in
    # scaleStrategy.workersToDelete. With autoscaling on, KubeRay deletes those and no
    # others, whatever replicas says.
    kept = sorted(p["metadata"]["name"] for p in live(kubectl, namespace, workers) if not gated(p))
    patch = [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3},
        {
            "op": "add",
            "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": [waiting]},
        },
    ]
    kubectl.run("patch", "raycluster", cluster, "-n", namespace, "--type=json",
                "-p", json.dumps(patch))  # fmt: skip
    wait_for(lambda: len(live(kubectl, namespace, workers)) == 3, timeout=60,
             what="the worker named deleted")  # fmt: skip
    assert sorted(p["metadata"]["name"] for p in live(kubectl, namespace, workers)) == kept


# PyTorchJob ------------------------------------------------------------------------------


def pytorch_job(kubectl: Kubectl, namespace: str, queue_name: str) -> str:
    """A PyTorchJob with an elastic policy: a master and 2 workers (1 to 4), cpu 1 each."""
    name = unique_name("torch")
    kubectl.create(
        {
            "apiVersion": PYTORCH_JOB.api_version,
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue_name}},
            "spec": {
                "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "rdzvBackend": "c10d"},
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": pod("pytorch", "1", "OnFailure")},
                    "Worker": {"replicas": 2, "template": pod("pytorch", "1", "OnFailure")},
                },
            },
        }
    )
    return name


def test_a_pytorch_jobs_workers_raised_wait_gated_then_run(
    kubectl: Kubectl, namespace: str, node: str
) -> None:
    team = queue(kubectl, "3")
    name = pytorch_job(kubectl, namespace, team)
    what = resource(PYTORCH_JOB)
    workers = f"training.kubeflow.org/job-name={name},training.kubeflow.org/replica-type=worker"
    wait_for(lambda: running(p := live(kubectl, namespace, workers)) and len(p) == 2,
             timeout=90, what="its 2 workers running")  # fmt: skip
    assert record(kubectl, what, name, namespace)["Worker"]["admitted"] == 2

    # Its Worker template stays mutable: taking the label that gates its pods off it, with
    # the growth it would let run ungated, is refused.
    strip = {"metadata": {"labels": {"sluice.dev/resizable": None}}}
    stripped = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": strip}}}}
    with pytest.raises(KubectlError) as refused:
        kubectl.run("patch", what, name, "-n", namespace, "--type=merge",
                    "-p", json.dumps(stripped))  # fmt: skip
    assert "job-template-labels" in str(refused.value)
    patch = '{"spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":4}}}}'
    kubectl.run("patch", what, name, "-n", namespace, "--type=merge", "-p", patch)
    wait_for(lambda: counted(live(kubectl, namespace, workers), 4, 2), timeout=60,
             what="2 new workers gated")  # fmt: skip
    assert record(kubectl, what, name, namespace)["Worker"]["admitted"] == 2

    capability(kubectl, team, "5")
    wait_for(lambda: record(kubectl, what, name, namespace)["Worker"]["admitted"] == 4,
             timeout=60, what="growth admitted")  # fmt: skip
    wait_for(lambda: running(p := live(kubectl, namespace, workers)) and len(p) == 4,
             timeout=90, what="4 workers running")  # fmt: skip


def test_a_pytorch_job_of_fixed_size_scaled_through_its_scale_subresource_is_refused(
    kubectl: Kubectl, namespace: str, node: str
) -> None:
    """`kubectl scale`, and an HPA, write a PyTorchJob's Worker replicas through its /scale
    subresource: without an elastic policy its pods are not gated, so the door refuses it
    there as it refuses the same raise written on the PyTorchJob."""
    team = queue(kubectl, "10")
    name = unique_name("torch")
    body = {
        "apiVersion": PYTORCH_JOB.api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: team}},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod("pytorch", "1", "OnFailure")},
                "Worker": {"replicas": 2, "template": pod("pytorch", "1", "OnFailure")},
            }
        },
    }
    kubectl.create(body)
    what = resource(PYTORCH_JOB)
    workers = f"training.kubeflow.org/job-name={name},training.kubeflow.org/replica-type=worker"
    wait_for(lambda: running(p := live(kubectl, namespace, workers)) and len(p) == 2,
             timeout=90, what="its 2 workers running")  # fmt: skip
    with pytest.raises(KubectlError) as refused:
        kubectl.run("scale", what, name, "-n", namespace, "--replicas=4")
    assert "job-grows-past-admission" in str(refused.value)
    spec = kubectl.get(what, name, namespace)["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert spec["replicas"] == 2
    assert len(live(kubectl, namespace, workers)) == 2
