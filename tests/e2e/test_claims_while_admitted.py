"""A RayJob, whose pod templates the RayJob CRD leaves mutable at any time (KubeRay runs here
without a webhook, as tests/e2e/controllers.py starts it), cannot change the DRA claims of its
templates while sluice has it admitted: its next pods would ask for devices its queue never
counted. Held, or in the write that suspends it, the change goes through; and a pod KubeRay
made cannot change its own claims either (the API server refuses any such pod update)."""

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
RAY_JOB = BY_KIND["RayJob"]
RESOURCE = f"{RAY_JOB.plural}.{RAY_JOB.group}"
WORKER_CLAIMS = "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec/resourceClaims"
CLAIMS = [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]


@pytest.fixture(scope="module")
def kuberay_and_sluice(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    workdir = tmp_path_factory.mktemp("claims-while-admitted")
    # test_workload_kinds.py's stand-in CRD may still be going when it ran first.
    kubectl.run("wait", "--for=delete", "--timeout=60s", f"crd/{RESOURCE}", check=False)
    with contextlib.ExitStack() as stack:
        crds: list[str] = []
        stack.callback(
            lambda: crds and kubectl.run("delete", "--ignore-not-found", "--timeout=60s", *crds)
        )
        ray = stack.enter_context(
            controllers.running(controllers.KUBERAY, control_plane, kubectl, workdir)
        )
        crds.extend(ray.crds)
        stack.enter_context(
            sluice_system(control_plane, kubectl, workdir, "e2e-claims", workloads=[RAY_JOB])
        )
        yield


@pytest.fixture
def node(kubectl: Kubectl, namespace: str, kuberay_and_sluice: None) -> Iterator[str]:
    """A fake node of cpu 8. After the test, the namespace's RayJobs go while KubeRay still
    runs to take its finalizers off them (a RayJob left behind would keep its CRD)."""
    name = unique_name("claims-node")
    kubectl.create(kwok.fake_node(name, {"cpu": "8", "memory": "64Gi"}))
    yield name
    kubectl.run("delete", RESOURCE, "--all", "-n", namespace, "--cascade=foreground",
                "--timeout=50s")  # fmt: skip
    kubectl.run("delete", "node", name, "--ignore-not-found", "--wait=false")


def queue(kubectl: Kubectl, cpu: str) -> str:
    name = unique_name("claims")
    kubectl.create(
        {
            "apiVersion": "scheduling.sluice.dev/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"parent": "root", "capability": {"cpu": cpu}},
        }
    )
    return name


def ray_job(kubectl: Kubectl, namespace: str, queue_name: str) -> str:
    """A RayJob of a head and one worker of cpu 1 each, in the queue."""

    def pod(container: str) -> dict[str, Any]:
        template = dict(kwok.pod_template({"cpu": "1"}, restart_policy="Always"))
        template["spec"]["containers"][0]["name"] = container
        return template

    name = unique_name("ray")
    group = {
        "groupName": "workers",
        "replicas": 1,
        "minReplicas": 1,
        "maxReplicas": 1,
        "rayStartParams": {},
        "template": pod("ray-worker"),
    }
    kubectl.create(
        {
            "apiVersion": RAY_JOB.api_version,
            "kind": "RayJob",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"sluice.dev/queue-name": queue_name},
            },
            "spec": {
                "entrypoint": "python -c 'print(1)'",
                "submissionMode": "K8sJobMode",
                "shutdownAfterJobFinishes": True,
                "rayClusterSpec": {
                    "headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head")},
                    "workerGroupSpecs": [group],
                },
            },
        }
    )
    return name


def suspended(kubectl: Kubectl, namespace: str, name: str) -> bool:
    return bool(kubectl.get(RESOURCE, name, namespace)["spec"].get("suspend"))


def patch(kubectl: Kubectl, namespace: str, name: str, *ops: dict[str, Any]) -> str:
    return kubectl.run(
        "patch", RESOURCE, name, "-n", namespace, "--type=json", "-p", json.dumps(list(ops))
    )


ADD_CLAIMS = {"op": "add", "path": WORKER_CLAIMS, "value": CLAIMS}


def test_an_admitted_rayjob_keeps_its_claims_and_a_held_one_may_change_them(
    kubectl: Kubectl, namespace: str, node: str
) -> None:
    roomy, tight = queue(kubectl, "8"), queue(kubectl, "1")
    admitted = ray_job(kubectl, namespace, roomy)
    held = ray_job(kubectl, namespace, tight)  # cpu 2 > capability 1: it stays held
    wait_for(lambda: not suspended(kubectl, namespace, admitted), timeout=30, what="admitted")

    with pytest.raises(KubectlError) as refused:
        patch(kubectl, namespace, admitted, ADD_CLAIMS)
    assert (
        f"rayjob {namespace}/{admitted}: the resourceClaims of pod set workers"
        " (spec.rayClusterSpec.workerGroupSpecs[0].template.spec.resourceClaims) cannot change"
        " while it is admitted"
    ) in str(refused.value)
    spec = kubectl.get(RESOURCE, admitted, namespace)["spec"]["rayClusterSpec"]
    assert "resourceClaims" not in spec["workerGroupSpecs"][0]["template"]["spec"]

    # The pods KubeRay made from the template: their claims are fixed by the API server.
    def worker() -> dict[str, Any] | None:
        pods = kubectl.json("get", "pods", "-n", namespace, "-l", "ray.io/group=workers")
        found = [p for p in pods["items"] if p["spec"].get("nodeName") == node]
        return found[0] if found else None

    pod = wait_for(worker, timeout=60, what="the admitted RayJob's worker pod on the node")
    with pytest.raises(KubectlError) as fixed:
        kubectl.run(
            "patch", "pod", pod["metadata"]["name"], "-n", namespace, "--type=json", "-p",
            json.dumps([{"op": "add", "path": "/spec/resourceClaims", "value": CLAIMS}]),
        )  # fmt: skip
    assert "pod updates may not change fields" in str(fixed.value)

    # Held, the claims may change; so may they in the write that suspends an admitted one.
    assert suspended(kubectl, namespace, held)
    patch(kubectl, namespace, held, ADD_CLAIMS)
    patch(kubectl, namespace, admitted, {"op": "replace", "path": "/spec/suspend", "value": True},
          ADD_CLAIMS)  # fmt: skip
    for name in (held, admitted):
        spec = kubectl.get(RESOURCE, name, namespace)["spec"]["rayClusterSpec"]
        assert spec["workerGroupSpecs"][0]["template"]["spec"]["resourceClaims"] == CLAIMS
