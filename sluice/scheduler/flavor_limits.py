"""What a queue's quota in a flavor holds a pod set to, for the choice of its flavor
(docs/flavors.md, *A flavor chosen at admission*): each level of the queue's chain whose
entries name the flavor, root first, within its realCapability there and whether over its
deserved there, and a level over its capability there admitting nothing more that asks for
what it is over in.

What bounds each queue in each flavor (``bounds``) and which levels of its chain name a flavor
(``levels_naming``) follow from the tree and the session's figures alone: they are worked out
once a session (``flavor_counts.count_flavors``), since a cycle asks them for every flavor
tried for every waiting job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sluice.api.quantity import format_quantity
from sluice.api.queue import FlavorQuota
from sluice.api.resources import EMPTY, describe_amount
from sluice.scheduler.records import Bound, QueueInfo

if TYPE_CHECKING:
    from sluice.scheduler.session import Session

UNTOLD = "its queues have no room for it in the flavor"
"""What stops a flavor, for a choice made without ``explain``: the actions only ask whether."""


def bounds(info: QueueInfo, entry: FlavorQuota, elastic: bool) -> tuple[Bound, ...]:
    """What the queue's ``entry`` holds admission to in its flavor, per resource it names:
    its realCapability there (named ``capability`` where that is the entry's own), or its
    deserved there when that is lower and queues may not go over it (ElasticEnable false)."""
    real = info.flavor_real_capability.get(entry.name, EMPTY)
    deserved = info.flavor_deserved.get(entry.name, EMPTY)
    out: list[Bound] = []
    for r in sorted(entry.names()):
        owed = deserved.get_amount(r)
        limit, label = real.get_amount(r), "realCapability"
        if entry.capability.get(r) == limit:
            label = "capability"
        if not elastic and owed < limit:
            limit, label = owed, "deserved"
        out.append((r, owed, limit, label))
    return tuple(out)


def levels_naming(session: Session, queue: str, flavor: str) -> tuple[str, ...]:
    """The queues of ``queue``'s chain whose entries name ``flavor``, root first."""
    return tuple(
        name
        for name in reversed(session.chain(queue))
        if flavor in session.queues[name].flavor_bounds
    )


def levels(
    session: Session, queue: str, flavor: str, need: Mapping[str, int], explain: bool = True
) -> tuple[str | None, bool]:
    """Whether ``need`` more in ``flavor`` keeps every level of the queue's chain naming the
    flavor within its realCapability there (else the first breach from the top, in the
    words of a pending reason; ``UNTOLD`` without ``explain``), and whether it takes some
    level over its deserved there. Only the resources a level's entry names are compared
    (``QueueInfo.flavor_bounds``, over ``QueueInfo.flavor_levels``)."""
    breach: str | None = None
    over = False
    naming = session.queues[queue].flavor_levels.get(flavor)
    if naming is None:
        naming = levels_naming(session, queue, flavor)
    for name in naming:
        info = session.queues[name]
        if breach is None and (held_back := _over_capability(session, queue, name, flavor, need)):
            breach, over = held_back, True
        held = info.flavor_allocated.get(flavor, {})
        for r, owed, limit, label in info.flavor_bounds[flavor]:
            amount = need.get(r, 0)
            if amount <= 0:
                continue
            would = held.get(r, 0) + amount
            over = over or would > owed
            if breach is None and would > limit:
                breach = _breach(session, queue, name, flavor, r, would, limit, label, explain)
    return breach, over


def _breach(
    session: Session,
    queue: str,
    name: str,
    flavor: str,
    r: str,
    would: int,
    limit: int,
    label: str,
    explain: bool,
) -> str:
    """Level ``name`` of the queue's chain would hold ``would`` of ``r`` in ``flavor``, over
    its ``limit`` there, in the words of a pending reason."""
    if not explain:
        return UNTOLD
    level = name if name == queue else f"{name} ({_relation(session, queue, name)})"
    breach = (
        f"{level} would use {describe_amount(r, would)} > {label}"
        f" {format_quantity(limit, r)} in flavor {flavor}"
    )
    return breach + (" (ElasticEnable is false)" if label == "deserved" else "")


def _over_capability(
    session: Session, queue: str, name: str, flavor: str, need: Mapping[str, int]
) -> str | None:
    """Why level ``name`` of the queue's chain admits nothing more asking ``need`` into
    ``flavor``: it holds more than its capability there in a resource ``need`` asks
    (``QueueInfo.flavor_over_capability``), as a queue over its own capability does
    (``fit.over_capability_failure``); None when it does not."""
    over = session.queues[name].flavor_over_capability.get(flavor)
    hit = sorted(r for r, a in need.items() if a > 0 and r in over) if over else []
    if not over or not hit:
        return None
    level = name if name == queue else f"{name} ({_relation(session, queue, name)})"
    which = hit[0] if len(hit) == 1 else f"{', '.join(hit[:-1])} and {hit[-1]}"
    them = "it" if len(hit) == 1 else "any of them"
    figures = "; ".join(
        f"{describe_amount(r, over[r][0])} > capability {format_quantity(over[r][1], r)}"
        for r in hit
    )
    return (
        f"queue {level} is over its capability in {which} in flavor {flavor}, and admits"
        f" nothing more that asks for {them} there until it fits again: {figures}"
    )


def _relation(session: Session, queue: str, name: str) -> str:
    parent = session.queues[queue].parent
    return f"{'parent' if parent == name else 'ancestor'} of {queue}"
