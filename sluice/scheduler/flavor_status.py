"""A Flavor's status as the operator writes it (docs/scheduler.md, *Flavors*): how many Ready,
schedulable nodes carry all its labels (``kubectl get flavors`` shows it as NODES) and the
condition ``Matched``, False while none does: a pod set given the flavor then waits, since
its pods would have nowhere to go. Whether a write is needed at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sluice.api.conditions import condition, status_differs
from sluice.api.constants import CONDITION_MATCHED
from sluice.api.flavor import FlavorView
from sluice.api.views import NodeView


def matching_nodes(flavor: FlavorView, nodes: Sequence[NodeView]) -> int:
    """How many nodes that may take pods (Ready, schedulable) are the flavor's."""
    return sum(1 for node in nodes if node.usable and flavor.matches(node.labels))


def _labels(flavor: FlavorView) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(flavor.node_labels.items())) or "none"


def flavor_status(
    obj: Mapping[str, Any], flavor: FlavorView, nodes: Sequence[NodeView], now: datetime
) -> dict[str, Any]:
    """The status a Flavor should have over these nodes."""
    count = matching_nodes(flavor, nodes)
    if count:
        said = f"{count} Ready, schedulable nodes carry its labels ({_labels(flavor)})"
    else:
        said = f"no Ready, schedulable node carries its labels ({_labels(flavor)})"
    matched = condition(
        obj.get("status") or {},
        CONDITION_MATCHED,
        count > 0,
        "NodesMatch" if count else "NoNodes",
        said,
        now,
    )
    return {
        "nodes": count,
        "conditions": [matched],
        "observedGeneration": (obj.get("metadata") or {}).get("generation"),
    }


def flavor_status_patch(
    obj: Mapping[str, Any], flavor: FlavorView, nodes: Sequence[NodeView], now: datetime
) -> dict[str, Any] | None:
    """The merge patch that brings a Flavor's status to what the nodes say, or None when a
    reader would see no difference."""
    wanted = flavor_status(obj, flavor, nodes, now)
    return wanted if status_differs(obj.get("status") or {}, wanted) else None
