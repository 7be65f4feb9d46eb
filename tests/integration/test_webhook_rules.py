"""The real server over HTTPS: every queue and job rule through AdmissionReview JSON."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest
from webhook_harness import OPERATOR, Webhook, make_review

from sluice.api.resources import Resources

QUEUE_API = "scheduling.sluice.dev/v1beta1"


def queue_obj(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def job_obj(name: str, queue: str | None = None, **spec: Any) -> dict[str, Any]:
    labels = {"sluice.dev/queue-name": queue} if queue else {}
    template = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team", "labels": labels},
        "spec": {"template": template, **spec},
    }


def seed(webhook: Webhook, *objs: dict[str, Any], status: dict[str, str] | None = None) -> None:
    items = [queue_obj("root"), queue_obj("default", parent="root"), *objs]
    for item in items:
        state = (status or {}).get(item["metadata"]["name"])
        if state:
            item["status"] = {"state": state}
    webhook.cache.replace(items)


def patched(original: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(original, ops)


async def test_queue_defaults_come_as_a_json_patch(webhook: Webhook) -> None:
    obj = queue_obj("team", weight=3)
    status, body = await webhook.review("/mutate/queues", make_review("Queue", obj, uid="u-42"))
    assert status == 200
    response = body["response"]
    assert response["uid"] == "u-42" and response["allowed"]
    assert patched(obj, response)["spec"] == {
        "weight": 3,
        "reclaimable": True,
        "state": "Open",
        "dequeueStrategy": "traverse",
        "parent": "root",
    }


async def test_queue_rules_refuse_with_the_rule_and_the_numbers(webhook: Webhook) -> None:
    seed(webhook, queue_obj("dept", parent="root", guarantee={"resource": {"cpu": "4"}}))
    child = queue_obj("a", parent="dept", guarantee={"resource": {"cpu": "6"}})
    _, body = await webhook.review("/validate/queues", make_review("Queue", child))
    response = body["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "queue a: the children of dept would have guarantee cpu 6 in total,"
        " more than dept's guarantee cpu 4"
    )
    assert response["status"]["reason"] == "guarantee-sum"


async def test_guarantees_a_capped_parent_can_never_hold_are_refused_with_the_numbers(
    webhook: Webhook,
) -> None:
    seed(
        webhook,
        queue_obj("dept", parent="root", capability={"cpu": "6"}),
        queue_obj("a", parent="dept", guarantee={"resource": {"cpu": "4"}}),
    )
    child = queue_obj("b", parent="dept", guarantee={"resource": {"cpu": "4"}})
    _, body = await webhook.review("/validate/queues", make_review("Queue", child))
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == (
        "queue b: the children of dept would have guarantee cpu 8 in total,"
        " more than all dept can ever hold, its capability cpu 6"
    )


async def test_a_malformed_quantity_is_refused_naming_the_field(webhook: Webhook) -> None:
    seed(webhook)
    bad = queue_obj("a", capability={"cpu": "four"})
    _, body = await webhook.review("/validate/queues", make_review("Queue", bad))
    assert body["response"]["allowed"] is False
    assert "field spec.capability" in body["response"]["status"]["message"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"state": "Closing"}, "Queue a: field spec.state: Input should be 'Open' or 'Closed'"),
        ({"weight": 0}, "Queue a: field spec.weight: Input should be greater than or equal to 1"),
        (
            {"weight": 65536},
            "Queue a: field spec.weight: Input should be less than or equal to 65535",
        ),
        (
            {"priority": 1, "priorityClassName": "high"},
            "Queue a: field spec: priority and priorityClassName cannot both be set",
        ),
    ],
)
async def test_a_spec_outside_the_schema_is_refused_naming_field_and_bounds(
    webhook: Webhook, spec: dict[str, Any], message: str
) -> None:
    seed(webhook)
    for operation, old in (("CREATE", None), ("UPDATE", queue_obj("a", parent="root"))):
        review = make_review("Queue", queue_obj("a", **spec), operation=operation, old=old)
        _, body = await webhook.review("/validate/queues", review)
        assert body["response"]["allowed"] is False
        assert body["response"]["status"] == {
            "code": 403,
            "message": message,
            "reason": "invalid-object",
        }


async def test_parent_with_jobs_is_asked_of_the_cluster_only_when_needed(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team", parent="root"))
    webhook.facts.holding = {"team"}
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", queue_obj("sub", parent="team"))
    )
    assert body["response"]["status"]["reason"] == "parent-holds-jobs"
    assert webhook.facts.asked == ["team"]
    webhook.facts.asked.clear()
    await webhook.review(
        "/validate/queues", make_review("Queue", queue_obj("other", parent="root"))
    )
    assert webhook.facts.asked == []


async def test_root_guarantee_warning_comes_back_as_a_warning(webhook: Webhook) -> None:
    seed(webhook, queue_obj("a", parent="root", guarantee={"resource": {"cpu": "8"}}))
    webhook.facts.capacity = Resources({"cpu": 10_000})
    obj = queue_obj("b", parent="root", guarantee={"resource": {"cpu": "4"}})
    _, body = await webhook.review("/validate/queues", make_review("Queue", obj))
    assert body["response"]["allowed"] is True
    assert "cannot all be honoured" in body["response"]["warnings"][0]


async def test_only_closed_queues_can_be_deleted(webhook: Webhook) -> None:
    seed(webhook, queue_obj("gone", parent="root"), queue_obj("busy", parent="root"))
    closed = {**queue_obj("gone", parent="root", state="Closed"), "status": {"state": "Closed"}}
    busy = {**queue_obj("busy", parent="root", state="Closed"), "status": {"state": "Closing"}}
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", None, operation="DELETE", old=closed)
    )
    assert body["response"]["allowed"] is True
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", None, operation="DELETE", old=busy)
    )
    assert body["response"]["status"]["message"].startswith("queue busy is Closing;")
    root = queue_obj("root")
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", None, operation="DELETE", old=root)
    )
    assert body["response"]["status"]["message"] == "queue root cannot be deleted"


async def test_status_updates_are_never_blocked(webhook: Webhook) -> None:
    seed(webhook, queue_obj("dept", parent="root", guarantee={"resource": {"cpu": "1"}}))
    broken = queue_obj("a", parent="dept", guarantee={"resource": {"cpu": "9"}})
    review = make_review("Queue", broken, operation="UPDATE", old=broken, sub_resource="status")
    _, body = await webhook.review("/validate/queues", review)
    assert body["response"]["allowed"] is True


async def test_job_create_is_suspended_and_inherits_the_queue_priority_class(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("team-a", parent="root", priorityClassName="research"))
    obj = job_obj("train", "team-a")
    _, body = await webhook.review("/mutate/jobs", make_review("Job", obj, namespace="team"))
    result = patched(obj, body["response"])
    assert result["spec"]["suspend"] is True
    assert result["spec"]["template"]["spec"]["priorityClassName"] == "research"


async def test_namespace_default_queue_labels_the_job(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    webhook.facts.namespaces = {"team": "team-a"}
    obj = job_obj("train")
    _, body = await webhook.review("/mutate/jobs", make_review("Job", obj, namespace="team"))
    result = patched(obj, body["response"])
    assert result["metadata"]["labels"]["sluice.dev/queue-name"] == "team-a"
    assert result["spec"]["suspend"] is True


async def test_unmanaged_jobs_pass_untouched(webhook: Webhook) -> None:
    seed(webhook)
    _, body = await webhook.review(
        "/mutate/jobs", make_review("Job", job_obj("x"), namespace="team")
    )
    assert body["response"] == {"uid": "uid-1", "allowed": True}


async def test_jobs_are_refused_for_missing_closed_or_parent_queues(webhook: Webhook) -> None:
    seed(
        webhook,
        queue_obj("dept", parent="root"),
        queue_obj("leaf", parent="dept"),
        queue_obj("shut", parent="root", state="Closed"),
        status={"shut": "Closed"},
    )
    cases = {
        "nope": "job team/j: queue nope does not exist",
        "dept": "job team/j: queue dept has child queues (leaf); jobs go to leaf queues only",
        "shut": "job team/j: queue shut is Closed; it accepts no new jobs",
        "root": "job team/j: jobs cannot be submitted to queue root; use a leaf queue",
    }
    for queue, message in cases.items():
        review = make_review("Job", job_obj("j", queue), namespace="team")
        _, body = await webhook.review("/validate/jobs", review)
        assert body["response"]["allowed"] is False
        assert body["response"]["status"]["message"] == message
    _, body = await webhook.review(
        "/validate/jobs", make_review("Job", job_obj("j", "leaf"), namespace="team")
    )
    assert body["response"]["allowed"] is True


async def test_a_queue_closed_a_moment_ago_refuses_jobs_before_its_status_catches_up(
    webhook: Webhook,
) -> None:
    seed(
        webhook,
        queue_obj("shut", parent="root", state="Closed"),
        queue_obj("dept", parent="root", state="Closed"),
        queue_obj("team", parent="dept"),
        status={"shut": "Open", "dept": "Closing", "team": "Open"},
    )
    for queue, message in (
        ("shut", "job team/j: queue shut is Closing; it accepts no new jobs"),
        (
            "team",
            "job team/j: queue team is Closing because its ancestor dept is Closed;"
            " it accepts no new jobs",
        ),
    ):
        review = make_review("Job", job_obj("j", queue), namespace="team")
        _, body = await webhook.review("/validate/jobs", review)
        assert body["response"]["allowed"] is False
        assert body["response"]["status"]["message"] == message


async def test_only_the_operator_may_unsuspend(webhook: Webhook) -> None:
    seed(webhook, queue_obj("a", parent="root"))
    old, new = job_obj("j", "a", suspend=True), job_obj("j", "a", suspend=False)
    review = make_review("Job", new, operation="UPDATE", old=old, namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["status"]["reason"] == "job-unsuspend"
    review = make_review("Job", new, operation="UPDATE", old=old, user=OPERATOR, namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["allowed"] is True


async def test_an_admitted_job_keeps_its_queue(webhook: Webhook) -> None:
    seed(webhook, queue_obj("a", parent="root"), queue_obj("b", parent="root"))
    old, new = job_obj("j", "a", suspend=False), job_obj("j", "b", suspend=False)
    review = make_review("Job", new, operation="UPDATE", old=old, namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["status"]["reason"] == "job-queue-immutable"


def broken_queue(**status: str) -> dict[str, Any]:
    """A queue stored before the webhooks were installed, with a spec they would refuse."""
    obj = queue_obj("legacy", parent="root", capability={"cpu": "four"}, state="Closed")
    if status:
        obj["status"] = status
    return obj


async def test_metadata_writes_on_an_unreadable_queue_are_allowed(webhook: Webhook) -> None:
    seed(webhook)
    old = broken_queue()
    new = {**old, "metadata": {"name": "legacy", "finalizers": ["sluice.dev/subtree"]}}
    review = make_review("Queue", new, operation="UPDATE", old=old, user=OPERATOR)
    _, body = await webhook.review("/validate/queues", review)
    assert body["response"]["allowed"] is True


async def test_an_unreadable_queue_can_be_repaired_but_not_broken_further(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("dept", parent="root", capability={"cpu": "2"}))
    old = broken_queue()
    fixed = queue_obj("legacy", parent="root", capability={"cpu": "4"}, state="Closed")
    review = make_review("Queue", fixed, operation="UPDATE", old=old)
    _, body = await webhook.review("/validate/queues", review)
    assert body["response"]["allowed"] is True
    over = queue_obj("legacy", parent="dept", capability={"cpu": "4"})
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", over, operation="UPDATE", old=old)
    )
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["reason"] == "capability-over-ancestor"
    still_bad = {**old, "spec": {**old["spec"], "weight": 2}}
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", still_bad, operation="UPDATE", old=old)
    )
    assert body["response"]["status"]["reason"] == "invalid-object"
    assert "field spec.capability" in body["response"]["status"]["message"]


async def test_an_unreadable_queue_is_deletable_once_closed(webhook: Webhook) -> None:
    seed(webhook)
    closed = broken_queue(state="Closed")
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", None, operation="DELETE", old=closed)
    )
    assert body["response"]["allowed"] is True
    closing = broken_queue(state="Closing")
    _, body = await webhook.review(
        "/validate/queues", make_review("Queue", None, operation="DELETE", old=closing)
    )
    assert body["response"]["status"]["reason"] == "delete-not-closed"


async def test_a_pending_job_moves_only_to_a_queue_that_would_accept_it(
    webhook: Webhook,
) -> None:
    seed(
        webhook,
        queue_obj("a", parent="root"),
        queue_obj("b", parent="root"),
        queue_obj("shut", parent="root", state="Closed"),
        status={"shut": "Closed"},
    )
    old = job_obj("j", "a", suspend=True)
    for target, reason, message in (
        ("shut", "job-queue-not-open", "job team/j: queue shut is Closed; it accepts no new jobs"),
        ("gone", "job-queue-missing", "job team/j: queue gone does not exist"),
    ):
        review = make_review(
            "Job", job_obj("j", target, suspend=True), operation="UPDATE", old=old, namespace="team"
        )
        _, body = await webhook.review("/validate/jobs", review)
        assert body["response"]["status"]["reason"] == reason
        assert body["response"]["status"]["message"] == message
    review = make_review(
        "Job", job_obj("j", "b", suspend=True), operation="UPDATE", old=old, namespace="team"
    )
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["allowed"] is True


async def test_only_sluice_may_take_the_queue_label_off_an_unfinished_job(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("a", parent="root"))
    old, new = job_obj("j", "a", suspend=True), job_obj("j", None, suspend=True)
    review = make_review("Job", new, operation="UPDATE", old=old, namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == (
        "job team/j: the label sluice.dev/queue-name (a) cannot be removed from an unfinished"
        " job; move it to another queue or delete it"
    )
    review = make_review("Job", new, operation="UPDATE", old=old, user=OPERATOR, namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["allowed"] is True
    done = {**old, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    review = make_review("Job", new, operation="UPDATE", old=done, namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["allowed"] is True


async def test_a_running_job_cannot_be_labelled_into_a_queue_but_a_finished_one_may_leave(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("a", parent="root"))
    running, labelled = job_obj("j", None, suspend=False), job_obj("j", "a", suspend=False)
    review = make_review("Job", labelled, operation="UPDATE", old=running, namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["status"]["reason"] == "job-queue-immutable"
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    finished = {**labelled, "status": done}
    review = make_review(
        "Job", {**running, "status": done}, operation="UPDATE", old=finished, namespace="team"
    )
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["allowed"] is True


async def test_a_guarantee_over_the_weighted_share_comes_back_as_a_warning(
    webhook: Webhook,
) -> None:
    seed(webhook, queue_obj("a", parent="root", weight=3))
    webhook.facts.capacity = Resources({"cpu": 12_000, "memory": 64 * 2**30 * 1000})
    greedy = queue_obj("b", parent="root", guarantee={"resource": {"cpu": "4", "memory": "1Gi"}})
    _, body = await webhook.review("/validate/queues", make_review("Queue", greedy))
    assert body["response"]["allowed"] is True
    # default (weight 1), a (3) and b (1) share root: b's weighted share of cpu 12 is cpu 2400m.
    assert body["response"]["warnings"] == [
        "queue b: guarantee cpu 4 is more than its weighted share of the cluster's current"
        " capacity, cpu 2400m (weight 1 of 5 under root); its siblings get less than their"
        " weights promise"
    ]
    modest = queue_obj("c", parent="root", guarantee={"resource": {"cpu": "2"}})
    _, body = await webhook.review("/validate/queues", make_review("Queue", modest))
    assert "warnings" not in body["response"]


async def test_dry_run_requests_get_the_same_answer(webhook: Webhook) -> None:
    seed(webhook, queue_obj("dept", parent="root", guarantee={"resource": {"cpu": "4"}}))
    child = queue_obj("a", parent="dept", guarantee={"resource": {"cpu": "6"}})
    answers = []
    for dry_run in (False, True):
        review = make_review("Queue", child, dry_run=dry_run)
        _, body = await webhook.review("/validate/queues", review)
        answers.append(body["response"])
    assert answers[0] == answers[1] and answers[1]["status"]["reason"] == "guarantee-sum"
    obj = queue_obj("team")
    _, body = await webhook.review("/mutate/queues", make_review("Queue", obj, dry_run=True))
    assert patched(obj, body["response"])["spec"]["parent"] == "root"


async def test_a_delete_without_old_object_is_judged_from_the_cache(webhook: Webhook) -> None:
    seed(
        webhook,
        queue_obj("busy", parent="root", state="Closed"),
        queue_obj("gone", parent="root", state="Closed"),
        status={"busy": "Closing", "gone": "Closed"},
    )
    for name, allowed in (("busy", False), ("gone", True), ("never-seen", True)):
        review = make_review("Queue", None, operation="DELETE")
        review["request"]["name"] = name
        _, body = await webhook.review("/validate/queues", review)
        assert body["response"]["allowed"] is allowed, name
    review = make_review("Queue", None, operation="DELETE")
    review["request"]["name"] = "default"
    _, body = await webhook.review("/validate/queues", review)
    assert body["response"]["status"]["message"] == "queue default cannot be deleted"


async def test_labels_and_finalizers_on_a_queue_in_a_broken_tree_are_allowed(
    webhook: Webhook,
) -> None:
    # Stored before the webhooks and without defaults: a's guarantee is over dept's.
    legacy = queue_obj("a", parent="dept", guarantee={"resource": {"cpu": "9"}})
    seed(webhook, queue_obj("dept", parent="root", guarantee={"resource": {"cpu": "1"}}), legacy)
    _, body = await webhook.review(
        "/mutate/queues",
        make_review("Queue", legacy, operation="UPDATE", old=legacy),
    )
    labelled = patched(legacy, body["response"])  # the mutating hook fills the defaults in
    labelled["metadata"] = {
        "name": "a",
        "labels": {"team": "ml"},
        "finalizers": ["sluice.dev/subtree"],
    }
    review = make_review("Queue", labelled, operation="UPDATE", old=legacy)
    _, body = await webhook.review("/validate/queues", review)
    assert body["response"]["allowed"] is True
    raised = {**labelled, "spec": {**labelled["spec"], "guarantee": {"resource": {"cpu": "10"}}}}
    review = make_review("Queue", raised, operation="UPDATE", old=legacy)
    _, body = await webhook.review("/validate/queues", review)
    assert body["response"]["status"]["reason"] == "guarantee-sum"


async def test_an_explicit_queue_label_wins_over_the_namespace_default(webhook: Webhook) -> None:
    seed(
        webhook,
        queue_obj("team-a", parent="root"),
        queue_obj("team-b", parent="root", priorityClassName="batch-low"),
        queue_obj("shut", parent="root", state="Closed"),
    )
    webhook.facts.namespaces = {"team": "team-a"}
    obj = job_obj("train", "team-b")
    _, body = await webhook.review("/mutate/jobs", make_review("Job", obj, namespace="team"))
    result = patched(obj, body["response"])
    assert result["metadata"]["labels"]["sluice.dev/queue-name"] == "team-b"
    assert result["spec"]["template"]["spec"]["priorityClassName"] == "batch-low"
    review = make_review("Job", job_obj("train", "shut"), namespace="team")
    _, body = await webhook.review("/validate/jobs", review)
    assert body["response"]["status"]["message"] == (
        "job team/train: queue shut is Closing; it accepts no new jobs"
    )
