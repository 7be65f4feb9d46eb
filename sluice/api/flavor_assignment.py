"""The record of what admission into flavors added to a workload's pod templates
(``sluice.dev/flavor-assignment``, docs/flavors.md, *Enforced on the pods, undone on
requeue*).

Per pod set: the flavor, the labels added to its nodeSelector and the tolerations added for
the flavor's taints, each only where the template lacked it. Undoing reads this record and
never the Flavor, so a Flavor changed or deleted while the workload runs is undone exactly.
Written as compact JSON with sorted keys, so the same assignment is always the same text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.api.constants import FLAVOR_ASSIGNMENT_ANNOTATION
from sluice.api.flavor import Taint
from sluice.api.pod_set_records import pod_set_records


@dataclass(frozen=True, slots=True)
class FlavorAssignment:
    """One pod set's flavor and what was added to its template for it."""

    pod_set: str
    flavor: str
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Taint, ...] = ()
    """The taints a toleration was added for: ``Equal`` on each one's key, value and effect."""


def toleration_for(taint: Taint) -> dict[str, str]:
    """The toleration written into a template for a flavor's taint."""
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}


def flavors_text(chosen: Sequence[tuple[str, str]]) -> str:
    """Where a workload's pod sets go, in words: ``flavor h100`` when all share it, else
    ``flavors main: h100, worker: a100``; "" for none."""
    names = {flavor for _, flavor in chosen}
    if not names:
        return ""
    if len(names) == 1:
        return f"flavor {names.pop()}"
    return "flavors " + ", ".join(f"{p}: {f}" for p, f in chosen)


def flavors_listed(chosen: Sequence[tuple[str, str]], pod_sets: int) -> str:
    """Where a workload's pod sets go, for a column: the flavor's name for a workload of one
    pod set, else ``driver=h100,workers=a100`` in the workload's order; "" for none."""
    if pod_sets == 1 and len(chosen) == 1:
        return chosen[0][1]
    return ",".join(f"{p}={f}" for p, f in chosen)


def flavor_assignment_text(assignments: Sequence[FlavorAssignment]) -> str:
    """The annotation's value for these assignments."""
    body = {a.pod_set: _entry_text(a) for a in assignments}
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _entry_text(assignment: FlavorAssignment) -> dict[str, Any]:
    """One pod set's record: its flavor, and the labels and tolerations added where any were
    (an absent field reads as nothing added)."""
    entry: dict[str, Any] = {"flavor": assignment.flavor}
    if assignment.node_selector:
        entry["nodeSelector"] = dict(assignment.node_selector)
    if assignment.tolerations:
        entry["tolerations"] = [toleration_for(t) for t in assignment.tolerations]
    return entry


def flavor_assignments_of(annotations: Mapping[str, Any]) -> tuple[FlavorAssignment, ...]:
    """The assignments recorded in a workload's annotations, by pod set name; () when none is
    recorded or the record is not one sluice writes (nothing is then taken off)."""
    return pod_set_records(annotations, FLAVOR_ASSIGNMENT_ANNOTATION, _entry)


def _entry(pod_set: str, entry: Any) -> FlavorAssignment | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("flavor"), str):
        return None
    selector = entry.get("nodeSelector") or {}
    tolerations = entry.get("tolerations") or []
    if not isinstance(selector, dict) or not isinstance(tolerations, list):
        return None
    taints: list[Taint] = []
    for t in tolerations:
        if not isinstance(t, dict) or not all(isinstance(t.get(k), str) for k in ("key", "effect")):
            return None
        taints.append(Taint(t["key"], str(t.get("value") or ""), t["effect"]))
    labels = tuple(sorted((str(k), str(v)) for k, v in selector.items()))
    return FlavorAssignment(pod_set, entry["flavor"], labels, tuple(taints))
