"""Each kind of workload with its real controller running (tests/e2e/controllers.py: KubeRay,
Kubeflow's training-operator, JobSet, the MPI operator, built by hack/build-binaries) and
sluice gating it, on four fake nodes of cpu 8 whose pods KWOK runs.

Per kind, one workload of three pods of cpu 6 (a RayJob also has KubeRay's submitter pod):
held by the webhook at creation; admitted, and its controller's pods Running; an identical
second one held with its reason; a batch Job asking for exactly the cpu still free on the
nodes admitted beside it (the first's running pods, and whatever its controller injected in
them, counted once); the first deleted, the second admitted; the second reclaimed by a queue
owed its share, its pods deleted by its controller, and admitted again once the room is back;
for PyTorchJob and JobSet, completion through the controller frees the room.

The kinds' CRDs here are their releases' (their stand-ins in tests/e2e/crds are for
test_workload_kinds.py, which installs them after this module has removed these).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sluice.api.resources import describe_amount
from sluice.api.workloads import BY_KIND, Adapter
from sluice.api.workloads.model import at, dig

from . import controllers
from .components import Operator, sluice_system
from .helpers import Kubectl, KubectlError, controlplane, unique_name, wait_for

kwok = controlplane.kwok
NODES, NODE_CPU = 4, 8
POD_CPU = 6
QUEUE_LABEL = "sluice.dev/queue-name"
T = TypeVar("T")


@dataclass(frozen=True)
class Kind:
    """A kind of workload, its controller, and how this module writes one and finds its pods."""

    adapter: Adapter
    controller: controlplane.Controller
    # Its request in milli-cpu, and its pods once all run: three of cpu 6, plus (RayJob) the
    # submitter pod KubeRay runs with 500m.
    request: int
    pods: int

    @property
    def name(self) -> str:
        return str(self.adapter.kind)

    @property
    def resource(self) -> str:
        return f"{self.adapter.plural}.{self.adapter.group}"

    def body(self, name: str, queue: str, complete_after: str | None = None) -> dict[str, Any]:
        def pod(container: str, restart: str = "Never") -> dict[str, Any]:
            template = kwok.pod_template(
                {"cpu": str(POD_CPU)}, complete_after=complete_after, restart_policy=restart
            )
            template["spec"]["containers"][0]["name"] = container
            return dict(template)

        kind = self.adapter.kind
        if kind == "PyTorchJob":
            spec: dict[str, Any] = {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": pod("pytorch", "OnFailure")},
                    "Worker": {"replicas": 2, "template": pod("pytorch", "OnFailure")},
                }
            }
        elif kind == "MPIJob":
            spec = {
                "slotsPerWorker": 1,
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": pod("launcher", "OnFailure")},
                    "Worker": {"replicas": 2, "template": pod("worker", "OnFailure")},
                },
            }
        elif kind == "JobSet":

            def job() -> dict[str, Any]:
                return {"spec": {"parallelism": 1, "completions": 1, "template": pod("main")}}

            spec = {
                "replicatedJobs": [
                    {"name": "driver", "replicas": 1, "template": job()},
                    {"name": "workers", "replicas": 2, "template": job()},
                ]
            }
        else:
            assert kind == "RayJob"
            group = {
                "groupName": "workers",
                "replicas": 2,
                "minReplicas": 2,
                "maxReplicas": 2,
                "rayStartParams": {},
                "template": pod("ray-worker", "Always"),
            }
            spec = {
                "entrypoint": "python -c 'print(1)'",
                "submissionMode": "K8sJobMode",
                "shutdownAfterJobFinishes": True,
                "rayClusterSpec": {
                    "headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head", "Always")},
                    "workerGroupSpecs": [group],
                },
            }
        return {
            "apiVersion": self.adapter.api_version,
            "kind": kind,
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
            "spec": spec,
        }

    def pods_of(self, kubectl: Kubectl, namespace: str, name: str) -> list[dict[str, Any]]:
        """The pods its controller made for it (terminating ones included)."""

        def pods(selector: str) -> list[dict[str, Any]]:
            found = kubectl.json("get", "pods", "-n", namespace, "-l", selector)
            return list(found["items"])

        kind = self.adapter.kind
        if kind in ("PyTorchJob", "MPIJob"):
            return pods(f"training.kubeflow.org/job-name={name}")
        if kind == "JobSet":
            return pods(f"jobset.sigs.k8s.io/jobset-name={name}")
        # A RayJob's: its RayClusters' (KubeRay names a new one at each start), and its
        # submitter Job's, which KubeRay names after it.
        clusters = kubectl.json(
            "get", "rayclusters", "-n", namespace, "-l", f"ray.io/originated-from-cr-name={name}"
        )["items"]
        found = [p for c in clusters for p in pods(f"ray.io/cluster={c['metadata']['name']}")]
        submitter = [
            p
            for p in pods(f"batch.kubernetes.io/job-name={name}")
            if _owner(kubectl, namespace, p) == ("RayJob", name)
        ]
        return found + submitter


def _owner(kubectl: Kubectl, namespace: str, pod: dict[str, Any]) -> tuple[str, str] | None:
    """The kind and name of what owns the pod's controlling Job."""
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref["kind"] == "Job":
            job = kubectl.get("job", ref["name"], namespace)
            for owner in job["metadata"].get("ownerReferences") or []:
                if owner.get("controller"):
                    return str(owner["kind"]), str(owner["name"])
    return None


