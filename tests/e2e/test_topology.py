"""Topology on the living cluster: 16 KWOK nodes in 2 blocks x 4 racks x 2 nodes; sluice picks
the domain, kube-scheduler places the pods inside it (sluice never writes a pod's nodeName)."""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any

import pytest

from .components import Operator
from .helpers import Kubectl, unique_name, wait_for
from .scenario import Scenario, kwok
from .test_operator import operator

__all__ = ["operator"]  # the fixture: sluice's operator, started once for the module

PER_NODE = 4  # of the test's resource: a rack holds 8, a block 32


class Racks:
    """A scenario's own Topology (its own label keys) over its own 16 nodes."""

    def __init__(self, s: Scenario, kubectl: Kubectl) -> None:
        self.s = s
        self.topology = tag = unique_name("t")
        self.block, self.rack = f"{tag}.e2e.sluice.dev/block", f"{tag}.e2e.sluice.dev/rack"
        self.racks: dict[str, list[str]] = {}
        self.rack_of: dict[str, str] = {}
        self.block_of: dict[str, str] = {}
        for b in range(2):
            for r in range(4):
                rack = f"r{b * 4 + r}"
                for _ in range(2):
                    name = s.node(PER_NODE, labels={self.block: f"b{b}", self.rack: rack})
                    self.racks.setdefault(rack, []).append(name)
                    self.rack_of[name] = rack
                    self.block_of[name] = f"b{b}"
        kubectl.create(
            {
                "apiVersion": "scheduling.sluice.dev/v1beta1",
                "kind": "Topology",
                "metadata": {"name": tag},
                "spec": {"levels": [{"nodeLabel": self.block}, {"nodeLabel": self.rack}]},
            }
        )

    def job(
        self, short: str, queue: str, amount: int, pods: int, ask: dict[str, str] | None = None
    ) -> str:
        """A suspended Job whose pod template carries ``ask`` (topology annotations)."""
        s = self.s
        template = kwok.pod_template({s.resource: amount}, annotations=ask)
        manifest = kwok.job(
            short, template, namespace=s.namespace, queue=s.name(queue), pods=pods, suspend=True
        )
        s.kubectl.create(manifest)
        return short

    def required(self) -> dict[str, str]:
        return {"sluice.dev/topology-required": self.rack}

    def nodes_of(self, job: str, count: int) -> list[str]:
        return sorted(p["spec"]["nodeName"] for p in self.s.wait_pods_running(job, count))

    def blocker(self, short: str, queue: str, node: str) -> str:
        """A Job of one pod that takes all of one node (pinned by hostname)."""
        s = self.s
        template = kwok.pod_template(
            {s.resource: PER_NODE}, node_selector={"kubernetes.io/hostname": node}
        )
        s.kubectl.create(
            kwok.job(short, template, namespace=s.namespace, queue=s.name(queue), suspend=True)
        )
        return short


@pytest.fixture
def t(operator: Operator, kubectl: Kubectl, namespace: str) -> Racks:
    return Racks(Scenario(kubectl, namespace), kubectl)


def selector(job: dict[str, Any]) -> dict[str, str]:
    return dict(job["spec"]["template"]["spec"].get("nodeSelector") or {})


def test_a_rack_required_job_runs_all_its_pods_in_one_rack(t: Racks) -> None:
    s = t.s
    s.queue("team")
    t.job("train", "team", 2, 4, t.required())  # 4 x 2: one rack of 8
    s.wait_admitted("train")
    nodes = t.nodes_of("train", 4)
    assert len({t.rack_of[n] for n in nodes}) == 1, nodes
    rack = t.rack_of[nodes[0]]
    assert rack == "r0"  # all racks equal: the first by name
    assert s.annotation("train", "topology-assignment") == f"{t.rack}=r0"
    assert selector(s.get_job("train")) == {t.rack: "r0"}


def test_a_job_that_fits_in_no_rack_waits_then_runs_when_a_rack_frees(t: Racks) -> None:
    s = t.s
    s.queue("team")
    # One node of every rack taken: 64 free in total, 4 per rack.
    blockers = [t.blocker(f"b{i}", "team", nodes[0]) for i, nodes in enumerate(t.racks.values())]
    s.wait_admitted(*blockers)
    t.job("train", "team", 4, 2, t.required())  # 2 x 4: a whole rack's 8
    reason = wait_for(lambda: s.annotation("train", "pending-reason"), what="train's reason")
    assert not s.admitted("train")
    first = sorted(t.racks["r0"])  # a reason names nodes by name
    assert reason == (
        f"position 1 in {s.name('team')}; no {t.rack} holds 2 x {s.resource} 4: best"
        f" rack r0 has {s.resource} 4 free of 8 (nodes {first[0]}, {first[1]})"
    )
    s.kubectl.delete("job", "b5", s.namespace)  # rack r5 is whole again
    s.wait_admitted("train", timeout=30)
    assert {t.rack_of[n] for n in t.nodes_of("train", 2)} == {"r5"}


