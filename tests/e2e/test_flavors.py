"""Flavors on the living cluster (docs/scheduler.md, *Flavors*).

The operator counts, in each Flavor's status, the Ready, schedulable KWOK nodes that carry
its labels (`kubectl get flavors` shows NODES), and says Matched=False for a Flavor none
carries; both follow the nodes as they are relabelled and cordoned. Jobs of a queue with
flavors are admitted into one: the operator writes the flavor's labels and tolerations into
their templates with the record `sluice.dev/flavor-assignment`, kube-scheduler binds their
pods to that flavor's nodes, a running Job keeps the flavor, and a Job suspended again gets
its templates back as submitted. A queue owed its part of a flavor reclaims there from a
queue borrowing it, and leaves that queue's workloads in other flavors alone. A JobSet (the
real JobSet controller) is given a flavor per pod set, and its child Jobs' pods run on each
flavor's nodes. A pod group's pods, and a replacement made for one of them, get their
flavor's labels and tolerations before their gate goes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from sluice.api.workloads import BY_KIND

from . import controllers
from .components import Operator, sluice_system
from .helpers import Kubectl, KubectlError, controlplane, unique_name, wait_for
from .scenario import Scenario

PER_NODE = 4  # of the test's resource


JOBSET = BY_KIND["JobSet"]


@pytest.fixture(scope="module")
def operator(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """The JobSet controller with its release's CRD, then sluice's operator and its webhooks
    (which keep an admitted workload's flavor) gating Jobs and JobSets."""
    workdir = tmp_path_factory.mktemp("flavors")
    crds: list[str] = []
    with contextlib.ExitStack() as stack:
        # Last out: the CRDs, once nothing serves or watches them any more.
        stack.callback(
            lambda: crds and kubectl.run("delete", "--ignore-not-found", "--timeout=60s", *crds)
        )
        # The stand-ins of test_workload_kinds.py may still be going when it ran first.
        crd = f"crd/{JOBSET.plural}.{JOBSET.group}"
        kubectl.run("wait", "--for=delete", "--timeout=60s", crd, check=False)
        running = stack.enter_context(
            controllers.running(controllers.JOBSET, control_plane, kubectl, workdir)
        )
        crds.extend(running.crds)
        yield stack.enter_context(
            sluice_system(control_plane, kubectl, workdir, "e2e-flavors", workloads=[JOBSET])
        )


def create_flavor(kubectl: Kubectl, name: str, labels: dict[str, str]) -> None:
    kubectl.create(
        {
            "apiVersion": "scheduling.sluice.dev/v1beta1",
            "kind": "Flavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": labels},
        }
    )


def status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    found = kubectl.get("flavor", name).get("status") or {}
    matched = [c for c in found.get("conditions") or () if c["type"] == "Matched"]
    return {"nodes": found.get("nodes"), "matched": matched[0] if matched else {}}


def test_a_flavor_counts_the_ready_schedulable_nodes_that_carry_its_labels(
    operator: Operator, kubectl: Kubectl, namespace: str
) -> None:
    s = Scenario(kubectl, namespace)
    tag = unique_name("f")
    model = f"{tag}.e2e.sluice.dev/model"
    h100 = [s.node(4, labels={model: "H100"}) for _ in range(3)]
    a100 = [s.node(4, labels={model: "A100"}) for _ in range(2)]
    s.node(4, labels={model: "H100"}, unschedulable=True)  # cordoned: no pod may go there
    names = {m: f"{tag}-{m}" for m in ("h100", "a100", "l4")}
    for short, name in names.items():
        create_flavor(kubectl, name, {model: short.upper()})
    try:

        def counted(short: str, nodes: int) -> dict[str, Any] | None:
            found = status(kubectl, names[short])
            return found if found["nodes"] == nodes and found["matched"] else None

        h = wait_for(lambda: counted("h100", 3), what="h100's status")
        assert (h["matched"]["status"], h["matched"]["reason"]) == ("True", "NodesMatch")
        assert wait_for(lambda: counted("a100", 2), what="a100's status")
        none = wait_for(lambda: counted("l4", 0), what="l4's status")["matched"]
        assert (none["status"], none["reason"]) == ("False", "NoNodes")
        assert none["message"] == f"no Ready, schedulable node carries its labels ({model}=L4)"
        table = kubectl.run("get", "flavor", names["h100"]).splitlines()
        column = table[0].index("NODES")  # kubectl aligns the columns; some may be empty
        assert table[1][column:].split()[0] == "3", table
        # An A100 node relabelled H100, then an H100 node cordoned: the counts follow.
        kubectl.run("label", "node", a100[0], f"{model}=H100", "--overwrite")
        wait_for(lambda: counted("h100", 4) and counted("a100", 1), what="the relabelled node")
        kubectl.run("cordon", h100[0])
        wait_for(lambda: counted("h100", 3), what="the cordoned node left out")
        kubectl.run("label", "node", a100[1], f"{model}=L4", "--overwrite")
        wait_for(lambda: counted("l4", 1), what="l4 to match a node")
        matched = status(kubectl, names["l4"])["matched"]
        assert (matched["status"], matched["reason"]) == ("True", "NodesMatch")
        found = wait_for(lambda: counted("a100", 0), what="a100 to match none")
        assert found["matched"]["status"] == "False"
    finally:
        for name in names.values():
            kubectl.delete("flavor", name)


