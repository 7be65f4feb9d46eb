"""Queue status as the operator writes it, and whether a write is needed at all."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sluice.api.constants import CONDITION_VALID, ROOT_QUEUE
from sluice.scheduler.model import CycleResult, QueueResult


def _valid_condition(
    current: Mapping[str, Any], result: QueueResult, now: datetime
) -> dict[str, Any]:
    status = "True" if result.valid else "False"
    reason = "Valid" if result.valid else "RuleBroken"
    message = "" if result.valid else result.invalid_reason
    previous = next(
        (c for c in current.get("conditions") or () if c.get("type") == CONDITION_VALID), None
    )
    changed = previous is None or previous.get("status") != status
    when = now if changed else None
    return {
        "type": CONDITION_VALID,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": (
            when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if when
            else (previous or {}).get("lastTransitionTime")
        ),
    }


def queue_status(obj: Mapping[str, Any], result: QueueResult, now: datetime) -> dict[str, Any]:
    current = obj.get("status") or {}
    return {
        "state": result.state,
        "pending": result.pending,
        "inqueue": result.inqueue,
        "running": result.running,
        "completed": result.completed,
        "allocated": result.allocated.to_kube(),
        "deserved": result.deserved.to_kube(),
        "share": round(result.share, 4),
        "conditions": [_valid_condition(current, result, now)],
        "observedGeneration": (obj.get("metadata") or {}).get("generation"),
    }


def status_differs(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether writing ``wanted`` would change anything a reader sees."""
    for key, value in wanted.items():
        if key == "conditions":
            have = [
                {k: v for k, v in c.items() if k != "lastTransitionTime"}
                for c in current.get("conditions") or ()
            ]
            want = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in value]
            if have != want:
                return True
        elif current.get(key) != value:
            return True
    return False


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
