"""A Topology's status as the operator writes it (docs/scheduler.md, *Topology*): whether its
levels nest on the nodes, the condition ``Nested`` (its message names the domain and nodes at
fault, as the reason of a workload that asks the Topology does), each level's domains and
nodes; whether a write is needed at all, and the Event a change of ``Nested`` tells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sluice.api.conditions import condition, condition_status, status_differs
from sluice.api.constants import CONDITION_NESTED
from sluice.api.topology import TopologyView, not_nested
from sluice.api.views import NodeView

NESTED_MESSAGE = "each domain of a level lies in one domain of the level above it"


def level_counts(topology: TopologyView, nodes: Sequence[NodeView]) -> list[dict[str, Any]]:
    """Per level, widest first: its label, how many domains (values of the label) and how
    many nodes carry it."""
    out: list[dict[str, Any]] = []
    for level in topology.levels:
        values = [v for node in nodes if (v := node.labels.get(level)) is not None]
        out.append({"nodeLabel": level, "domains": len(set(values)), "nodes": len(values)})
    return out


def topology_status(
    obj: Mapping[str, Any], topology: TopologyView, nodes: Sequence[NodeView], now: datetime
) -> dict[str, Any]:
    """The status a Topology should have over these nodes."""
    current = obj.get("status") or {}
    problem = not_nested(topology, nodes)
    return {
        "levels": level_counts(topology, nodes),
        "conditions": [
            condition(
                current,
                CONDITION_NESTED,
                problem is None,
                "Nested" if problem is None else "NotNested",
                problem or NESTED_MESSAGE,
                now,
            )
        ],
        "observedGeneration": (obj.get("metadata") or {}).get("generation"),
    }


def topology_status_patch(
    obj: Mapping[str, Any], topology: TopologyView, nodes: Sequence[NodeView], now: datetime
) -> dict[str, Any] | None:
    """The merge patch that brings a Topology's status to what the nodes say (its lists are
    replaced whole), or None when a reader would see no difference."""
    wanted = topology_status(obj, topology, nodes, now)
    return wanted if status_differs(obj.get("status") or {}, wanted) else None


def nested_event(
    current: Mapping[str, Any], wanted: Mapping[str, Any]
) -> tuple[str, str, bool] | None:
    """The Event a status write tells, as (reason, message, warning): the levels stopped
    nesting (a Warning naming the domain and nodes at fault), or nest again; None when
    neither changed (a first status that says nested tells nothing)."""
    was, now = (
        condition_status(current, CONDITION_NESTED),
        condition_status(wanted, CONDITION_NESTED),
    )
    if now == "False" and was != "False":
        (said,) = [c["message"] for c in wanted["conditions"] if c["type"] == CONDITION_NESTED]
        return (
            "NotNested",
            f"its levels do not nest on the nodes: {said}; no workload that requires one of"
            " its levels is admitted until they do",
            True,
        )
    if now == "True" and was == "False":
        return "Nested", f"its levels nest on the nodes again: {NESTED_MESSAGE}", False
    return None
