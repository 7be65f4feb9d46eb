"""Pure pieces of `sluice job why`: what stands between a pending job and admission.

The scheduler's reason names the first limit a job hits; a person deciding what to stop or
resize needs every limit and the amount to release at each, read from the same cycle result.
"""

from __future__ import annotations

from sluice.api.constants import ROOT_QUEUE
from sluice.api.quantity import format_quantity
from sluice.api.resources import Resources, describe_amount
from sluice.scheduler.model import CycleResult


def _chain(result: CycleResult, queue: str) -> list[str]:
    """The queue and its ancestors below root, top first (root's limit is the cluster)."""
    chain: list[str] = []
    name: str | None = queue
    while name is not None and name in result.queues and name not in chain:
        if result.queues[name].parent is not None:
            chain.append(name)
        name = result.queues[name].parent
    return list(reversed(chain))


def free_up(result: CycleResult, queue: str, request: Resources) -> list[str]:
    """Per limiting queue and resource: how much must be released before the job fits.

    Limits are each queue's real capability (what its capability and its ancestors allow) and
    the cluster's free capacity; an empty list means no hard limit stands in the way.
    """
    lines: list[str] = []
    said: dict[str, int] = {}  # per resource, the shortfall an ancestor already names
    for name in _chain(result, queue):
        info = result.queues[name]
        if info.real_capability is None:
            continue
        for r, amount in sorted(request.items()):
            limit = info.real_capability.get_amount(r)
            if amount <= 0 or limit >= result.cluster_total.get_amount(r):
                continue  # a limit equal to the whole cluster's is said below
            short = info.allocated.get_amount(r) + amount - limit
            if short > said.get(r, 0):  # a child inheriting its parent's limit adds nothing
                said[r] = short
                lines.append(
                    f"queue {name}: {describe_amount(r, short)} must free up"
                    f" (it uses {format_quantity(info.allocated.get_amount(r), r)} of"
                    f" {format_quantity(limit, r)}; the job requests {format_quantity(amount, r)})"
                )
    used = Resources()  # everything admitted: what root's children hold
    for info in result.queues.values():
        if info.parent == ROOT_QUEUE:
            used = used + info.allocated
    for r, amount in sorted(request.items()):
        free = result.cluster_total.get_amount(r) - used.get_amount(r)
        if amount > 0 and amount > free:
            lines.append(
                f"cluster: {describe_amount(r, amount - max(free, 0))} must free up"
                f" ({format_quantity(max(free, 0), r)} of"
                f" {format_quantity(result.cluster_total.get_amount(r), r)} free;"
                f" the job requests {format_quantity(amount, r)})"
            )
    return lines


def explain_pending(result: CycleResult, job: str, queue: str, request: Resources) -> list[str]:
    """The lines `job why` prints about a pending job after one offline cycle."""
    admitted = next((d for d in result.decisions if d.job == job and d.action == "admit"), None)
    if admitted is not None:
        return [f"now: it would be admitted this cycle ({admitted.reason})"]
    lines: list[str] = []
    mine = next((p for p in result.pending if p.job == job), None)
    if mine is not None:
        waiting = sum(1 for p in result.pending if p.queue == mine.queue)
        lines.append(f"now: {mine.reason}")
        lines.append(f"position {mine.position} of {waiting} pending in queue {mine.queue}")
    info = result.queues.get(queue)
    if info is not None:
        lines.append(
            f"queue {queue}: allocated {info.allocated.describe()},"
            f" deserved {info.deserved.describe()}, share {info.share:.2f}"
        )
    lines.append(f"it requests {request.describe()}")
    blockers = free_up(result, queue, request)
    lines.extend(blockers or ["no queue or cluster limit stands in the way; see the reason above"])
    return lines
