"""The writes that change an admitted workload's size (``plan.py``; docs/elastic.md): a
growth admitted raises its record, a shrink lowers its size fields and its record to give
pods above its minimum to a reclaim or preempt, and a size its owner lowered lowers the
record with it. Each rests on the spec the cycle saw, as its size may have changed since;
the first two drop the growth reason the workload carried.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.admitted_size import lowered_to, size_record_text
from sluice.api.constants import ADMITTED_SIZE_ANNOTATION, PENDING_REASON_ANNOTATION
from sluice.api.objects import Obj
from sluice.api.views import WorkloadView
from sluice.api.workloads.domain_patches import merged
from sluice.api.workloads.ray_cluster import ClusterSizes, workers_taken_patch
from sluice.api.workloads.size_patches import size_growth_patch, size_shrink_patch
from sluice.operator.writes import Basis, Beside, Write, adapter_of, decision_event
from sluice.scheduler.model import Decision


def growth(d: Decision, key: str, obj: Obj | None, decided: Basis | None) -> Write:
    """An admitted growth entry, written on its workload ``key``: its record raised
    (api.workloads.size_patches)."""
    patch = size_growth_patch(d.sizes, obj) if obj is not None else {}
    event = decision_event(d, "growth admitted")
    return Write("admit", key, _reason_dropped(patch), decided, event)


def shrink(
    d: Decision, obj: Obj | None, decided: Basis | None, cluster: ClusterSizes | None = None
) -> Write:
    """A workload that gives pods above its minimum to a reclaim or preempt: its size fields
    and its record lowered (api.workloads.size_patches); it stays admitted, and its
    controller deletes the pods beyond its new size. A growth of it waiting goes with the
    size its owner asked. A RayJob with Ray's autoscaler (``WorkloadView.sheds`` ``named``)
    has its workers (``Decision.deletes``) named to KubeRay on ``cluster``, the RayCluster
    it runs, first (api.workloads.ray_cluster); nothing more
    there when the cluster has no more replicas than admitted; with no cluster known, the
    write lands nowhere (``Beside.key`` empty) and the next cycle decides again."""
    patch = size_shrink_patch(d.sizes, obj, adapter_of(obj)) if obj is not None else {}
    event = decision_event(d, "its size lowered by sluice")
    beside = None
    if obj is not None and adapter_of(obj).read_sheds(obj) == "named":
        ops = workers_taken_patch(obj, cluster, d.sizes, d.deletes) if cluster else []
        where = f"{d.job.partition('/')[0]}/{cluster.cluster}" if cluster else ""
        if ops or not where:
            beside = Beside("ray.io", "v1", "rayclusters", where, tuple(ops))
    return Write(d.action, d.job, _reason_dropped(patch), decided, event, beside=beside)


def records_lowered(views: Mapping[str, WorkloadView], decided: set[str]) -> list[Write]:
    """The record of each admitted workload whose size asked fell below it (its owner, or
    Ray's autoscaler on its RayCluster, lowered it; ``admitted_size.lowered_to``) lowered
    with it, resting on the spec and queue its view was read from; none for a workload
    ``decided`` on this cycle, whose own write comes first."""
    out: list[Write] = []
    for key, view in views.items():
        if not view.sized or not view.phase.admitted or key in decided:
            continue
        lowered = lowered_to(view.sized, {s.name: s.count for s in view.pod_sets})
        if lowered is None:
            continue
        text = size_record_text(lowered)
        patch = {"metadata": {"annotations": {ADMITTED_SIZE_ANNOTATION: text}}}
        out.append(Write("record", key, patch, (view.generation, view.queue)))
    return out


def _reason_dropped(patch: Mapping[str, Any]) -> Mapping[str, Any]:
    """A size patch with the workload's pending reason dropped in the same write; {} (no
    change of size) stays {}."""
    if not patch:
        return patch
    return merged(patch, {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: None}}})
