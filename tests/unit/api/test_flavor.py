"""Reading a Flavor, and what the door refuses in one."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.errors import InvalidObject
from sluice.api.flavor import FlavorView, Taint, flavor_from_object, flavor_problems
from sluice.queues.flavors import check_flavor

MODEL = "gpu.example.com/model"


def flavor(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "h100"}, "spec": spec}


def test_a_flavor_is_its_labels_taints_and_topology() -> None:
    view = flavor_from_object(
        flavor(
            nodeLabels={MODEL: "H100", "pool": "reserved"},
            nodeTaints=[
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "spot", "effect": "NoExecute"},
            ],
            topologyName="fabric",
        )
    )
    assert view == FlavorView(
        "h100",
        {MODEL: "H100", "pool": "reserved"},
        (Taint("nvidia.com/gpu", "present", "NoSchedule"), Taint("spot", "", "NoExecute")),
        "fabric",
    )
    assert view.matches({MODEL: "H100", "pool": "reserved", "zone": "a"})
    assert not view.matches({MODEL: "H100"})
    assert not view.matches({MODEL: "A100", "pool": "reserved"})


def test_a_flavor_without_labels_is_every_node() -> None:
    view = flavor_from_object({"metadata": {"name": "any"}})
    assert (view.node_labels, view.node_taints, view.topology) == ({}, (), "")
    assert view.matches({}) and view.matches({MODEL: "L4"})
    assert check_flavor({"metadata": {"name": "any"}}).allowed


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"nodeLabels": {"-bad": "x"}}, "spec.nodeLabels: '-bad' is not a valid label name"),
        ({"nodeLabels": {"Bad_Prefix/x": "y"}}, "spec.nodeLabels: 'Bad_Prefix/x' has an invalid"),
        ({"nodeLabels": {MODEL: "H100 SXM"}}, f"spec.nodeLabels[{MODEL}]: 'H100 SXM' is not a"),
        ({"nodeLabels": {MODEL: "x" * 64}}, f"spec.nodeLabels[{MODEL}]: 'xxxx"),
        ({"nodeLabels": {f"l{i}": "v" for i in range(17)}}, "spec.nodeLabels: at most 16 labels"),
        ({"nodeLabels": ["a"]}, "spec.nodeLabels: expected a map"),
        ({"nodeTaints": [{"effect": "NoSchedule"}]}, "spec.nodeTaints[0].key: missing"),
        ({"nodeTaints": [{"key": "k", "effect": "Never"}]}, "spec.nodeTaints[0].effect: 'Never'"),
        ({"nodeTaints": [{"key": "k"}]}, "spec.nodeTaints[0].effect: None is not one of"),
        (
            {"nodeTaints": [{"key": "k", "value": "a b", "effect": "NoSchedule"}]},
            "spec.nodeTaints[0].value: 'a b' is not a valid label value",
        ),
        (
            {"nodeTaints": [{"key": "k", "effect": "NoSchedule"}] * 2},
            "spec.nodeTaints[1]: k with effect NoSchedule is named twice",
        ),
        ({"nodeTaints": {"key": "k"}}, "spec.nodeTaints: expected a list"),
        ({"topologyName": "Fabric"}, "spec.topologyName: 'Fabric' is not a valid object name"),
        ({"topologyName": ""}, "spec.topologyName: a name is needed"),
    ],
)
def test_the_door_names_what_is_wrong(spec: dict[str, Any], problem: str) -> None:
    problems = flavor_problems(spec)
    assert any(p.startswith(problem) for p in problems), problems
    verdict = check_flavor(flavor(**spec))
    assert (verdict.allowed, verdict.rule) == (False, "flavor-invalid")
    assert verdict.message.startswith("flavor h100: ")
    with pytest.raises(InvalidObject, match="Flavor h100: field spec: "):
        flavor_from_object(flavor(**spec))


def test_the_same_key_may_be_tainted_with_two_effects() -> None:
    taints = [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}]
    assert flavor_problems({"nodeTaints": taints}) == []
