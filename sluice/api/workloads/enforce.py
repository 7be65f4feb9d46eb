"""Where a workload's flavors are written, for every kind with pod templates: each flavor's
labels in the nodeSelector, and tolerations for its taints, of the pod template of the pod
set given it, and taken off again (docs/flavors.md, *Enforced on the pods, undone on
requeue*). Pure: the operator will write these patches, the webhook check them.

Only what a template lacks is added (a label it selects already, a taint it tolerates
already, get nothing), and the record (api.flavor_assignment) says exactly what, so taking
it off puts every template back as it was (an empty nodeSelector or toleration list counts as
none). The templates are those a Topology domain is written in (``Adapter.domain_templates``):
a pod set made at the workload's creation has no template of its own to write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sluice.api.constraints import Taint as NodeTaint
from sluice.api.constraints import Toleration, tolerates
from sluice.api.flavor import FlavorView, Taint
from sluice.api.flavor_assignment import FlavorAssignment, toleration_for
from sluice.api.objects import Obj
from sluice.api.workloads.confine import merge_diff, selector, spec_copy
from sluice.api.workloads.model import Adapter, at


def _tolerations(template: Mapping[str, Any]) -> list[Any]:
    spec = template.get("spec")
    found = spec.get("tolerations") if isinstance(spec, Mapping) else None
    return list(found) if isinstance(found, list) else []


def _covers(raw: Any, taint: Taint) -> bool:
    """Whether a toleration as written in a template covers the taint."""
    if not isinstance(raw, Mapping):
        return False
    read = Toleration(
        str(raw.get("key") or ""),
        str(raw.get("operator") or "Equal"),
        str(raw.get("value") or ""),
        str(raw.get("effect") or ""),
    )
    return tolerates(read, NodeTaint(taint.key, taint.value, taint.effect))


def enforce(
    obj: Obj, adapter: Adapter, chosen: Mapping[str, FlavorView]
) -> tuple[dict[str, Any], tuple[FlavorAssignment, ...]]:
    """The merge patch that writes, into the template of each pod set ``chosen`` names, its
    flavor's labels and tolerations the template lacks, and the assignments as recorded; a
    pod set to which nothing is added is recorded too, with nothing added, so the record
    names every pod set's flavor."""
    after = spec_copy(obj)
    added: list[FlavorAssignment] = []
    for name, path in adapter.domain_templates(obj):
        flavor = chosen.get(name)
        template = at(after, path)
        if flavor is None or not isinstance(template, dict):
            continue
        spec = template.get("spec")
        if not isinstance(spec, dict):
            continue  # no pod spec: nothing the reading of its pod sets would accept
        have = selector(template)
        labels = tuple(sorted((k, v) for k, v in flavor.node_labels.items() if k not in have))
        present = _tolerations(template)
        taints = tuple(t for t in flavor.node_taints if not any(_covers(r, t) for r in present))
        if labels:
            spec["nodeSelector"] = {**have, **dict(labels)}
        if taints:
            spec["tolerations"] = [*present, *(toleration_for(t) for t in taints)]
        added.append(FlavorAssignment(name, flavor.name, labels, taints))
    return merge_diff(obj, after), tuple(added)


def unenforce(obj: Obj, adapter: Adapter, added: Sequence[FlavorAssignment]) -> dict[str, Any]:
    """The merge patch that takes what the record says was added off the templates again:
    a label still of the value added, and one toleration equal to each added."""
    after = spec_copy(obj)
    by_set = {a.pod_set: a for a in added}
    for name, path in adapter.domain_templates(obj):
        record = by_set.get(name)
        template = at(after, path)
        if record is None or not isinstance(template, dict):
            continue
        spec = template.get("spec")
        if not isinstance(spec, dict):
            continue
        have = selector(template)
        kept = {k: v for k, v in have.items() if (k, v) not in record.node_selector}
        if kept != dict(have):
            if kept:
                spec["nodeSelector"] = kept
            else:
                del spec["nodeSelector"]
        tolerations = _tolerations(template)
        for taint in record.tolerations:
            if (written := toleration_for(taint)) in tolerations:
                tolerations.remove(written)
        if len(tolerations) != len(_tolerations(template)):
            if tolerations:
                spec["tolerations"] = tolerations
            else:
                del spec["tolerations"]
    return merge_diff(obj, after)


def unenforced(obj: Obj, adapter: Adapter, added: Sequence[FlavorAssignment]) -> str | None:
    """The first pod set whose template no longer carries what was added for its flavor, or
    None: an admitted workload's templates keep them (webhook)."""
    by_set = {a.pod_set: a for a in added}
    for name, path in adapter.domain_templates(obj):
        record = by_set.get(name)
        template = at(obj, path)
        if record is None:
            continue
        if not isinstance(template, Mapping):
            return name
        have = selector(template)
        tolerations = _tolerations(template)
        if any(have.get(k) != v for k, v in record.node_selector) or any(
            toleration_for(t) not in tolerations for t in record.tolerations
        ):
            return name
    return None