def priority_class(kubectl: Kubectl, value: int) -> str:
    name = unique_name("flavor-pc")
    kubectl.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
    )
    return name


class Models:
    """A test's KWOK nodes of two GPU models, two of each: the H100 ones labelled only, the
    A100 pool labelled and tainted. Its Flavors h100 and a100 pick them."""

    def __init__(self, s: Scenario, kubectl: Kubectl) -> None:
        self.s = s
        tag = unique_name("f")
        self.model = f"{tag}.e2e.sluice.dev/model"
        self.taint = {"key": f"{tag}.e2e.sluice.dev/pool", "value": "a100", "effect": "NoSchedule"}
        self.h100_nodes = {s.node(PER_NODE, labels={self.model: "H100"}) for _ in range(2)}
        self.a100_nodes = {
            s.node(PER_NODE, labels={self.model: "A100"}, taints=[self.taint]) for _ in range(2)
        }
        self.h100, self.a100 = f"{tag}-h100", f"{tag}-a100"
        for name, labels, taints in (
            (self.h100, {self.model: "H100"}, []),
            (self.a100, {self.model: "A100"}, [self.taint]),
        ):
            kubectl.create(
                {
                    "apiVersion": "scheduling.sluice.dev/v1beta1",
                    "kind": "Flavor",
                    "metadata": {"name": name},
                    "spec": {"nodeLabels": labels, "nodeTaints": taints},
                }
            )
        self.kubectl = kubectl

    def delete(self) -> None:
        for name in (self.h100, self.a100):
            self.kubectl.delete("flavor", name)

    def entry(self, flavor: str, capability: int) -> dict[str, Any]:
        return {"name": flavor, "capability": {self.s.resource: str(capability)}}

    def nodes_of(self, job: str, count: int) -> set[str]:
        return {p["spec"]["nodeName"] for p in self.s.wait_pods_running(job, count)}

    def pod_spec(self, job: str) -> dict[str, Any]:
        return dict(self.s.get_job(job)["spec"]["template"]["spec"])

    def record(self, job: str) -> Any:
        text = self.s.annotation(job, "flavor-assignment")
        return json.loads(text) if text else None


@pytest.fixture
def models(operator: Operator, kubectl: Kubectl, namespace: str) -> Iterator[Models]:
    m = Models(Scenario(kubectl, namespace), kubectl)
    try:
        yield m
    finally:
        m.delete()


def test_a_job_pinned_to_h100_waits_in_a_queue_given_only_a100(models: Models) -> None:
    s = models.s
    s.queue("a100-only", flavors=[models.entry(models.a100, 8)])
    s.job("pinned", "a100-only", PER_NODE, node_selector={models.model: "H100"})
    reason = wait_for(lambda: s.annotation("pinned", "pending-reason"), what="its reason")
    assert not s.admitted("pinned")
    assert reason == (
        f"position 1 in {s.name('a100-only')}; pod set main selects none of queue "
        f"{s.name('a100-only')}'s flavors: flavor {models.a100} has {models.model}=A100, "
        f"its nodeSelector asks {models.model}=H100"
    )
    assert not s.pods("pinned")


