"""Queue status as the operator writes it, and whether a write is needed at all."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sluice.api.constants import CONDITION_VALID
from sluice.scheduler.model import QueueResult


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
