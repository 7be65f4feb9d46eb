"""The real server over HTTPS: Flavors at /validate/flavors, Queues' spec.flavors at
/validate/queues, which reads the Flavors that exist only for a queue that names some, and
what admission into flavors wrote in an admitted workload's templates, kept while it runs."""

from __future__ import annotations

import copy
from typing import Any

from test_webhook_rules import job_obj, queue_obj, seed
from webhook_harness import Webhook, make_review

from sluice.api.flavor import FlavorView, Taint
from sluice.api.workloads import BY_KIND
from sluice.api.workloads.flavor_patches import applied, flavor_admission_patch

GPU = "nvidia.com/gpu"
H100 = FlavorView("h100", {"gpu.example.com/model": "H100"}, (Taint(GPU, "present", "NoSchedule"),))
A100 = FlavorView("a100", {"gpu.example.com/model": "A100"})


def flavor_obj(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Flavor",
        "metadata": {"name": name},
        "spec": spec,
    }


async def _allowed(webhook: Webhook, path: str, review: dict[str, Any]) -> dict[str, Any]:
    status, body = await webhook.review(path, review)
    assert status == 200
    return dict(body["response"])


async def test_a_flavor_is_validated_at_the_door(webhook: Webhook) -> None:
    good = flavor_obj(
        "h100",
        nodeLabels={"gpu.example.com/model": "H100"},
        nodeTaints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        topologyName="fabric",
    )
    assert (await _allowed(webhook, "/validate/flavors", make_review("Flavor", good)))["allowed"]
    bad = flavor_obj(
        "h100",
        nodeLabels={"gpu.example.com/model": "H100 SXM"},
        nodeTaints=[{"key": "dedicated", "effect": "NoWait"}],
    )
    response = await _allowed(webhook, "/validate/flavors", make_review("Flavor", bad))
    assert not response["allowed"]
    message = response["status"]["message"]
    assert message.startswith("flavor h100: spec.nodeLabels[gpu.example.com/model]: 'H100 SXM'")
    assert "spec.nodeTaints[0].effect: 'NoWait' is not one of NoSchedule" in message
    update = make_review("Flavor", bad, operation="UPDATE", old=good)
    assert not (await _allowed(webhook, "/validate/flavors", update))["allowed"]


async def test_a_queue_naming_a_missing_flavor_is_refused(webhook: Webhook) -> None:
    seed(webhook)
    webhook.facts.flavors = frozenset({"a100"})
    queue = queue_obj("team", parent="root", flavors=[{"name": "h100", "capability": {GPU: 8}}])
    response = await _allowed(webhook, "/validate/queues", make_review("Queue", queue))
    assert not response["allowed"]
    assert response["status"]["message"] == (
        "queue team: flavor h100 does not exist (flavors: a100); create the Flavor first"
    )
    webhook.facts.flavors = frozenset({"a100", "h100"})
    assert (await _allowed(webhook, "/validate/queues", make_review("Queue", queue)))["allowed"]


async def test_per_flavor_sums_are_refused_naming_queue_flavor_and_resource(
    webhook: Webhook,
) -> None:
    webhook.facts.flavors = frozenset({"h100"})
    seed(
        webhook,
        queue_obj(
            "org", parent="root", flavors=[{"name": "h100", "guarantee": {"resource": {GPU: 8}}}]
        ),
        queue_obj(
            "a", parent="org", flavors=[{"name": "h100", "guarantee": {"resource": {GPU: 6}}}]
        ),
    )
    b = queue_obj(
        "b", parent="org", flavors=[{"name": "h100", "guarantee": {"resource": {GPU: 4}}}]
    )
    response = await _allowed(webhook, "/validate/queues", make_review("Queue", b))
    assert not response["allowed"]
    assert response["status"]["message"] == (
        "queue b: in flavor h100, the queues nearest below org that name it would have"
        " guarantee nvidia.com/gpu 10 in total, more than org's guarantee nvidia.com/gpu 8"
    )


async def test_a_queue_without_flavors_never_reads_them(webhook: Webhook) -> None:
    seed(webhook)

    async def fail() -> frozenset[str]:
        raise AssertionError("the Flavors were read for a queue that names none")

    webhook.facts.flavor_names = fail  # type: ignore[method-assign]
    queue = queue_obj("team", parent="root", capability={GPU: 8})
    assert (await _allowed(webhook, "/validate/queues", make_review("Queue", queue)))["allowed"]


def admitted_into(obj: dict[str, Any], adapter_kind: str, **chosen: str) -> dict[str, Any]:
    """The workload as the operator's release leaves it: each pod set on its flavor."""
    adapter = BY_KIND[adapter_kind]
    flavors = {"h100": H100, "a100": A100}
    decided = tuple((pod_set, flavors[name].name) for pod_set, name in chosen.items())
    release = {**adapter.suspend_patch(False)}
    return applied(obj, flavor_admission_patch(decided, obj, adapter, flavors, release))


async def test_an_admitted_jobs_flavor_stays_on_its_template(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = admitted_into(job_obj("train", "team-a", suspend=True), "Job", main="h100")
    for change in ("nodeSelector", "tolerations"):
        new = copy.deepcopy(old)
        del new["spec"]["template"]["spec"][change]
        body = make_review("Job", new, operation="UPDATE", old=old, namespace="team")
        response = await _allowed(webhook, "/validate/jobs", body)
        assert not response["allowed"]
        assert response["status"]["reason"] == "flavor-assignment-kept"
        assert response["status"]["message"] == (
            "job team/train: the pod template of pod set main must keep the nodeSelector and"
            " tolerations of flavor h100 it was admitted into while it runs; suspend it to"
            " change them"
        )
    # Another label, another toleration: the flavor's stay, so it may.
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"]["zone"] = "z1"
    body = make_review("Job", new, operation="UPDATE", old=old, namespace="team")
    assert (await _allowed(webhook, "/validate/jobs", body))["allowed"]
    # Suspended, it may change (and sluice takes the flavor off itself).
    held = copy.deepcopy(old)
    held["spec"]["suspend"] = True
    new = copy.deepcopy(held)
    del new["spec"]["template"]["spec"]["nodeSelector"]
    body = make_review("Job", new, operation="UPDATE", old=held, namespace="team")
    assert (await _allowed(webhook, "/validate/jobs", body))["allowed"]


async def test_each_pod_set_of_a_jobset_keeps_its_own_flavor(webhook: Webhook) -> None:
    seed(webhook, queue_obj("team-a", parent="root"))
    old = admitted_into(two_sets(), "JobSet", driver="a100", workers="h100")
    new = copy.deepcopy(old)
    spec = new["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    spec["nodeSelector"]["gpu.example.com/model"] = "A100"
    body = make_review("JobSet", new, operation="UPDATE", old=old, namespace="team")
    body["request"]["kind"]["group"] = body["request"]["resource"]["group"] = "jobset.x-k8s.io"
    response = await _allowed(webhook, "/validate/workloads", body)
    assert not response["allowed"]
    assert response["status"]["message"].startswith(
        "jobset team/sweep: the pod template of pod set workers must keep the nodeSelector and"
        " tolerations of flavor h100"
    )


def two_sets() -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}

    def replicated(name: str) -> dict[str, Any]:
        return {"name": name, "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "sweep",
            "namespace": "team",
            "labels": {"sluice.dev/queue-name": "team-a"},
        },
        "spec": {"suspend": True, "replicatedJobs": [replicated("driver"), replicated("workers")]},
    }
