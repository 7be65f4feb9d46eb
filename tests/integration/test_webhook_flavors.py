"""The real server over HTTPS: Flavors at /validate/flavors, and Queues' spec.flavors at
/validate/queues, which reads the Flavors that exist only for a queue that names some."""

from __future__ import annotations

from typing import Any

from test_webhook_rules import queue_obj, seed
from webhook_harness import Webhook, make_review

GPU = "nvidia.com/gpu"


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
