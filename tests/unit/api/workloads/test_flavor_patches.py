"""The patches that write a workload's flavors with its release and take them off once it is
suspended again, merged with the Topology ones (sluice/api/workloads/flavor_patches.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from workload_fixtures import merge_patch, objects

from sluice.api.constants import FLAVOR_ASSIGNMENT_ANNOTATION, TOPOLOGY_ASSIGNMENT_ANNOTATION
from sluice.api.flavor import FlavorView, Taint
from sluice.api.flavor_assignment import FlavorAssignment, flavor_assignments_of
from sluice.api.workloads import BY_KIND, Adapter
from sluice.api.workloads.domain_patches import admission_patch, restore_patch
from sluice.api.workloads.enforce import unenforced
from sluice.api.workloads.flavor_patches import (
    NotEnforceable,
    flavor_admission_patch,
    flavor_restore_patch,
)
from sluice.api.workloads.job import JOB
from sluice.api.workloads.model import at
from sluice.api.workloads.pod_flavors import pod_flavor_ops
from sluice.api.workloads.pods import pod_member

REAL = Path(__file__).parent / "real"
MODEL = "gpu.example.com/model"
RACK = "example.com/rack"
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
H100 = FlavorView("h100", {MODEL: "H100"}, (GPU_TAINT,))
A100 = FlavorView("a100", {MODEL: "A100", "pool": "gpu"})
FLAVORS = {f.name: f for f in (H100, A100)}
EQUAL = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def held(obj: dict[str, Any]) -> tuple[dict[str, Any], Adapter]:
    adapter = BY_KIND[obj["kind"]]
    return merge_patch(obj, adapter.suspend_patch(True)), adapter


def job(**spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"suspend": True, "template": template},
    }


def admit_and_undo(
    obj: dict[str, Any], adapter: Adapter, decided: tuple[tuple[str, str], ...], domain: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workload as admitted (its release, its domain and flavors in one patch), and as
    given back once suspended again (the Topology restore and the flavor one in one patch)."""
    before = copy.deepcopy(obj)
    base = {**adapter.suspend_patch(False), **admission_patch(domain, obj, adapter)}
    running = merge_patch(obj, flavor_admission_patch(decided, obj, adapter, FLAVORS, base))
    assert obj == before
    stopped = merge_patch(running, adapter.suspend_patch(True))
    undo = flavor_restore_patch(stopped, adapter, restore_patch(stopped, adapter))
    assert undo is not None
    return running, merge_patch(stopped, undo)


