"""Topologies: node-label levels, widest first, and what a workload asks of them.

A Topology (cluster-scoped, ``spec.levels``) names node labels from the widest level (a block)
to the narrowest (a rack, a host). A *domain* of a level is the nodes that share one value of
its label. A workload annotated ``sluice.dev/topology-required: <label>`` runs all its pods in
one domain of that level or not at all; ``sluice.dev/topology-preferred: <label>`` in one
domain of that level if any holds it, else of the next wider level, else anywhere
(docs/scheduler.md, *Topology*). The levels must nest on the real nodes: every domain of a
level inside one domain of the level above it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sluice.api.constants import (
    TOPOLOGY_ASSIGNMENT_ANNOTATION,
    TOPOLOGY_KIND,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from sluice.api.errors import InvalidObject

if TYPE_CHECKING:
    from sluice.api.views import NodeView

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
    """What a workload asks: all its pods in one domain of ``level`` (a node label)."""

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


def workload_request(
    obj: Mapping[str, Any], templates: Iterable[Mapping[str, Any]], kind: str, name: str
) -> TopologyRequest | None:
    """What a workload asks: on its own metadata, else on its pod templates (which must then
    agree: all its pods go in one domain together)."""
    meta = obj.get("metadata") or {}
    own = request_of(meta.get("annotations") or {}, kind, name, "metadata.annotations")
    if own is not None:
        return own
    found: TopologyRequest | None = None
    for template in templates:
        annotations = ((template or {}).get("metadata") or {}).get("annotations") or {}
        asked = request_of(annotations, kind, name, "template metadata.annotations")
        if asked is not None and found is not None and asked != found:
            raise InvalidObject(
                kind,
                name,
                "template metadata.annotations",
                f"its pod templates ask {found.describe()} and {asked.describe()}: put one"
                " on the workload's own metadata to place them together",
            )
        found = found or asked
    return found


@dataclass(frozen=True, slots=True)
class Assignment:
    """The domain an admitted workload was placed in: ``<level>=<value>``."""

    level: str
    value: str

    def text(self) -> str:
        return f"{self.level}={self.value}"

    @staticmethod
    def parse(text: str | None) -> Assignment | None:
        if not text or "=" not in text:
            return None
        level, _, value = text.partition("=")
        return Assignment(level, value)


def assignment_of(annotations: Mapping[str, Any]) -> Assignment | None:
    return Assignment.parse(annotations.get(TOPOLOGY_ASSIGNMENT_ANNOTATION))


def not_nested(topology: TopologyView, nodes: Sequence[NodeView]) -> str | None:
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
