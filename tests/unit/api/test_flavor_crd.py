"""The Flavor CRD and sluice.api.flavor describe the same Flavor: identity, fields, limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api import constants
from sluice.api.flavor import MAX_NODE_LABELS, MAX_NODE_TAINTS, TAINT_EFFECTS

CRD_PATH = Path(__file__).parents[3] / "crds" / "flavors.scheduling.sluice.dev.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return dict(yaml.safe_load(CRD_PATH.read_text()))


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    (only,) = crd["spec"]["versions"]
    return dict(only)


@pytest.fixture(scope="module")
def spec(version: dict[str, Any]) -> dict[str, Any]:
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def test_identity_matches_constants(crd: dict[str, Any], version: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == f"{constants.FLAVOR_PLURAL}.{constants.GROUP}"
    assert crd["spec"]["group"] == constants.GROUP
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["kind"] == constants.FLAVOR_KIND
    assert crd["spec"]["names"]["plural"] == constants.FLAVOR_PLURAL
    assert version["name"] == constants.VERSION
    assert version["served"] and version["storage"]


def test_printer_columns_show_its_nodes(version: dict[str, Any]) -> None:
    columns = {c["name"].upper(): c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "LABELS": ".spec.nodeLabels",
        "TAINTS": ".spec.nodeTaints[*].key",
        "TOPOLOGY": ".spec.topologyName",
        "NODES": ".status.nodes",
        "AGE": ".metadata.creationTimestamp",
    }


def test_its_status_holds_what_the_operator_writes(version: dict[str, Any]) -> None:
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status) == {"nodes", "conditions", "observedGeneration"}
    assert version["subresources"] == {"status": {}}


def test_fields_and_limits_match_the_reader(spec: dict[str, Any]) -> None:
    props = spec["properties"]
    assert set(props) == {"nodeLabels", "nodeTaints", "topologyName"}
    assert props["nodeLabels"]["maxProperties"] == MAX_NODE_LABELS
    assert props["nodeTaints"]["maxItems"] == MAX_NODE_TAINTS
    taint = props["nodeTaints"]["items"]
    assert taint["properties"]["effect"]["enum"] == list(TAINT_EFFECTS)
    assert set(taint["required"]) == {"key", "effect"}
    assert spec["default"] == {}  # a flavor of every node needs no spec
