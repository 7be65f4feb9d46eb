"""Queue status as the operator writes it, and whether a write is needed at all."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sluice.api.conditions import condition, status_differs
from sluice.api.constants import CONDITION_OVER_CAPABILITY, CONDITION_VALID, ROOT_QUEUE
from sluice.scheduler.model import CycleResult, QueueResult

USAGE_WRITE_SECONDS = 30.0
"""status.usage is written at most this often: it changes with every cycle."""


def usage_status(current: Mapping[str, Any], result: QueueResult) -> dict[str, Any] | None:
    """status.usage to write, or None: the usage plugin is off, or what is stored was sampled
    less than USAGE_WRITE_SECONDS before this cycle's sample (the operator keeps the newer
    one in memory; a new leader resumes from the stored one)."""
    usage = result.usage
    if usage is None or usage.sampled_at is None:
        return None
    stored = (current.get("usage") or {}).get("sampledAt")
    if stored:
        written = datetime.fromisoformat(str(stored).replace("Z", "+00:00"))
        if (usage.sampled_at - written).total_seconds() < USAGE_WRITE_SECONDS:
            return None
    return {
        "sampledAt": usage.sampled_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "resources": {r: round(a, 1) for r, a in sorted(usage.resources.items())},
        "namespaces": {
            ns: {r: round(a, 1) for r, a in sorted(amounts.items())}
            for ns, amounts in sorted(usage.namespaces.items())
        },
        "dominant": usage.dominant,
    }


def queue_status(obj: Mapping[str, Any], result: QueueResult, now: datetime) -> dict[str, Any]:
    current = obj.get("status") or {}
    over = result.over_capability
    usage = usage_status(current, result)
    return {
        **({"usage": usage} if usage is not None else {}),
        "state": result.state,
        "pending": result.pending,
        "inqueue": result.inqueue,
        "running": result.running,
        "completed": result.completed,
        "allocated": result.allocated.to_kube(),
        "deserved": result.deserved.to_kube(),
        "share": round(result.share, 4),
        # None: removed by the merge patch while the queue has no flavors.
        "flavors": [f.to_kube() for f in result.flavors] or None,
        "flavorSummary": "; ".join(f.summary() for f in result.flavors) or None,
        # None: removed by the merge patch (and absent reads as None) while within it.
        "overCapability": over or None,
        "conditions": [
            condition(
                current,
                CONDITION_VALID,
                result.valid,
                "Valid" if result.valid else "RuleBroken",
                "" if result.valid else result.invalid_reason,
                now,
            ),
            condition(
                current,
                CONDITION_OVER_CAPABILITY,
                bool(over),
                "PodsAskMoreThanAdmitted" if over else "WithinCapability",
                over,
                now,
            ),
        ],
        "observedGeneration": (obj.get("metadata") or {}).get("generation"),
    }


def over_capability_event(
    current: Mapping[str, Any], wanted: Mapping[str, Any]
) -> tuple[str, str, bool] | None:
    """The Event a status write tells, as (reason, message, warning): the queue went over
    its capability (a Warning naming the workloads and how much more their pods ask), or
    came back within it; None when neither changed."""
    was, now = current.get("overCapability"), wanted.get("overCapability")
    if now and not was:
        return "OverCapability", f"holds more than its capability: {now}", True
    if was and not now:
        return "WithinCapability", "holds no more than its capability again", False
    return None


def status_patch(
    obj: Mapping[str, Any] | None, name: str, result: CycleResult, now: datetime
) -> dict[str, Any] | None:
    """The merge patch that brings a Queue's status to what the cycle found, or None when a
    reader would see no difference. Root is always Open and has nothing else to show."""
    if obj is None:
        return None
    current = obj.get("status") or {}
    if name == ROOT_QUEUE:
        return None if current.get("state") == "Open" else {"state": "Open"}
    queue = result.queues.get(name)
    if queue is None:
        return None
    wanted = queue_status(obj, queue, now)
    if not status_differs(current, wanted):
        return None
    patch = dict(wanted)
    for key in ("allocated", "deserved"):
        gone = set(current.get(key) or {}) - set(wanted[key])
        patch[key] = {**wanted[key], **dict.fromkeys(gone)}  # null removes in a merge patch
    return patch
