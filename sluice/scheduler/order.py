"""Queue order and job order.

Queues are compared level by level from the root: siblings by their own key, so a team is
served before its cousin when its department is ahead. A key is the opinions of the
configured plugins in tier order (the first that differs decides), then creation time, then
name. With QueueScoreOrderEnable the key is seed 000's weighted score instead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sluice.api.config import ActionArguments
from sluice.api.constants import ROOT_QUEUE
from sluice.scheduler.session import JobInfo, Session

SHARE_PLUGINS = ("proportion", "capacity", "proportion_optimize")

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

    def key(name: str) -> QueueKey:
        info = session.queues[name]
        parts: list[Any] = []
        for plugin in plugins:
            if plugin == "priority":
                parts.append(-info.priority)
            elif plugin == "drf":
                parts.append(session.drf_share(name))
            elif plugin in SHARE_PLUGINS:
                parts.append(session.share(name))
        return (*parts, info.queue.creation_timestamp, name)

    return key


def _score_key(
    session: Session, args: ActionArguments, plugins: list[str]
) -> Callable[[str], QueueKey]:
    priorities = [q.priority for n, q in session.queues.items() if n != ROOT_QUEUE]
    low, high = (min(priorities), max(priorities)) if priorities else (0, 0)

    def score(name: str) -> float:
        info = session.queues[name]
        total = 0.0
        for plugin in plugins:
            weight = args.score_weight(plugin)
            if plugin == "priority":
                if high > low:
                    total += weight * (info.priority - low) / (high - low)
            elif plugin == "drf":
                total += weight * (1.0 - session.drf_share(name) / max(info.weight, 1))
            elif plugin in SHARE_PLUGINS:
                total += weight * (1.0 - session.share(name))
        return total

    def key(name: str) -> QueueKey:
        info = session.queues[name]
        return (-score(name), info.queue.creation_timestamp, name)

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
    """jobOrder: global — job priority first, queue order second (seed 000)."""

    def key(job: JobInfo) -> tuple[int, int, datetime, str]:
        return (-job.priority, rank.get(job.queue, len(rank)), job.view.creation_timestamp, job.key)

    return key
