"""The patches that enforce a workload's flavors on its pods, and that undo it
(docs/flavors.md, *Enforced on the pods, undone on requeue*): pure, decided here, planned by
the operator's plan and written by its executor, in the same writes as the Topology ones
(api.workloads.domain_patches).

Admitted into flavors, a workload's pod templates get each flavor's labels and tolerations
(api.workloads.enforce) in the very patch that releases it, and
``sluice.dev/flavor-assignment`` records what was added. Once it is suspended again the
record is read and exactly that is taken off, with the record. A pod set with no template
sluice may write (an MPIJob's Launcher, made at creation; a RayJob's submitter without a
template of its own) is recorded with its flavor and nothing added: it counts in its flavor and
goes where kube-scheduler puts it, as it does for a Topology domain. A workload none of whose
pod sets has such a template (a TrainJob) is not released into flavors at all.
Plain pods get theirs before their gate goes (api.workloads.pod_flavors).

Both patches are worked out on the object as the Topology patch written with them leaves it:
a template inside a list (a JobSet's, a RayJob's worker groups) is written whole, so the
write that comes last must carry both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sluice.api.constants import FLAVOR_ASSIGNMENT_ANNOTATION
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import (
    FlavorAssignment,
    flavor_assignment_text,
    flavor_assignments_of,
)
from sluice.api.objects import Obj
from sluice.api.workloads.domain_patches import merged
from sluice.api.workloads.enforce import enforce, unenforce
from sluice.api.workloads.model import Adapter


class NotEnforceable(ValueError):
    """An admission into flavors that cannot be written: the workload is not released."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def chosen_flavors(
    decided: Sequence[tuple[str, str]], flavors: Mapping[str, FlavorView]
) -> dict[str, FlavorView]:
    """Each pod set's Flavor as the decision names it; raises NotEnforceable for a flavor
    not among ``flavors`` (those the cycle read): released without it, the pods would go
    anywhere while counted in it."""
    out: dict[str, FlavorView] = {}
    for pod_set, name in decided:
        found = flavors.get(name)
        if found is None:
            raise NotEnforceable(f"pod set {pod_set}: flavor {name} does not exist")
        out[pod_set] = found
    return out


def applied(target: Any, patch: Any) -> Any:
    """What a JSON merge patch makes of ``target`` (RFC 7386)."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = applied(out.get(key), value)
    return out


def flavor_admission_patch(
    decided: Sequence[tuple[str, str]],
    obj: Obj | None,
    adapter: Adapter,
    flavors: Mapping[str, FlavorView],
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a workload admitted into flavors (``decided``: the decision's pod set -> flavor)
    gets besides its release: each flavor's labels and tolerations in its pod set's template
    and the record, merged into ``base`` (the Topology admission patch of the same write);
    ``base`` alone when it has no flavors. Raises NotEnforceable when it cannot be written."""
    out = dict(base or {})
    if not decided or obj is None:
        return out
    chosen = chosen_flavors(decided, flavors)
    if not adapter.domain_templates(obj):
        kind = str(obj.get("kind") or adapter.kind)
        raise NotEnforceable(
            f"a {kind} has no pod templates of its own (its pods come from elsewhere), so"
            " sluice cannot keep its pods on a flavor's nodes"
        )
    patch, added = enforce(applied(obj, out), adapter, chosen)
    written = {a.pod_set for a in added}
    unwritten = tuple(
        FlavorAssignment(name, flavor.name)
        for name, flavor in chosen.items()
        if name not in written
    )
    record = flavor_assignment_text((*added, *unwritten))
    body = {"metadata": {"annotations": {FLAVOR_ASSIGNMENT_ANNOTATION: record}}}
    return merged(out, merged(patch, body))


def flavor_restore_patch(
    obj: Obj, adapter: Adapter, base: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """For a suspended workload that sluice had admitted into flavors: the patch that takes
    what the record says was added off its templates again, and the record, merged into
    ``base`` (the write it goes with: its pending reason, its Topology restore); None
    otherwise."""
    meta = obj.get("metadata") or {}
    added = flavor_assignments_of(meta.get("annotations") or {})
    if not added or not adapter.suspended(obj):
        return None
    out = dict(base or {})
    undo = unenforce(applied(obj, out), adapter, added)
    body: dict[str, Any] = {"metadata": {"annotations": {FLAVOR_ASSIGNMENT_ANNOTATION: None}}}
    return merged(out, merged(undo, body))
