"""What each kind asks of a Topology, per pod template or for all its pod sets, and how it is
kept in its domains, on the objects the real controllers made (real/): the admission writes
each domain's label in the nodeSelector of the templates it covers, and once suspended the
templates are given back exactly as they were."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from workload_fixtures import merge_patch, objects

from sluice.api.errors import InvalidObject
from sluice.api.topology import TopologyRequest
from sluice.api.views import WorkloadView
from sluice.api.workloads import BY_KIND, Adapter, workload_from_object
from sluice.api.workloads.model import at
from sluice.operator.plan import plan
from sluice.operator.state import ClusterState
from sluice.operator.writes import basis
from sluice.queues.topology import check_topology_request
from sluice.scheduler.model import CycleResult, Decision, PendingJob

REAL = Path(__file__).parent / "real"
NOW = datetime(2026, 11, 26, tzinfo=UTC)
RACK = "example.com/rack"
ASSIGNMENT = "sluice.dev/topology-assignment"
REQUIRED = "sluice.dev/topology-required"
KINDS = {
    # file: (its workload's entry, the pod set asked for, where its template's spec is)
    "jobset": ("jobset", "workers", ("spec", "replicatedJobs", 1, "template", "spec", "template")),
    "pytorchjob": ("pytorchjob", "Worker", ("spec", "pytorchReplicaSpecs", "Worker", "template")),
    "mpijob": ("mpijob", "Worker", ("spec", "mpiReplicaSpecs", "Worker", "template")),
    "rayjob": (
        "rayjob",
        "workers",
        ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template"),
    ),
}


def held(file: str) -> tuple[dict[str, Any], Adapter]:
    entry = KINDS[file][0]
    obj = json.loads((REAL / f"{file}.json").read_text())[entry]
    adapter = BY_KIND[obj["kind"]]
    obj = merge_patch(obj, adapter.suspend_patch(True))
    obj["metadata"]["generation"] = 1
    return obj, adapter


def as_stored(obj: dict[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, WorkloadView]]:
    """The workload as the operator keeps it, and its latest view (``plan``'s inputs)."""
    state = ClusterState()
    state.on_workload("ADDED", obj)
    return state.workloads, state.workload_views


def admitted(obj: dict[str, Any], domain: str) -> dict[str, Any]:
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    decided = {key: basis(obj)}
    result = CycleResult(
        (), {}, decisions=(Decision("admit", key, "team-a", "fits", domain=domain),)
    )
    (write,) = plan(result, *as_stored(obj), decided, NOW, 0.0, {}).admissions
    return merge_patch(obj, write.patch)


def suspended_and_restored(obj: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    obj = merge_patch(obj, adapter.suspend_patch(True))
    waiting = PendingJob(key, "team-a", 1, "reclaimed")
    result = CycleResult((), {}, pending=(waiting,))
    (write,) = plan(result, *as_stored(obj), {}, NOW, 0.0, {}).reasons
    assert write.basis == basis(obj)  # a list of templates is written whole: on this spec
    return merge_patch(obj, write.patch)


def selectors(obj: Mapping[str, Any], adapter: Adapter) -> dict[str, Any]:
    return {
        name: (at(obj, path).get("spec") or {}).get("nodeSelector")
        for name, path in adapter.domain_templates(obj)
    }


@pytest.mark.parametrize("file", sorted(KINDS))
def test_a_pod_sets_domain_goes_in_its_template_alone_and_comes_off_again(file: str) -> None:
    obj, adapter = held(file)
    _, pod_set, path = KINDS[file]
    running = admitted(obj, f"{pod_set}: {RACK}=r3")
    assert not adapter.suspended(running)
    assert at(running, path)["spec"]["nodeSelector"] == {RACK: "r3"}
    assert selectors(running, adapter) == {
        name: ({RACK: "r3"} if name == pod_set else None)
        for name, _ in adapter.domain_templates(obj)
    }
    assert running["metadata"]["annotations"][ASSIGNMENT] == f"{pod_set}: {RACK}=r3"
    back = suspended_and_restored(running, adapter)
    assert back["spec"] == obj["spec"]  # every template exactly as before admission
    assert ASSIGNMENT not in back["metadata"].get("annotations", {})


@pytest.mark.parametrize("file", sorted(KINDS))
def test_the_workloads_domain_goes_in_every_template(file: str) -> None:
    obj, adapter = held(file)
    running = admitted(obj, f"{RACK}=r3")
    assert set(map(str, selectors(running, adapter).values())) == {str({RACK: "r3"})}
    assert running["metadata"]["annotations"][ASSIGNMENT] == f"{RACK}=r3"
    assert suspended_and_restored(running, adapter)["spec"] == obj["spec"]


def test_a_template_that_selects_the_level_keeps_its_own_and_only_the_others_are_recorded() -> None:
    obj, adapter = held("pytorchjob")
    master = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    master["nodeSelector"] = {RACK: "r3", "gpu": "h100"}
    running = admitted(obj, f"{RACK}=r3")
    assert running["metadata"]["annotations"][ASSIGNMENT] == f"Worker: {RACK}=r3"
    assert selectors(running, adapter) == {
        "Master": {RACK: "r3", "gpu": "h100"},
        "Worker": {RACK: "r3"},
    }
    assert suspended_and_restored(running, adapter)["spec"] == obj["spec"]


def test_a_workload_still_running_keeps_its_domains() -> None:
    obj, _ = held("jobset")
    running = admitted(obj, f"workers: {RACK}=r3")
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    result = CycleResult((), {}, pending=(PendingJob(key, "team-a", 1, "x"),))
    writes = plan(result, *as_stored(running), {}, NOW, 0.0, {}).reasons
    assert all("spec" not in w.patch for w in writes)


def asking(obj: dict[str, Any], meta: str | None, **templates: str) -> dict[str, Any]:
    """The object with sluice.dev/topology-required: ``meta`` on its metadata and on the
    templates of the named pod sets."""
    obj = json.loads(json.dumps(obj))
    if meta:
        obj["metadata"].setdefault("annotations", {})[REQUIRED] = meta
    adapter = BY_KIND[obj["kind"]]
    for name, path in adapter.pod_set_templates(obj):
        if name in templates:
            at(obj, path).setdefault("metadata", {}).setdefault("annotations", {})[REQUIRED] = (
                templates[name]
            )
    return obj


def test_a_pod_template_asks_for_its_pod_set_and_the_metadata_for_all_of_them() -> None:
    fanout = objects("jobsets.yaml")["fanout"]
    view = workload_from_object(asking(fanout, None, workers=RACK))
    assert view is not None and view.topology is None
    assert {s.name: s.topology for s in view.pod_sets} == {
        "workers": TopologyRequest(RACK, True),
        "driver": None,
    }
    together = workload_from_object(asking(fanout, RACK, workers=RACK))
    assert together is not None and together.topology == TopologyRequest(RACK, True)
    assert all(s.topology is None for s in together.pod_sets)
    with pytest.raises(InvalidObject, match="for all its pod sets together and required"):
        workload_from_object(asking(fanout, RACK, workers="example.com/block"))


def test_a_workload_of_one_pod_set_asks_as_a_whole_wherever_it_says_so() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": {"sluice.dev/queue-name": "q"}},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    view = workload_from_object(asking(job, None, main=RACK))
    assert view is not None and view.topology == TopologyRequest(RACK, True)
    assert view.pod_sets[0].topology is None


def test_an_mpijobs_launcher_made_at_creation_gets_no_domain_and_cannot_ask_one() -> None:
    obj, adapter = held("mpijob")
    launcher = ("spec", "mpiReplicaSpecs", "Launcher", "template")
    running = admitted(obj, f"{RACK}=r3")
    assert at(running, launcher) == at(obj, launcher)
    assert running["metadata"]["annotations"][ASSIGNMENT] == f"{RACK}=r3"  # every template it may
    asked = asking(obj, None, Launcher=RACK)
    verdict = check_topology_request(None, asked, "mpijob ns/pi", False, frozenset({RACK}), adapter)
    assert verdict.rule == "topology-request-pod-set"
    assert verdict.message.startswith(
        f"mpijob ns/pi: {REQUIRED} (pod set Launcher): the MPIJob's controller makes the pods"
        " of Launcher from its template once, when the MPIJob is created"
    )
