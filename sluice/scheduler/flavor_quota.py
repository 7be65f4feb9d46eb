"""What a workload holds in each flavor (docs/flavors.md, *Counting per flavor*).

Each pod set counts in the flavor it was given, whole; a claim its pods name directly counts
once per workload, as it does in the workload's request, in the flavor of the first pod set
that names it. The amounts are kept whole per flavor: a queue's quota in a flavor compares
only the resources its entry names, so one figure per queue and flavor serves every level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluice.api.views import PodSet

FlavorAmounts = dict[str, dict[str, int]]
"""Flavor -> resource -> milli-units."""


def add_in(target: FlavorAmounts, amounts: Mapping[str, Mapping[str, int]], sign: int = 1) -> None:
    """Add ``amounts`` (times ``sign``) to ``target``, flavor by flavor and resource by
    resource; a flavor left holding nothing is dropped, so what holds nothing shows nothing."""
    for flavor, resources in amounts.items():
        into = target.setdefault(flavor, {})
        for r, a in resources.items():
            into[r] = into.get(r, 0) + sign * a
        if not any(into.values()):
            del target[flavor]


def counted(pod_sets: Sequence[PodSet], chosen: Mapping[str, str]) -> FlavorAmounts:
    """What the pod sets hold per flavor, each pod set in the flavor ``chosen`` for it (by
    name; a pod set given none counts in no flavor)."""
    out: FlavorAmounts = {}
    claims: set[str] = set()
    for pod_set in pod_sets:
        flavor = chosen.get(pod_set.name)
        if flavor is None:
            continue
        into = out.setdefault(flavor, {})
        amounts = [pod_set.request]
        for key, amount in pod_set.named_claims:
            if key not in claims:
                claims.add(key)
                amounts.append(amount)
        for amount in amounts:
            for r, a in amount.items():
                into[r] = into.get(r, 0) + a
    return out
