"""Plain pods through the real server: the gate and the queue label at creation, and the rules
that keep a held or admitted pod in its queue, its group and its size."""

from __future__ import annotations

import copy
from typing import Any

from test_webhook_rules import patched, queue_obj, seed
from test_webhook_tenancy import answer
from webhook_harness import OPERATOR, Webhook, make_review

GATE = {"name": "sluice.dev/admission"}


def plain_pod(
    queue: str | None = "team-a",
    cpu: str = "1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "web-1",
        "namespace": "team",
        "labels": {**({"sluice.dev/queue-name": queue} if queue else {}), **(labels or {})},
        "annotations": dict(annotations or {}),
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": True}],
    }
    container = {"name": "main", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container], **spec},
    }


async def test_a_pod_of_a_queue_is_created_gated(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    obj = plain_pod(
        schedulingGates=[{"name": "theirs"}],
        labels={"sluice.dev/pod-group": "g"},
        annotations={"sluice.dev/pod-group-total-count": "4"},
    )
    response = await answer(webhook, "/mutate/pods", make_review("Pod", obj, namespace="team"))
    assert patched(obj, response)["spec"]["schedulingGates"] == [{"name": "theirs"}, GATE]
    verdict = await answer(webhook, "/validate/pods", make_review("Pod", obj, namespace="team"))
    assert verdict["allowed"] is True


async def test_a_pod_in_a_namespace_with_a_default_queue_gets_the_queue_and_the_gate(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    webhook.facts.namespaces["team"] = "team-a"
    obj = plain_pod(queue=None)
    response = await answer(webhook, "/mutate/pods", make_review("Pod", obj, namespace="team"))
    got = patched(obj, response)
    assert got["metadata"]["labels"] == {"sluice.dev/queue-name": "team-a"}
    assert got["spec"]["schedulingGates"] == [GATE]


async def test_a_jobs_pod_and_a_pod_of_no_queue_pass_untouched(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    jobs = plain_pod()
    jobs["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "j", "uid": "u", "controller": True}
    ]
    for obj in (jobs, plain_pod(queue=None)):
        response = await answer(webhook, "/mutate/pods", make_review("Pod", obj, namespace="team"))
        assert response["allowed"] is True and "patch" not in response


async def test_a_pod_of_a_resizable_job_is_created_gated(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    obj = plain_pod(labels={"sluice.dev/resizable": "true"})
    obj["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "j", "uid": "u", "controller": True}
    ]
    response = await answer(webhook, "/mutate/pods", make_review("Pod", obj, namespace="team"))
    assert patched(obj, response)["spec"]["schedulingGates"] == [GATE]


async def test_a_pod_must_go_to_an_open_leaf_queue_and_a_group_must_say_its_size(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    missing = await answer(
        webhook, "/validate/pods", make_review("Pod", plain_pod("nope"), namespace="team")
    )
    assert missing["status"]["message"] == "pod team/web-1: queue nope does not exist"
    group = plain_pod(labels={"sluice.dev/pod-group": "g"})
    refused = await answer(webhook, "/validate/pods", make_review("Pod", group, namespace="team"))
    assert (refused["status"]["reason"], refused["status"]["message"]) == (
        "pod-group-count",
        "Pod team/web-1: field metadata.annotations[sluice.dev/pod-group-total-count]: missing:"
        " a pod of a group says how many it has",
    )


async def test_only_sluice_removes_the_gate(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    held = plain_pod(schedulingGates=[GATE])
    released = plain_pod(schedulingGates=[])
    review = make_review("Pod", released, operation="UPDATE", old=held, namespace="team")
    response = await answer(webhook, "/validate/pods", review)
    assert response["status"]["message"] == (
        "pod team/web-1: only sluice may remove the scheduling gate sluice.dev/admission of a pod"
        " of queue team-a; it does so when the queue's quota allows"
    )
    by_operator = make_review(
        "Pod", released, operation="UPDATE", old=held, namespace="team", user=OPERATOR
    )
    assert (await answer(webhook, "/validate/pods", by_operator))["allowed"] is True


async def test_a_plain_pod_keeps_its_queue_group_and_size(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"), queue_obj("team-b", parent="root"))
    old = plain_pod(
        labels={"sluice.dev/pod-group": "g"},
        annotations={"sluice.dev/pod-group-total-count": "4"},
    )
    moved = copy.deepcopy(old)
    moved["metadata"]["labels"]["sluice.dev/queue-name"] = "team-b"
    review = make_review("Pod", moved, operation="UPDATE", old=old, namespace="team")
    assert (await answer(webhook, "/validate/pods", review))["status"]["message"] == (
        "pod team/web-1: its label sluice.dev/queue-name cannot change (from team-a to team-b);"
        " it ties the pod to its queue and group: create a new pod instead"
    )
    resized = copy.deepcopy(old)
    resized["metadata"]["annotations"]["sluice.dev/pod-group-total-count"] = "2"
    review = make_review("Pod", resized, operation="UPDATE", old=old, namespace="team")
    assert (await answer(webhook, "/validate/pods", review))["status"]["reason"] == (
        "pod-queue-immutable"
    )
    grown = copy.deepcopy(old)
    grown["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    review = make_review(
        "Pod", grown, operation="UPDATE", old=old, namespace="team", sub_resource="resize"
    )
    assert (await answer(webhook, "/validate/pods", review))["status"]["message"] == (
        "pod team/web-1 of queue team-a: its request cannot grow past what it was created with:"
        " cpu 1 -> 2"
    )


async def test_anyone_may_opt_a_pod_in_as_a_victim_but_not_protect_it(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    opted = plain_pod(annotations={"sluice.dev/preemptable": "true"})
    review = make_review("Pod", opted, namespace="team")
    assert (await answer(webhook, "/validate/pods", review))["allowed"] is True
    kept = plain_pod(annotations={"sluice.dev/preemptable": "false"})
    review = make_review("Pod", kept, namespace="team")
    refused = await answer(webhook, "/validate/pods", review)
    assert refused["status"]["reason"] == "job-protected-annotation"
    assert refused["status"]["message"].startswith(
        "pod team/web-1: annotation sluice.dev/preemptable can be set or changed only by"
    )
    stamped = plain_pod(annotations={"sluice.dev/admitted-at": "2026-01-01T00:00:00Z"})
    review = make_review("Pod", stamped, operation="UPDATE", old=plain_pod(), namespace="team")
    assert (await answer(webhook, "/validate/pods", review))["status"]["reason"] == (
        "job-operator-annotation"
    )
