"""The CRD and the pydantic models describe the same Queue: same fields, defaults, enums, ranges.

The API server validates with the CRD and sluice reads with the models; if the two drift, objects
the server accepts could be unreadable by sluice (or the reverse).
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from sluice.api import constants
from sluice.api.quantity import QUANTITY_PATTERN
from sluice.api.queue import (
    Condition,
    FlavorFungibility,
    FlavorQuota,
    Guarantee,
    QueueSpec,
    QueueStatus,
    QueueUsage,
)
from sluice.api.selector import LabelSelector, SelectorRequirement

CRD_PATH = Path(__file__).parents[3] / "crds" / "queues.scheduling.sluice.dev.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return dict(yaml.safe_load(CRD_PATH.read_text()))


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    (only,) = crd["spec"]["versions"]
    return dict(only)


@pytest.fixture(scope="module")
def schema(version: dict[str, Any]) -> dict[str, Any]:
    return dict(version["schema"]["openAPIV3Schema"])


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return {info.alias or name: info for name, info in model.model_fields.items()}


def _literal_values(info: FieldInfo) -> list[str] | None:
    annotation = info.annotation
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            return list(typing.get_args(arg))
    return None


def _is_empty(value: Any) -> bool:
    if isinstance(value, BaseModel):
        return all(_is_empty(getattr(value, name)) for name in type(value).model_fields)
    return not value


def _bound(info: FieldInfo, kind: type) -> int | None:
    for meta in info.metadata:
        if isinstance(meta, kind):
            return int(getattr(meta, kind.__name__.lower()))
    return None


def test_identity_matches_constants(crd: dict[str, Any], version: dict[str, Any]) -> None:
    names = crd["spec"]["names"]
    assert crd["metadata"]["name"] == f"{constants.PLURAL}.{constants.GROUP}"
    assert crd["spec"]["group"] == constants.GROUP
    assert crd["spec"]["scope"] == "Cluster"
    assert names["kind"] == constants.KIND
    assert names["plural"] == constants.PLURAL
    assert names["shortNames"] == [constants.SHORT_NAME]
    assert version["name"] == constants.VERSION
    assert version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_printer_columns(version: dict[str, Any]) -> None:
    columns = {c["name"].upper(): c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "STATE": ".status.state",
        "PARENT": ".spec.parent",
        "WEIGHT": ".spec.weight",
        "PRIORITY": ".spec.priority",
        "PENDING": ".status.pending",
        "RUNNING": ".status.running",
        "ALLOCATED": ".status.allocated",
        "NAMESPACES": ".spec.namespaceSelector",
        "OVER": ".status.overCapability",
        "USAGE": ".status.usage.dominant",
        "FLAVORS": ".status.flavorSummary",
        "AGE": ".metadata.creationTimestamp",
    }


@pytest.mark.parametrize(
    ("path", "model"),
    [
        (("spec",), QueueSpec),
        (("status",), QueueStatus),
        (("spec", "guarantee"), Guarantee),
        (("spec", "flavors", "items"), FlavorQuota),
        (("spec", "flavors", "items", "guarantee"), Guarantee),
        (("spec", "flavorFungibility"), FlavorFungibility),
        (("status", "conditions", "items"), Condition),
        (("status", "usage"), QueueUsage),
        (("spec", "namespaceSelector"), LabelSelector),
        (("spec", "namespaceSelector", "matchExpressions", "items"), SelectorRequirement),
    ],
)
def test_same_field_names(schema: dict[str, Any], path: tuple[str, ...], model: Any) -> None:
    node = schema
    for part in path:
        node = node[part] if part == "items" else node["properties"][part]
    assert set(node["properties"]) == set(_fields(model))


@pytest.mark.parametrize("model", [QueueSpec, QueueStatus])
def test_same_defaults(schema: dict[str, Any], model: type[BaseModel]) -> None:
    section = "spec" if model is QueueSpec else "status"
    props = schema["properties"][section]["properties"]
    for alias, info in _fields(model).items():
        crd_default = props[alias].get("default")
        if crd_default is None:
            # No schema default: the model's default must be "nothing set".
            assert _is_empty(info.default), alias
        else:
            assert info.default == crd_default, alias


def test_parent_has_no_schema_default(schema: dict[str, Any]) -> None:
    # root has no parent; the mutating webhook fills in root for every other queue.
    assert "default" not in schema["properties"]["spec"]["properties"]["parent"]
    assert QueueSpec().parent_name("root") is None
    assert QueueSpec().parent_name("team-a") == "root"


@pytest.mark.parametrize(
    ("model", "section"),
    [(QueueSpec, "spec"), (QueueStatus, "status")],
)
def test_same_enums(schema: dict[str, Any], model: type[BaseModel], section: str) -> None:
    props = schema["properties"][section]["properties"]
    for alias, info in _fields(model).items():
        values = _literal_values(info)
        if values is not None:
            assert props[alias]["enum"] == values, alias
        else:
            assert "enum" not in props[alias], alias


def test_condition_status_enum(schema: dict[str, Any]) -> None:
    items = schema["properties"]["status"]["properties"]["conditions"]["items"]
    assert items["properties"]["status"]["enum"] == _literal_values(
        Condition.model_fields["status"]
    )
    assert set(items["required"]) == {
        alias for alias, info in _fields(Condition).items() if info.is_required()
    }


def test_same_ranges(schema: dict[str, Any]) -> None:
    props = schema["properties"]["spec"]["properties"]
    for alias, info in _fields(QueueSpec).items():
        assert props[alias].get("minimum") == _bound(info, annotated_types.Ge), alias
        assert props[alias].get("maximum") == _bound(info, annotated_types.Le), alias
    assert (props["weight"]["minimum"], props["weight"]["maximum"]) == (1, 65535)
    assert props["priority"]["minimum"] == 0


def _resource_maps(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        found.append((path, extra))
    for name, child in (node.get("properties") or {}).items():
        found.extend(_resource_maps(child, f"{path}.{name}"))
    if isinstance(node.get("items"), dict):
        found.extend(_resource_maps(node["items"], f"{path}[]"))
    return found


def test_every_resource_map_takes_quantities(schema: dict[str, Any]) -> None:
    maps = dict(_resource_maps(schema))
    # The maps that are not of quantities: the selector's labels, and usage over time
    # (resource-seconds, in whole units of the resource), per resource and per namespace.
    assert maps.pop(".spec.namespaceSelector.matchLabels") == {"type": "string"}
    assert maps.pop(".status.usage.resources") == {"type": "number"}
    assert maps.pop(".status.usage.namespaces") == {
        "type": "object",
        "additionalProperties": {"type": "number"},
    }
    assert set(maps) == {
        ".spec.capability",
        ".spec.deserved",
        ".spec.guarantee.resource",
        ".spec.flavors[].capability",
        ".spec.flavors[].deserved",
        ".spec.flavors[].guarantee.resource",
        ".status.allocated",
        ".status.deserved",
        ".status.flavors[].allocated",
        ".status.flavors[].deserved",
        ".status.flavors[].realCapability",
    }
    for path, value in maps.items():
        assert value["x-kubernetes-int-or-string"] is True, path
        assert value["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        if path.startswith(".spec"):
            # What users write is checked; what the operator writes is trusted.
            assert value["pattern"] == QUANTITY_PATTERN, path


def test_structural_schema_basics(schema: dict[str, Any]) -> None:
    """Every node has a type, except int-or-string values (the structural-schema rule)."""

    def walk(node: dict[str, Any], path: str) -> None:
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
            return
        assert "type" in node, path
        for name, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}[*]")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    walk(schema, "")


def test_selector_operators_match_the_model(schema: dict[str, Any]) -> None:
    selector = schema["properties"]["spec"]["properties"]["namespaceSelector"]
    item = selector["properties"]["matchExpressions"]["items"]
    assert item["properties"]["operator"]["enum"] == _literal_values(
        SelectorRequirement.model_fields["operator"]
    )
    assert set(item["required"]) == {
        alias for alias, info in _fields(SelectorRequirement).items() if info.is_required()
    }


def test_cel_rules_have_messages(schema: dict[str, Any]) -> None:
    spec_rules = schema["properties"]["spec"]["x-kubernetes-validations"]
    assert any("priorityClassName" in r["rule"] for r in spec_rules)
    for rule in [*schema["x-kubernetes-validations"], *spec_rules]:
        assert rule["message"], rule["rule"]


def test_flavors_are_a_list_keyed_by_name(schema: dict[str, Any]) -> None:
    """The API server itself refuses a flavor listed twice, as the queue rules do."""
    flavors = schema["properties"]["spec"]["properties"]["flavors"]
    assert flavors["x-kubernetes-list-type"] == "map"
    assert flavors["x-kubernetes-list-map-keys"] == ["name"]
    assert flavors["items"]["required"] == ["name"]
    assert "default" not in flavors


def test_flavor_fungibility_enums_and_defaults(schema: dict[str, Any]) -> None:
    props = schema["properties"]["spec"]["properties"]["flavorFungibility"]["properties"]
    for alias, info in _fields(FlavorFungibility).items():
        assert props[alias]["enum"] == _literal_values(info), alias
        assert props[alias]["default"] == info.default, alias
    assert QueueSpec().fungibility() == FlavorFungibility()
    read = QueueSpec.model_validate({"flavorFungibility": {"whenCanReclaim": "Reclaim"}})
    assert read.fungibility().when_can_borrow == "Borrow"
    assert read.fungibility().when_can_reclaim == "Reclaim"