def test_jobs_land_on_their_flavor_and_the_next_on_the_second_when_the_first_is_full(
    models: Models,
) -> None:
    s = models.s
    s.queue("team", flavors=[models.entry(models.h100, 8), models.entry(models.a100, 8)])
    s.job("first", "team", PER_NODE, pods=2)
    s.wait_admitted("first")
    spec = models.pod_spec("first")
    assert spec["nodeSelector"] == {models.model: "H100"}
    assert not spec.get("tolerations")
    assert models.record("first") == {
        "main": {
            "flavor": models.h100,
            "nodeSelector": {models.model: "H100"},
        }
    }
    assert models.nodes_of("first", 2) == models.h100_nodes
    # h100 holds 8 of the queue's 8 there: the next Job goes to a100, through its taint.
    s.job("second", "team", PER_NODE, pods=2)
    s.wait_admitted("second")
    toleration = {**models.taint, "operator": "Equal"}
    spec = models.pod_spec("second")
    assert spec["nodeSelector"] == {models.model: "A100"}
    assert spec["tolerations"] == [toleration]
    assert models.record("second") == {
        "main": {
            "flavor": models.a100,
            "nodeSelector": {models.model: "A100"},
            "tolerations": [toleration],
        }
    }
    assert models.nodes_of("second", 2) == models.a100_nodes
    # Both flavors full, and with them every node of the test: a third waits.
    s.job("third", "team", PER_NODE)
    reason = wait_for(lambda: s.annotation("third", "pending-reason"), what="third's reason")
    assert reason == (
        f"position 1 in {s.name('team')}; cluster has {s.resource} 0 free, "
        f"job requests {s.resource} {PER_NODE}"
    )
    assert not s.admitted("third")


def test_an_admitted_jobs_flavor_is_kept_and_taken_off_once_it_is_suspended(
    models: Models, kubectl: Kubectl
) -> None:
    s = models.s
    low, high = priority_class(kubectl, 10), priority_class(kubectl, 1000)
    s.queue("ranked", flavors=[models.entry(models.h100, 8)])
    own = {"kubernetes.io/os": "linux"}  # the tenant's own, kept through it all
    s.job("low", "ranked", PER_NODE, low, pods=2, node_selector=own)
    s.wait_admitted("low")
    assert models.pod_spec("low")["nodeSelector"] == {**own, models.model: "H100"}
    models.nodes_of("low", 2)
    # The flavor's label taken off while it runs: refused. A running Job's template is
    # immutable to the API server itself, which refuses before sluice's webhooks see it
    # (flavor-assignment-kept guards the kinds whose templates may change while they run).
    with pytest.raises(KubectlError, match=r"spec\.template: Invalid value.*field is immutable"):
        kubectl.run(
            "patch",
            "job",
            "low",
            "-n",
            s.namespace,
            "--type=json",
            "-p",
            json.dumps(
                [{"op": "replace", "path": "/spec/template/spec/nodeSelector", "value": own}]
            ),
        )
    assert models.pod_spec("low")["nodeSelector"] == {**own, models.model: "H100"}
    # A Job of higher priority waits for h100; once its owner suspends the first, the other
    # takes h100, and the first's template comes back as submitted while it waits.
    s.job("high", "ranked", PER_NODE, high, pods=2)
    wait_for(lambda: s.annotation("high", "pending-reason"), what="high's reason")
    kubectl.run("patch", "job", "low", "-n", s.namespace, "-p", '{"spec":{"suspend":true}}')
    s.wait_admitted("high")
    s.wait_suspended("low")
    s.wait_no_pods("low")
    wait_for(lambda: models.record("low") is None, what="low's record gone")
    restored = models.pod_spec("low")
    assert restored["nodeSelector"] == own
    assert "tolerations" not in restored
    assert models.nodes_of("high", 2) == models.h100_nodes