def test_preferred_spreads_over_racks_of_one_block_when_no_rack_holds_it(t: Racks) -> None:
    s = t.s
    s.queue("team")
    ask = {"sluice.dev/topology-preferred": t.rack}
    t.job("wide", "team", 4, 5, ask)  # 5 x 4 = 20: more than a rack, less than a block
    s.wait_admitted("wide")
    nodes = t.nodes_of("wide", 5)
    assert {t.block_of[n] for n in nodes} == {"b0"}
    assert len({t.rack_of[n] for n in nodes}) > 1
    assert s.annotation("wide", "topology-assignment") == f"{t.block}=b0"


def test_reclaim_for_a_rack_required_job_evicts_in_one_rack_and_gives_the_template_back(
    t: Racks,
) -> None:
    s = t.s
    s.queue("a", deserved={s.resource: "8"})
    s.queue("b")
    # b borrows every node: a job per node; r3's second node is b's smallest loss.
    hogs = {}
    for rack, nodes in t.racks.items():
        for i, node in enumerate(nodes):
            hogs[node] = t.blocker(f"h-{rack}-{i}", "b", node)
    s.wait_admitted(*hogs.values(), timeout=40)
    t.job("train", "a", 4, 2, t.required())
    s.wait_admitted("train", timeout=40)
    reclaimed = [job for job in hogs.values() if not s.admitted(job)]
    assert len(reclaimed) == 2, reclaimed
    racks = {t.rack_of[node] for node, job in hogs.items() if job in reclaimed}
    assert len(racks) == 1, racks
    (rack,) = racks
    assert {t.rack_of[n] for n in t.nodes_of("train", 2)} == {rack}
    # The reclaimed hogs were never confined: their templates say what they said.
    for job in reclaimed:
        assert s.annotation(job, "topology-assignment") is None


def test_a_suspended_job_gets_its_template_back_and_may_run_in_another_rack(t: Racks) -> None:
    s = t.s
    s.queue("team")
    s.queue("other")
    t.job("train", "team", 4, 2, t.required())
    s.wait_admitted("train")
    assert {t.rack_of[n] for n in t.nodes_of("train", 2)} == {"r0"}
    original = s.get_job("train")["spec"]["template"]
    original_selector = {k: v for k, v in selector(s.get_job("train")).items() if k != t.rack}

    def patch(kind: str, name: str, body: str, namespace: str | None = None) -> None:
        where = ["-n", namespace] if namespace else []
        s.kubectl.run("patch", kind, name, *where, "--type=merge", "-p", body)

    # Its queue may hold next to nothing for now, and the job is suspended (as reclaim, preempt and
    # requeue do): it waits, and sluice gives its template back as it was before admission.
    patch("queue", s.name("team"), f'{{"spec":{{"capability":{{"{s.resource}":"1"}}}}}}')
    t.job("probe", "team", 2, 1)  # once it waits for the capability, sluice has seen it
    wait_for(lambda: s.annotation("probe", "pending-reason"), what="probe's reason")
    patch("job", "train", '{"spec":{"suspend":true}}', s.namespace)
    wait_for(
        lambda: (
            s.annotation("train", "topology-assignment") is None
            and selector(s.get_job("train")) == original_selector
        ),
        what="train's template given back",
    )
    assert not s.admitted("train")
    template = s.get_job("train")["spec"]["template"]
    assert template["spec"].get("nodeSelector") is None
    assert {**original["spec"], "nodeSelector": None} == {**template["spec"], "nodeSelector": None}
    # r0 is taken meanwhile, so its next admission goes to another rack.
    t.blocker("r0-hog", "other", t.racks["r0"][0])
    s.wait_admitted("r0-hog")
    patch("queue", s.name("team"), '{"spec":{"capability":null}}')
    s.wait_admitted("train", "probe", timeout=30)
    # One rack, not r0 (which rack of the free ones depends on whether the probe, admitted in
    # the same moment, went first).
    racks = {t.rack_of[n] for n in t.nodes_of("train", 2)}
    assert len(racks) == 1 and racks != {"r0"}, racks


def _watched(out: str) -> list[dict[str, Any]]:
    """The pods as a kubectl watch printed them, one JSON document per change."""
    decoder, seen, at = json.JSONDecoder(), [], 0
    while (at := out.find("{", at)) >= 0:
        event, at = decoder.raw_decode(out, at)
        seen.append(event["object"])
    return seen


