"""Usage over time in words: the note a pending job's reason carries when a sibling goes
first because it used less, and the line ``sluice job why`` makes of it with the numbers
from the queues' status (docs/scheduler.md, *Usage over time*).

The note names no numbers, so that a waiting job's reason does not change (and is not
rewritten) each time its queue's usage moves; the numbers are in the queues' status.
"""

from __future__ import annotations

import re
from typing import Final

from sluice.api.queue import QueueUsage

_NOTE: Final = re.compile(
    r"queue (?P<ahead>[a-z0-9.-]+) goes first: queue (?P<behind>[a-z0-9.-]+) has used more"
    r" over time \(half-life (?P<half_life>[^)]+)\)"
)


def behind_note(behind: str, ahead: str, half_life: str) -> str:
    return (
        f"queue {ahead} goes first: queue {behind} has used more over time (half-life {half_life})"
    )


def parse_behind(reason: str) -> tuple[str, str, str] | None:
    """(behind, ahead, half-life) of the note in a pending reason; None without one."""
    found = _NOTE.search(reason)
    return (found["behind"], found["ahead"], found["half_life"]) if found else None


def hours(seconds: float) -> str:
    """Resource-seconds as people read them: ``310h``, ``2.5h``, ``12m``."""
    h = seconds / 3600
    if h >= 100:
        return f"{h:.0f}h"
    if h >= 1:
        return f"{h:.1f}".rstrip("0").rstrip(".") + "h"
    return f"{seconds / 60:.0f}m"


def compared(
    behind: str,
    used: QueueUsage | None,
    ahead: str,
    other: QueueUsage | None,
    half_life: str,
) -> str:
    """``queue b has used nvidia.com/gpu 310h (half-life 1h) against a's 12h; a goes first``,
    in the resource that weighs most in ``behind``'s usage, as their statuses last said."""
    dominant = used.dominant if used is not None else ""
    resource = dominant.rsplit(" ", 1)[0] if dominant else ""
    if not resource or used is None:
        return f"queue {behind} has used more over time than {ahead}; {ahead} goes first"
    theirs = (other.resources if other is not None else {}).get(resource, 0.0)
    return (
        f"queue {behind} has used {dominant} (half-life {half_life}) against {ahead}'s"
        f" {hours(theirs)}; {ahead} goes first"
    )