MILLI = 1000
KINDS = (
    Kind(BY_KIND["PyTorchJob"], controllers.TRAINING_OPERATOR, 3 * POD_CPU * MILLI, 3),
    Kind(BY_KIND["JobSet"], controllers.JOBSET, 3 * POD_CPU * MILLI, 3),
    Kind(BY_KIND["MPIJob"], controllers.MPI_OPERATOR, 3 * POD_CPU * MILLI, 3),
    Kind(BY_KIND["RayJob"], controllers.KUBERAY, 3 * POD_CPU * MILLI + 500, 4),
)
COMPLETES = ("PyTorchJob", "JobSet")


@dataclass
class System:
    operator: Operator
    controllers: dict[str, controllers.Running]
    workdir: Path
    """Where the operator's, the webhooks' and each controller's logs are."""


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[System]:
    workdir = tmp_path_factory.mktemp("real-controllers")
    crds: list[str] = []
    with contextlib.ExitStack() as stack:
        # Last out: the CRDs, once nothing serves or watches them any more.
        stack.callback(_remove_crds, kubectl, crds)
        running = {}
        for kind in KINDS:
            # The stand-ins of test_workload_kinds.py may still be going when it ran first.
            names = [f"crd/{kind.resource}"]
            kubectl.run("wait", "--for=delete", "--timeout=60s", *names, check=False)
            process = stack.enter_context(
                controllers.running(kind.controller, control_plane, kubectl, workdir)
            )
            running[kind.name] = process
            crds.extend(n for n in process.crds if n not in crds)
        operator = stack.enter_context(
            sluice_system(
                control_plane,
                kubectl,
                workdir,
                "e2e-real-controllers",
                workloads=[k.adapter for k in KINDS],
            )
        )
        yield System(operator, running, workdir)


def _remove_crds(kubectl: Kubectl, crds: list[str]) -> None:
    if crds:
        kubectl.run("delete", "--ignore-not-found", "--timeout=60s", *crds)


