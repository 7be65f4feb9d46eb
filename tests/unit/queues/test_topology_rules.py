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


def test_only_kinds_sluice_confines_may_ask() -> None:
    obj = {
        "kind": "JobSet",
        "metadata": {"name": "js", "annotations": {TOPOLOGY_REQUIRED_ANNOTATION: RACK}},
    }
    verdict = check_topology_request(None, obj, "jobset ns/js", False, LEVELS, JOBSET)
    assert verdict.rule == "topology-request-kind"


def test_tenants_write_the_request_annotations_never_the_assignment() -> None:
    assert check_annotations(job(), job({TOPOLOGY_REQUIRED_ANNOTATION: RACK}), "ns", TENANT).allowed
    forged = check_annotations(
        job(), job({TOPOLOGY_ASSIGNMENT_ANNOTATION: f"{RACK}=r1"}), "ns", TENANT
    )
    assert forged.rule == "job-operator-annotation"
