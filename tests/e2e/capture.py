"""Capture what the real workload controllers make, for the unit tests of sluice's adapters:
one small workload of each kind on a fresh living cluster, no sluice running (nothing holds
them), its controller run as in the e2e tests (tests/e2e/controllers.py), its pods Running on
KWOK's fake nodes; then the objects exactly as the API server returns them, less their
managedFields, written to tests/unit/api/workloads/real/<kind>.json.

    .venv/bin/python -m tests.e2e.capture [rayjob|pytorchjob|jobset|mpijob ...]

Needs hack/build-binaries done. Each workload names a queue (the label sluice reads) so the
files show where the controllers carry it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import controllers
from .helpers import REPO, Kubectl, controlplane, wait_for

OUT = REPO / "tests/unit/api/workloads/real"
kwok = controlplane.kwok
QUEUE = {"sluice.dev/queue-name": "team-a"}
NAMESPACE = "capture"


def _container(name: str, image: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory},
        },
    }


def _pod(container: dict[str, Any], restart: str = "Never") -> dict[str, Any]:
    return {"spec": {"restartPolicy": restart, "containers": [container]}}


def rayjob() -> dict[str, Any]:
    image = "rayproject/ray:2.46.0"
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "ray-capture", "namespace": NAMESPACE, "labels": QUEUE},
        "spec": {
            "entrypoint": "python -c 'import ray; ray.init(); print(ray.cluster_resources())'",
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "rayVersion": "2.46.0",
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": _pod(_container("ray-head", image, "1", "2Gi"), "Always"),
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "workers",
                        "replicas": 2,
                        "minReplicas": 2,
                        "maxReplicas": 2,
                        "rayStartParams": {},
                        "template": _pod(_container("ray-worker", image, "1", "1Gi"), "Always"),
                    }
                ],
            },
        },
    }


def pytorchjob() -> dict[str, Any]:
    image = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"
    replica = {
        "restartPolicy": "OnFailure",
        "template": _pod(_container("pytorch", image, "1", "1Gi"), "OnFailure"),
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "torch-capture", "namespace": NAMESPACE, "labels": QUEUE},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, **replica},
                "Worker": {"replicas": 2, **replica},
            }
        },
    }


def jobset() -> dict[str, Any]:
    def job(parallelism: int) -> dict[str, Any]:
        pod = _pod(_container("main", kwok.IMAGE, "1", "1Gi"))
        return {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "backoffLimit": 0,
                "template": pod,
            }
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js-capture", "namespace": NAMESPACE, "labels": QUEUE},
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": job(1)},
                {"name": "workers", "replicas": 2, "template": job(1)},
            ]
        },
    }


def mpijob() -> dict[str, Any]:
    image = "mpioperator/mpi-pi:openmpi"
    launcher = _container("launcher", image, "500m", "512Mi")
    launcher["command"] = ["mpirun", "-n", "2", "/home/mpiuser/pi"]
    worker = _container("worker", image, "1", "1Gi")
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "mpi-capture", "namespace": NAMESPACE, "labels": QUEUE},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _pod(launcher, "OnFailure")},
                "Worker": {"replicas": 2, "template": _pod(worker, "OnFailure")},
            },
        },
    }


def _running(kubectl: Kubectl, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = kubectl.json("get", "pods", "-n", NAMESPACE, "-l", selector)["items"]
    ok = len(pods) >= count and all(p["status"].get("phase") == "Running" for p in pods)
    return pods if ok else None


def _get(kubectl: Kubectl, resource: str, name: str) -> dict[str, Any]:
    return controllers.strip(kubectl.get(resource, name, NAMESPACE))


def capture_rayjob(kubectl: Kubectl) -> dict[str, Any]:
    kubectl.create(rayjob())
    cluster = wait_for(
        lambda: (
            kubectl.get("rayjob", "ray-capture", NAMESPACE).get("status", {}).get("rayClusterName")
        ),
        timeout=60,
        what="the RayCluster's name",
    )
    selector = f"ray.io/cluster={cluster}"
    pods = wait_for(lambda: _running(kubectl, selector, 3), timeout=90, what="3 Ray pods")
    jobs = wait_for(
        lambda: kubectl.json("get", "jobs", "-n", NAMESPACE)["items"],
        timeout=90,
        what="the submitter Job",
    )
    job = jobs[0]["metadata"]["name"]
    submitter = wait_for(
        lambda: _running(kubectl, f"batch.kubernetes.io/job-name={job}", 1),
        timeout=60,
        what="the submitter's pod",
    )
    head = next(p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head")
    worker = next(p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker")
    return {
        "rayjob": _get(kubectl, "rayjob", "ray-capture"),
        "raycluster": _get(kubectl, "raycluster", cluster),
        "head_pod": _get(kubectl, "pod", head["metadata"]["name"]),
        "worker_pod": _get(kubectl, "pod", worker["metadata"]["name"]),
        "submitter_job": _get(kubectl, "job", job),
        "submitter_pod": _get(kubectl, "pod", submitter[0]["metadata"]["name"]),
    }


def capture_pytorchjob(kubectl: Kubectl) -> dict[str, Any]:
    kubectl.create(pytorchjob())
    selector = "training.kubeflow.org/job-name=torch-capture"
    pods = wait_for(lambda: _running(kubectl, selector, 3), timeout=90, what="3 PyTorch pods")
    role = "training.kubeflow.org/replica-type"
    master = next(p for p in pods if p["metadata"]["labels"].get(role) == "master")
    worker = next(p for p in pods if p["metadata"]["labels"].get(role) == "worker")
    time.sleep(2)  # the controller's status update after its pods run
    return {
        "pytorchjob": _get(kubectl, "pytorchjob", "torch-capture"),
        "master_pod": _get(kubectl, "pod", master["metadata"]["name"]),
        "worker_pod": _get(kubectl, "pod", worker["metadata"]["name"]),
    }


def capture_jobset(kubectl: Kubectl) -> dict[str, Any]:
    kubectl.create(jobset())
    selector = "jobset.sigs.k8s.io/jobset-name=js-capture"
    pods = wait_for(lambda: _running(kubectl, selector, 3), timeout=90, what="3 JobSet pods")
    jobs = kubectl.json("get", "jobs", "-n", NAMESPACE, "-l", selector)["items"]
    job = next(j for j in jobs if "workers" in j["metadata"]["name"])
    pod = next(p for p in pods if "workers" in p["metadata"]["name"])
    time.sleep(2)
    return {
        "jobset": _get(kubectl, "jobset", "js-capture"),
        "job": _get(kubectl, "job", job["metadata"]["name"]),
        "pod": _get(kubectl, "pod", pod["metadata"]["name"]),
    }


def capture_mpijob(kubectl: Kubectl) -> dict[str, Any]:
    kubectl.create(mpijob())
    selector = "training.kubeflow.org/job-name=mpi-capture"
    pods = wait_for(lambda: _running(kubectl, selector, 3), timeout=90, what="3 MPI pods")
    role = "training.kubeflow.org/job-role"
    launcher = next(p for p in pods if p["metadata"]["labels"].get(role) == "launcher")
    worker = next(p for p in pods if p["metadata"]["labels"].get(role) == "worker")
    time.sleep(2)
    return {
        "mpijob": _get(kubectl, "mpijob", "mpi-capture"),
        "launcher_pod": _get(kubectl, "pod", launcher["metadata"]["name"]),
        "worker_pod": _get(kubectl, "pod", worker["metadata"]["name"]),
    }


CAPTURES: dict[str, tuple[controlplane.Controller, Callable[[Kubectl], dict[str, Any]]]] = {
    "rayjob": (controllers.KUBERAY, capture_rayjob),
    "pytorchjob": (controllers.TRAINING_OPERATOR, capture_pytorchjob),
    "jobset": (controllers.JOBSET, capture_jobset),
    "mpijob": (controllers.MPI_OPERATOR, capture_mpijob),
}


def main(kinds: list[str]) -> int:
    unknown = [k for k in kinds if k not in CAPTURES]
    if unknown:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sluice-capture-") as tmp:
        state = Path(tmp)
        plane = controlplane.ControlPlane(state, tie_to_parent=True, data_root=state)
        cluster = plane.up()
        try:
            kubectl = Kubectl(cluster.kubectl, cluster.kubeconfig)
            for i in range(4):
                node = kwok.fake_node(f"node-{i}", {"cpu": "8", "memory": "32Gi"})
                kubectl.create(node)
            kubectl.run("create", "namespace", NAMESPACE)
            for kind in kinds or list(CAPTURES):
                controller, capture = CAPTURES[kind]
                with controllers.running(controller, cluster, kubectl, state) as running:
                    try:
                        objects = capture(kubectl)
                    except AssertionError:
                        print(running.logs()[-6000:], file=sys.stderr)
                        raise
                OUT.mkdir(parents=True, exist_ok=True)
                path = OUT / f"{kind}.json"
                path.write_text(json.dumps(objects, indent=2, sort_keys=True) + "\n")
                print(f"wrote {path.relative_to(REPO)} ({', '.join(objects)})")
        finally:
            plane.down()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
