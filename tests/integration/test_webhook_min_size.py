"""A workload's minimum size through the real server (docs/elastic.md, *The minimum*): its
owner writes it at creation, and it stays as it was while the workload is admitted."""

from __future__ import annotations

import copy
from typing import Any

from test_webhook_rules import job_obj, patched, queue_obj, seed
from test_webhook_tenancy import answer, running
from webhook_harness import OPERATOR, Webhook, make_review

MIN = "sluice.dev/min-parallelism"


def with_minimum(obj: dict[str, Any], value: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["annotations"] = {MIN: value}
    return out


async def test_a_tenant_creates_a_job_with_its_minimum(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    obj = with_minimum(job_obj("j", "team-a", parallelism=8), "4")
    review = make_review("Job", obj, namespace="team", user="alice")
    assert (await answer(webhook, "/validate/jobs", review))["allowed"] is True
    bad = make_review("Job", with_minimum(obj, "four"), namespace="team", user="alice")
    response = await answer(webhook, "/validate/jobs", bad)
    assert response["status"]["reason"] == "job-min-size-invalid"


async def test_a_job_with_a_minimum_labels_its_pods_resizable_beside_their_queue(
    webhook: Webhook,
) -> None:
    # Both labels go on a template that had none: its pods carry the queue label the pod
    # webhooks select them by, and sluice.dev/resizable, which gates them.
    seed(webhook, queue_obj("team-a", parent="root"))
    obj = with_minimum(job_obj("j", "team-a", parallelism=8), "4")
    obj["spec"]["template"].pop("metadata", None)
    review = make_review("Job", obj, namespace="team", user="alice")
    got = patched(obj, await answer(webhook, "/mutate/jobs", review))
    assert got["spec"]["template"]["metadata"]["labels"] == {
        "sluice.dev/queue-name": "team-a",
        "sluice.dev/resizable": "true",
    }


async def test_the_minimum_of_an_admitted_job_stays(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = running(with_minimum(job_obj("j", "team-a", parallelism=8), "4"))
    new = with_minimum(old, "2")
    review = make_review("Job", new, operation="UPDATE", old=old, namespace="team", user="alice")
    response = await answer(webhook, "/validate/jobs", review)
    assert response["status"]["reason"] == "job-min-size-immutable"
    assert f"(metadata.annotations[{MIN}]: 4 -> 2)" in response["status"]["message"]
    review = make_review("Job", new, operation="UPDATE", old=old, namespace="team", user=OPERATOR)
    assert (await answer(webhook, "/validate/jobs", review))["allowed"] is True
