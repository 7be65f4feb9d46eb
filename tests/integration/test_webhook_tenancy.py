"""The tenancy rules through the real server: queue access by namespace, protected
annotations by user and group, growth, orphaning deletes and the pods of managed jobs."""

from __future__ import annotations

import copy
from typing import Any

from test_webhook_rules import job_obj, patched, queue_obj, seed
from webhook_harness import OPERATOR, Webhook, make_review


def running(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["suspend"] = False
    return out


def with_requests(obj: dict[str, Any], cpu: str, parallelism: int = 1) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["parallelism"] = parallelism
    out["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return out


async def answer(webhook: Webhook, path: str, review: dict[str, Any]) -> dict[str, Any]:
    status, body = await webhook.review(path, review)
    assert status == 200, body
    return dict(body["response"])


async def test_a_managed_jobs_pods_carry_its_queue(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    obj = job_obj("train", "team-a")
    response = await answer(webhook, "/mutate/jobs", make_review("Job", obj, namespace="team"))
    labels = patched(obj, response)["spec"]["template"]["metadata"]["labels"]
    assert labels == {"sluice.dev/queue-name": "team-a"}


async def test_the_queue_selector_is_judged_on_the_namespaces_labels(webhook: Webhook) -> None:
    selector = {"matchLabels": {"team": "a"}}
    seed(webhook, queue_obj("team-a", parent="root", namespaceSelector=selector))
    review = make_review("Job", job_obj("j", "team-a"), namespace="team")
    response = await answer(webhook, "/validate/jobs", review)
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "job team/j: queue team-a takes jobs only from namespaces matching team=a"
        " (spec.namespaceSelector); namespace team does not match"
    )
    assert response["status"]["reason"] == "job-namespace-not-allowed"
    webhook.facts.namespace_labels_by_name["team"] = {"team": "a"}
    assert (await answer(webhook, "/validate/jobs", review))["allowed"] is True


async def test_protection_by_user_by_group_and_never_by_a_tenant(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    obj = job_obj("j", "team-a")
    obj["metadata"]["annotations"] = {"sluice.dev/preemptable": "false"}
    cases = [
        ("alice", ("system:authenticated",), False),
        ("platform-admin", ("system:authenticated",), True),
        ("bob", ("sluice-admins", "system:authenticated"), True),
        (OPERATOR, ("system:serviceaccounts",), True),
    ]
    for user, groups, allowed in cases:
        review = make_review("Job", obj, namespace="team", user=user, groups=groups)
        response = await answer(webhook, "/validate/jobs", review)
        assert response["allowed"] is allowed, user
    review = make_review("Job", obj, namespace="team", user="alice")
    message = (await answer(webhook, "/validate/jobs", review))["status"]["message"]
    assert "webhooks.protectedJobUsers (platform-admin, group:unused, sluice-admins)" in message


async def test_an_admitted_job_cannot_grow_through_the_server(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = running(with_requests(job_obj("j", "team-a"), "2", parallelism=1))
    new = with_requests(old, "2", parallelism=50)
    review = make_review("Job", new, operation="UPDATE", old=old, namespace="team")
    response = await answer(webhook, "/validate/jobs", review)
    assert response["status"]["reason"] == "job-grows-past-admission"
    assert "cpu 2 -> 100 (parallelism 1 -> 50)" in response["status"]["message"]
    review = make_review("Job", new, operation="UPDATE", old=old, user=OPERATOR)
    assert (await answer(webhook, "/validate/jobs", review))["allowed"] is True


async def test_deleting_an_admitted_job_must_take_its_pods(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = running(job_obj("j", "team-a"))
    for options, allowed in (
        ({"kind": "DeleteOptions", "propagationPolicy": "Orphan"}, False),
        ({"kind": "DeleteOptions"}, False),
        ({"kind": "DeleteOptions", "propagationPolicy": "Background"}, True),
    ):
        review = make_review(
            "Job", None, operation="DELETE", old=old, namespace="team", options=options
        )
        assert (await answer(webhook, "/validate/jobs", review))["allowed"] is allowed, options


def pod_obj(cpu: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "j-abc",
            "namespace": "team",
            "labels": {
                "sluice.dev/queue-name": "team-a",
                "batch.kubernetes.io/controller-uid": "u1",
                **labels,
            },
        },
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]},
    }


async def test_a_managed_pod_is_neither_resized_up_nor_relabelled_out(webhook: Webhook) -> None:
    seed(webhook)
    grow = make_review(
        "Pod", pod_obj("2"), operation="UPDATE", old=pod_obj("1"), sub_resource="resize"
    )
    response = await answer(webhook, "/validate/pods", grow)
    assert response["status"]["message"] == (
        "pod team/j-abc belongs to a job of queue team-a; its request cannot grow past what"
        " the job was admitted with: cpu 1 -> 2"
    )
    shrink = make_review(
        "Pod", pod_obj("1"), operation="UPDATE", old=pod_obj("2"), sub_resource="resize"
    )
    assert (await answer(webhook, "/validate/pods", shrink))["allowed"] is True
    away = pod_obj("1", **{"batch.kubernetes.io/controller-uid": "mine"})
    relabel = make_review("Pod", away, operation="UPDATE", old=pod_obj("1"))
    assert (await answer(webhook, "/validate/pods", relabel))["status"]["reason"] == "pod-job-label"
    status = make_review(
        "Pod", pod_obj("9"), operation="UPDATE", old=pod_obj("1"), sub_resource="status"
    )
    assert (await answer(webhook, "/validate/pods", status))["allowed"] is True
