"""The real server over HTTPS, its Queue cache held behind the API server: a queue the cache
has not seen yet is read from the API server (the fake facts' ``stored``) before a request
naming it is refused, and only then."""

from __future__ import annotations

from typing import Any

from test_webhook_rules import job_obj, patched, queue_obj, seed
from webhook_harness import Webhook, make_review


def stored(name: str, **spec: Any) -> dict[str, Any]:
    """A queue as the API server holds it: defaults filled in by the mutating webhook."""
    obj = queue_obj(name, **spec)
    obj["spec"] = {"weight": 1, "state": "Open", "reclaimable": True, **spec}
    return obj


async def verdict(webhook: Webhook, path: str, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
    status, body = await webhook.review(path, make_review(obj["kind"], obj, **kw))
    assert status == 200
    response: dict[str, Any] = body["response"]
    return response


async def test_default_is_accepted_while_the_cache_has_not_seen_root(webhook: Webhook) -> None:
    """The operator creates root, then default at once: the watch has not brought root yet."""
    webhook.cache.replace([])
    webhook.facts.stored["root"] = stored("root")
    default = queue_obj("default", parent="root")
    assert (await verdict(webhook, "/validate/queues", default))["allowed"] is True
    assert webhook.facts.read == ["root"]


async def test_a_parent_the_api_server_does_not_hold_either_is_refused(webhook: Webhook) -> None:
    webhook.cache.replace([])
    response = await verdict(webhook, "/validate/queues", queue_obj("default", parent="root"))
    assert response["allowed"] is False
    assert response["status"]["message"] == "queue default: parent root does not exist"
    assert webhook.facts.read == ["root"]


async def test_a_child_applied_with_its_parents_is_judged_against_them(webhook: Webhook) -> None:
    """`kubectl apply -f` of dept, team and lab in that order: the cache has seen neither
    parent when lab comes. They are read up the tree, and the rules hold against them."""
    seed(webhook)
    webhook.facts.stored["dept"] = stored("dept", parent="root")
    webhook.facts.stored["team"] = stored(
        "team", parent="dept", guarantee={"resource": {"cpu": "4"}}
    )
    lab = queue_obj("lab", parent="team", guarantee={"resource": {"cpu": "2"}})
    assert (await verdict(webhook, "/validate/queues", lab))["allowed"] is True
    assert webhook.facts.read == ["team", "dept"]
    greedy = queue_obj("lab", parent="team", guarantee={"resource": {"cpu": "6"}})
    response = await verdict(webhook, "/validate/queues", greedy)
    assert response["allowed"] is False
    assert response["status"]["reason"] == "guarantee-sum"


async def test_a_child_listed_before_its_parent_is_still_refused(webhook: Webhook) -> None:
    seed(webhook)
    response = await verdict(webhook, "/validate/queues", queue_obj("lab", parent="team"))
    assert response["allowed"] is False
    assert response["status"]["message"] == "queue lab: parent team does not exist"


async def test_a_queue_the_cache_holds_costs_no_read(webhook: Webhook) -> None:
    seed(webhook, queue_obj("dept", parent="root"))
    team = queue_obj("team", parent="dept")
    assert (await verdict(webhook, "/validate/queues", team))["allowed"] is True
    job = job_obj("j", queue="default")
    assert (await verdict(webhook, "/validate/jobs", job, namespace="team"))["allowed"] is True
    assert webhook.facts.read == []


async def test_a_job_for_a_queue_created_a_moment_ago_is_held_and_admitted(
    webhook: Webhook,
) -> None:
    seed(webhook)
    webhook.facts.stored["fresh"] = stored("fresh", parent="root", priorityClassName="batch")
    job = job_obj("j", queue="fresh")
    mutated = await verdict(webhook, "/mutate/jobs", job, namespace="team")
    spec = patched(job, mutated)["spec"]
    assert spec["suspend"] is True
    assert spec["template"]["spec"]["priorityClassName"] == "batch"  # the stored queue's
    assert (await verdict(webhook, "/validate/jobs", job, namespace="team"))["allowed"] is True
    assert webhook.facts.read == ["fresh", "fresh"]


async def test_a_job_for_a_queue_nowhere_is_refused_and_an_update_reads_nothing(
    webhook: Webhook,
) -> None:
    seed(webhook)
    job = job_obj("j", queue="nope", suspend=True)
    response = await verdict(webhook, "/validate/jobs", job, namespace="team")
    assert response["allowed"] is False
    assert response["status"]["message"] == "job team/j: queue nope does not exist"
    assert webhook.facts.read == ["nope"]
    changed = {**job, "metadata": {**job["metadata"], "annotations": {"note": "x"}}}
    kw: dict[str, Any] = {"operation": "UPDATE", "old": job, "namespace": "team"}
    assert (await verdict(webhook, "/validate/jobs", changed, **kw))["allowed"] is True
    assert webhook.facts.read == ["nope"]  # its queue unchanged: the rules do not read it