def created_job(s: Scenario, short: str, queue: str, pods: int, **template: Any) -> dict[str, Any]:
    """A suspended Job of ``pods`` pods of PER_NODE each, as the API server stored it at
    creation: before sluice writes anything into it."""
    pod = controlplane.kwok.pod_template({s.resource: PER_NODE}, **template)
    manifest = controlplane.kwok.job(
        short, pod, namespace=s.namespace, queue=s.name(queue), pods=pods, suspend=True
    )
    return dict(json.loads(s.kubectl.create(manifest, "-o", "json")))


def test_a_borrower_in_h100_is_reclaimed_for_a_queue_owed_h100_and_gets_its_template_back(
    models: Models,
) -> None:
    s = models.s
    both = [models.entry(models.h100, 8), models.entry(models.a100, 8)]
    s.queue("borrower", flavors=both)
    own = {"kubernetes.io/os": "linux"}  # the tenant's own selector and toleration, kept
    tolerated = [{"key": "example.com/own", "operator": "Exists", "effect": "NoSchedule"}]
    first = created_job(s, "b1", "borrower", 2, node_selector=own, tolerations=tolerated)
    s.wait_admitted("b1")
    assert models.nodes_of("b1", 2) == models.h100_nodes
    # The borrower's next goes to a100 (h100 full); newer, it would be reclaim's first
    # victim were victims not taken in the flavor reclaimed in only.
    s.job("b2", "borrower", PER_NODE)
    s.wait_admitted("b2")
    assert models.nodes_of("b2", 1) < models.a100_nodes
    # A queue given only h100 asks half of it: owed that half (proportion splits h100
    # between the two), it takes it back from the borrower's h100 Job, and b2 stays.
    s.queue("owed", flavors=[models.entry(models.h100, 8)])
    s.job("mine", "owed", PER_NODE)
    s.wait_admitted("mine", timeout=30)
    s.wait_suspended("b1")
    assert s.admitted("b2")
    assert models.nodes_of("mine", 1) < models.h100_nodes
    assert models.record("mine") == {
        "main": {
            "flavor": models.h100,
            "nodeSelector": {models.model: "H100"},
        }
    }
    # The reclaimed Job's template comes back exactly as submitted, once its pods are gone.
    s.wait_no_pods("b1")
    wait_for(lambda: models.record("b1") is None, what="b1's record gone")
    assert models.pod_spec("b1") == first["spec"]["template"]["spec"]


def jobset_of(s: Scenario, name: str, queue: str, **replicas: int) -> dict[str, Any]:
    """A JobSet of one replicated Job per keyword, each of that many one-pod Jobs asking
    PER_NODE."""
    pod = controlplane.kwok.pod_template({s.resource: PER_NODE})
    job = {"spec": {"parallelism": 1, "completions": 1, "template": pod}}
    return {
        "apiVersion": JOBSET.api_version,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": s.namespace,
            "labels": {"sluice.dev/queue-name": s.name(queue)},
        },
        "spec": {
            "replicatedJobs": [
                {"name": n, "replicas": count, "template": job} for n, count in replicas.items()
            ]
        },
    }


def test_a_jobset_is_admitted_into_flavors_and_its_child_jobs_pods_run_on_their_nodes(
    models: Models,
) -> None:
    """A JobSet's pod sets are given a flavor each: the driver's fits h100, the workers' no
    longer fit h100's capability beside it and go to a100; the JobSet controller makes child
    Jobs from the templates sluice wrote, and kube-scheduler binds each pod on its flavor's
    nodes."""
    s, kubectl = models.s, models.kubectl
    s.queue("team", flavors=[models.entry(models.h100, 8), models.entry(models.a100, 8)])
    kubectl.create(jobset_of(s, "train", "team", driver=1, workers=2))

    def jobset() -> dict[str, Any]:
        return kubectl.get("jobset", "train", s.namespace)

    wait_for(lambda: jobset()["spec"].get("suspend") is False, what="the JobSet admitted")
    toleration = {**models.taint, "operator": "Equal"}
    record = json.loads(jobset()["metadata"]["annotations"]["sluice.dev/flavor-assignment"])
    assert record == {
        "driver": {
            "flavor": models.h100,
            "nodeSelector": {models.model: "H100"},
        },
        "workers": {
            "flavor": models.a100,
            "nodeSelector": {models.model: "A100"},
            "tolerations": [toleration],
        },
    }

    def running() -> list[dict[str, Any]] | None:
        found = kubectl.json(
            "get", "pods", "-n", s.namespace, "-l", "jobset.sigs.k8s.io/jobset-name=train"
        )["items"]
        ok = len(found) == 3 and all(
            p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in found
        )
        return list(found) if ok else None

    pods = wait_for(running, timeout=60, what="the JobSet's three pods running")
    nodes: dict[str, set[str]] = {}
    for p in pods:
        group = p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]
        nodes.setdefault(group, set()).add(p["spec"]["nodeName"])
    assert nodes["driver"] < models.h100_nodes
    assert nodes["workers"] == models.a100_nodes


