"""A workload as the operator leaves it once a decision about flavors is written, for the
cycles a simulation runs one after another (``cycle.apply_decisions``).

Admitted into flavors, each pod set's pods carry the flavor's labels and tolerations (as
``flavor_fit.in_flavor`` adds them) and the workload records what was added; suspended, what
its record says was added is taken off again, as the operator's restore does from the same
record (docs/flavors.md, *Enforced on the pods, undone on requeue*).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sluice.api.constraints import PodSpecView, Toleration, interned
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import FlavorAssignment
from sluice.api.views import WorkloadView
from sluice.scheduler.flavor_fit import in_flavor


def admitted_into(
    view: WorkloadView, given: Sequence[tuple[str, str]], flavors: Sequence[FlavorView]
) -> WorkloadView:
    """The workload with its pod sets in the flavors ``given`` (pod set, flavor), and the
    record of what that added; a flavor deleted since is recorded with nothing added."""
    named = {f.name: f for f in flavors}
    chosen = dict(given)
    pod_sets, records = [], []
    for pods in view.pod_sets:
        name = chosen.get(pods.name)
        flavor = named.get(name) if name is not None else None
        if name is None or flavor is None:
            pod_sets.append(pods)
            if name is not None:
                records.append(FlavorAssignment(pods.name, name))
            continue
        shaped = in_flavor(pods.pod, flavor)
        added = tuple(kv for kv in shaped.node_selector if kv not in pods.pod.node_selector)
        taints = tuple(
            t
            for t in flavor.node_taints
            if Toleration(t.key, "Equal", t.value, t.effect) in shaped.tolerations
            and Toleration(t.key, "Equal", t.value, t.effect) not in pods.pod.tolerations
        )
        pod_sets.append(replace(pods, pod=shaped))
        records.append(FlavorAssignment(pods.name, name, added, taints))
    return replace(view, pod_sets=tuple(pod_sets), flavors=tuple(records))


def suspended_from(view: WorkloadView) -> WorkloadView:
    """The workload with what its record says admission added taken off its pods, and no
    record."""
    if not view.flavors:
        return view
    records = {a.pod_set: a for a in view.flavors}
    pod_sets = []
    for pods in view.pod_sets:
        record = records.get(pods.name)
        if record is None:
            pod_sets.append(pods)
            continue
        added = {Toleration(t.key, "Equal", t.value, t.effect) for t in record.tolerations}
        was = pods.pod
        selector = tuple(kv for kv in was.node_selector if kv not in record.node_selector)
        kept = tuple(t for t in was.tolerations if t not in added)
        pod = interned(PodSpecView(was.request, selector, was.affinity, kept))
        pod_sets.append(replace(pods, pod=pod))
    return replace(view, pod_sets=tuple(pod_sets), flavors=())
