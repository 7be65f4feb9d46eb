"""The patches that admit a workload at a smaller size, and that give it its size back
(docs/elastic.md, *Admitted smaller*): pure, decided here, for the operator's plan to write.

Admitted smaller, a workload's size fields (``Adapter.size_fields``: a Job's parallelism, a
worker group's replicas) are lowered in the very patch that releases it, and
``sluice.dev/admitted-size`` records what each field was. Once it is suspended again
(reclaimed, preempted, requeued, or by its owner) each field that still holds the value
sluice wrote gets its recorded value back, and the record goes; a field its owner changed
since is the owner's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sluice.api.admitted_size import SizeRecord, size_record_text, size_records_of
from sluice.api.constants import ADMITTED_SIZE_ANNOTATION
from sluice.api.objects import Obj
from sluice.api.workloads.confine import merge_diff
from sluice.api.workloads.domain_patches import merged
from sluice.api.workloads.model import Adapter, TemplatePath, at
from sluice.api.workloads.sizes import path_text

Sizes = Sequence[tuple[str, int, int]]
"""Per pod set admitted smaller: (its name, pods asked, pods admitted)."""


def size_admission_patch(sizes: Sizes, obj: Obj, adapter: Adapter) -> dict[str, Any]:
    """What a workload admitted at ``sizes`` gets besides its release: the size fields of
    the pod sets admitted smaller lowered, and the record of every pod set of ``sizes`` with
    what its fields were (a pod set admitted whole is recorded too: its growth is counted
    from the record); {} when ``sizes`` is empty."""
    after = _copy(obj)
    records: list[SizeRecord] = []
    for pod_set, asked, admitted in sizes:
        lowered: list[tuple[str, int]] = []
        fields = adapter.size_fields(obj, pod_set, admitted) if admitted < asked else ()
        for path, value in fields:
            was = at(obj, path)
            if isinstance(was, int) and was != value and _set(after, path, value):
                lowered.append((path_text(path), was))
        records.append(SizeRecord(pod_set, asked, admitted, tuple(sorted(lowered))))
    if not records:
        return {}
    record = {"metadata": {"annotations": {ADMITTED_SIZE_ANNOTATION: size_record_text(records)}}}
    return merged(merge_diff(obj, after), record)


def size_restore_patch(
    obj: Obj, adapter: Adapter, base: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """For a suspended workload that sluice had admitted smaller: the patch that gives each
    lowered field its recorded value back where it still holds the value sluice wrote, and
    drops the record, merged into ``base`` (a patch written with it); None otherwise."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    records = size_records_of(annotations)
    if ADMITTED_SIZE_ANNOTATION not in annotations or not adapter.suspended(obj):
        return None
    after = _copy(obj)
    for record in records:
        was = dict(record.fields)
        for path, value in adapter.size_fields(obj, record.pod_set, record.admitted):
            where = path_text(path)
            if where in was and at(obj, path) == value:
                _set(after, path, was[where])
    body: dict[str, Any] = {"metadata": {"annotations": {ADMITTED_SIZE_ANNOTATION: None}}}
    return merged(base or {}, merged(body, merge_diff(obj, after)))


def size_growth_patch(sizes: Sizes, obj: Obj) -> dict[str, Any]:
    """The write of an admitted growth (docs/elastic.md, *Grown through the queue*): the
    workload's record with each pod set of ``sizes`` at its raised sizes, the fields its
    first admission lowered kept (they are what a requeue puts back); {} when the workload
    has no record any more (suspended since: its growth went back with it)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    raised = {name: (asked, admitted) for name, asked, admitted in sizes}
    records = [
        SizeRecord(r.pod_set, *raised.get(r.pod_set, (r.asked, r.admitted)), r.fields)
        for r in size_records_of(annotations)
    ]
    if not records:
        return {}
    return {"metadata": {"annotations": {ADMITTED_SIZE_ANNOTATION: size_record_text(records)}}}


def size_shrink_patch(sizes: Sizes, obj: Obj, adapter: Adapter) -> dict[str, Any]:
    """The write of a shrink (reclaim or preempt taking pods above a workload's minimum,
    docs/scheduler.md, *Victims above a minimum*): the size fields of each pod set of
    ``sizes`` lowered to its admitted size, and its record with them; each field keeps in
    the record the value it had before sluice first lowered it, which a requeue puts back.
    {} when the workload has no record any more (suspended since)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    lowered_to = {name: (asked, admitted) for name, asked, admitted in sizes}
    after = _copy(obj)
    records: list[SizeRecord] = []
    for r in size_records_of(annotations):
        if r.pod_set not in lowered_to:
            records.append(r)
            continue
        asked, admitted = lowered_to[r.pod_set]
        was = dict(r.fields)
        for path, value in adapter.size_fields(obj, r.pod_set, admitted):
            now = at(obj, path)
            if isinstance(now, int) and now != value and _set(after, path, value):
                was.setdefault(path_text(path), now)
        records.append(SizeRecord(r.pod_set, asked, admitted, tuple(sorted(was.items()))))
    if not records:
        return {}
    record = {"metadata": {"annotations": {ADMITTED_SIZE_ANNOTATION: size_record_text(records)}}}
    return merged(merge_diff(obj, after), record)


def _copy(obj: Obj) -> dict[str, Any]:
    """A deep, plain copy of the object's spec (what the patches change)."""
    spec: dict[str, Any] = json.loads(json.dumps(obj.get("spec") or {}))
    return {**obj, "spec": spec}


def _set(obj: dict[str, Any], path: TemplatePath, value: int) -> bool:
    """Sets the field at ``path`` where its parent exists; whether it did."""
    parent = at(obj, path[:-1])
    key = path[-1]
    if not isinstance(parent, dict) or not isinstance(key, str):
        return False
    parent[key] = value
    return True


def size_release_patch(
    sizes: Sizes, obj: Obj, adapter: Adapter, before: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The writes of a workload's release, ``before`` (its other writes to the workload: a
    Topology domain's templates) with its sizes: the fields a previous admission lowered
    put back first (a workload requeued and released again before its restore was written),
    then the fields of ``sizes`` lowered. Each is worked out on the workload as the writes
    before it leave it, so a list written whole (a Ray worker group's) carries them all."""
    base = merged(obj, before or {})
    restore = size_restore_patch(base, adapter) or {}
    lowered = size_admission_patch(sizes, merged(base, restore), adapter)
    return merged(merged(before or {}, restore), lowered)


def with_size_restore(
    obj: Obj, adapter: Adapter, restore: Mapping[str, Any] | None, base: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A waiting workload's write that gives back what sluice changed to admit it: its
    Topology ``restore`` (None: nothing of it), else ``base`` (its pending reason), with its
    sizes put back, worked out on the workload as those leave it; None when neither has
    anything to put back."""
    done = restore if restore is not None else base
    sized = size_restore_patch(merged(obj, done or {}), adapter, done)
    if sized is not None:
        return sized
    return None if restore is None else dict(restore)
