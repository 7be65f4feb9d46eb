"""A workload's flavors written into its pod templates and taken off again, and the record of
what was added (sluice/api/workloads/enforce.py, sluice/api/flavor_assignment.py)."""

from __future__ import annotations

import copy
from typing import Any

from workload_fixtures import merge_patch

from sluice.api.constants import FLAVOR_ASSIGNMENT_ANNOTATION
from sluice.api.flavor import FlavorView, Taint
from sluice.api.flavor_assignment import (
    FlavorAssignment,
    flavor_assignment_text,
    flavor_assignments_of,
)
from sluice.api.workloads.enforce import enforce, unenforce, unenforced
from sluice.api.workloads.job import JOB
from sluice.api.workloads.jobset import JOBSET

MODEL = "gpu.example.com/model"
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
H100 = FlavorView("h100", {MODEL: "H100"}, (GPU_TAINT,))
CPU = FlavorView("cpu-pool", {"pool": "cpu"})
EQUAL = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "busybox"}], **extra}


def job(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"suspend": True, "template": {"spec": pod_spec(**extra)}},
    }


def jobset(driver: dict[str, Any], workers: dict[str, Any]) -> dict[str, Any]:
    def replicated(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "replicas": 1, "template": {"spec": {"template": {"spec": spec}}}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"replicatedJobs": [replicated("driver", driver), replicated("workers", workers)]},
    }


def round_trip(obj: dict[str, Any], adapter: Any, chosen: dict[str, FlavorView]) -> None:
    """Enforced, recorded, read back and undone: the object is as it was."""
    before = copy.deepcopy(obj)
    patch, added = enforce(obj, adapter, chosen)
    admitted = merge_patch(obj, patch)
    assert unenforced(admitted, adapter, added) is None
    text = flavor_assignment_text(added)
    assert flavor_assignments_of({FLAVOR_ASSIGNMENT_ANNOTATION: text}) == added
    restored = merge_patch(admitted, unenforce(admitted, adapter, added))
    assert restored == before
    assert obj == before  # the patches never change what they are worked out from


def test_a_job_gets_the_flavors_labels_and_a_toleration_for_its_taint() -> None:
    patch, added = enforce(job(), JOB, {"main": H100})
    assert patch == {
        "spec": {"template": {"spec": {"nodeSelector": {MODEL: "H100"}, "tolerations": [EQUAL]}}}
    }
    assert added == (FlavorAssignment("main", "h100", ((MODEL, "H100"),), (GPU_TAINT,)),)
    assert flavor_assignment_text(added) == (
        '{"main":{"flavor":"h100","nodeSelector":{"gpu.example.com/model":"H100"},'
        '"tolerations":[{"effect":"NoSchedule","key":"nvidia.com/gpu","operator":"Equal",'
        '"value":"present"}]}}'
    )


def test_what_the_template_has_already_is_neither_added_nor_taken_off() -> None:
    own = {"key": "nvidia.com/gpu", "operator": "Exists"}
    obj = job(nodeSelector={MODEL: "H100", "zone": "a"}, tolerations=[own])
    patch, added = enforce(obj, JOB, {"main": H100})
    assert patch == {}
    assert added == (FlavorAssignment("main", "h100"),)
    assert unenforce(obj, JOB, added) == {}
    round_trip(obj, JOB, {"main": H100})


def test_a_template_with_a_selector_and_tolerations_of_its_own_comes_back_as_it_was() -> None:
    other = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    round_trip(job(nodeSelector={"zone": "a"}, tolerations=[other]), JOB, {"main": H100})
    round_trip(job(), JOB, {"main": H100})


def test_each_pod_set_gets_its_own_flavor() -> None:
    obj = jobset(pod_spec(), pod_spec())
    patch, added = enforce(obj, JOBSET, {"driver": CPU, "workers": H100})
    admitted = merge_patch(obj, patch)
    driver, workers = (
        r["template"]["spec"]["template"]["spec"] for r in admitted["spec"]["replicatedJobs"]
    )
    assert driver["nodeSelector"] == {"pool": "cpu"} and "tolerations" not in driver
    assert workers["nodeSelector"] == {MODEL: "H100"} and workers["tolerations"] == [EQUAL]
    assert [a.flavor for a in added] == ["cpu-pool", "h100"]
    round_trip(obj, JOBSET, {"driver": CPU, "workers": H100})


def test_the_record_names_only_what_was_added() -> None:
    obj = jobset(pod_spec(), pod_spec(nodeSelector={"pool": "cpu"}))
    _, added = enforce(obj, JOBSET, {"driver": CPU, "workers": CPU})
    assert flavor_assignment_text(added) == (
        '{"driver":{"flavor":"cpu-pool","nodeSelector":{"pool":"cpu"}},'
        '"workers":{"flavor":"cpu-pool"}}'
    )
    # A record written with the empty fields reads the same.
    written = (
        '{"driver":{"flavor":"cpu-pool","nodeSelector":{"pool":"cpu"},"tolerations":[]},'
        '"workers":{"flavor":"cpu-pool","nodeSelector":{},"tolerations":[]}}'
    )
    assert flavor_assignments_of({FLAVOR_ASSIGNMENT_ANNOTATION: written}) == added


def test_undoing_reads_the_record_not_the_flavor() -> None:
    obj = job()
    patch, added = enforce(obj, JOB, {"main": H100})
    admitted = merge_patch(obj, patch)
    # The Flavor changes while the job runs: what was added is still what comes off.
    recorded = flavor_assignments_of({FLAVOR_ASSIGNMENT_ANNOTATION: flavor_assignment_text(added)})
    assert merge_patch(admitted, unenforce(admitted, JOB, recorded)) == obj


def test_a_label_changed_since_is_left_and_named() -> None:
    obj = job()
    patch, added = enforce(obj, JOB, {"main": H100})
    admitted = merge_patch(obj, patch)
    changed = copy.deepcopy(admitted)
    changed["spec"]["template"]["spec"]["nodeSelector"][MODEL] = "A100"
    assert unenforced(changed, JOB, added) == "main"
    dropped = copy.deepcopy(admitted)
    del dropped["spec"]["template"]["spec"]["tolerations"]
    assert unenforced(dropped, JOB, added) == "main"
    undone = merge_patch(changed, unenforce(changed, JOB, added))
    assert undone["spec"]["template"]["spec"] == {**pod_spec(), "nodeSelector": {MODEL: "A100"}}


def test_a_record_sluice_does_not_write_reads_as_none() -> None:
    for text in (
        "",
        "[]",
        "{",
        '{"main": {"nodeSelector": {}}}',
        '{"main": {"flavor": "h", "tolerations": [1]}}',
    ):
        assert flavor_assignments_of({FLAVOR_ASSIGNMENT_ANNOTATION: text}) == ()
    assert flavor_assignments_of({}) == ()
