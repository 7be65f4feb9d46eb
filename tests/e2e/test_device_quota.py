"""Devices asked through DRA claims count against the queues, on the living cluster
(docs/scheduler.md, *Devices (DRA)*): kube-scheduler allocates them from the ResourceSlices of
the test driver (tests/e2e/devices.py), the controller manager's resourceclaim controller makes
each pod's claims from its templates and deletes them once the pod is gone, and sluice's
operator and webhooks hold, admit and reclaim by what the claims ask and hold. A JobSet and a
PyTorchJob run under their real controllers.

Each test has a driver and a DeviceClass of its own, so that its class selects only its own
nodes' devices, and the scheduler configuration's `deviceClassMappings` maps that class to
`example.com/gpu`, the quota resource its queues cap.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.workloads import BY_KIND, Adapter
from sluice.api.workloads.model import dig

from . import controllers, devices
from .components import Operator, sluice_system
from .helpers import Kubectl, controlplane, set_scheduler_config, unique_name, wait_for
from .scenario import Scenario, kwok

GPU = "example.com/gpu"
HALF = "example.com/half-gpu"
KINDS: tuple[Adapter, ...] = (BY_KIND["JobSet"], BY_KIND["PyTorchJob"])
CONTROLLERS = (controllers.JOBSET, controllers.TRAINING_OPERATOR)


@dataclass
class System:
    operator: Operator
    workdir: Path
    """Where the operator's, the webhooks' and each controller's logs are."""


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[System]:
    """The JobSet controller and the training-operator with their releases' CRDs, then
    sluice's operator and webhooks gating Jobs, JobSets and PyTorchJobs."""
    workdir = tmp_path_factory.mktemp("device-quota")
    crds: list[str] = []
    with contextlib.ExitStack() as stack:
        # Last out: the CRDs, once nothing serves or watches them any more.
        stack.callback(
            lambda: crds and kubectl.run("delete", "--ignore-not-found", "--timeout=60s", *crds)
        )
        for adapter in KINDS:
            # The stand-ins of test_workload_kinds.py may still be going when it ran first.
            crd = f"crd/{adapter.plural}.{adapter.group}"
            kubectl.run("wait", "--for=delete", "--timeout=60s", crd, check=False)
        for controller in CONTROLLERS:
            running = stack.enter_context(
                controllers.running(controller, control_plane, kubectl, workdir)
            )
            crds.extend(running.crds)
        operator = stack.enter_context(
            sluice_system(control_plane, kubectl, workdir, "e2e-device-quota", workloads=KINDS)
        )
        yield System(operator, workdir)


