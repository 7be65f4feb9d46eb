"""Queue order and job order.

Queues are compared level by level from the root: siblings by their own key, so a team is
served before its cousin when its department is ahead. A key is the opinions of the
configured plugins in tier order (the first that differs decides: priority higher first, drf
lower dominant share per unit of weight first, the deserved plugins lower share first), then
creation time, then name. With QueueScoreOrderEnable the key is the weighted score of
docs/scheduler.md instead. The usage plugin's opinion (decayed dominant usage per unit of
weight, lower first) comes right after queue priority wherever it is listed, and before the
score: what a queue used over time is what decides between siblings, today's keys only
where it does not.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sluice.api.config import ActionArguments
from sluice.api.constants import ROOT_QUEUE
from sluice.api.plugins import PLUGINS, QueueOrder
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session

QueueKey = tuple[Any, ...]


def order_arguments(session: Session) -> ActionArguments:
    """Queue-order arguments come from enqueue (or allocate, when enqueue has none)."""
    config = session.config
    if "enqueue" in config.action_arguments:
        return config.arguments("enqueue")
    return config.arguments("allocate")


def queue_key_function(session: Session) -> Callable[[str], QueueKey]:
    """The key that orders a queue among its siblings (smaller first)."""
    args = order_arguments(session)
    plugins = session.config.plugin_names()
    if args.queue_score_order:
        return _score_key(session, args, plugins)

    orders = usage_first([PLUGINS[plugin].queue_order for plugin in plugins])

    def key(name: str) -> QueueKey:
        info = session.queues[name]
        parts: list[Any] = []
        for by in orders:
            if by == "priority":
                parts.append(-info.priority)
            elif by == "drf":
                # Hierarchical DRF: a sibling's dominant share counts per unit of weight, so
                # weights 2:1:1 split the parent 2:1:1 from the first cycle on, as proportion
                # splits deserved, and nothing is admitted only to be reclaimed next cycle.
                parts.append(session.drf_share(name) / max(info.weight, 1))
            elif by == "share":
                parts.append(session.share(name))
            elif by == "usage":
                parts.append(session.usage_key(name))
        return (*parts, info.queue.creation_timestamp, name)

    return key


def usage_first(orders: list[QueueOrder | None]) -> list[QueueOrder | None]:
    """The plugins' opinions in the order they count: usage right after priority."""
    if "usage" not in orders:
        return orders
    rest = [by for by in orders if by != "usage"]
    at = rest.index("priority") + 1 if "priority" in rest else 0
    return [*rest[:at], "usage", *rest[at:]]


def weighted_score(
    weights: dict[str, float],
    *,
    priority: float | None = None,
    drf_share: float | None = None,
    weight: int = 1,
    share: float | None = None,
) -> float:
    """The queue score of ``QueueScoreOrderEnable`` (docs/scheduler.md, "Queue order"): each
    configured plugin's score times its weight, summed, higher first.

    priority is already normalised to 0..1 over the queues' own min and max; drf scores
    1 - share/weight; proportion, capacity and proportion_optimize score 1 - share.
    """
    total = 0.0
    if priority is not None:
        total += weights.get("priority", 1.0) * priority
    if drf_share is not None:
        total += weights.get("drf", 1.0) * (1.0 - drf_share / max(weight, 1))
    if share is not None:
        total += weights.get("share", 1.0) * (1.0 - share)
    return total


def _score_key(
    session: Session, args: ActionArguments, plugins: list[str]
) -> Callable[[str], QueueKey]:
    priorities = [q.priority for n, q in session.queues.items() if n != ROOT_QUEUE]
    low, high = (min(priorities), max(priorities)) if priorities else (0, 0)
    share_plugin = next((p for p in plugins if PLUGINS[p].queue_order == "share"), None)
    weights = {
        "priority": args.score_weight("priority"),
        "drf": args.score_weight("drf"),
        "share": args.score_weight(share_plugin) if share_plugin else 0.0,
    }

    def key(name: str) -> QueueKey:
        info = session.queues[name]
        score = weighted_score(
            weights,
            priority=(info.priority - low) / (high - low)
            if "priority" in plugins and high > low
            else None,
            drf_share=session.drf_share(name) if "drf" in plugins else None,
            weight=info.weight,
            share=session.share(name) if share_plugin else None,
        )
        if "usage" in plugins:
            return (session.usage_key(name), -score, info.queue.creation_timestamp, name)
        return (-score, info.queue.creation_timestamp, name)

    return key


def leaf_order(session: Session, leaves: list[str]) -> list[str]:
    """Leaves sorted by their path of sibling keys from the root."""
    key = queue_key_function(session)
    cache: dict[str, QueueKey] = {}

    def level(name: str) -> QueueKey:
        if name not in cache:
            cache[name] = key(name)
        return cache[name]

    def path(leaf: str) -> tuple[QueueKey, ...]:
        chain = session.chain(leaf)
        return tuple(level(n) for n in reversed(chain) if n != ROOT_QUEUE)

    return sorted(leaves, key=path)


def global_job_key(rank: dict[str, int]) -> Callable[[JobInfo], tuple[int, int, datetime, str]]:
    """jobOrder: global — job priority first, queue order second."""

    def key(job: JobInfo) -> tuple[int, int, datetime, str]:
        return (-job.priority, rank.get(job.queue, len(rank)), job.view.queued_at, job.key)

    return key
