"""Topologies: node-label levels, widest first, and what a workload asks of them.

A Topology (cluster-scoped, ``spec.levels``) names node labels from the widest level (a block)
to the narrowest (a rack, a host). A *domain* of a level is the nodes that share one value of
its label. A pod template annotated ``sluice.dev/topology-required: <label>`` runs all the pods
of its pod set in one domain of that level or not at all; ``sluice.dev/topology-preferred:
<label>`` in one domain of that level if any holds them, else of the next wider level, else
anywhere; on a workload's own metadata, the same puts all its pod sets in one domain together
(docs/scheduler.md, *Topology*). The levels must nest on the real nodes: every domain of a
level inside one domain of the level above it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sluice.api.constants import (
    TOPOLOGY_ASSIGNMENT_ANNOTATION,
    TOPOLOGY_KIND,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from sluice.api.errors import InvalidObject

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key (an optional DNS-subdomain prefix and ``/``, then a
    name of at most 63 characters), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{key!r} has an invalid prefix (a DNS subdomain)"
    if not name or len(name) > 63 or not _NAME.match(name):
        return f"{key!r} is not a valid label name (at most 63 letters, digits, '-', '_', '.')"
    return None


def level_problems(levels: Any) -> list[str]:
    """What is wrong with a Topology's ``spec.levels``: at least one, each a valid label key
    in ``nodeLabel``, none twice."""
    if not isinstance(levels, list) or not levels:
        return ["spec.levels: at least one level is needed"]
    out: list[str] = []
    seen: set[str] = set()
    for i, level in enumerate(levels):
        label = level.get("nodeLabel") if isinstance(level, Mapping) else None
        if not isinstance(label, str):
            out.append(f"spec.levels[{i}].nodeLabel: missing")
            continue
        if problem := label_key_problem(label):
            out.append(f"spec.levels[{i}].nodeLabel: {problem}")
        if label in seen:
            out.append(f"spec.levels[{i}].nodeLabel: {label} is named twice")
        seen.add(label)
    return out


@dataclass(frozen=True, slots=True)
class TopologyView:
    """A Topology: its levels, widest first."""

    name: str
    levels: tuple[str, ...]


def topology_from_object(obj: Mapping[str, Any]) -> TopologyView:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "<unnamed>")
    levels: Any = (obj.get("spec") or {}).get("levels")
    problems = level_problems(levels)
    if problems:
        raise InvalidObject(TOPOLOGY_KIND, name, "spec.levels", "; ".join(problems))
    return TopologyView(name, tuple(str(level["nodeLabel"]) for level in levels))


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """What a workload or a pod set asks: all its pods in one domain of ``level`` (a node
    label)."""

    level: str
    required: bool

    @property
    def annotation(self) -> str:
        return TOPOLOGY_REQUIRED_ANNOTATION if self.required else TOPOLOGY_PREFERRED_ANNOTATION

    def describe(self) -> str:
        return f"{'required' if self.required else 'preferred'} {self.level}"


def request_of(
    annotations: Mapping[str, Any], kind: str, name: str, where: str
) -> TopologyRequest | None:
    """The topology request of one set of annotations; both at once is refused."""
    required = annotations.get(TOPOLOGY_REQUIRED_ANNOTATION)
    preferred = annotations.get(TOPOLOGY_PREFERRED_ANNOTATION)
    if required is not None and preferred is not None:
        raise InvalidObject(
            kind,
            name,
            where,
            f"both {TOPOLOGY_REQUIRED_ANNOTATION} and {TOPOLOGY_PREFERRED_ANNOTATION}: say one",
        )
    if required is not None:
        return TopologyRequest(str(required), True)
    if preferred is not None:
        return TopologyRequest(str(preferred), False)
    return None


def whole_request(
    own: TopologyRequest | None,
    set_asks: Sequence[tuple[str, TopologyRequest | None]],
    kind: str,
    name: str,
) -> TopologyRequest | None:
    """What places all of a workload's pod sets in one domain together: the ask on its own
    metadata (``own``); else, for a workload of one pod set, that set's own ask (its pod
    template's). ``set_asks``: each pod set's name and what its pod template asks. A pod set
    that asks otherwise than the metadata is refused: the metadata places every pod set
    together, a template places its pod set alone (docs/scheduler.md, *Topology*)."""
    if own is None:
        return set_asks[0][1] if len(set_asks) == 1 else None
    for pod_set, asked in set_asks:
        if asked is not None and asked != own:
            raise InvalidObject(
                kind,
                name,
                "metadata.annotations",
                f"it asks {own.describe()} for all its pod sets together and {asked.describe()}"
                f" for pod set {pod_set}: ask on the workload's metadata to place its pod sets"
                " together, or on their pod templates to place each alone",
            )
    return own


@dataclass(frozen=True, slots=True)
class Assignment:
    """A domain an admitted workload was placed in, ``<level>=<value>``: of all its pod sets
    together, or of one (``pod_set``), written ``<pod set>: <level>=<value>``."""

    level: str
    value: str
    pod_set: str = ""

    def text(self) -> str:
        where = f"{self.level}={self.value}"
        return f"{self.pod_set}: {where}" if self.pod_set else where

    @staticmethod
    def parse(text: str | None) -> Assignment | None:
        """One domain of all the pod sets, ``<level>=<value>``; None for anything else."""
        if not text or "=" not in text or ": " in text:
            return None
        level, _, value = text.partition("=")
        return Assignment(level, value)


def parse_assignments(text: str | None) -> tuple[Assignment, ...]:
    """The domains of sluice.dev/topology-assignment: ``<level>=<value>`` (all the pod sets
    together), or ``<pod set>: <level>=<value>`` for each of the pod sets sluice confined,
    joined by ``, ``; none for a text of neither form."""
    whole = Assignment.parse(text)
    if whole is not None or not text:
        return (whole,) if whole is not None else ()
    out: list[Assignment] = []
    for entry in text.split(", "):
        pod_set, colon, where = entry.partition(": ")
        level, equals, value = where.partition("=")
        if not colon or not equals or not pod_set or not level:
            return ()
        out.append(Assignment(level, value, pod_set))
    return tuple(out)


def assignment_text(assignments: Sequence[Assignment]) -> str:
    """sluice.dev/topology-assignment's text of these domains (``parse_assignments``)."""
    return ", ".join(a.text() for a in assignments)


