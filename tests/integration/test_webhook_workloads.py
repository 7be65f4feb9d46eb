"""The kinds of workload other than Jobs at the door (docs/workloads.md): held on create
through their own field, and the tenancy rules of Jobs, read through each kind's adapter."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from test_webhook_rules import job_obj, patched, queue_obj, seed
from test_webhook_tenancy import answer
from webhook_harness import OPERATOR, Webhook, make_review

from sluice.api.workloads import BY_KIND
from sluice.webhooks.cache import QueueCache
from sluice.webhooks.handlers import Context, validate_workload
from sluice.webhooks.review import ReviewError, parse_review

POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}


def review(obj: dict[str, Any] | None, **kw: Any) -> dict[str, Any]:
    """An AdmissionReview of a workload of the object's kind (or the old object's)."""
    kind = str((obj or kw["old"])["kind"])
    out = make_review(kind, obj, namespace="team", **kw)
    group = BY_KIND[kind].group
    out["request"]["kind"]["group"] = out["request"]["resource"]["group"] = group
    return out


def jobset(name: str, queue: str | None = "team-a", **spec: Any) -> dict[str, Any]:
    labels = {"sluice.dev/queue-name": queue} if queue else {}
    job = {"parallelism": 2, "template": {"spec": POD}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "team", "labels": labels},
        "spec": {
            "replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": job}}],
            **spec,
        },
    }


def pytorch_job(name: str, **run_policy: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": POD}}}
    }
    if run_policy:
        spec["runPolicy"] = run_policy
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {"sluice.dev/queue-name": "team-a"},
        },
        "spec": spec,
    }


def ray_job(name: str, **spec: Any) -> dict[str, Any]:
    head = {"template": {"spec": POD}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {"sluice.dev/queue-name": "team-a"},
        },
        "spec": {"rayClusterSpec": {"headGroupSpec": head}, **spec},
    }


async def test_each_kind_is_held_on_create_through_its_own_field(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    js = jobset("sweep")
    held = patched(js, await answer(webhook, "/mutate/workloads", review(js)))
    assert held["spec"]["suspend"] is True
    pt = pytorch_job("train")
    held = patched(pt, await answer(webhook, "/mutate/workloads", review(pt)))
    assert held["spec"]["runPolicy"] == {"suspend": True}


async def test_a_namespaces_default_queue_labels_and_holds_a_workload(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    webhook.facts.namespaces["team"] = "team-a"
    js = jobset("sweep", queue=None)
    held = patched(js, await answer(webhook, "/mutate/workloads", review(js)))
    assert held["metadata"]["labels"] == {"sluice.dev/queue-name": "team-a"}
    assert held["spec"]["suspend"] is True


async def test_a_job_a_gated_kind_controls_is_left_to_it(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    webhook.facts.namespaces["team"] = "team-a"
    child = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sweep-workers-0",
            "namespace": "team",
            "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "controller": True}
            ],
        },
        "spec": {"template": {"spec": POD}},
    }
    mutated = await answer(webhook, "/mutate/jobs", make_review("Job", child, namespace="team"))
    assert mutated["allowed"] is True and "patch" not in mutated


async def test_queue_access_is_judged_as_for_a_job(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    response = await answer(webhook, "/validate/workloads", review(jobset("x", queue="nope")))
    assert response["allowed"] is False
    assert response["status"]["message"] == "jobset team/x: queue nope does not exist"
    assert response["status"]["reason"] == "job-queue-missing"


async def test_a_rayjob_that_keeps_its_cluster_is_refused(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    response = await answer(webhook, "/validate/workloads", review(ray_job("keep")))
    assert response["allowed"] is False
    assert response["status"]["reason"] == "job-not-manageable"
    assert response["status"]["message"] == (
        "rayjob team/keep: field spec.shutdownAfterJobFinishes: must be true: KubeRay holds a"
        " RayJob by spec.suspend only then (its Ray cluster goes when its job ends), and sluice"
        " holds RayJobs by spec.suspend"
    )
    ok = ray_job("done", shutdownAfterJobFinishes=True)
    assert (await answer(webhook, "/validate/workloads", review(ok)))["allowed"] is True


async def test_only_sluice_releases_a_held_workload(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = pytorch_job("train", suspend=True)
    new = pytorch_job("train", suspend=False)
    body = review(new, operation="UPDATE", old=old)
    response = await answer(webhook, "/validate/workloads", body)
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "pytorchjob team/train: only sluice may clear spec.runPolicy.suspend on a job of queue"
        " team-a; it does so when the queue's quota allows"
    )
    body = review(new, operation="UPDATE", old=old, user=OPERATOR)
    assert (await answer(webhook, "/validate/workloads", body))["allowed"] is True


async def test_an_admitted_workload_does_not_grow(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = jobset("sweep", suspend=False)
    new = copy.deepcopy(old)
    new["spec"]["replicatedJobs"][0]["replicas"] = 4
    response = await answer(
        webhook, "/validate/workloads", review(new, operation="UPDATE", old=old)
    )
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "jobset team/sweep: an admitted job cannot grow past what it was admitted with:"
        " cpu 4 -> 8 (pods 4 -> 8); lower it, or suspend the job (spec.suspend: true) to queue"
        " it again at its new size"
    )
    new["spec"]["suspend"] = True
    body = review(new, operation="UPDATE", old=old)
    assert (await answer(webhook, "/validate/workloads", body))["allowed"] is True


CLAIMS = [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]


async def test_an_admitted_workloads_claims_do_not_change(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = jobset("sweep", suspend=False)
    new = copy.deepcopy(old)
    new["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["resourceClaims"] = (
        CLAIMS
    )
    response = await answer(
        webhook, "/validate/workloads", review(new, operation="UPDATE", old=old)
    )
    assert response["allowed"] is False
    assert response["status"]["reason"] == "job-claims-immutable"
    assert response["status"]["message"].startswith(
        "jobset team/sweep: the resourceClaims of pod set workers"
        " (spec.replicatedJobs[0].template.spec.template.spec.resourceClaims) cannot change"
        " while it is admitted"
    )
    new["spec"]["suspend"] = True
    body = review(new, operation="UPDATE", old=old)
    assert (await answer(webhook, "/validate/workloads", body))["allowed"] is True


async def test_an_admitted_jobs_claims_do_not_change(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = job_obj("train", "team-a", suspend=False)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["resourceClaims"] = CLAIMS
    body = make_review("Job", new, operation="UPDATE", old=old, namespace="team")
    response = await answer(webhook, "/validate/jobs", body)
    assert response["status"]["reason"] == "job-claims-immutable"
    message = response["status"]["message"]
    assert message.startswith("job team/train: the resourceClaims of pod set main (spec.template")
    held = job_obj("train", "team-a", suspend=True)
    asking = copy.deepcopy(held)
    asking["spec"]["template"]["spec"]["resourceClaims"] = CLAIMS
    body = make_review("Job", asking, operation="UPDATE", old=held, namespace="team")
    assert (await answer(webhook, "/validate/jobs", body))["allowed"] is True


async def test_the_operators_annotations_are_its_own_on_every_kind(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    obj = jobset("sweep")
    obj["metadata"]["annotations"] = {"sluice.dev/admitted-at": "2026-01-01T00:00:00Z"}
    response = await answer(webhook, "/validate/workloads", review(obj))
    assert response["allowed"] is False
    assert response["status"]["reason"] == "job-operator-annotation"


async def test_a_kind_that_is_not_gated_is_not_reviewed() -> None:
    ctx = Context(
        cache=QueueCache(),
        facts=None,  # type: ignore[arg-type]
        operator_users=frozenset(),
        workloads=frozenset({"Job", "JobSet"}),
    )
    request = parse_review(_bytes(review(pytorch_job("train"))))
    with pytest.raises(ReviewError, match="reviews the kinds of workload sluice gates"):
        await validate_workload(request, ctx)


def _bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


async def test_every_pod_template_of_a_workload_is_labelled_with_its_queue(
    webhook: Webhook,
) -> None:
    # Its pods then carry the queue, so the pod webhook guards them as a Job's (below).
    seed(webhook, queue_obj("team-a", parent="root"))
    queue = {"sluice.dev/queue-name": "team-a"}
    ray = ray_job(
        "count",
        rayClusterSpec={
            "headGroupSpec": {"template": {"spec": POD}},
            "workerGroupSpecs": [
                {
                    "groupName": "small",
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": POD},
                },
                {"groupName": "big", "template": {"spec": POD}},
            ],
        },
        submitterPodTemplate={"spec": POD},
    )
    held = patched(ray, await answer(webhook, "/mutate/workloads", review(ray)))
    cluster = held["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["metadata"]["labels"] == queue
    assert cluster["workerGroupSpecs"][0]["template"]["metadata"]["labels"] == {"a": "b", **queue}
    assert cluster["workerGroupSpecs"][1]["template"]["metadata"]["labels"] == queue
    assert held["spec"]["submitterPodTemplate"]["metadata"]["labels"] == queue
    js = jobset("sweep")
    held = patched(js, await answer(webhook, "/mutate/workloads", review(js)))
    pods = held["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pods["metadata"]["labels"] == queue
    pt = pytorch_job("train")
    held = patched(pt, await answer(webhook, "/mutate/workloads", review(pt)))
    master = held["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    assert master["metadata"]["labels"] == queue


def ray_pod(cpu: str, **labels: str) -> dict[str, Any]:
    """A Ray worker pod of a managed RayJob, as KubeRay makes it from a labelled template."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "count-raycluster-x-small-worker-abc",
            "namespace": "team",
            "labels": {
                "sluice.dev/queue-name": "team-a",
                "ray.io/cluster": "count-raycluster-x",
                "ray.io/group": "small",
                "ray.io/node-type": "worker",
                **labels,
            },
            "ownerReferences": [
                {"kind": "RayCluster", "name": "count-raycluster-x", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "ray-worker", "resources": {"requests": {"cpu": cpu}}}]},
    }


@pytest.mark.parametrize("label", ["ray.io/cluster", "ray.io/group"])
async def test_a_workloads_pod_keeps_the_labels_sluice_counts_it_by(
    webhook: Webhook, label: str
) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    away = ray_pod("1", **{label: "elsewhere"})
    relabel = make_review("Pod", away, operation="UPDATE", old=ray_pod("1"), namespace="team")
    refused = await answer(webhook, "/validate/pods", relabel)
    assert refused["status"]["reason"] == "pod-job-label"
    assert label in refused["status"]["message"]
    grow = make_review(
        "Pod", ray_pod("2"), operation="UPDATE", old=ray_pod("1"), namespace="team",
        sub_resource="resize",
    )  # fmt: skip
    assert (await answer(webhook, "/validate/pods", grow))["allowed"] is False
    other = ray_pod("1", app="web")
    changed = make_review("Pod", other, operation="UPDATE", old=ray_pod("1"), namespace="team")
    assert (await answer(webhook, "/validate/pods", changed))["allowed"] is True
