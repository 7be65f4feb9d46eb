"""The rules at the door for a workload's minimum size (docs/elastic.md, *The minimum*).

The minimum is its owner's to write: on a Job's metadata, on the pod template of a pod set
that may shrink, or in the kind's own field. It is read where its kind reads it and nowhere
else, it is a count, and it stays as it was while the workload is admitted: sluice admitted
it, and reclaims from it, by the minimum it had then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import MIN_PARALLELISM_ANNOTATION, RESIZABLE_LABEL
from sluice.api.errors import InvalidObject
from sluice.api.workloads import Adapter
from sluice.api.workloads.model import at
from sluice.api.workloads.sizes import MinSource, with_minimums
from sluice.queues.verdict import ALLOW, Verdict, deny

_ON_METADATA = ("metadata", "annotations", MIN_PARALLELISM_ANNOTATION)


def declares_minimums(obj: Mapping[str, Any]) -> bool:
    """Whether the object is a workload whose minimum its owner writes: any kind but a plain
    pod, which is admitted whole (its sluice.dev/ annotations stay sluice's)."""
    return obj.get("kind") != "Pod"


def declares_a_minimum(obj: Mapping[str, Any], adapter: Adapter) -> bool:
    """Whether the workload writes a minimum for any of its pod sets: its pod templates then
    carry sluice.dev/resizable, and its pods are gated until sluice releases them."""
    return any(source.value is not None for source in adapter.min_sources(obj))


def check_min_size(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    who: str,
    admitted: bool,
    adapter: Adapter,
) -> Verdict:
    """``old``: None on create; ``admitted``: a write by its owner that leaves it admitted."""
    sources = adapter.min_sources(new)
    read_here = any(path == _ON_METADATA for _, path in adapter.min_fields(new))
    written = ((new.get("metadata") or {}).get("annotations") or {}).get(MIN_PARALLELISM_ANNOTATION)
    if written is not None and not read_here:
        bounded = ", ".join(name for name, _ in adapter.min_fields(new)) or "none here"
        return deny(
            "job-min-size-place",
            f"{who}: annotation {MIN_PARALLELISM_ANNOTATION} is read on a Job's metadata, or"
            f" on the pod template of the pod set it bounds ({bounded}), not on a"
            f" {adapter.kind}'s metadata",
        )
    try:
        with_minimums((), sources, adapter.kind, "")
    except InvalidObject as err:
        return deny("job-min-size-invalid", f"{who}: field {err.field}: {err.problem}")
    if not admitted or old is None:
        return ALLOW
    return _kept(_written(adapter.min_sources(old)), _written(sources), who, adapter)


def _written(sources: tuple[MinSource, ...]) -> dict[str, Any]:
    return {s.where: s.value for s in sources if s.value is not None}


def _kept(before: dict[str, Any], after: dict[str, Any], who: str, adapter: Adapter) -> Verdict:
    for where in dict.fromkeys((*before, *after)):
        was, now = before.get(where), after.get(where)
        if was == now:
            continue
        return deny(
            "job-min-size-immutable",
            f"{who}: the minimum size of an admitted workload cannot change ({where}:"
            f" {_said(was)} -> {_said(now)}); suspend it ({adapter.hold.name}: true) to queue"
            " it again with the new minimum",
        )
    return ALLOW


def _said(value: Any) -> str:
    return "nothing" if value is None else str(value)


def gated_templates(obj: Mapping[str, Any], adapter: Adapter) -> dict[str, bool]:
    """Each pod set of the workload, by name: whether its pod template carries
    sluice.dev/resizable, so that the pod webhook gates its pods."""
    return {
        name: _labelled(at(obj, (*path, "metadata", "labels")))
        for name, path in adapter.pod_set_templates(obj)
    }


def _labelled(labels: Any) -> bool:
    return isinstance(labels, Mapping) and labels.get(RESIZABLE_LABEL) == "true"
