"""Which flavors a pod set may be given, by what its pods select (docs/flavors.md, *A flavor
chosen at admission*).

A pod set admitted into a flavor gets the flavor's labels in its nodeSelector, so a flavor
whose labels its own nodeSelector or required node affinity already rule out would leave its
pods no node at all: such a flavor is never tried for it. Only the keys the flavor sets are
looked at. A requirement on any other key, or on a node's name, is left to placement, which
checks the pods against the flavor's nodes one by one (an empty affinity term, which no node
matches, is placement's to refuse too); so a pod set that selects nothing the flavors set may
be given any of them. Taints do not count here: the pods admitted into a
flavor are given tolerations for its taints.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluice.api.constraints import (
    NodeRequirement,
    PodSpecView,
    Taint,
    Toleration,
    interned,
    tolerates,
)
from sluice.api.flavor import FlavorView
from sluice.scheduler.placement import holds_for


def _may_hold(req: NodeRequirement, flavor: FlavorView) -> bool:
    """Whether the requirement may hold on a node of the flavor: it does where the flavor
    sets its key, and may elsewhere (the nodes decide)."""
    if req.on_field or req.key not in flavor.node_labels:
        return True
    return holds_for(req, flavor.node_labels[req.key])


def flavor_refusal(pod: PodSpecView, flavor: FlavorView) -> str | None:
    """Why no node of ``flavor`` may take the pod by the labels the flavor sets, in the words
    of a pending reason; None when some may (placement then checks its nodes)."""
    for key, value in pod.node_selector:
        have = flavor.node_labels.get(key)
        if have is not None and have != value:
            return f"flavor {flavor.name} has {key}={have}, its nodeSelector asks {key}={value}"
    if pod.affinity is not None and not any(
        all(_may_hold(r, flavor) for r in term) for term in pod.affinity
    ):
        labels = ", ".join(f"{k}={v}" for k, v in sorted(flavor.node_labels.items()))
        return f"flavor {flavor.name} has {labels}, which its node affinity rules out"
    return None


def flavors_for(
    pod: PodSpecView, flavors: Sequence[FlavorView]
) -> tuple[tuple[FlavorView, ...], tuple[tuple[str, str], ...]]:
    """The flavors the pod's set may be given, in the order given (the queue's), and each
    flavor it may not be given with why (``flavor_refusal``), in the same order."""
    may: list[FlavorView] = []
    refused: list[tuple[str, str]] = []
    for flavor in flavors:
        why = flavor_refusal(pod, flavor)
        if why is None:
            may.append(flavor)
        else:
            refused.append((flavor.name, why))
    return tuple(may), tuple(refused)


_SHAPED: dict[tuple[PodSpecView, int], tuple[FlavorView, PodSpecView]] = {}
_SHAPED_MAX = 8192


def in_flavor(pod: PodSpecView, flavor: FlavorView) -> PodSpecView:
    """``shaped``, remembered per pod shape and Flavor object (a cycle asks it of every
    waiting pod set for every flavor it may be given, and they share a few hundred shapes):
    the Flavor is kept with the answer, so its identity is never another's."""
    key = (pod, id(flavor))
    known = _SHAPED.get(key)
    if known is not None and known[0] is flavor:
        return known[1]
    if len(_SHAPED) >= _SHAPED_MAX:
        _SHAPED.clear()
    out = shaped(pod, flavor)
    _SHAPED[key] = (flavor, out)
    return out


def shaped(pod: PodSpecView, flavor: FlavorView) -> PodSpecView:
    """The pod as admission into ``flavor`` leaves it: the flavor's labels its nodeSelector
    does not name yet added to it, and a toleration (``Equal``, the taint's key, value and
    effect) for each of the flavor's taints it does not tolerate yet. Placement then checks it
    against the nodes as it checks any pod, and keeps its shape apart from the same pod's in
    another flavor."""
    selected = dict(pod.node_selector)
    added = {k: v for k, v in flavor.node_labels.items() if k not in selected}
    missing = tuple(
        Toleration(t.key, "Equal", t.value, t.effect)
        for t in flavor.node_taints
        if not any(tolerates(have, Taint(t.key, t.value, t.effect)) for have in pod.tolerations)
    )
    if not added and not missing:
        return pod
    selector = tuple(sorted({**selected, **added}.items()))
    return interned(PodSpecView(pod.request, selector, pod.affinity, (*pod.tolerations, *missing)))
