"""Which flavor each gated plain pod goes on, and the JSON patch operations that put it
there before its gate goes (a gated pod's nodeSelector may grow and tolerations be added to;
docs/flavors.md, *Enforced on the pods, undone on requeue*). Pure: planned by the operator.

A pod of a workload admitted into flavors goes on its pod set's flavor; a replacement for a
lost pod of a workload admitted earlier, on that of the released pod it is made as (each
pod's own ``sluice.dev/flavor-assignment`` says which, and what was added to it). A victim's
pods are deleted and come back from their controller as they were: nothing is undone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sluice.api.constraints import Taint as NodeTaint
from sluice.api.constraints import Toleration, tolerates
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import FlavorAssignment, toleration_for
from sluice.api.workloads.domain_patches import pointer_token
from sluice.api.workloads.flavor_patches import NotEnforceable, chosen_flavors
from sluice.api.workloads.pods import PodMember, PodWorkload, pod_set_of

PodFlavor = tuple[str, FlavorView]
"""The pod set a plain pod is counted in and the Flavor it goes on."""


def pod_flavors(
    decided: Sequence[tuple[str, str]],
    workload: PodWorkload,
    gated: Sequence[PodMember],
    flavors: Mapping[str, FlavorView],
) -> dict[str, PodFlavor]:
    """The flavor each gated pod (by key) of a workload admitted into flavors goes on
    (``decided``: pod set -> flavor): its pod set's; a pod beyond its workload's count, in no
    pod set, that of all of them when they share one. Raises NotEnforceable when a flavor
    does not exist, or a pod's cannot be told."""
    chosen = chosen_flavors(decided, flavors)
    if not chosen or workload.view is None:
        return {}
    shared = {f.name: (n, f) for n, f in chosen.items()}
    out: dict[str, PodFlavor] = {}
    for member in gated:
        pod_set = pod_set_of(member, workload.view.pod_sets)
        if pod_set is not None and pod_set in chosen:
            out[member.key] = (pod_set, chosen[pod_set])
        elif len(shared) == 1:
            out[member.key] = next(iter(shared.values()))
        else:
            raise NotEnforceable(f"pod {member.key}: in none of the pod sets given a flavor")
    return out


def straggler_flavors(
    workload: PodWorkload, flavors: Mapping[str, FlavorView]
) -> dict[str, PodFlavor]:
    """The flavor each gated pod (by key) of an admitted workload goes on ({} when its pods
    went on none); raises NotEnforceable when one cannot be told or no longer exists."""
    released = [m for m in workload.members if not m.gated]
    if not any(m.flavor is not None for m in released):
        return {}
    out: dict[str, PodFlavor] = {}
    for member in workload.stragglers:
        record = straggler_flavor(member, released)
        if record is None:
            raise NotEnforceable(f"pod {member.key}: made as none of the pods on a flavor")
        flavor = flavors.get(record.flavor)
        if flavor is None:
            raise NotEnforceable(f"pod {member.key}: flavor {record.flavor} does not exist")
        out[member.key] = (record.pod_set, flavor)
    return out


def pod_flavor_ops(
    member: PodMember, pod_set: str, flavor: FlavorView, also: Mapping[str, str] | None = None
) -> tuple[list[dict[str, Any]], FlavorAssignment]:
    """The JSON patch operations that put a gated plain pod of ``pod_set`` on ``flavor``'s
    nodes before its gate goes: the labels its nodeSelector lacks, and a toleration for each
    taint it does not tolerate yet; and what they add, for the pod's record. ``also``: the
    labels the same release adds before them (its Topology domain's). They go before the
    annotation ops of the release."""
    have = {**dict(member.pod.node_selector), **(also or {})}
    labels = tuple(sorted((k, v) for k, v in flavor.node_labels.items() if k not in have))
    tolerated = member.pod.tolerations
    taints = tuple(
        t
        for t in flavor.node_taints
        if not any(tolerates(tol, NodeTaint(t.key, t.value, t.effect)) for tol in tolerated)
    )
    ops: list[dict[str, Any]] = []
    if labels and have:
        ops += [
            {"op": "add", "path": f"/spec/nodeSelector/{pointer_token(k)}", "value": v}
            for k, v in labels
        ]
    elif labels:
        ops.append({"op": "add", "path": "/spec/nodeSelector", "value": dict(labels)})
    if taints and tolerated:
        ops += [
            {"op": "add", "path": "/spec/tolerations/-", "value": toleration_for(t)} for t in taints
        ]
    elif taints:
        ops.append(
            {"op": "add", "path": "/spec/tolerations", "value": [toleration_for(t) for t in taints]}
        )
    return ops, FlavorAssignment(pod_set, flavor.name, labels, taints)


def _as_submitted(member: PodMember) -> tuple[object, ...]:
    """A released pod's constraints without what sluice added at its release (its flavor's
    labels and tolerations, its domain's label): as its gated replacements have them."""
    added = member.flavor
    drop = set(added.node_selector) if added is not None else set()
    if member.assignment is not None:
        drop.add((member.assignment.level, member.assignment.value))
    written = [toleration_for(t) for t in added.tolerations] if added is not None else []
    tolerations = list(member.pod.tolerations)
    for t in written:
        read = Toleration(t["key"], t["operator"], t["value"], t["effect"])
        if read in tolerations:
            tolerations.remove(read)
    pod = member.pod
    selector = tuple(kv for kv in pod.node_selector if kv not in drop)
    return (pod.request, selector, pod.affinity, tuple(tolerations))


def straggler_flavor(member: PodMember, released: Sequence[PodMember]) -> FlavorAssignment | None:
    """The flavor a gated pod of an admitted workload goes on (a controller's replacement
    for a pod lost): that of its workload's pods when they are all on one, else that of the
    released pod it is made as; None when none is recorded or it is made as none of them."""
    records = {m.flavor for m in released if m.flavor is not None}
    if len({(r.pod_set, r.flavor) for r in records}) == 1:
        return next(iter(records))
    pod = member.pod
    mine = (pod.request, pod.node_selector, pod.affinity, pod.tolerations)
    return next(
        (m.flavor for m in released if m.flavor is not None and _as_submitted(m) == mine),
        None,
    )