GATE = "sluice.dev/admission"


def group_pod(s: Scenario, name: str, queue: str, group: str, total: int) -> dict[str, Any]:
    """A plain pod of ``group`` (of ``total`` pods) asking PER_NODE, as the API server stored
    it at creation: sluice's webhook has gated it."""
    pod = controlplane.kwok.pod_template(
        {s.resource: PER_NODE},
        labels={"sluice.dev/queue-name": s.name(queue), "sluice.dev/pod-group": group},
        annotations={"sluice.dev/pod-group-total-count": str(total)},
        restart_policy="Always",
    )
    pod["metadata"] |= {"name": name, "namespace": s.namespace}
    return dict(
        json.loads(s.kubectl.create({"apiVersion": "v1", "kind": "Pod", **pod}, "-o", "json"))
    )


def test_a_pod_groups_replacement_pod_goes_on_the_groups_flavor_before_its_gate_goes(
    models: Models,
) -> None:
    """A pod group admitted into a100 (its nodes tainted): each pod gets the flavor's label
    and toleration before its gate goes. One pod deleted and a replacement made as it was
    (gated at creation like the others) is released on a100 too, and runs on an a100 node,
    which it could not without the toleration."""
    s, kubectl = models.s, models.kubectl
    s.queue("team", flavors=[models.entry(models.h100, 8), models.entry(models.a100, 8)])
    s.job("h100-full", "team", PER_NODE, pods=2)  # h100 at its capability: the group goes to a100
    s.wait_admitted("h100-full")
    made = [group_pod(s, f"g-{i}", "team", "g", 2) for i in range(2)]
    assert all(GATE in [g["name"] for g in p["spec"]["schedulingGates"]] for p in made)
    toleration = {**models.taint, "operator": "Equal"}
    record = {
        "main": {
            "flavor": models.a100,
            "nodeSelector": {models.model: "A100"},
            "tolerations": [toleration],
        }
    }

    def running(names: set[str]) -> list[dict[str, Any]] | None:
        found = kubectl.json("get", "pods", "-n", s.namespace, "-l", "sluice.dev/pod-group=g")
        live = [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]
        ok = {p["metadata"]["name"] for p in live} == names and all(
            p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in live
        )
        return live if ok else None

    def on_a100(pods: list[dict[str, Any]]) -> None:
        for p in pods:
            assert p["spec"]["nodeSelector"] == {models.model: "A100"}
            assert p["spec"]["tolerations"].count(toleration) == 1
            assert not p["spec"].get("schedulingGates")
            flavor = p["metadata"]["annotations"]["sluice.dev/flavor-assignment"]
            assert json.loads(flavor) == record
        assert {p["spec"]["nodeName"] for p in pods} <= models.a100_nodes

    on_a100(wait_for(lambda: running({"g-0", "g-1"}), timeout=60, what="the group running"))
    kubectl.run("delete", "pod", "g-0", "-n", s.namespace, "--wait=false")
    replacement = group_pod(s, "g-2", "team", "g", 2)
    assert GATE in [g["name"] for g in replacement["spec"]["schedulingGates"]]
    assert not replacement["spec"].get("nodeSelector")
    on_a100(wait_for(lambda: running({"g-1", "g-2"}), timeout=60, what="the replacement running"))
