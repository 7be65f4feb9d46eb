"""Usage over time: what queues and namespaces held, decayed with a half-life.

A queue's usage of a resource is the resource-seconds its admitted workloads held, each
second weighing half as much one half-life later. It is sampled every cycle: the last sample
decays over the time since, and what the queue holds now is counted as held at a constant
rate over that time (the closed form of the decayed integral). An admitted job adds its
request times the entry penalty at once. The order key is the dominant weighted usage: per
resource, weight times usage over the cluster's total (the seconds the whole cluster's
resource would have been held), the largest of them. docs/scheduler.md, *Usage over time*.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TypeVar

from sluice.api.config import UsageSettings
from sluice.api.queue import QueueUsage
from sluice.api.usage_text import hours

Amounts = dict[str, float]
"""Resource -> resource-seconds (whole units, not milli-units)."""


def _halvings(seconds: float, half_life: float) -> float:
    """How many half-lives ``seconds`` are (none for a time that runs backwards)."""
    return max(seconds, 0.0) / half_life


def decay_factor(seconds: float, half_life: float) -> float:
    """How much of a usage is left after ``seconds``: 2^(-seconds / half-life)."""
    return math.pow(2.0, -_halvings(seconds, half_life))


def advance(
    usage: Mapping[str, float], held: Mapping[str, float], seconds: float, half_life: float
) -> Amounts:
    """The usage ``seconds`` later, ``held`` (resource -> units) held all that time:
    u * d + rate * h / ln 2 * (1 - d), with d the decay factor."""
    d = decay_factor(seconds, half_life)
    # 1 - d without the cancellation of subtracting two nearly equal numbers: over a short
    # interval of a long half-life d is 1 - 3e-9, and 1.0 - d kept only a few digits.
    lost = -math.expm1(-_halvings(seconds, half_life) * math.log(2.0))
    gained = half_life / math.log(2.0) * lost
    out: Amounts = {r: a * d for r, a in usage.items()}
    for r, rate in held.items():
        if rate > 0:
            out[r] = out.get(r, 0.0) + rate * gained
    return {r: a for r, a in out.items() if a > 0}


def units(milli: Mapping[str, int]) -> Amounts:
    """Milli-units -> whole units."""
    return {r: a / 1000 for r, a in milli.items() if a > 0}


def add_penalty(usage: Amounts, request: Mapping[str, int], settings: UsageSettings) -> None:
    """An admitted job counts as if it had already held its request ``entryPenalty`` long."""
    seconds = settings.entry_penalty.total_seconds()
    if seconds <= 0:
        return
    for r, a in request.items():
        if a > 0:
            usage[r] = usage.get(r, 0.0) + a / 1000 * seconds


def dominant(
    usage: Mapping[str, float], total: Mapping[str, int], settings: UsageSettings
) -> tuple[float, str]:
    """The dominant weighted usage in seconds of the whole cluster, and its resource ("" when
    nothing was used). A resource the cluster has none of counts for nothing."""
    best, which = 0.0, ""
    for r, a in sorted(usage.items()):
        cap = total.get(r, 0)
        if cap <= 0 or a <= 0:
            continue
        value = settings.weight(r) * a / (cap / 1000)
        if value > best:
            best, which = value, r
    return best, which


def describe(usage: Mapping[str, float], resource: str) -> str:
    """The dominant resource's usage as text: ``nvidia.com/gpu 310h``; "" for none."""
    return f"{resource} {hours(usage[resource])}" if resource else ""


def previous(
    name: str, given: Mapping[str, QueueUsage], stored: QueueUsage | None, created: datetime
) -> QueueUsage | None:
    """The usage a cycle starts from: the operator's last sample, else the Queue's status (a
    new leader, a restart), else none (a new queue starts at zero). A sample taken before
    the queue was created is of a queue of the same name deleted since: not this one's."""
    found = given.get(name) or stored
    if found is None or (found.sampled_at is not None and found.sampled_at < created):
        return None
    return found


def elapsed(since: QueueUsage | None, now: datetime) -> float:
    if since is None or since.sampled_at is None:
        return 0.0
    return max((now - since.sampled_at).total_seconds(), 0.0)


J = TypeVar("J")


def job_order(
    jobs: list[J],
    namespace_of: Callable[[J], str],
    request_of: Callable[[J], Mapping[str, int]],
    priority_of: Callable[[J], int],
    spaces: Mapping[str, Mapping[str, float]],
    total: Mapping[str, int],
    settings: UsageSettings,
) -> list[J]:
    """A leaf's waiting jobs (given in job order) with, within each job priority, the jobs of
    the namespace that used least first: each time as if the jobs before had been admitted
    and counted their entry penalty, so that namespaces take turns rather than the least
    used taking all. Within a namespace the job order stays."""
    out: list[J] = []
    start = 0
    while start < len(jobs):
        level = priority_of(jobs[start])
        end = start
        while end < len(jobs) and priority_of(jobs[end]) == level:
            end += 1
        by_space: dict[str, list[tuple[int, J]]] = {}
        for i in range(start, end):
            by_space.setdefault(namespace_of(jobs[i]), []).append((i, jobs[i]))
        projected = {ns: dict(spaces.get(ns, {})) for ns in by_space}
        heap = [
            (dominant(projected[ns], total, settings)[0], queued[0][0], ns)
            for ns, queued in by_space.items()
        ]
        heapq.heapify(heap)
        taken = dict.fromkeys(by_space, 0)
        while heap:
            _, _, ns = heapq.heappop(heap)
            queued = by_space[ns]
            job = queued[taken[ns]][1]
            taken[ns] += 1
            out.append(job)
            if taken[ns] < len(queued):
                add_penalty(projected[ns], request_of(job), settings)
                value = dominant(projected[ns], total, settings)[0]
                heapq.heappush(heap, (value, queued[taken[ns]][0], ns))
        start = end
    return out