def test_a_job_runs_on_its_flavor_and_comes_back_exactly() -> None:
    obj = job(tolerations=[{"key": "spot", "operator": "Exists"}], nodeSelector={"zone": "z1"})
    running, back = admit_and_undo(obj, JOB, (("main", "h100"),))
    spec = running["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"zone": "z1", MODEL: "H100"}
    assert spec["tolerations"] == [{"key": "spot", "operator": "Exists"}, EQUAL]
    assert not JOB.suspended(running)
    assert flavor_assignments_of(running["metadata"]["annotations"]) == (
        FlavorAssignment("main", "h100", ((MODEL, "H100"),), (GPU_TAINT,)),
    )
    assert back["spec"] == obj["spec"]
    assert FLAVOR_ASSIGNMENT_ANNOTATION not in back["metadata"].get("annotations", {})


def test_a_jobset_of_two_replicated_jobs_in_two_flavors() -> None:
    obj, adapter = held(objects("jobsets.yaml")["fanout"])
    names = [name for name, _ in adapter.domain_templates(obj)]
    decided = ((names[0], "h100"), (names[1], "a100"))
    running, back = admit_and_undo(obj, adapter, decided)
    templates = dict(adapter.domain_templates(running))
    first, second = (at(running, templates[n])["spec"] for n in names)
    assert (first["nodeSelector"], first["tolerations"]) == ({MODEL: "H100"}, [EQUAL])
    assert second["nodeSelector"] == {MODEL: "A100", "pool": "gpu"}
    assert "tolerations" not in second
    assert back["spec"] == obj["spec"]


def test_a_pytorchjobs_master_and_workers() -> None:
    obj, adapter = held(json.loads((REAL / "pytorchjob.json").read_text())["pytorchjob"])
    running, back = admit_and_undo(obj, adapter, (("Master", "a100"), ("Worker", "h100")))
    replicas = running["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["template"]["spec"]["nodeSelector"] == {MODEL: "A100", "pool": "gpu"}
    assert replicas["Worker"]["template"]["spec"]["tolerations"][-1] == EQUAL
    assert back["spec"] == obj["spec"]


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_flavor_and_domain_on_the_same_template_are_written_and_undone_together(kind: str) -> None:
    if kind == "job":
        obj, adapter = job(), JOB
    else:
        obj, adapter = held(objects("jobsets.yaml")["fanout"])
    names = [name for name, _ in adapter.domain_templates(obj)]
    running, back = admit_and_undo(obj, adapter, tuple((n, "h100") for n in names), f"{RACK}=r3")
    for _, path in adapter.domain_templates(running):
        assert at(running, path)["spec"]["nodeSelector"] == {RACK: "r3", MODEL: "H100"}
        assert at(running, path)["spec"]["tolerations"] == [EQUAL]
    annotations = running["metadata"]["annotations"]
    assert annotations[TOPOLOGY_ASSIGNMENT_ANNOTATION] == f"{RACK}=r3"
    assert unenforced(running, adapter, flavor_assignments_of(annotations)) is None
    assert back["spec"] == obj["spec"]
    assert not set(back["metadata"].get("annotations", {})) & {
        TOPOLOGY_ASSIGNMENT_ANNOTATION,
        FLAVOR_ASSIGNMENT_ANNOTATION,
    }


def test_an_mpijobs_launcher_is_recorded_in_its_flavor_and_not_written() -> None:
    obj, adapter = held(json.loads((REAL / "mpijob.json").read_text())["mpijob"])
    running, back = admit_and_undo(obj, adapter, (("Launcher", "a100"), ("Worker", "h100")))
    replicas = running["spec"]["mpiReplicaSpecs"]
    assert replicas["Launcher"] == obj["spec"]["mpiReplicaSpecs"]["Launcher"]
    assert replicas["Worker"]["template"]["spec"]["nodeSelector"][MODEL] == "H100"
    recorded = flavor_assignments_of(running["metadata"]["annotations"])
    assert FlavorAssignment("Launcher", "a100") in recorded
    assert back["spec"] == obj["spec"]


def test_a_flavor_deleted_since_the_decision_or_a_kind_without_templates_is_not_released() -> None:
    with pytest.raises(NotEnforceable, match="pod set main: flavor l4 does not exist"):
        flavor_admission_patch((("main", "l4"),), job(), JOB, FLAVORS)
    obj, adapter = held(objects("trainjobs.yaml")["three-node-ddp"])
    with pytest.raises(NotEnforceable, match="TrainJob has no pod templates of its own"):
        flavor_admission_patch((("node", "h100"),), obj, adapter, FLAVORS)


def test_no_flavors_leave_the_patch_as_it_was() -> None:
    assert flavor_admission_patch((), job(), JOB, FLAVORS, {"spec": {"suspend": False}}) == {
        "spec": {"suspend": False}
    }
    assert flavor_restore_patch(job(), JOB) is None


def test_a_running_workload_keeps_its_flavor() -> None:
    running, _ = admit_and_undo(job(), JOB, (("main", "h100"),))
    assert flavor_restore_patch(running, JOB) is None


def gated_pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "labels": {"sluice.dev/queue-name": "team"},
        },
        "spec": {
            "containers": [{"name": "c"}],
            "schedulingGates": [{"name": "sluice.dev/admission"}],
            **spec,
        },
    }


@pytest.mark.parametrize(
    ("spec", "also"),
    [
        ({}, None),
        (
            {
                "nodeSelector": {"zone": "z1"},
                "tolerations": [{"key": "spot", "operator": "Exists"}],
            },
            None,
        ),
        ({}, {RACK: "r3"}),
    ],
)
def test_a_gated_pods_ops_add_only_what_it_lacks(
    spec: dict[str, Any], also: dict[str, str] | None
) -> None:
    obj = gated_pod(**spec)
    member = pod_member(obj)
    assert member is not None
    ops, added = pod_flavor_ops(member, "main", H100, also)
    if also:  # the domain's label is added first, by the release's own op
        obj["spec"]["nodeSelector"] = dict(also)
    after = jsonpatch.apply_patch(obj, ops)
    assert after["spec"]["nodeSelector"] == {
        **spec.get("nodeSelector", {}),
        **(also or {}),
        MODEL: "H100",
    }
    assert after["spec"]["tolerations"] == [*spec.get("tolerations", []), EQUAL]
    assert added == FlavorAssignment("main", "h100", ((MODEL, "H100"),), (GPU_TAINT,))


def test_a_gated_pod_that_tolerates_and_selects_already_gets_nothing() -> None:
    exists = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    member = pod_member(gated_pod(nodeSelector={MODEL: "H100"}, tolerations=exists))
    assert member is not None
    assert pod_flavor_ops(member, "main", H100) == ([], FlavorAssignment("main", "h100"))
