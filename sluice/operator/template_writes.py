"""What a release and a requeue write into a workload's templates and sizes (``plan.py``):
released, it is confined to its Topology domains, put on its flavors' nodes and lowered to
its admitted size, in one merge patch beside its release; waiting again, each of these is
undone from its record, in the same write as its pending reason (docs/workloads.md, "Where
a Topology domain is written"; docs/flavors.md; docs/elastic.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sluice.api.flavor import FlavorView
from sluice.api.objects import Obj
from sluice.api.workloads import Adapter
from sluice.api.workloads.domain_patches import admission_patch, restore_patch
from sluice.api.workloads.flavor_patches import flavor_admission_patch, flavor_restore_patch
from sluice.api.workloads.size_patches import size_release_patch, with_size_restore
from sluice.operator.writes import Write, adapter_of, basis
from sluice.scheduler.model import Decision


def release_patch(
    d: Decision, obj: Obj | None, adapter: Adapter, flavors: Mapping[str, FlavorView]
) -> dict[str, Any]:
    """What an admitted workload ``obj`` gets in its templates besides its release: its
    domain's labels (api.workloads.domain_patches), its flavors' labels and tolerations
    (flavor_patches) and its admitted sizes (size_patches), each with its record, worked out
    on the workload as the ones before leave it; {} when none applies. Raises
    NotEnforceable when its flavors cannot be written."""
    patch = admission_patch(d.domain, obj, adapter)
    patch = flavor_admission_patch(d.flavors, obj, adapter, flavors, patch)
    if obj is not None:
        patch = size_release_patch(d.sizes, obj, adapter, patch)
    return patch


def with_restores(
    confined: list[str],
    jobs: Mapping[str, Obj],
    admitted: set[str],
    reasons: list[Write | None],
) -> list[Write | None]:
    """Each waiting workload that sluice had confined to Topology domains, admitted into
    flavors or admitted smaller (``confined``: its latest view records any of these; only
    those are looked at as stored) and that is suspended now gets its templates and sizes
    back as before (api.workloads.domain_patches, flavor_patches, size_patches), in the same
    write as its pending reason when it has one. A Job's templates may change only once its
    pods are gone: the API server refuses the write till then, and a later cycle writes it
    again."""
    by_job = {w.workload: i for i, w in enumerate(reasons) if w is not None and w.pods is None}
    out = list(reasons)
    for job in confined:
        obj = None if job in admitted else jobs.get(job)
        if obj is None:
            continue
        i = by_job.get(job)
        write = out[i] if i is not None else None
        adapter, base = adapter_of(obj), write.patch if write is not None else None
        restore = restore_patch(obj, adapter, base)
        restore = (
            flavor_restore_patch(obj, adapter, base if restore is None else restore) or restore
        )
        restore = with_size_restore(obj, adapter, restore, base)
        if restore is None:
            continue
        # A template inside a list is written whole: the write rests on the spec it was
        # worked out from.
        if write is None:
            out.append(Write("restore", job, restore, basis(obj)))
        else:
            assert i is not None
            out[i] = replace(write, patch=restore, basis=basis(obj))
    return out
