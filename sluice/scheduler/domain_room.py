"""The domains of the cluster's Topology levels over one cycle's nodes, and the room free in
each (docs/scheduler.md, *Topology*).

``TopologyLevels`` says which levels exist, which wider levels a preferred one widens to, and
which Topology cannot be relied on. ``DomainRoom`` lists each level's domains and keeps their
free room as room is held and given back on their nodes, so that a placement asks a domain's
room without adding up its nodes again.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from sluice.api.resources import Resources
from sluice.api.topology import TopologyRequest, TopologyView, not_nested
from sluice.scheduler.placement import Footprint, Placement


@dataclass(frozen=True, slots=True)
class Domain:
    """The nodes (placement indexes, in order) whose ``level`` label is ``value``."""

    level: str
    value: str
    nodes: tuple[int, ...]
    text: str = field(init=False, repr=False, compare=False)
    """As sluice.dev/topology-assignment writes it: ``<level>=<value>`` (asked of every
    domain looked at: made once)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", f"{self.level}={self.value}")

    @property
    def short(self) -> str:
        """``rack r7`` for the level example.com/rack."""
        return f"{self.level.rpartition('/')[2]} {self.value}"


class TopologyLevels:
    """The levels of the cluster's Topologies: each with the wider levels of its Topology,
    and why a Topology whose levels do not nest on the nodes cannot be relied on."""

    def __init__(self, topologies: Sequence[TopologyView], placement: Placement) -> None:
        self.widening: dict[str, tuple[str, ...]] = {}
        """Level -> itself, then each wider level of its Topology."""
        self.broken: dict[str, str] = {}
        """Level -> why its Topology cannot be relied on (its levels do not nest)."""
        for topology in sorted(topologies, key=lambda t: t.name):
            problem = not_nested(topology, placement.nodes) if len(topology.levels) > 1 else None
            for k, level in enumerate(topology.levels):
                if level in self.widening:
                    continue
                self.widening[level] = tuple(reversed(topology.levels[: k + 1]))
                if problem:
                    self.broken[level] = f"Topology {topology.name} is not nested: {problem}"

    def levels(self, request: TopologyRequest) -> tuple[str, ...]:
        """The levels a request may be placed at, narrowest first: its own, then (preferred)
        each wider one; none when it is no level of a Topology or its Topology is broken."""
        if request.level not in self.widening or request.level in self.broken:
            return ()
        return self.widening[request.level] if not request.required else (request.level,)

    def widest(self) -> list[str]:
        """Each Topology's widest level, by name."""
        return sorted({levels[-1] for levels in self.widening.values()})


class DomainRoom:
    """The domains of each level looked at, and the free room of their usable nodes, kept as
    room is held and given back (``changed``, a watcher of the placement's)."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self._domains: dict[str, list[Domain]] = {}
        self._by_value: dict[str, dict[str, Domain]] = {}
        self.sums: dict[str, dict[str, int]] = {}
        """Domain text -> the free room of its usable nodes, for the levels looked at so far
        (read only: kept here)."""
        self._of_node: dict[str, dict[int, str]] = {}  # level -> node -> its domain's text
        self._ranks: dict[
            tuple[str, tuple[str, ...]], tuple[list[tuple[float, str]], dict[str, float]]
        ] = {}
        """(level, the resources a workload asks) -> its domains by the room they have free
        in those resources (a share of the cluster's each, added up), then by name; and each
        domain's figure: kept in order as room is held and given back."""
        self.versions: dict[str, int] = {}
        """Domain text -> how many times room was held or given back on its nodes (read
        only)."""
        self._changes: dict[str, list[str]] = {}
        """Level -> the value of each of its domains room was held or given back on, in
        order, once per change."""

    def domains(self, level: str) -> list[Domain]:
        """The domains of a level, by name."""
        found = self._domains.get(level)
        if found is None:
            members: dict[str, list[int]] = {}
            for i, node in enumerate(self.placement.nodes):
                value = node.labels.get(level)
                if value is not None:
                    members.setdefault(value, []).append(i)
            found = self._domains[level] = [
                Domain(level, value, tuple(nodes)) for value, nodes in sorted(members.items())
            ]
            nodes, free = self.placement.nodes, self.placement.free
            of_node = self._of_node[level] = {}
            for domain in found:
                room: dict[str, int] = {}
                for i in domain.nodes:
                    if nodes[i].usable:
                        of_node[i] = domain.text
                        for r, a in free[i].items():
                            room[r] = room.get(r, 0) + a
                self.sums[domain.text] = room
            self._by_value[level] = {d.value: d for d in found}
        return found

    def by_value(self, level: str) -> dict[str, Domain]:
        """The domains of a level looked at already, by value."""
        return self._by_value[level]

    def changes(self, level: str) -> list[str]:
        """The value of each domain of the level room was held or given back on, in order,
        once per change (read only)."""
        return self._changes.setdefault(level, [])

    def free(self, domain: Domain) -> dict[str, int]:
        """The free room of a domain's usable nodes now."""
        self.domains(domain.level)
        return self.sums[domain.text]

    def widest_free(self, levels: Sequence[str]) -> dict[str, Resources]:
        """The free room of each domain of these levels, by its text."""
        return {
            domain.text: Resources(self.free(domain))
            for level in levels
            for domain in self.domains(level)
        }

    def total(self, domain: Domain) -> dict[str, int]:
        room: dict[str, int] = {}
        for i in domain.nodes:
            node = self.placement.nodes[i]
            if node.usable:
                for r, a in node.allocatable.items():
                    room[r] = room.get(r, 0) + a
        return room

    def version(self, domain: Domain) -> int:
        """Changed whenever room is held or given back on the domain's nodes."""
        self.domains(domain.level)
        return self.versions.get(domain.text, 0)

    def ranking(self, level: str, asked: tuple[str, ...]) -> list[tuple[float, str]]:
        """The domains of a level by the room they have free in the resources asked, then by
        value."""
        key = (level, asked)
        found = self._ranks.get(key)
        if found is None:
            scores = {d.value: self._score(d.text, asked) for d in self.domains(level)}
            found = self._ranks[key] = (sorted((v, k) for k, v in scores.items()), scores)
        return found[0]

    def _score(self, text: str, asked: tuple[str, ...]) -> float:
        room, total = self.sums[text], self.placement.total
        return sum(room.get(r, 0) / total[r] for r in asked)

    def changed(self, footprint: Footprint, sign: int) -> None:
        """Room held (sign -1) or given back (sign +1) on these nodes: the sums, versions,
        changes and rankings of the domains they are in follow."""
        for level, of_node in self._of_node.items():
            touched: set[str] = set()
            for i, amounts in footprint.items():
                text = of_node.get(i)
                if text is not None:
                    touched.add(text)
                    room = self.sums[text]
                    for r, a in amounts.items():
                        room[r] = room.get(r, 0) + sign * a
            if not touched:
                continue
            version = self.versions
            for text in touched:
                version[text] = version.get(text, 0) + 1
            self._changes.setdefault(level, []).extend(text[len(level) + 1 :] for text in touched)
            for (ranked_level, asked), (order, scores) in self._ranks.items():
                if ranked_level != level:
                    continue
                for text in touched:
                    value = text[len(level) + 1 :]
                    old = scores[value]
                    del order[bisect.bisect_left(order, (old, value))]
                    scores[value] = new = self._score(text, asked)
                    bisect.insort(order, (new, value))
