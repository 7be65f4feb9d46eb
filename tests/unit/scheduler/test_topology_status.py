"""A Topology's status: Nested or not over the nodes, each level's domains and nodes, written
only when it changes, and an Event only when nesting comes or goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from builders import node

from sluice.api.topology import TopologyView, not_nested
from sluice.api.views import NodeView
from sluice.scheduler.topology_status import (
    nested_event,
    topology_status,
    topology_status_patch,
)

BLOCK, RACK = "example.com/block", "example.com/rack"
TOPOLOGY = TopologyView("default", (BLOCK, RACK))
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
OBJ: dict[str, Any] = {"metadata": {"name": "default", "generation": 2}}


def racks(placed: dict[str, tuple[str, str]]) -> list[NodeView]:
    """node -> (block, rack)."""
    return [node(n, labels={BLOCK: b, RACK: r}, cpu=8) for n, (b, r) in sorted(placed.items())]


NESTED = racks({"n0": ("b0", "r0"), "n1": ("b0", "r0"), "n2": ("b0", "r1"), "n3": ("b1", "r2")})
SPLIT = racks({"n0": ("b0", "r0"), "n1": ("b1", "r0"), "n2": ("b0", "r1")})  # r0 in two blocks


def nested(status: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in status["conditions"] if c["type"] == "Nested"]
    return dict(found)


def test_nested_levels_are_true_with_each_levels_domains_and_nodes() -> None:
    unlabelled = node("n9", cpu=8)  # carries no level: in no domain, counted nowhere
    status = topology_status(OBJ, TOPOLOGY, [*NESTED, unlabelled], NOW)
    assert status["levels"] == [
        {"nodeLabel": BLOCK, "domains": 2, "nodes": 4},
        {"nodeLabel": RACK, "domains": 3, "nodes": 4},
    ]
    assert nested(status)["status"] == "True"
    assert nested(status)["reason"] == "Nested"
    assert nested(status)["lastTransitionTime"] == "2026-11-25T12:00:00Z"
    assert status["observedGeneration"] == 2


def test_not_nested_names_the_domain_and_nodes_at_fault_as_the_pending_reason_does() -> None:
    status = topology_status(OBJ, TOPOLOGY, SPLIT, NOW)
    condition = nested(status)
    assert (condition["status"], condition["reason"]) == ("False", "NotNested")
    assert condition["message"] == "example.com/rack=r0 is in two example.com/block domains:" \
        " b0 (node n0) and b1 (node n1)"  # fmt: skip
    assert condition["message"] == not_nested(TOPOLOGY, SPLIT)
    assert status["levels"][1] == {"nodeLabel": RACK, "domains": 2, "nodes": 3}


def test_a_node_with_a_narrow_label_and_no_wide_one_is_not_nested() -> None:
    lone = node("n5", labels={RACK: "r9"}, cpu=8)
    condition = nested(topology_status(OBJ, TOPOLOGY, [*NESTED, lone], NOW))
    assert condition["status"] == "False"
    assert condition["message"] == f"node n5 has {RACK}=r9 but no {BLOCK} label"


def test_one_level_always_nests() -> None:
    status = topology_status(OBJ, TopologyView("hosts", (RACK,)), SPLIT, NOW)
    assert nested(status)["status"] == "True"
    assert status["levels"] == [{"nodeLabel": RACK, "domains": 2, "nodes": 3}]


def stored(nodes: list[NodeView], at: datetime = NOW) -> dict[str, Any]:
    """The Topology as the API server returns it once its status for ``nodes`` is written."""
    return {**OBJ, "status": topology_status(OBJ, TOPOLOGY, nodes, at)}


def test_written_only_when_a_reader_would_see_a_difference() -> None:
    later = NOW + timedelta(minutes=5)
    assert topology_status_patch(OBJ, TOPOLOGY, NESTED, NOW) is not None  # no status yet
    assert topology_status_patch(stored(NESTED), TOPOLOGY, NESTED, later) is None
    # Another node in an existing rack: the counts change, the condition keeps its time.
    more = [*NESTED, node("n4", labels={BLOCK: "b1", RACK: "r2"}, cpu=8)]
    patch = topology_status_patch(stored(NESTED), TOPOLOGY, more, later)
    assert patch is not None
    assert patch["levels"][1]["nodes"] == 5
    assert nested(patch)["lastTransitionTime"] == "2026-11-25T12:00:00Z"
    # Nesting broken: the condition changes, and with it its time.
    broken = topology_status_patch(stored(NESTED), TOPOLOGY, SPLIT, later)
    assert broken is not None
    assert nested(broken)["lastTransitionTime"] == "2026-11-25T12:05:00Z"


def test_a_warning_when_it_stops_nesting_a_normal_event_when_it_nests_again() -> None:
    later = NOW + timedelta(minutes=1)
    split = topology_status(OBJ, TOPOLOGY, SPLIT, later)
    told = nested_event(stored(NESTED)["status"], split)
    assert told is not None
    reason, message, warning = told
    assert (reason, warning) == ("NotNested", True)
    assert nested(split)["message"] in message
    # Still not nested, another fault: the status changes, no new Event.
    other = racks({"n0": ("b0", "r1"), "n1": ("b1", "r1")})
    assert nested_event(split, topology_status(OBJ, TOPOLOGY, other, later)) is None
    again = nested_event(split, topology_status(OBJ, TOPOLOGY, NESTED, later))
    assert again is not None
    assert (again[0], again[2]) == ("Nested", False)
    # Nested from the first status on, or still nested: nothing to tell.
    assert nested_event({}, stored(NESTED)["status"]) is None
    assert nested_event(stored(NESTED)["status"], stored(NESTED)["status"]) is None
    # Not nested from the first status on: told.
    first = nested_event({}, split)
    assert first is not None and first[0] == "NotNested"
