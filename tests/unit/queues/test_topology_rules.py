"""At the door: Topologies, and what workloads ask of them."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.constants import (
    TOPOLOGY_ASSIGNMENT_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from sluice.api.workloads.jobset import JOBSET
from sluice.api.workloads.trainjob import TRAIN_JOB
from sluice.queues.jobs import Writer, check_annotations
from sluice.queues.topology import asks_topology, check_topology, check_topology_request

RACK, BLOCK = "example.com/rack", "example.com/block"
LEVELS = frozenset({BLOCK, RACK})
TENANT = Writer(name="alice", operator=False)


def topology(*labels: Any) -> dict[str, Any]:
    return {"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": x} for x in labels]}}


def job(
    meta: dict[str, str] | None = None, template: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns", "annotations": meta or {}},
        "spec": {"template": {"metadata": {"annotations": template or {}}, "spec": {}}},
    }


def test_a_topology_needs_a_level_each_a_label_once() -> None:
    assert check_topology(topology(BLOCK, RACK, "kubernetes.io/hostname")).allowed
    assert (
        check_topology(topology()).message
        == "topology t: spec.levels: at least one level is needed"
    )
    twice = check_topology(topology(RACK, RACK))
    assert twice.message == f"topology t: spec.levels[1].nodeLabel: {RACK} is named twice"
    bad = check_topology(topology("Example.com/rack"))
    assert bad.message == (
        "topology t: spec.levels[0].nodeLabel: 'Example.com/rack' has an invalid prefix"
        " (a DNS subdomain)"
    )
    assert not check_topology(topology("a/b c")).allowed


@pytest.mark.parametrize("where", ["meta", "template"])
def test_a_level_of_a_topology_is_asked_on_the_job_or_its_template(where: str) -> None:
    asked = {TOPOLOGY_REQUIRED_ANNOTATION: RACK}
    obj = job(**{where: asked})
    assert asks_topology(obj)
    assert check_topology_request(None, obj, "job ns/train", False, LEVELS).allowed


def test_a_label_that_is_no_level_is_refused() -> None:
    obj = job({TOPOLOGY_PREFERRED_ANNOTATION: "example.com/row"})
    verdict = check_topology_request(None, obj, "job ns/train", False, LEVELS)
    assert verdict.message == (
        f"job ns/train: {TOPOLOGY_PREFERRED_ANNOTATION}: example.com/row is no level of any"
        f" Topology (levels: {BLOCK}, {RACK})"
    )


def test_both_on_one_set_is_refused() -> None:
    obj = job(template={TOPOLOGY_REQUIRED_ANNOTATION: RACK, TOPOLOGY_PREFERRED_ANNOTATION: BLOCK})
    verdict = check_topology_request(None, obj, "job ns/train", False, LEVELS)
    assert verdict.rule == "topology-request-invalid"
    assert "both" in verdict.message


def test_what_an_admitted_job_asks_cannot_change_nor_be_dropped_or_added() -> None:
    rack = job({TOPOLOGY_REQUIRED_ANNOTATION: RACK})
    block = job({TOPOLOGY_REQUIRED_ANNOTATION: BLOCK})
    for old, new in [(rack, block), (rack, job()), (job(), rack)]:
        verdict = check_topology_request(old, new, "job ns/train", True, LEVELS)
        assert verdict.rule == "topology-request-immutable"
    assert check_topology_request(rack, block, "job ns/train", False, LEVELS).allowed


def jobset(
    meta: dict[str, str] | None = None,
    workers: dict[str, str] | None = None,
    driver: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    def replicated(name: str, asks: dict[str, str] | None) -> dict[str, Any]:
        pod: dict[str, Any] = {"containers": [{"name": "c"}]}
        if selector is not None and name == "workers":
            pod["nodeSelector"] = selector
        template = {"metadata": {"annotations": asks or {}}, "spec": pod}
        return {"name": name, "template": {"spec": {"template": template}}}

    return {
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns", "annotations": meta or {}},
        "spec": {"replicatedJobs": [replicated("driver", driver), replicated("workers", workers)]},
    }


def test_each_pod_template_of_a_jobset_may_ask_and_so_may_the_jobset() -> None:
    rack, block = {TOPOLOGY_REQUIRED_ANNOTATION: RACK}, {TOPOLOGY_PREFERRED_ANNOTATION: BLOCK}
    for obj in (jobset(workers=rack), jobset(workers=rack, driver=block), jobset(meta=rack)):
        assert asks_topology(obj, JOBSET)
        assert check_topology_request(None, obj, "jobset ns/js", False, LEVELS, JOBSET).allowed
    row = jobset(driver={TOPOLOGY_REQUIRED_ANNOTATION: "example.com/row"})
    verdict = check_topology_request(None, row, "jobset ns/js", False, LEVELS, JOBSET)
    assert verdict.message == (
        f"jobset ns/js: {TOPOLOGY_REQUIRED_ANNOTATION} (pod set driver): example.com/row is no"
        f" level of any Topology (levels: {BLOCK}, {RACK})"
    )
    both = jobset(workers={**rack, **block})
    verdict = check_topology_request(None, both, "jobset ns/js", False, LEVELS, JOBSET)
    assert verdict.rule == "topology-request-invalid"
    apart = jobset(meta=rack, workers=block)
    verdict = check_topology_request(None, apart, "jobset ns/js", False, LEVELS, JOBSET)
    assert verdict.message == (
        f"jobset ns/js: it asks required {RACK} for all its pod sets together and preferred"
        f" {BLOCK} for pod set workers: ask on the workload's metadata to place its pod sets"
        " together, or on their pod templates to place each alone"
    )


def test_a_pod_sets_ask_cannot_change_while_admitted_nor_its_domain_be_dropped() -> None:
    rack = {TOPOLOGY_REQUIRED_ANNOTATION: RACK}
    before = jobset(workers=rack)
    moved = check_topology_request(
        before, jobset(driver=rack), "jobset ns/js", True, LEVELS, JOBSET
    )
    assert moved.message == (
        f"jobset ns/js: what an admitted workload asks of a Topology cannot change (from"
        f" workers: required {RACK} to driver: required {RACK}); suspend it to queue it again"
        " with the new ask"
    )
    recorded = {TOPOLOGY_ASSIGNMENT_ANNOTATION: f"workers: {RACK}=r1"}
    running = jobset(meta=recorded, workers=rack, selector={RACK: "r1"})
    kept = jobset(meta=recorded, workers=rack, selector={RACK: "r1", "gpu": "h100"})
    assert check_topology_request(running, kept, "jobset ns/js", True, LEVELS, JOBSET).allowed
    dropped = jobset(meta=recorded, workers=rack, selector={})
    verdict = check_topology_request(running, dropped, "jobset ns/js", True, LEVELS, JOBSET)
    assert verdict.message == (
        "jobset ns/js: the pod template of pod set workers must keep the nodeSelector of the"
        f" domain it was admitted into (workers: {RACK}=r1) while it runs"
    )
    assert check_topology_request(running, dropped, "jobset ns/js", False, LEVELS, JOBSET).allowed


def test_a_kind_without_pod_templates_of_its_own_cannot_ask() -> None:
    obj = {
        "kind": "TrainJob",
        "metadata": {"name": "tj", "annotations": {TOPOLOGY_REQUIRED_ANNOTATION: RACK}},
        "spec": {"trainer": {"numNodes": 2}},
    }
    verdict = check_topology_request(None, obj, "trainjob ns/tj", False, LEVELS, TRAIN_JOB)
    assert verdict.message == (
        "trainjob ns/tj: sluice keeps a workload in its domain through the nodeSelector of its"
        " pod templates, and a TrainJob has none of its own (its pods come from elsewhere): it"
        f" cannot ask {TOPOLOGY_REQUIRED_ANNOTATION}"
    )


def test_tenants_write_the_request_annotations_never_the_assignment() -> None:
    assert check_annotations(job(), job({TOPOLOGY_REQUIRED_ANNOTATION: RACK}), "ns", TENANT).allowed
    forged = check_annotations(
        job(), job({TOPOLOGY_ASSIGNMENT_ANNOTATION: f"{RACK}=r1"}), "ns", TENANT
    )
    assert forged.rule == "job-operator-annotation"
