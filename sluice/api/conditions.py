"""Status conditions as sluice writes them on its own objects (Queues, Topologies), and
whether a status write would change anything a reader sees."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def condition(
    current: Mapping[str, Any], kind: str, true: bool, reason: str, message: str, now: datetime
) -> dict[str, Any]:
    """The condition ``kind`` of a status whose stored form is ``current``: its
    lastTransitionTime is ``now`` when its status changes, else what it was."""
    status = "True" if true else "False"
    previous = next((c for c in current.get("conditions") or () if c.get("type") == kind), None)
    changed = previous is None or previous.get("status") != status
    when = now if changed else None
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": (
            when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if when
            else (previous or {}).get("lastTransitionTime")
        ),
    }


def condition_status(current: Mapping[str, Any], kind: str) -> str | None:
    """The status ("True", "False") of a stored status's condition ``kind``; None without it."""
    found = next((c for c in current.get("conditions") or () if c.get("type") == kind), None)
    return None if found is None else str(found.get("status"))


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
