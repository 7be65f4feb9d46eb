"""The RayCluster a managed RayJob runs, through the real server (docs/elastic.md, *What the
tenancy guarantees become*): only its worker groups' replicas and scaleStrategy change."""

from __future__ import annotations

import copy
from typing import Any

from test_webhook_tenancy import answer
from webhook_harness import Webhook, make_review


def cluster() -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"sluice.dev/queue-name": "team", "sluice.dev/resizable": "true"}},
        "spec": {"containers": [{"name": "c"}]},
    }
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train", "uid": "u"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "train-abc",
            "namespace": "team",
            "labels": {"sluice.dev/queue-name": "team"},
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "template": template}]
        },
    }


def review(new: dict[str, Any]) -> dict[str, Any]:
    out = make_review("RayCluster", new, operation="UPDATE", old=cluster(), namespace="team")
    out["request"]["kind"]["group"] = out["request"]["resource"]["group"] = "ray.io"
    return out


async def test_a_managed_ray_jobs_cluster_changes_only_where_the_autoscaler_writes(
    webhook: Webhook,
) -> None:
    scaled = cluster()
    scaled["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    assert (await answer(webhook, "/validate/rayclusters", review(scaled)))["allowed"] is True
    stripped = copy.deepcopy(scaled)
    stripped["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["labels"].clear()
    response = await answer(webhook, "/validate/rayclusters", review(stripped))
    assert response["allowed"] is False
    assert response["status"]["reason"] == "raycluster-spec"
