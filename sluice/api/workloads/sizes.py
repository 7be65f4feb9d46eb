"""The smallest size a pod set may be admitted at (docs/elastic.md, *The minimum*).

A pod set that its kind lets shrink has one place of its kind's own for its minimum (a
Job's sluice.dev/min-parallelism annotation, a PyTorchJob's elasticPolicy.minReplicas for
its workers, a Ray worker group's minReplicas) and may carry sluice.dev/min-parallelism on
its pod template, which wins for that pod set. Any other pod set is admitted whole, and a
minimum written on its template is an error rather than a promise sluice would not keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sluice.api.errors import InvalidObject
from sluice.api.views import PodSet

Path = tuple[str | int, ...]
"""A path into an object: keys, and indexes of list items."""


def path_text(path: Path) -> str:
    """A path as messages name a field: ``spec.workerGroupSpecs[0].minReplicas``, and an
    annotation as ``metadata.annotations[sluice.dev/min-parallelism]``."""
    out = ""
    for key in path:
        if isinstance(key, int) or "/" in key:
            out += f"[{key}]"
        else:
            out += f".{key}" if out else key
    return out


@dataclass(frozen=True, slots=True)
class MinSource:
    """One place where a pod set's minimum may be written, and what is written there."""

    pod_set: str
    path: Path
    value: Any
    """What is written there; None when nothing is."""
    own: bool
    """The kind's own place (its field, a Job's annotation); otherwise the pod template's
    annotation."""

    @property
    def where(self) -> str:
        """The field, as messages name it."""
        return path_text(self.path)


def read_minimum(source: MinSource, kind: str, full: str) -> int | None:
    """The minimum written at ``source``, in its kind's units of size; None when none is.
    An annotation is text of a count of at least 1 (a Job never runs with no pod); a kind's
    own field is a count as its kind allows it (a Ray worker group's minReplicas may be 0)."""
    value = source.value
    if value is None:
        return None
    if isinstance(value, str):
        if not value.isascii() or not value.isdigit() or int(value) < 1:
            raise InvalidObject(kind, full, source.where, f"{value!r} is not a count of at least 1")
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidObject(kind, full, source.where, f"{value!r} is not a count")
    return value


def with_minimums(
    pod_sets: tuple[PodSet, ...], sources: Sequence[MinSource], kind: str, full: str
) -> tuple[PodSet, ...]:
    """The pod sets with the minimums their sources declare, each in pods (its units times
    its ``count_step``) and never above its count: a minimum above what a pod set asks asks
    it whole, so lowering a size (which frees quota) never makes a workload unreadable."""
    if all(s.value is None for s in sources):  # most workloads: nothing to read
        return pod_sets
    own = [s.pod_set for s in sources if s.own]
    declared: dict[str, int] = {}
    for source in sorted(sources, key=lambda s: not s.own):  # the template's wins
        if not source.own and source.pod_set not in own:
            raise InvalidObject(kind, full, source.where, _whole_only(source, own, kind))
        minimum = read_minimum(source, kind, full)
        if minimum is not None:
            declared[source.pod_set] = minimum
    if not declared:
        return pod_sets
    return tuple(
        replace(s, min_count=min(declared[s.name] * s.count_step, s.count), min_declared=True)
        if s.name in declared
        else s
        for s in pod_sets
    )


def _whole_only(source: MinSource, own: Sequence[str], kind: str) -> str:
    said = f"pod set {source.pod_set} of a {kind} is admitted whole only"
    if not own:
        return f"{said}; a {kind} is never admitted smaller"
    return f"{said}; a minimum size is read on {', '.join(own)}"