def assignment_of(annotations: Mapping[str, Any]) -> Assignment | None:
    """A plain pod's domain: its whole workload's."""
    return Assignment.parse(annotations.get(TOPOLOGY_ASSIGNMENT_ANNOTATION))


def assignments_of(annotations: Mapping[str, Any]) -> tuple[Assignment, ...]:
    return parse_assignments(annotations.get(TOPOLOGY_ASSIGNMENT_ANNOTATION))


class LabelledNode(Protocol):
    """What the nesting of levels reads of a node: its name and its labels."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


def not_nested(topology: TopologyView, nodes: Sequence[LabelledNode]) -> str | None:
    """Why the levels do not nest on these nodes (a domain of a level in two domains of the
    level above it, or a node with a narrower level's label but not a wider one's), or None."""
    for wide, narrow in zip(topology.levels, topology.levels[1:], strict=False):
        above: dict[str, tuple[str, str]] = {}  # narrow value -> (wide value, a node)
        for node in sorted(nodes, key=lambda n: n.name):
            value = node.labels.get(narrow)
            if value is None:
                continue
            parent = node.labels.get(wide)
            if parent is None:
                return f"node {node.name} has {narrow}={value} but no {wide} label"
            seen = above.setdefault(value, (parent, node.name))
            if seen[0] != parent:
                return (
                    f"{narrow}={value} is in two {wide} domains: {seen[0]} (node {seen[1]})"
                    f" and {parent} (node {node.name})"
                )
    return None
