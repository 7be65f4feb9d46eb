"""The sizes of a resizable workload as people see them (docs/elastic.md, *Seen
everywhere*): per pod set, the pods its queue admitted, the pods it asks, its minimum and the
pods waiting in its queue. `sluice job list` and `sluice job why`, the dashboard and the
operator's per-workload metrics all read them from here.

Pure, from a workload's view alone (its spec and its record ``sluice.dev/admitted-size``),
so what a tenant reads off the Job is what the metrics count. Only a workload that declares
a minimum or carries a record has sizes: every other one is admitted whole, and showing
``1/1`` beside each would say nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.api.admitted_size import asked_size

if TYPE_CHECKING:
    from sluice.api.views import WorkloadView


@dataclass(frozen=True, slots=True)
class PodSetSize:
    """One pod set's sizes, in pods."""

    pod_set: str
    admitted: int
    """Pods its queue admitted: its record's (or fewer, where its owner lowered its size,
    which frees that quota at once); 0 while the workload waits."""
    asked: int
    """Pods it asks: its spec's, or what it asked before sluice lowered it to ``admitted``."""
    minimum: int
    """The fewest pods it may be admitted with (its ``asked`` when it declares none)."""
    waiting: int
    """Pods waiting in its queue: all it asks while the workload waits; while admitted, its
    growth (the pods its spec asks beyond what was admitted)."""

    @property
    def shown(self) -> bool:
        """Whether it says anything: it may shrink, or is admitted at fewer pods than it
        asks (admitted smaller, or grown)."""
        return self.minimum < self.asked or 0 < self.admitted < self.asked


def pod_set_sizes(view: WorkloadView) -> tuple[PodSetSize, ...]:
    """Every pod set of a workload that may shrink (waiting or admitted) or that is admitted
    with a record; () for any other workload, and for one that has finished (it holds
    nothing). A waiting workload's record is the operator's to drop: it says nothing."""
    if view.phase.finished:
        return ()
    resizable = any(s.resizable for s in view.pod_sets)
    if not resizable and not (view.sized and view.phase.admitted):
        return ()
    if not view.phase.admitted:
        return tuple(PodSetSize(s.name, 0, s.count, s.min_count, s.count) for s in view.pod_sets)
    records = {r.pod_set: r for r in view.sized}
    out: list[PodSetSize] = []
    for s in view.pod_sets:
        record = records.get(s.name)
        if record is None:
            out.append(PodSetSize(s.name, s.count, s.count, s.min_count, 0))
            continue
        held = min(s.count, record.admitted)
        asked = asked_size(s.count, record)
        out.append(PodSetSize(s.name, held, asked, s.min_count, s.count - held))
    return tuple(out)


def sizes_text(view: WorkloadView) -> str:
    """Its pods admitted of those asked, the column of `sluice job list`: ``6/8`` for a
    workload of one pod set (``0/8`` while it waits), by name for several (``Worker 6/8,
    group 3/4``); "" for a workload without sizes."""
    shown = [s for s in pod_set_sizes(view) if s.shown]
    if len(view.pod_sets) == 1 and len(shown) == 1:
        return f"{shown[0].admitted}/{shown[0].asked}"
    return ", ".join(f"{s.pod_set} {s.admitted}/{s.asked}" for s in shown)


def sizes_words(view: WorkloadView, growth: bool = True) -> str:
    """The line of `sluice job why`: ``admitted 6 of 8 pods (min 4), growth of 2 pods
    waiting in its queue`` while admitted (without its growth when ``growth`` is false: the
    operator's reason for it says more), ``asks 8 pods (min 4): admitted smaller when that
    is all that fits`` while waiting; by pod set for several; "" without sizes."""
    shown = [s for s in pod_set_sizes(view) if s.shown]
    if not shown:
        return ""
    named = len(view.pod_sets) > 1
    if not view.phase.admitted:
        asks = ", ".join(
            f"{s.pod_set + ' ' if named else ''}{s.asked} pods (min {s.minimum})" for s in shown
        )
        return f"asks {asks}: admitted smaller when that is all that fits"
    parts = ", ".join(
        f"{s.pod_set + ' ' if named else ''}{s.admitted} of {s.asked} pods (min {s.minimum})"
        for s in shown
    )
    waiting = sum(s.waiting for s in shown)
    grows = f", growth of {waiting} pods waiting in its queue" if waiting and growth else ""
    return f"admitted {parts}{grows}"


def pods_admitted_and_waiting(view: WorkloadView) -> tuple[int, int] | None:
    """The workload's pods admitted and waiting in its queue, over all its pod sets, for its
    metrics; None for a workload without sizes (it has no series)."""
    sizes = pod_set_sizes(view)
    if not sizes:
        return None
    return sum(s.admitted for s in sizes), sum(s.waiting for s in sizes)
