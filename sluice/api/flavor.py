"""Flavors: named sets of nodes (a GPU model, a pool) that a Queue holds quota in.

A Flavor (cluster-scoped, docs/scheduler.md, *Flavors*) names the node labels that pick its
nodes (``spec.nodeLabels``, every one must match), the taints those nodes carry
(``spec.nodeTaints``, which the pods admitted into it tolerate) and, optionally, the Topology
whose domains its nodes sit in (``spec.topologyName``). No labels at all is a flavor of every
node, as Kueue's default flavor is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluice.api.constants import FLAVOR_KIND
from sluice.api.errors import InvalidObject
from sluice.api.topology import label_key_problem

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_NODE_LABELS = 16
MAX_NODE_TAINTS = 16
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_value_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid label value (at most 63 characters, alphanumeric at both
    ends, '-', '_', '.' between; empty is valid), or None."""
    if not isinstance(value, str):
        return f"{value!r} is not a string"
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return f"{value!r} is not a valid label value (at most 63 letters, digits, '-', '_', '.')"
    return None


def object_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a cluster-scoped object (a DNS subdomain), or None."""
    if not isinstance(name, str) or not name:
        return "a name is needed"
    if len(name) > 253 or not _OBJECT_NAME.match(name):
        return f"{name!r} is not a valid object name (lower-case DNS subdomain)"
    return None


def _label_problems(labels: Any) -> list[str]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return ["spec.nodeLabels: expected a map of label to value"]
    out: list[str] = []
    if len(labels) > MAX_NODE_LABELS:
        out.append(f"spec.nodeLabels: at most {MAX_NODE_LABELS} labels")
    for key, value in labels.items():
        if problem := label_key_problem(str(key)):
            out.append(f"spec.nodeLabels: {problem}")
        if problem := label_value_problem(value):
            out.append(f"spec.nodeLabels[{key}]: {problem}")
    return out


def _taint_problems(taints: Any) -> list[str]:
    if taints is None:
        return []
    if not isinstance(taints, list):
        return ["spec.nodeTaints: expected a list of taints"]
    out: list[str] = []
    if len(taints) > MAX_NODE_TAINTS:
        out.append(f"spec.nodeTaints: at most {MAX_NODE_TAINTS} taints")
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        where = f"spec.nodeTaints[{i}]"
        if not isinstance(taint, Mapping) or not isinstance(taint.get("key"), str):
            out.append(f"{where}.key: missing")
            continue
        key, effect = taint["key"], taint.get("effect")
        if problem := label_key_problem(key):
            out.append(f"{where}.key: {problem}")
        if "value" in taint and (problem := label_value_problem(taint["value"])):
            out.append(f"{where}.value: {problem}")
        if effect not in TAINT_EFFECTS:
            out.append(f"{where}.effect: {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
        elif (key, effect) in seen:
            out.append(f"{where}: {key} with effect {effect} is named twice")
        seen.add((key, str(effect)))
    return out


def flavor_problems(spec: Any) -> list[str]:
    """What is wrong with a Flavor's spec: its labels, its taints, its Topology's name."""
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        return ["spec: expected an object"]
    out = _label_problems(spec.get("nodeLabels"))
    out.extend(_taint_problems(spec.get("nodeTaints")))
    topology = spec.get("topologyName")
    if topology is not None and (problem := object_name_problem(topology)):
        out.append(f"spec.topologyName: {problem}")
    return out


@dataclass(frozen=True, slots=True)
class Taint:
    """A taint a flavor's nodes carry: the pods admitted into the flavor tolerate it."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class FlavorView:
    """A Flavor: the labels that pick its nodes, their taints, its Topology (or "")."""

    name: str
    node_labels: Mapping[str, str]
    node_taints: tuple[Taint, ...] = ()
    topology: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with these labels is one of the flavor's: it carries them all."""
        return all(labels.get(key) == value for key, value in self.node_labels.items())


def flavor_from_object(obj: Mapping[str, Any]) -> FlavorView:
    """Read a Flavor object; a spec the door would refuse raises InvalidObject naming it."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "<unnamed>")
    spec: Any = obj.get("spec") or {}
    problems = flavor_problems(spec)
    if problems:
        raise InvalidObject(FLAVOR_KIND, name, "spec", "; ".join(problems))
    taints = tuple(
        Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"]))
        for t in spec.get("nodeTaints") or ()
    )
    labels = {str(k): str(v) for k, v in (spec.get("nodeLabels") or {}).items()}
    return FlavorView(name, labels, taints, str(spec.get("topologyName") or ""))
