"""The real server over HTTPS: Flavors at /validate/flavors."""

from __future__ import annotations

from typing import Any

from webhook_harness import Webhook, make_review


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
