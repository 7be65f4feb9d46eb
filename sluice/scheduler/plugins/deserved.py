"""How much each queue deserves: proportion, capacity and proportion_optimize.

All three work top-down on the tree: a parent's deserved is split among its children (root's
is the cluster total). Amounts are exact milli-unit integers; weights are integers, so every
split is integer division and the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sluice.api.config import PluginConfig
from sluice.api.resources import Resources


@dataclass(frozen=True, slots=True)
class Claim:
    """One child's part in a split: what it may take and how strongly it pulls."""

    name: str
    weight: int
    cap: Resources  # min(request, realCapability)
    guarantee: Resources


def water_fill(amount: int, claims: Sequence[tuple[str, int, int]]) -> dict[str, int]:
    """Weighted max-min split of one resource: (name, weight, cap) -> share, none above its cap.

    Repeatedly gives every unsatisfied claim its weighted part of what is left; claims whose
    remaining need is within their part take just that, and the rest is shared again.
    """
    given = {name: 0 for name, _, _ in claims}
    active = [(name, weight, cap) for name, weight, cap in claims if cap > 0 and weight > 0]
    remaining = amount
    while active and remaining > 0:
        total_weight = sum(weight for _, weight, _ in active)
        satisfied = [
            (name, weight, cap)
            for name, weight, cap in active
            if cap - given[name] <= remaining * weight // total_weight
        ]
        if not satisfied:
            for name, weight, _ in active:
                given[name] += remaining * weight // total_weight
            break
        for name, _, cap in satisfied:
            remaining -= cap - given[name]
            given[name] = cap
        done = {name for name, _, _ in satisfied}
        active = [claim for claim in active if claim[0] not in done]
    return given


def split_by_weight(total: Resources, claims: Sequence[Claim]) -> dict[str, Resources]:
    """Water-fill every resource of ``total`` among the claims, independently per resource."""
    out: dict[str, dict[str, int]] = {claim.name: {} for claim in claims}
    for resource, amount in total.items():
        shares = water_fill(
            amount,
            [(c.name, c.weight, c.cap.get_amount(resource)) for c in claims],
        )
        for name, share in shares.items():
            if share:
                out[name][resource] = share
    return {name: Resources(values) for name, values in out.items()}


def split(plugin: PluginConfig, total: Resources, claims: Sequence[Claim]) -> dict[str, Resources]:
    """A parent's deserved among its children, as the plugin that computes deserved splits it
    (capacity does not split: each queue deserves what it sets)."""
    if plugin.name == "proportion":
        return proportion(total, claims)
    return proportion_optimize(
        total,
        claims,
        guarantee_enable=plugin.flag("GuaranteeEnable", True),
        priority_type=str(plugin.arguments.get("PriorityType", "Weight")),
    )


def proportion(total: Resources, claims: Sequence[Claim]) -> dict[str, Resources]:
    """Deserved by weight, each capped by min(request, realCapability), raised to its guarantee."""
    split = split_by_weight(total, claims)
    return {c.name: split[c.name].maximum(c.guarantee) for c in claims}


def proportion_optimize(
    total: Resources,
    claims: Sequence[Claim],
    *,
    guarantee_enable: bool,
    priority_type: str,
) -> dict[str, Resources]:
    """proportion_optimize (docs/scheduler.md, "Numbers"): resolve the conflict between
    guarantee and weight one of two ways.

    Guarantee priority: a queue whose weighted part falls short of its guarantee in any
    resource gets its weight raised (the least that makes its part reach the guarantee), then
    the split is done with the new weights. Weight priority: the split is by the configured
    weights; only what the split left over is shared out, evenly, to the queues still short of
    their guarantee, smallest shortfall first.
    """
    if not guarantee_enable:
        return split_by_weight(total, claims)
    if priority_type == "Guarantee":
        adjusted = _weights_meeting_guarantees(total, claims)
        split = split_by_weight(total, adjusted)
        return {c.name: split[c.name] for c in claims}
    split = split_by_weight(total, claims)
    return _top_up_guarantees(total, claims, split)


def _weights_meeting_guarantees(total: Resources, claims: Sequence[Claim]) -> list[Claim]:
    current = list(claims)
    for _ in range(8):  # each round only raises weights; a few rounds settle any tree
        total_weight = sum(c.weight for c in current) or 1
        changed = False
        adjusted: list[Claim] = []
        for claim in current:
            factor_num, factor_den = 1, 1
            for resource, wanted in claim.guarantee.items():
                part = total.get_amount(resource) * claim.weight // total_weight
                if 0 < part < wanted and wanted * factor_den > part * factor_num:
                    factor_num, factor_den = wanted, part
            if factor_num > factor_den:
                weight = -(-claim.weight * factor_num // factor_den)
                adjusted.append(Claim(claim.name, weight, claim.cap, claim.guarantee))
                changed = True
            else:
                adjusted.append(claim)
        current = adjusted
        if not changed:
            break
    return current


def _top_up_guarantees(
    total: Resources, claims: Sequence[Claim], split: Mapping[str, Resources]
) -> dict[str, Resources]:
    out = {name: dict(values) for name, values in split.items()}
    for resource, amount in total.items():
        remaining = amount - sum(values.get(resource, 0) for values in out.values())
        short = sorted(
            (c for c in claims if out[c.name].get(resource, 0) < c.guarantee.get_amount(resource)),
            key=lambda c: (c.guarantee.get_amount(resource) - out[c.name].get(resource, 0), c.name),
        )
        while short and remaining > 0:
            average = remaining // len(short)
            claim = short.pop(0)
            gap = claim.guarantee.get_amount(resource) - out[claim.name].get(resource, 0)
            given = min(gap, average) if short else min(gap, remaining)
            out[claim.name][resource] = out[claim.name].get(resource, 0) + given
            remaining -= given
    return {name: Resources(values) for name, values in out.items()}