@dataclass
class Play:
    """One kind's workloads in one namespace, on this test's nodes, with the expectations that
    did not hold gathered rather than stopping the story at the first one."""

    kind: Kind
    kubectl: Kubectl
    namespace: str
    system: System
    prefix: str = field(default_factory=lambda: unique_name("rc"))
    failures: list[str] = field(default_factory=list)

    def queue(self, short: str, **spec: Any) -> str:
        name = f"{self.prefix}-{short}"
        self.kubectl.create(
            {
                "apiVersion": "scheduling.sluice.dev/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"parent": "root", **spec},
            }
        )
        return name

    def create(self, name: str, queue: str, complete_after: str | None = None) -> dict[str, Any]:
        body = self.kind.body(name, queue, complete_after)
        body["metadata"]["namespace"] = self.namespace
        created: dict[str, Any] = json.loads(self.kubectl.create(body, "-o", "json"))
        return created

    def get(self, name: str, resource: str | None = None) -> dict[str, Any]:
        return self.kubectl.get(resource or self.kind.resource, name, self.namespace)

    def held(self, name: str, resource: str | None = None) -> bool:
        if resource == "job":
            return bool(self.get(name, "job")["spec"].get("suspend"))
        return bool(dig(self.get(name), self.kind.adapter.hold.path))

    def annotation(self, name: str, key: str, resource: str | None = None) -> str | None:
        annotations = self.get(name, resource)["metadata"].get("annotations") or {}
        return annotations.get(f"sluice.dev/{key}")

    def pods(self, name: str) -> list[dict[str, Any]]:
        return self.kind.pods_of(self.kubectl, self.namespace, name)

    def describe(self, name: str) -> str:
        """Its status and its pods', for a failure message."""
        try:
            status = self.get(name).get("status")
        except KubectlError as error:
            status = str(error)
        pods = [
            (
                p["metadata"]["name"],
                p["status"].get("phase"),
                p["spec"].get("nodeName"),
                bool(p["metadata"].get("deletionTimestamp")),
            )
            for p in self.pods(name)
        ]
        return f"{self.kind.name} {name}: status {json.dumps(status)}; pods {pods}"

    def wait(self, probe: Callable[[], T | None], name: str, what: str, timeout: float = 30) -> T:
        """wait_for, and on a timeout say where the workload is."""
        try:
            return wait_for(probe, timeout=timeout, what=what)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.describe(name)}") from None

    def wait_running(self, name: str, count: int, timeout: float = 60) -> list[dict[str, Any]]:
        def running() -> list[dict[str, Any]] | None:
            pods = [p for p in self.pods(name) if not p["metadata"].get("deletionTimestamp")]
            ok = len(pods) == count and all(
                p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in pods
            )
            return pods if ok else None

        return self.wait(running, name, f"{count} pods of {name} Running", timeout)

    def wait_admitted(self, name: str, resource: str | None = None, timeout: float = 30) -> None:
        def admitted() -> bool:
            return not self.held(name, resource)

        try:
            wait_for(admitted, timeout=timeout, what=f"{name} admitted")
        except AssertionError as error:
            reason = self.annotation(name, "pending-reason", resource)
            raise AssertionError(f"{error}; its pending reason: {reason!r}") from None

    def wait_reason(self, name: str, expected: str) -> None:
        def reason() -> bool:
            return self.annotation(name, "pending-reason") == expected

        try:
            wait_for(reason, timeout=20, what=f"{name}'s reason")
        except AssertionError:
            got = self.annotation(name, "pending-reason")
            self.failures.append(f"{name}'s pending reason: expected {expected!r}, got {got!r}")

    def delete(self, name: str, resource: str | None = None) -> None:
        self.kubectl.delete(resource or self.kind.resource, name, self.namespace)

    def wait_no_pods(self, name: str) -> None:
        self.wait(lambda: not self.pods(name), name, f"{name}'s pods gone", timeout=60)

    def batch_job(self, name: str, queue: str, cpu_milli: int, pod_milli: int) -> None:
        """A plain Job of pods of `pod_milli` cpu, `cpu_milli` in all."""
        assert cpu_milli % pod_milli == 0, (cpu_milli, pod_milli)
        template = kwok.pod_template({"cpu": f"{pod_milli}m"})
        self.kubectl.create(
            kwok.job(
                name,
                template,
                namespace=self.namespace,
                queue=queue,
                pods=cpu_milli // pod_milli,
                suspend=True,
            )
        )

    def wait_job_pods_running(self, name: str, count: int) -> None:
        def running() -> bool:
            pods = self.kubectl.json(
                "get", "pods", "-n", self.namespace, "-l", f"batch.kubernetes.io/job-name={name}"
            )["items"]
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            return len(live) == count and all(p["status"].get("phase") == "Running" for p in live)

        wait_for(running, timeout=60, what=f"{count} pods of Job {name} Running")

    def finished(self, name: str) -> bool:
        return bool(self.kind.adapter.read_finished(self.get(name).get("status") or {}))


