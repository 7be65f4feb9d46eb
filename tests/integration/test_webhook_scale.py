"""A workload's /scale subresource at the door (docs/elastic.md, *Grown through the
queue*): `kubectl scale` and an HPA (the training-operator makes one for an elastic
PyTorchJob with metrics) write a PyTorchJob's Worker replicas there, as a Scale that carries
nothing but the count. The webhook reads the workload and judges the write as the same
replicas written on it: a fixed-size workload admitted cannot grow there either."""

from __future__ import annotations

import copy
import json
from typing import Any

from test_webhook_rules import queue_obj, seed
from test_webhook_tenancy import answer
from webhook_harness import OPERATOR, Webhook, make_review

POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
RECORD = json.dumps({"Worker": {"admitted": 2, "asked": 2, "fields": {}}})


def pytorch_job(elastic: bool = False, queue: str | None = "team-a") -> dict[str, Any]:
    """Admitted (not suspended), a master and 2 workers; ``elastic``: with its minimum, the
    label the door put on its templates at creation and the record of its admission, its
    pods gated."""
    spec: dict[str, Any] = {
        "runPolicy": {"suspend": False},
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": POD}},
            "Worker": {"replicas": 2, "template": {"spec": POD}},
        },
    }
    meta: dict[str, Any] = {"name": "train", "namespace": "team", "labels": {}}
    if queue:
        meta["labels"]["sluice.dev/queue-name"] = queue
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4}
        for replica in spec["pytorchReplicaSpecs"].values():
            replica["template"]["metadata"] = {"labels": {"sluice.dev/resizable": "true"}}
        meta["annotations"] = {"sluice.dev/admitted-size": RECORD}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta, "spec": spec}


def scale(replicas: int, was: int = 2, user: str = "alice") -> dict[str, Any]:
    """The review of a write of train's /scale subresource, as the API server sends it."""

    def body(n: int) -> dict[str, Any]:
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": "train", "namespace": "team"},
            "spec": {"replicas": n},
        }

    out = make_review(
        "Scale", body(replicas), operation="UPDATE", old=body(was), namespace="team", user=user
    )
    out["request"]["kind"] = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    out["request"]["resource"] = {
        "group": "kubeflow.org",
        "version": "v1",
        "resource": "pytorchjobs",
    }
    out["request"]["subResource"] = "scale"
    return out


async def test_a_fixed_size_job_admitted_cannot_grow_through_its_scale(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    webhook.facts.workloads["PyTorchJob/team/train"] = pytorch_job()
    response = await answer(webhook, "/validate/workloads", scale(4))
    assert response["allowed"] is False
    assert response["status"]["reason"] == "job-grows-past-admission"
    assert "(pods 3 -> 5)" in response["status"]["message"]
    # Lowering it frees quota; the operator's writes are not judged.
    assert (await answer(webhook, "/validate/workloads", scale(1)))["allowed"] is True
    by_operator = scale(4, user=OPERATOR)
    assert (await answer(webhook, "/validate/workloads", by_operator))["allowed"] is True


async def test_an_elastic_job_grows_through_its_scale_as_through_its_spec(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    webhook.facts.workloads["PyTorchJob/team/train"] = pytorch_job(elastic=True)
    assert (await answer(webhook, "/validate/workloads", scale(4)))["allowed"] is True


async def test_a_scale_of_a_held_unmanaged_or_unknown_job_passes(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    held = pytorch_job()
    held["spec"]["runPolicy"]["suspend"] = True
    for stored in (held, pytorch_job(queue=None)):
        webhook.facts.workloads["PyTorchJob/team/train"] = copy.deepcopy(stored)
        assert (await answer(webhook, "/validate/workloads", scale(4)))["allowed"] is True
    del webhook.facts.workloads["PyTorchJob/team/train"]
    assert (await answer(webhook, "/validate/workloads", scale(4)))["allowed"] is True