class Gpus:
    """One test's devices: its driver and DeviceClass, its nodes each with a ResourceSlice of
    8 devices, and its jobs' claims. Queues and jobs are the Scenario's."""

    def __init__(self, s: Scenario, operator: Operator) -> None:
        self.s = s
        self.kubectl = s.kubectl
        self.operator = operator
        tag = unique_name("gpu")
        self.driver = f"{tag}.example.com"
        self.device_class = tag
        self.classes = [tag]
        self.slices: list[str] = []
        self.nodes: list[str] = []
        self.kubectl.create(devices.device_class(tag, driver=self.driver))

    def map(self, mappings: dict[str, list[str]] | None = None) -> None:
        """The scheduler configuration's deviceClassMappings (by default: this test's class
        counts as GPU), in use once the operator has loaded it."""
        loaded = self.operator.logs().count("event=config-loaded")
        entries = mappings or {GPU: [self.device_class]}
        text = yaml.safe_dump(
            {
                "deviceClassMappings": [
                    {"name": k, "deviceClassNames": v} for k, v in entries.items()
                ]
            }
        )
        set_scheduler_config(self.kubectl, text)
        wait_for(
            lambda: self.operator.logs().count("event=config-loaded") > loaded,
            what="the deviceClassMappings in use",
        )

    def another_class(self, short: str, **extra: Any) -> tuple[str, str]:
        """A second class of this test, of a driver of its own: (class, driver)."""
        name, driver = f"{self.device_class}-{short}", f"{short}.{self.driver}"
        self.kubectl.create(devices.device_class(name, driver=driver, **extra))
        self.classes.append(name)
        return name, driver

    def node(self, *, publish: bool = True) -> str:
        """A fake node with its devices (8, published at once unless told not to), and cpu
        and memory for what a controller adds to its pods (the training-operator's init
        container). Deleted after the test, so that no later test meets its cpu."""
        name = self.s.name(f"node-{len(self.nodes)}")
        self.kubectl.create(kwok.fake_node(name, {"cpu": "8", "memory": "32Gi"}))
        self.nodes.append(name)
        if publish:
            self.publish(name)
        return name

    def publish(self, node: str, driver: str = "") -> None:
        slice_ = devices.resource_slice(node, driver=driver or self.driver)
        self.kubectl.create(slice_)
        self.slices.append(slice_["metadata"]["name"])

    def template(self, name: str, count: int, spec: dict[str, Any] | None = None) -> str:
        ns = self.s.namespace
        self.kubectl.create(devices.claim_template(name, ns, self.device_class, count, spec=spec))
        return name

    def claim(self, name: str, count: int) -> str:
        self.kubectl.create(
            devices.resource_claim(name, self.s.namespace, self.device_class, count)
        )
        return name

    def pod(
        self, *, template: str = "", claim: str = "", requests: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A pod template asking devices through a claim template or a named claim (and
        its container `requests`)."""
        asked = dict(requests or {})
        pod = kwok.pod_template(asked)
        if template:
            return devices.with_claim_template(pod, template)
        if claim:
            return devices.with_claim(pod, claim)
        return pod

    def job(self, short: str, queue: str, pod: dict[str, Any], *, pods: int = 1) -> str:
        """A Job of `pods` pods at once, completions as many, created suspended."""
        s = self.s
        manifest = kwok.job(
            short, pod, namespace=s.namespace, queue=s.name(queue), pods=pods, suspend=True
        )
        self.kubectl.create(manifest)
        return short

    def claims_of(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The claims these pods use, as their status names them (a claim shared by several
        pods once)."""
        names: list[str] = []
        for pod in pods:
            fresh = self.kubectl.get("pod", pod["metadata"]["name"], self.s.namespace)
            status = fresh.get("status", {})
            # kube-scheduler's own claim for an extended resource a class serves goes last.
            made = [*(status.get("resourceClaimStatuses") or [])]
            made.append(status.get("extendedResourceClaimStatus") or {})
            for entry in made:
                if entry.get("resourceClaimName") and entry["resourceClaimName"] not in names:
                    names.append(entry["resourceClaimName"])
        for pod in pods:
            for claim in pod["spec"].get("resourceClaims") or []:
                if claim.get("resourceClaimName") and claim["resourceClaimName"] not in names:
                    names.append(claim["resourceClaimName"])
        return [self.kubectl.get("resourceclaim", n, self.s.namespace) for n in names]

    def wait_allocated(self, pods: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
        """`count` claims of these pods, each allocated by kube-scheduler."""

        def allocated() -> list[dict[str, Any]] | None:
            claims = self.claims_of(pods)
            ok = len(claims) == count and all(devices.allocated_devices(c) for c in claims)
            return claims if ok else None

        return wait_for(allocated, what=f"{count} claim(s) allocated")

    def claim_exists(self, name: str) -> bool:
        found = self.kubectl.run(
            "get", "resourceclaim", name, "-n", self.s.namespace, "--ignore-not-found", "-o", "name"
        )
        return bool(found.strip())

    def wait_queue(self, short: str, allocated: dict[str, str]) -> dict[str, Any]:
        """The queue's status once its `allocated` is exactly this."""

        def status() -> dict[str, Any] | None:
            st = self.s.queue_status(short)
            return st if (st.get("allocated") or {}) == allocated else None

        try:
            return wait_for(status, what=f"{short} allocated {allocated}")
        except AssertionError as error:
            got = self.s.queue_status(short).get("allocated")
            raise AssertionError(f"{error}; its allocated: {got}") from None

    def wait_reason(self, job: str) -> str:
        reason = wait_for(lambda: self.s.annotation(job, "pending-reason"), what=f"{job}'s reason")
        assert not self.s.admitted(job) and not self.s.pods(job), job
        return reason

    def cleanup(self) -> None:
        for name in self.slices:
            self.kubectl.delete("resourceslice", name)
        for name in self.classes:
            self.kubectl.delete("deviceclass", name)
        for name in self.nodes:
            self.kubectl.delete("node", name)
        self.kubectl.run(
            "delete", "configmap", "sluice-scheduler", "-n", "sluice-system", check=False
        )


@pytest.fixture
def g(system: System, kubectl: Kubectl, namespace: str) -> Iterator[Gpus]:
    gpus = Gpus(Scenario(kubectl, namespace), system.operator)
    try:
        yield gpus
    finally:
        gpus.cleanup()


def through(g: Gpus, *classes: str) -> str:
    """What a reason adds after a device resource's numbers."""
    return f" (devices of {', '.join(classes or (g.device_class,))} asked through claims)"


def test_devices_asked_through_claims_count_against_the_cap_with_the_reason(
    g: Gpus, kubectl: Kubectl
) -> None:
    s = g.s
    g.map()
    g.node()
    team = s.queue("team", capability={GPU: "2"})
    g.template("one", 1)
    g.job("fits", "team", g.pod(template="one"), pods=2)
    s.wait_admitted("fits")
    claims = g.wait_allocated(s.wait_pods_running("fits", 2), 2)
    assert [len(devices.allocated_devices(c)) for c in claims] == [1, 1]

    g.job("more", "team", g.pod(template="one"))
    reason = g.wait_reason("more")
    assert reason == f"position 1 in {team}; {team} would use {GPU} 3 > capability 2" + through(g)
    g.wait_queue("team", {GPU: "2"})
    table = kubectl.run("get", "sq", team, "-o", "wide")
    assert f'"{GPU}":"2"' in table, table


def test_a_gang_of_whole_nodes_of_devices_waits_until_a_second_node_has_them_all_free(
    g: Gpus,
) -> None:
    s = g.s
    g.map()
    whole, half_a, half_b = g.node(), g.node(), g.node()
    g.template("four", 4)
    s.queue("other")
    for i, node in enumerate((half_a, half_b)):
        pinned = g.pod(template="four")
        pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        g.job(f"half-{i}", "other", pinned)
    s.wait_admitted("half-0", "half-1")
    for i in range(2):
        g.wait_allocated(s.wait_pods_running(f"half-{i}", 1), 1)

    # 16 devices free in all, but 8 on one node only: one pod of 8 fits, not two.
    team = s.queue("team")
    g.template("eight", 8)
    g.job("gang", "team", g.pod(template="eight"), pods=2)
    reason = g.wait_reason("gang")
    assert reason == (
        f"position 1 in {team}; only 1 of its 2 pods of {GPU} 8 fit on the nodes at once"
        f" ({whole} 1)"
    )
    fourth = g.node()
    s.wait_admitted("gang", timeout=30)
    pods = s.wait_pods_running("gang", 2)
    assert {p["spec"]["nodeName"] for p in pods} == {whole, fourth}
    assert [len(devices.allocated_devices(c)) for c in g.wait_allocated(pods, 2)] == [8, 8]


def test_reclaim_evicts_the_borrower_and_its_claims_go_before_the_owed_job_runs(g: Gpus) -> None:
    s = g.s
    g.map()
    g.node()
    g.node()
    s.queue("lender", deserved={GPU: "8"})
    s.queue("owed", deserved={GPU: "8"})
    g.template("eight", 8)
    g.job("hog", "lender", g.pod(template="eight"), pods=2)
    s.wait_admitted("hog")
    held = [c["metadata"]["name"] for c in g.wait_allocated(s.wait_pods_running("hog", 2), 2)]
    g.wait_queue("lender", {GPU: "16"})

    g.job("urgent", "owed", g.pod(template="eight"))
    s.wait_admitted("urgent", timeout=30)
    assert not s.admitted("hog")
    assert s.annotation("hog", "reclaimed-by") == f"{s.namespace}/urgent"
    s.wait_no_pods("hog")
    wait_for(lambda: not any(g.claim_exists(n) for n in held), what=f"hog's claims {held} gone")
    [claim] = g.wait_allocated(s.wait_pods_running("urgent", 1), 1)
    assert len(devices.allocated_devices(claim)) == 8
    g.wait_queue("owed", {GPU: "8"})
    assert not s.admitted("hog")  # 16 devices: only 8 are free


def test_a_claim_shared_by_the_pods_of_a_job_counts_once(g: Gpus) -> None:
    s = g.s
    g.map()
    g.node()
    team = s.queue("team", capability={GPU: "2"})
    g.claim("shared", 2)
    g.job("pair", "team", g.pod(claim="shared"), pods=2)
    s.wait_admitted("pair")
    pods = s.wait_pods_running("pair", 2)
    [claim] = g.wait_allocated(pods, 1)
    assert claim["metadata"]["name"] == "shared"
    assert len(devices.allocated_devices(claim)) == 2
    users = sorted(r["name"] for r in claim["status"]["reservedFor"])
    assert users == sorted(p["metadata"]["name"] for p in pods)
    g.wait_queue("team", {GPU: "2"})

    g.template("one", 1)
    g.job("third", "team", g.pod(template="one"))
    reason = g.wait_reason("third")
    assert reason == f"position 1 in {team}; {team} would use {GPU} 3 > capability 2" + through(g)


def test_first_available_counts_the_largest_alternative_then_what_was_given(g: Gpus) -> None:
    s = g.s
    half, half_driver = g.another_class("half")
    g.map({GPU: [g.device_class], HALF: [half]})
    node = g.node()
    g.publish(node, half_driver)

    # Two devices are the first alternative, and kube-scheduler would give them; four are
    # the largest, and count.
    narrow = s.queue("narrow", capability={GPU: "3"})
    either = devices.first_available_spec([("two", g.device_class, 2), ("four", g.device_class, 4)])
    g.template("two-or-four", 0, either)
    g.job("wide", "narrow", g.pod(template="two-or-four"))
    reason = g.wait_reason("wide")
    assert reason == f"position 1 in {narrow}; {narrow} would use {GPU} 4 > capability 3" + through(
        g
    )

    # Two whole devices or four halves: before allocation both count (the most of each
    # resource); kube-scheduler gives the first alternative, and from then on the claim counts
    # what it was given, in the queue of the job it was made for and in that of a job that
    # names it afterwards (a queue that caps halves at 0 admits that one).
    s.queue("team")
    whole_or_halves = devices.first_available_spec(
        [("whole", g.device_class, 2), ("halves", half, 4)]
    )
    g.kubectl.create(
        {
            "apiVersion": devices.API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": "either", "namespace": s.namespace},
            "spec": whole_or_halves,
        }
    )
    g.job("first", "team", g.pod(claim="either"))
    s.wait_admitted("first")
    [claim] = g.wait_allocated(s.wait_pods_running("first", 1), 1)
    results = devices.allocated_devices(claim)
    assert {r["request"] for r in results} == {"gpus/whole"} and len(results) == 2, results
    g.wait_queue("team", {GPU: "2"})
    s.queue("tight", capability={GPU: "2", HALF: "0"})
    g.job("second", "tight", g.pod(claim="either"))
    s.wait_admitted("second")
    s.wait_pods_running("second", 1)
    g.wait_queue("tight", {GPU: "2"})


def test_a_job_naming_a_claim_of_another_queues_job_counts_it_in_its_own_queue(g: Gpus) -> None:
    s = g.s
    g.map()
    g.node()
    s.queue("a")
    b = s.queue("b", capability={GPU: "0"})
    g.claim("theirs", 2)
    g.job("owner", "a", g.pod(claim="theirs"))
    s.wait_admitted("owner")
    g.wait_allocated(s.wait_pods_running("owner", 1), 1)
    g.job("borrower", "b", g.pod(claim="theirs"))
    reason = g.wait_reason("borrower")
    assert reason == f"position 1 in {b}; {b} would use {GPU} 2 > capability 0" + through(g)
    g.wait_queue("a", {GPU: "2"})


def test_a_claim_template_recreated_bigger_after_admission_counts_bigger(
    g: Gpus, kubectl: Kubectl
) -> None:
    s = g.s
    g.map()
    g.node()
    team = s.queue("team", capability={GPU: "4"})
    g.template("grow", 1)
    g.job("grow", "team", g.pod(template="grow"), pods=2)
    s.wait_admitted("grow")
    pods = s.wait_pods_running("grow", 2)
    g.wait_allocated(pods, 2)
    g.wait_queue("team", {GPU: "2"})

    # A template's spec is immutable; deleted and made again under its name, it is bigger
    # for every pod made from now on.
    kubectl.run("delete", "resourceclaimtemplate", "grow", "-n", s.namespace, "--wait=true")
    g.template("grow", 4)
    kubectl.run("delete", "pod", pods[0]["metadata"]["name"], "-n", s.namespace, "--wait=true")
    renewed = s.wait_pods_running("grow", 2)
    claims = g.wait_allocated(renewed, 2)
    assert sorted(len(devices.allocated_devices(c)) for c in claims) == [1, 4]
    # Its pods ask 4 devices each from now on: the pod set counts 2 x 4, more than the 1 + 4
    # its live claims hold.
    status = g.wait_queue("team", {GPU: "8"})
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    assert conditions["OverCapability"]["status"] == "True", status
    g.job("later", "team", g.pod(template="grow"))
    reason = g.wait_reason("later")
    assert f"queue {team} is over its capability in {GPU}" in reason, reason


def test_devices_asked_as_an_extended_resource_a_class_serves_count_and_are_placed(
    g: Gpus,
) -> None:
    s = g.s
    served = f"example.com/{g.device_class}"
    _, driver = g.another_class("served", extended_resource_name=served)
    node = g.node(publish=False)  # no allocatable of `served`: its room is in the slice
    g.publish(node, driver)
    team = s.queue("team", capability={served: "2"})
    g.job("fits", "team", g.pod(requests={served: "2"}))
    s.wait_admitted("fits")
    [pod] = s.wait_pods_running("fits", 1)
    assert pod["spec"]["nodeName"] == node
    # kube-scheduler satisfied it with devices of the class, through a claim it made.
    [claim] = g.wait_allocated([pod], 1)
    assert len(devices.allocated_devices(claim)) == 2

    g.job("more", "team", g.pod(requests={served: "1"}))
    reason = g.wait_reason("more")
    assert reason.startswith(f"position 1 in {team}; {team} would use {served} 3 > capability 2")
    g.wait_queue("team", {served: "2"})


def _workload(kind: Adapter, name: str, queue: str, pod: dict[str, Any]) -> dict[str, Any]:
    """A JobSet of two one-pod Jobs, or a PyTorchJob of a master and a worker: two pods of
    `pod` each way."""
    if kind.kind == "JobSet":
        job = {"spec": {"parallelism": 1, "completions": 1, "template": pod}}
        spec: dict[str, Any] = {
            "replicatedJobs": [{"name": "workers", "replicas": 2, "template": job}]
        }
    else:
        assert kind.kind == "PyTorchJob"
        replica = json.loads(json.dumps(pod))
        replica["spec"]["containers"][0]["name"] = "pytorch"
        replica["spec"]["restartPolicy"] = "OnFailure"
        spec = {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": replica},
                "Worker": {"replicas": 1, "template": replica},
            }
        }
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": name, "labels": {"sluice.dev/queue-name": queue}},
        "spec": spec,
    }


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_a_controllers_pods_asking_devices_through_a_template_are_counted_held_and_run(
    g: Gpus, kubectl: Kubectl, kind: Adapter
) -> None:
    s = g.s
    g.map()
    g.node()
    team = s.queue("team", capability={GPU: "4"})
    g.template("two", 2)
    resource = f"{kind.plural}.{kind.group}"

    def create(name: str) -> dict[str, Any]:
        body = _workload(kind, name, team, g.pod(template="two"))
        body["metadata"]["namespace"] = s.namespace
        created: dict[str, Any] = json.loads(kubectl.create(body, "-o", "json"))
        return created

    def held(name: str) -> bool:
        return bool(dig(kubectl.get(resource, name, s.namespace), kind.hold.path))

    def pods(name: str) -> list[dict[str, Any]]:
        label = kind.pod_label or "training.kubeflow.org/job-name"
        found = kubectl.json("get", "pods", "-n", s.namespace, "-l", f"{label}={name}")
        return [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]

    def running(name: str) -> list[dict[str, Any]] | None:
        live = pods(name)
        ok = len(live) == 2 and all(p["status"].get("phase") == "Running" for p in live)
        return live if ok else None

    assert dig(create("first"), kind.hold.path) is True, "held by the webhook on create"
    wait_for(lambda: not held("first"), what="first admitted")
    first = wait_for(lambda: running("first"), timeout=60, what="first's 2 pods Running")
    claims = g.wait_allocated(first, 2)
    assert [len(devices.allocated_devices(c)) for c in claims] == [2, 2]
    # The training-operator's init container, on its worker, counts as well.
    injected = {"cpu": "50m", "memory": "10Mi"} if kind.kind == "PyTorchJob" else {}
    g.wait_queue("team", {GPU: "4", **injected})

    create("second")
    reason = wait_for(
        lambda: (
            kubectl.get(resource, "second", s.namespace)["metadata"].get("annotations") or {}
        ).get("sluice.dev/pending-reason"),
        what="second's reason",
    )
    assert reason == f"position 1 in {team}; {team} would use {GPU} 8 > capability 4" + through(g)
    assert held("second") and not pods("second")

    kubectl.delete(resource, "first", s.namespace)
    wait_for(lambda: not held("second"), timeout=60, what="second admitted")
    second = wait_for(lambda: running("second"), timeout=60, what="second's 2 pods Running")
    g.wait_allocated(second, 2)