def _effective_milli_cpu(pod: dict[str, Any]) -> int:
    """What the scheduler holds for a pod on its node: the larger of its containers' sum and
    its largest init container (none of these pods has sidecars or overhead)."""

    def milli(container: dict[str, Any]) -> int:
        value = str((container.get("resources") or {}).get("requests", {}).get("cpu", "0"))
        return int(value[:-1]) if value.endswith("m") else int(float(value) * MILLI)

    spec = pod["spec"]
    main = sum(milli(c) for c in spec["containers"])
    init = max((milli(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def really_free_milli_cpu(kubectl: Kubectl, nodes: list[str]) -> int:
    """The cpu the scheduler could still place on these nodes: their allocatable less what
    the pods bound to them, and not finished, request."""
    total = 0
    for name in nodes:
        value = str(kubectl.get("node", name)["status"]["allocatable"]["cpu"])
        total += int(value) * MILLI
    pods = kubectl.json("get", "pods", "-A")["items"]
    used = sum(
        _effective_milli_cpu(p)
        for p in pods
        if p["spec"].get("nodeName") in nodes
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    )
    return total - used


@pytest.fixture
def nodes(kubectl: Kubectl) -> Iterator[list[str]]:
    """Four fake nodes of cpu 8: the only cpu of the cluster while the test runs (the test
    fails, rather than counts wrong, when another test left a node with cpu behind)."""
    prefix = unique_name("rc-node")
    names = [f"{prefix}-{i}" for i in range(NODES)]
    for name in names:
        kubectl.create(kwok.fake_node(name, {"cpu": str(NODE_CPU), "memory": "64Gi"}))

    def others_with_cpu() -> list[str]:
        listed = kubectl.json("get", "nodes")["items"]
        return [
            n["metadata"]["name"]
            for n in listed
            if n["metadata"]["name"] not in names
            and str(n["status"].get("allocatable", {}).get("cpu", "0")) not in ("0", "")
        ]

    wait_for(lambda: not others_with_cpu(), timeout=30, what="no other node with cpu")
    wait_for(
        lambda: all(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in kubectl.get("node", n)["status"].get("conditions") or []
            )
            for n in names
        ),
        timeout=30,
        what="the nodes Ready",
    )
    yield names
    kubectl.run("delete", "node", *names, "--ignore-not-found", "--wait=true")


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def play(
    request: pytest.FixtureRequest,
    system: System,
    kubectl: Kubectl,
    nodes: list[str],
    namespace: str,
) -> Iterator[Play]:
    kind: Kind = request.param
    play = Play(kind, kubectl, namespace, system)
    yield play
    # Its workloads and their pods gone before the next kind's test counts the cluster's room
    # (quicker than waiting for the namespace, which goes after).
    kubectl.run(
        "delete",
        f"{kind.resource},jobs",
        "--all",
        "-n",
        namespace,
        "--cascade=foreground",
        "--timeout=90s",
    )
    process = system.controllers[kind.name]
    assert process.alive(), f"{kind.controller.name} died:\n{process.logs()[-3000:]}"


def test_gated_admitted_run_reclaimed_and_readmitted(play: Play, nodes: list[str]) -> None:
    kind, ns = play.kind, play.namespace
    cpu = describe_amount
    low = play.queue("low", priority=1)
    high = play.queue("high", priority=10)
    fill = play.queue("fill", priority=1)
    capacity = NODES * NODE_CPU * MILLI

    # Held at creation, admitted, run by its controller.
    first = play.create("first", low)
    assert dig(first, kind.adapter.hold.path) is True, "held by the webhook on create"
    play.wait_admitted("first")
    assert play.annotation("first", "admitted-at")
    play.wait_running("first", kind.pods)

    # An identical second one waits for room, and says so.
    play.create("second", low)
    free = capacity - kind.request
    play.wait_reason(
        "second",
        f"position 1 in {low}; cluster has {cpu('cpu', free)} free,"
        f" job requests {cpu('cpu', kind.request)}",
    )
    assert play.held("second")

    # A Job asking for exactly the cpu still free on the nodes fits beside the first: its
    # running pods (and whatever their controller injected in them) count once.
    really_free = really_free_milli_cpu(play.kubectl, nodes)
    assert really_free == free, f"the nodes have {really_free}m cpu free, expected {free}m"
    play.batch_job("exact", fill, really_free, 500)
    try:
        play.wait_admitted("exact", "job", timeout=20)
        play.wait_job_pods_running("exact", really_free // 500)
    except AssertionError as error:
        play.failures.append(f"a Job of exactly the free cpu: {error}")
    play.delete("exact", "job")
    wait_for(
        lambda: (
            not play.kubectl.json(
                "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=exact"
            )["items"]
        ),
        timeout=60,
        what="the Job's pods gone",
    )
    assert play.held("second")

    # The first deleted: the second takes its room.
    play.delete("first")
    play.wait_admitted("second", timeout=60)
    play.wait_running("second", kind.pods)

    # A queue owed its share reclaims it: held again, its controller deletes its pods.
    urgent_cpu = capacity // 2
    play.batch_job("urgent", high, urgent_cpu, 2 * MILLI)
    play.wait_admitted("urgent", "job", timeout=30)
    assert play.held("second"), "second reclaimed"
    assert play.annotation("second", "reclaimed-by") == f"{ns}/urgent"
    play.wait_no_pods("second")
    play.wait_job_pods_running("urgent", urgent_cpu // (2 * MILLI))

    # Room back: readmitted, and run again.
    play.delete("urgent", "job")
    play.wait_admitted("second", timeout=60)
    play.wait_running("second", kind.pods)

    if kind.name in COMPLETES:
        # Completion through the controller gives the room back.
        play.delete("second")
        play.wait_no_pods("second")
        # Long enough for the background pass (every fullPassSeconds, 5 s) to write the
        # waiting job's reason while "done" still runs.
        play.create("done", low, complete_after="15s")
        play.wait_admitted("done")
        play.create("after", low)
        wait_for(lambda: play.annotation("after", "pending-reason"), what="after waiting")
        assert play.held("after")
        play.wait(lambda: play.finished("done"), "done", "done finished by its controller", 60)
        play.wait_admitted("after", timeout=30)
        play.wait_running("after", kind.pods)

    assert not play.failures, "\n".join([*play.failures, f"logs in {play.system.workdir}"])


def test_controllers_ran_with_their_release_crds(system: System, kubectl: Kubectl) -> None:
    """The CRDs served are the releases' (their schemas, not the stand-ins'), and every
    controller is still up after the plays."""
    for kind in KINDS:
        crd = kubectl.get("crd", kind.resource)
        schema = crd["spec"]["versions"]
        served = [v for v in schema if v["name"] == kind.adapter.version]
        assert served and served[0]["served"], kind.name
        properties = served[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert "properties" in properties and len(properties["properties"]) > 2, kind.name
        process = system.controllers[kind.name]
        assert process.alive(), f"{kind.controller.name} died:\n{process.logs()[-3000:]}"


CONFINED = {"PyTorchJob": "Worker", "MPIJob": "Worker", "JobSet": "workers", "RayJob": "workers"}
"""Each kind's pod set of two pods of cpu 6, which needs a whole rack of two nodes of cpu 8."""


def test_pod_sets_that_ask_a_rack_each_run_in_one_and_get_their_templates_back(
    play: Play, nodes: list[str]
) -> None:
    """The controller takes the nodeSelector sluice writes in a suspended workload's pod
    templates: the two pods of one pod set run in one rack, the other pod sets' in the other,
    each pod carrying its rack's label; reclaimed, the templates are exactly as they were
    before admission. (A RayJob's submitter has no template: it goes anywhere.)"""
    kind, kubectl = play.kind, play.kubectl
    rack = f"{play.prefix}.e2e.sluice.dev/rack"
    rack_of = {node: f"r{i // 2}" for i, node in enumerate(nodes)}
    for node, value in rack_of.items():
        kubectl.run("label", "node", node, f"{rack}={value}")
    kubectl.create(
        {
            "apiVersion": "scheduling.sluice.dev/v1beta1",
            "kind": "Topology",
            "metadata": {"name": play.prefix},
            "spec": {"levels": [{"nodeLabel": rack}]},
        }
    )
    try:
        low, high = play.queue("low", priority=1), play.queue("high", priority=10)
        body = kind.body("train", low)
        body["metadata"]["namespace"] = play.namespace
        if kind.name == "MPIJob":
            # sluice gives its Launcher no domain (its Job is made at creation:
            # Adapter.made_at_creation), so it says its rack itself.
            launcher = body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
            launcher["nodeSelector"] = {rack: "r1"}
        templates = kind.adapter.domain_templates(body)
        for _, path in templates:
            meta = at(body, path).setdefault("metadata", {})
            meta.setdefault("annotations", {})["sluice.dev/topology-required"] = rack
        # The webhook refuses a label that is no level, on any pod template.
        wrong = json.loads(json.dumps(body))
        meta = at(wrong, templates[0][1])["metadata"]
        meta["annotations"]["sluice.dev/topology-required"] = f"{play.prefix}.e2e.sluice.dev/row"
        with pytest.raises(KubectlError, match="is no level of any Topology"):
            kubectl.create(wrong)
        created = json.loads(kubectl.create(body, "-o", "json"))
        before = {name: at(created, path) for name, path in templates}
        play.wait_admitted("train")
        # The two pods of the confined set need a whole rack: they choose first, r0.
        expected = {name: "r0" if name == CONFINED[kind.name] else "r1" for name, _ in templates}
        assert play.annotation("train", "topology-assignment") == ", ".join(
            f"{name}: {rack}={value}" for name, value in expected.items()
        )
        pods = play.wait_running("train", kind.pods)
        for pod_set in kind.adapter.pod_sets(created):
            if pod_set.name not in expected or pod_set.pods_by is None:
                continue
            label, value = pod_set.pods_by
            mine = [p for p in pods if p["metadata"]["labels"].get(label) == value]
            assert len(mine) == pod_set.count, (pod_set.name, [p["metadata"]["name"] for p in pods])
            for pod in mine:
                got = (pod["spec"].get("nodeSelector") or {}).get(rack)
                assert got == expected[pod_set.name], (pod["metadata"]["name"], pod["spec"])
                node = kubectl.get("node", pod["spec"]["nodeName"])
                assert node["metadata"]["labels"][rack] == expected[pod_set.name], pod_set.name

        # Reclaimed for a queue owed its share: held again, its templates given back.
        play.batch_job("urgent", high, NODES * NODE_CPU * MILLI // 2, 2 * MILLI)
        play.wait_admitted("urgent", "job", timeout=30)
        assert play.held("train"), "train reclaimed"
        play.wait(
            lambda: play.annotation("train", "topology-assignment") is None,
            "train",
            "train's templates given back",
        )
        after = play.get("train")
        for name, path in templates:
            assert at(after, path) == before[name], name
        play.wait_no_pods("train")
    finally:
        kubectl.run("delete", "topology", play.prefix, "--ignore-not-found")
