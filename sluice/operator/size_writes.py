"""The writes that change an admitted workload's size (``plan.py``; docs/elastic.md): a
growth admitted raises its record, a shrink lowers its size fields and its record to give
pods above its minimum to a reclaim or preempt. Each rests on the spec the cycle saw, as its
size may have changed since, and drops the growth reason it carried.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import PENDING_REASON_ANNOTATION
from sluice.api.objects import Obj
from sluice.api.workloads.domain_patches import merged
from sluice.api.workloads.size_patches import size_growth_patch, size_shrink_patch
from sluice.operator.writes import Basis, EventSpec, Write, adapter_of
from sluice.scheduler.model import Decision


def growth(d: Decision, key: str, obj: Obj | None, decided: Basis | None) -> Write:
    """An admitted growth entry, written on its workload ``key``: its record raised
    (api.workloads.size_patches)."""
    patch = size_growth_patch(d.sizes, obj) if obj is not None else {}
    event = EventSpec("Admitted", f"growth admitted by queue {d.queue}: {d.reason}")
    return Write("admit", key, _reason_dropped(patch), decided, event)


def shrink(d: Decision, obj: Obj | None, decided: Basis | None) -> Write:
    """A workload that gives pods above its minimum to a reclaim or preempt: its size fields
    and its record lowered (api.workloads.size_patches); it stays admitted, and its
    controller deletes the pods beyond its new size. A growth of it waiting goes with the
    size its owner asked."""
    patch = size_shrink_patch(d.sizes, obj, adapter_of(obj)) if obj is not None else {}
    title = "Reclaimed" if d.action == "reclaim" else "Preempted"
    event = EventSpec(title, f"{d.reason}; its size lowered by sluice")
    return Write(d.action, d.job, _reason_dropped(patch), decided, event)


def _reason_dropped(patch: Mapping[str, Any]) -> Mapping[str, Any]:
    """A size patch with the workload's pending reason dropped in the same write; {} (no
    change of size) stays {}."""
    if not patch:
        return patch
    return merged(patch, {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: None}}})
