"""Where a workload's Topology domains are written, for every kind with pod templates: the
domain's label in the nodeSelector of each pod template it covers, and taken off again
(docs/scheduler.md, *Topology*). Pure: the operator writes these patches, the webhook checks
them.

A domain of all the pod sets together (``<level>=<value>``) covers every pod template of the
workload (but those of pod sets made at its creation: ``Adapter.made_at_creation``); a pod
set's (``<pod set>: <level>=<value>``) covers that pod set's template. A
template that selects the level's label already gets nothing. What was added is recorded in
sluice.dev/topology-assignment: ``<level>=<value>`` when every template got the domain of all
the pod sets, else ``<pod set>: <level>=<value>`` for each that got one; taking those off puts every
template back as it was (an empty nodeSelector counts as none).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sluice.api.objects import Obj
from sluice.api.topology import Assignment
from sluice.api.workloads.model import Adapter, TemplatePath, at


def selector(template: Any) -> Mapping[str, Any]:
    """A pod template's nodeSelector ({} when it has none)."""
    spec = template.get("spec") if isinstance(template, Mapping) else None
    found = spec.get("nodeSelector") if isinstance(spec, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def covered(
    obj: Obj, adapter: Adapter, assignments: Sequence[Assignment]
) -> list[tuple[str, TemplatePath, Assignment]]:
    """Each pod template a domain covers: (its pod set, where it is, the domain)."""
    templates = adapter.domain_templates(obj)
    return [
        (name, path, a)
        for a in assignments
        for name, path in templates
        if not a.pod_set or a.pod_set == name
    ]


def confine(
    obj: Obj, adapter: Adapter, assignments: Sequence[Assignment]
) -> tuple[dict[str, Any], tuple[Assignment, ...]]:
    """The merge patch that writes each domain's label in the templates it covers that do
    not select that label yet, and what it adds, as sluice.dev/topology-assignment records
    it; ({}, ()) when it adds nothing."""
    after = spec_copy(obj)
    added: list[Assignment] = []
    for name, path, a in covered(obj, adapter, assignments):
        template = at(after, path)
        if not isinstance(template, dict) or a.level in selector(template):
            continue
        spec = template.get("spec")
        if not isinstance(spec, dict):
            continue  # no pod spec: nothing the reading of its pod sets would accept
        spec["nodeSelector"] = {**selector(template), a.level: a.value}
        added.append(Assignment(a.level, a.value, name))
    if not added:
        return {}, ()
    same = {(a.level, a.value) for a in added}
    whole = all(not a.pod_set for a in assignments)
    if whole and len(same) == 1 and len(added) == len(adapter.domain_templates(obj)):
        level, value = next(iter(same))
        return merge_diff(obj, after), (Assignment(level, value),)
    return merge_diff(obj, after), tuple(added)


def unconfine(obj: Obj, adapter: Adapter, assignments: Sequence[Assignment]) -> dict[str, Any]:
    """The merge patch that takes the recorded domains' labels off the templates again."""
    after = spec_copy(obj)
    for _, path, a in covered(obj, adapter, assignments):
        template = at(after, path)
        if not isinstance(template, dict) or selector(template).get(a.level) != a.value:
            continue
        kept = {k: v for k, v in selector(template).items() if k != a.level}
        if kept:
            template["spec"]["nodeSelector"] = kept
        else:
            del template["spec"]["nodeSelector"]
    return merge_diff(obj, after)


def unkept(obj: Obj, adapter: Adapter, assignments: Sequence[Assignment]) -> str | None:
    """The first pod set whose template no longer selects the domain recorded for it, or
    None: an admitted workload's templates keep them (webhook)."""
    for name, path, a in covered(obj, adapter, assignments):
        if selector(at(obj, path)).get(a.level) != a.value:
            return name
    return None


def merge_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch from ``before`` to ``after``: maps key by key, a changed list whole
    (a list item cannot be patched alone), a removed key as null."""
    out: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        old = before.get(key)
        if key in before and old == value:
            continue
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = merge_diff(old, value)
        else:
            out[key] = value
    return out


def spec_copy(obj: Obj) -> dict[str, Any]:
    """A deep, plain copy of the object's spec (what the patches change)."""
    spec: dict[str, Any] = json.loads(json.dumps(obj.get("spec") or {}))
    return {**obj, "spec": spec}
