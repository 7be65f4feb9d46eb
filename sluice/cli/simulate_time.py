"""``sluice simulate --minutes N``: the dump's jobs over N minutes of simulated time, each
running for its known duration, and each queue's wait (``sluice/scheduler/timeline.py``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sluice.api.config import format_duration, parse_duration
from sluice.api.constants import CONFIGMAP_NAME, PREFIX
from sluice.api.errors import ConfigError
from sluice.api.views import JobPhase, WorkloadView
from sluice.cli.snapshot_io import (
    Located,
    SnapshotError,
    build_snapshot,
    load_config_file,
    load_objects,
)
from sluice.operator.memory import paused
from sluice.scheduler.timeline import Timeline, run_for

DURATION_ANNOTATION = f"{PREFIX}/duration"
"""On a Job of a dump: how long it runs once admitted, for ``--minutes`` (a Go duration)."""

STEP = timedelta(seconds=10)
"""Simulated time between cycles: about the operator's resync."""


@dataclass(frozen=True, slots=True)
class QueueWait:
    queue: str
    admitted: int
    waiting: int
    median_seconds: float | None
    longest_seconds: float | None


@dataclass(frozen=True, slots=True)
class TimedRun:
    minutes: float
    queues: Sequence[QueueWait]
    order: Sequence[str]
    """Jobs in the order they were first admitted."""


def durations(objects: Sequence[Located], default: timedelta | None) -> dict[str, timedelta]:
    """Job (namespace/name) -> how long it runs: its annotation, else ``default``."""
    out: dict[str, timedelta] = {}
    for located in objects:
        meta: Any = located.obj.get("metadata") or {}
        if located.kind != "Job" or not isinstance(meta, dict):
            continue
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        written = (meta.get("annotations") or {}).get(DURATION_ANNOTATION)
        if written is not None:
            try:
                out[key] = parse_duration(written, f"{located.label}: {DURATION_ANNOTATION}")
            except ConfigError as err:
                raise SnapshotError(str(err)) from None
        elif default is not None:
            out[key] = default
    return out


def simulate_minutes(
    snapshot: Path,
    minutes: float,
    config: Path | None,
    now: datetime,
    default_duration: timedelta | None,
    config_map_name: str = CONFIGMAP_NAME,
) -> TimedRun:
    chosen = load_config_file(config) if config is not None else None
    objects = load_objects(snapshot)
    dump = build_snapshot(objects, now, chosen, config_map_name)
    timeline = paused(  # as the operator runs a pass
        run_for,
        dump.snapshot,
        now + timedelta(minutes=minutes),
        STEP,
        durations(objects, default_duration),
    )
    return TimedRun(
        minutes, _waits(timeline, dump.snapshot.workloads, now, minutes), timeline.order
    )


def _waits(
    timeline: Timeline, jobs: Sequence[WorkloadView], now: datetime, minutes: float
) -> list[QueueWait]:
    end = now + timedelta(minutes=minutes)
    waits = timeline.waits(list(jobs))
    waiting: dict[str, int] = {}
    for job in jobs:
        never = job.key not in timeline.admitted and job.phase is JobPhase.PENDING
        if never and job.creation_timestamp <= end:
            waiting[job.queue] = waiting.get(job.queue, 0) + 1
    out = []
    for queue in sorted(set(waits) | set(waiting)):
        seen = waits.get(queue, [])
        out.append(
            QueueWait(
                queue,
                len(seen),
                waiting.get(queue, 0),
                statistics.median(seen) if seen else None,
                max(seen) if seen else None,
            )
        )
    return out


def render(run: TimedRun) -> list[str]:
    """The lines ``--minutes`` prints: each queue's wait, then the order of admission."""

    def seconds(value: float | None) -> str:
        return "-" if value is None else format_duration(timedelta(seconds=round(value)))

    lines = [f"{run.minutes:g} simulated minutes:"]
    for q in run.queues:
        lines.append(
            f"  queue {q.queue}: {q.admitted} admitted, median wait {seconds(q.median_seconds)},"
            f" longest {seconds(q.longest_seconds)}; {q.waiting} still waiting"
        )
    lines.append("order of admission: " + (", ".join(run.order) or "none"))
    return lines


def to_json(run: TimedRun) -> dict[str, Any]:
    return {
        "minutes": run.minutes,
        "queues": {
            q.queue: {
                "admitted": q.admitted,
                "waiting": q.waiting,
                "medianWaitSeconds": q.median_seconds,
                "longestWaitSeconds": q.longest_seconds,
            }
            for q in run.queues
        },
        "order": list(run.order),
    }