def test_a_group_of_gated_pods_gets_its_rack_in_the_patch_that_removes_its_gates(
    t: Racks,
) -> None:
    """Every state of its pods the API server ever had: gated without a nodeSelector, then
    released with the rack's label in it (one patch), then bound by kube-scheduler in that
    rack."""
    s = t.s
    s.queue("team")
    group = "g"

    def create(i: int) -> None:
        pod = kwok.pod_template({s.resource: 2}, restart_policy="Always")
        pod["metadata"] = {
            "name": f"g-{i}",
            "namespace": s.namespace,
            "labels": {"sluice.dev/queue-name": s.name("team"), "sluice.dev/pod-group": group},
            "annotations": {"sluice.dev/pod-group-total-count": "4", **t.required()},
        }
        pod["spec"]["schedulingGates"] = [{"name": "sluice.dev/admission"}]
        s.kubectl.create({"apiVersion": "v1", "kind": "Pod", **pod})

    def bound() -> list[dict[str, Any]] | None:
        pods = s.kubectl.json("get", "pods", "-n", s.namespace, "-l", "sluice.dev/pod-group")
        ok = len(pods["items"]) == 4 and all(
            p["status"].get("phase") == "Running" for p in pods["items"]
        )
        return list(pods["items"]) if ok else None

    for i in range(3):  # a group of 4 x 2 (one rack of 8), not whole yet: gated
        create(i)
    watch = subprocess.Popen(
        [
            str(s.kubectl.binary),
            f"--kubeconfig={s.kubectl.kubeconfig}",
            *("get", "pods", "-n", s.namespace, "-l", f"sluice.dev/pod-group={group}"),
            *("--watch", "--output-watch-events", "-o", "json"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    stdout = watch.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")))
    reader.start()
    try:
        wait_for(lambda: "".join(lines).count('"type"') >= 3, what="the watch seeing the 3")
        create(3)
        pods = wait_for(bound, timeout=30, what="the group's pods running")
    finally:
        watch.terminate()
        reader.join(timeout=10)
    out = "".join(lines)
    racks = {t.rack_of[p["spec"]["nodeName"]] for p in pods}
    assert len(racks) == 1, racks
    (rack,) = racks
    states = _watched(out)
    gated = [p for p in states if p["spec"].get("schedulingGates")]
    released = [p for p in states if not p["spec"].get("schedulingGates")]
    assert gated and all(not p["spec"].get("nodeSelector") for p in gated)
    assert {p["metadata"]["name"] for p in released} == {f"g-{i}" for i in range(4)}
    for pod in released:
        assert pod["spec"].get("nodeSelector") == {t.rack: rack}, pod["metadata"]["name"]
        assert (
            pod["metadata"]["annotations"]["sluice.dev/topology-assignment"] == f"{t.rack}={rack}"
        )


def test_the_topology_says_whether_its_levels_nest_in_its_status_and_events(t: Racks) -> None:
    s, kubectl = t.s, t.s.kubectl

    def nested() -> dict[str, Any]:
        status = kubectl.get("topology", t.topology).get("status") or {}
        found = [c for c in status.get("conditions") or () if c["type"] == "Nested"]
        return {**found[0], "levels": status["levels"]} if found else {}

    def events() -> list[tuple[str, str]]:
        selector = f"involvedObject.kind=Topology,involvedObject.name={t.topology}"
        found = kubectl.json("get", "events", "-n", "default", "--field-selector", selector)
        return [(e["type"], e["reason"]) for e in found["items"]]

    first = wait_for(nested, what="the Topology's status")
    assert first["status"] == "True"
    assert first["levels"] == [
        {"nodeLabel": t.block, "domains": 2, "nodes": 16},
        {"nodeLabel": t.rack, "domains": 8, "nodes": 16},
    ]
    # One node of rack r0 moves to block b1: r0 is in two blocks.
    a, b = sorted(t.racks["r0"])
    kubectl.run("label", "node", b, f"{t.block}=b1", "--overwrite")
    broken = wait_for(lambda: (n := nested()) and n["status"] == "False" and n, what="not nested")
    problem = f"{t.rack}=r0 is in two {t.block} domains: b0 (node {a}) and b1 (node {b})"
    assert (broken["reason"], broken["message"]) == ("NotNested", problem)
    assert broken["levels"][0] == {"nodeLabel": t.block, "domains": 2, "nodes": 16}
    wait_for(lambda: ("Warning", "NotNested") in events(), what="the Warning Event")
    assert "NotNested" in kubectl.run("describe", "topology", t.topology)
    table = kubectl.run("get", "topology", t.topology)
    assert table.splitlines()[0].split()[:3] == ["NAME", "LEVELS", "NESTED"], table
    assert table.splitlines()[1].split()[2] == "False", table
    # What requires a level of it waits, said with the same words.
    s.queue("team")
    t.job("train", "team", 2, 2, t.required())
    reason = wait_for(lambda: s.annotation("train", "pending-reason"), what="train's reason")
    assert reason.endswith(f"Topology {t.topology} is not nested: {problem}"), reason
    assert not s.admitted("train")
    # Put back: nested again, a Normal Event, and the job is admitted.
    kubectl.run("label", "node", b, f"{t.block}=b0", "--overwrite")
    wait_for(lambda: nested().get("status") == "True", what="nested again")
    wait_for(lambda: ("Normal", "Nested") in events(), what="the Normal Event")
    assert events().count(("Warning", "NotNested")) == 1
    s.wait_admitted("train", timeout=30)
