"""While a workload is admitted, the DRA claims its pod templates name do not change, for
every kind sluice gates: the devices they ask were counted when it was admitted."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from queue_builders import cluster, q

from sluice.api.workloads import BY_KIND, Adapter
from sluice.api.workloads.model import at
from sluice.queues.jobs import Writer, check_job_update

FIXTURES = Path(__file__).parents[1] / "api" / "workloads"
OPERATOR = Writer("system:serviceaccount:sluice-system:sluice-operator", operator=True)
ALICE = Writer("alice", ("system:authenticated",))
QUEUES = cluster(q("team"))
CLAIMS = [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]


def _fixture(file_name: str) -> dict[str, Any]:
    first = next(d for d in yaml.safe_load_all((FIXTURES / file_name).read_text()) if d)
    assert isinstance(first, dict)
    return first


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns"},
        "spec": {
            "suspend": True,
            "parallelism": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    }


KINDS = {
    "Job": _job,
    "JobSet": lambda: _fixture("jobsets.yaml"),
    "RayJob": lambda: _fixture("rayjobs.yaml"),
    "PyTorchJob": lambda: _fixture("pytorchjobs.yaml"),
    "MPIJob": lambda: _fixture("mpijobs.yaml"),
}


def workload(kind: str, *, held: bool) -> tuple[dict[str, Any], Adapter]:
    """One workload of the kind in queue team, held or admitted."""
    obj = KINDS[kind]()
    obj["metadata"]["namespace"] = "ns"
    obj["metadata"]["labels"] = {"sluice.dev/queue-name": "team"}
    adapter = BY_KIND[kind]
    return hold(obj, adapter, held), adapter


def hold(obj: dict[str, Any], adapter: Adapter, held: bool) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    parent: dict[str, Any] = out
    for key in adapter.hold.path[:-1]:
        parent = parent.setdefault(key, {})
    parent[adapter.hold.path[-1]] = held
    return out


def with_claims(obj: dict[str, Any], adapter: Adapter, claims: Any, pod_set: int = -1) -> Any:
    """The object with the pod set's template (the last one's by default) naming ``claims``."""
    out = copy.deepcopy(obj)
    _, path = adapter.pod_set_templates(out)[pod_set]
    template = at(out, path)
    template.setdefault("spec", {})["resourceClaims"] = claims
    return out


def update(old: dict[str, Any], new: dict[str, Any], adapter: Adapter, writer: Writer) -> Any:
    return check_job_update(old, new, "ns", QUEUES, None, writer, adapter)


@pytest.mark.parametrize("kind", list(KINDS))
def test_claims_added_to_an_admitted_workload_are_refused(kind: str) -> None:
    old, adapter = workload(kind, held=False)
    verdict = update(old, with_claims(old, adapter, CLAIMS), adapter, ALICE)
    assert verdict.rule == "job-claims-immutable"
    name, _ = adapter.pod_set_templates(old)[-1]
    assert f"the resourceClaims of pod set {name} (" in verdict.message
    assert f"{adapter.kind.lower()} ns/{old['metadata']['name']}:" in verdict.message


def test_the_refusal_names_the_workload_the_pod_set_and_the_field() -> None:
    old, adapter = workload("RayJob", held=False)
    verdict = update(old, with_claims(old, adapter, CLAIMS), adapter, ALICE)
    assert verdict.message == (
        "rayjob ns/count-to-ten: the resourceClaims of pod set small"
        " (spec.rayClusterSpec.workerGroupSpecs[0].template.spec.resourceClaims) cannot change"
        " while it is admitted: its devices were counted at admission; suspend it"
        " (spec.suspend: true) to change them and queue it again"
    )


@pytest.mark.parametrize("kind", list(KINDS))
def test_claims_changed_or_removed_while_admitted_are_refused(kind: str) -> None:
    held, adapter = workload(kind, held=True)
    asking = hold(with_claims(held, adapter, CLAIMS), adapter, False)
    other = [{"name": "gpus", "resourceClaimTemplateName": "sixty-four-gpus"}]
    for changed in (with_claims(asking, adapter, other), with_claims(asking, adapter, [])):
        assert update(asking, changed, adapter, ALICE).rule == "job-claims-immutable"


@pytest.mark.parametrize("kind", list(KINDS))
def test_claims_change_freely_while_held_or_in_the_write_that_holds_it(kind: str) -> None:
    held, adapter = workload(kind, held=True)
    assert update(held, with_claims(held, adapter, CLAIMS), adapter, ALICE).allowed
    admitted = hold(held, adapter, False)
    suspending = hold(with_claims(admitted, adapter, CLAIMS), adapter, True)
    assert update(admitted, suspending, adapter, ALICE).allowed


def test_the_first_pod_set_is_guarded_too_and_the_operator_is_not_refused() -> None:
    old, adapter = workload("JobSet", held=False)
    first = with_claims(old, adapter, CLAIMS, pod_set=0)
    verdict = update(old, first, adapter, ALICE)
    assert verdict.rule == "job-claims-immutable"
    name, _ = adapter.pod_set_templates(old)[0]
    field = "spec.replicatedJobs[0].template.spec.template.spec.resourceClaims"
    assert f"pod set {name} ({field})" in verdict.message
    assert update(old, first, adapter, OPERATOR).allowed


def test_the_same_claims_or_none_written_as_an_empty_list_are_no_change() -> None:
    old, adapter = workload("RayJob", held=False)
    asking = with_claims(old, adapter, CLAIMS)
    relabelled = copy.deepcopy(asking)
    relabelled["metadata"]["labels"]["team"] = "vision"
    assert update(asking, relabelled, adapter, ALICE).allowed
    assert update(old, with_claims(old, adapter, []), adapter, ALICE).allowed
