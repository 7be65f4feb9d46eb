"""The resizable workloads of a simulated cluster (docs/elastic.md, *Seen everywhere*): each
one's sizes once the simulated cycles' decisions are applied, for ``sluice simulate``'s
table, JSON and ``--html`` page, read as `sluice job list` reads a Job
(``sluice.api.workload_sizes``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice.api.workload_sizes import PodSetSize, pod_set_sizes, sizes_text, sizes_words
from sluice.scheduler.growth import grown_workload, growth_key, rejoined
from sluice.scheduler.model import Snapshot


@dataclass(frozen=True, slots=True)
class SizedWorkload:
    """One resizable workload after the last simulated cycle."""

    job: str
    queue: str
    state: str
    size: str
    """Its pods admitted of those asked (``6/8``)."""
    words: str
    """The same with its minimum and its growth waiting (``sizes_words``)."""
    pod_sets: tuple[PodSetSize, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "queue": self.queue,
            "state": self.state,
            "size": self.size,
            "words": self.words,
            "podSets": [
                {
                    "name": s.pod_set,
                    "admitted": s.admitted,
                    "asked": s.asked,
                    "minimum": s.minimum,
                    "waiting": s.waiting,
                }
                for s in self.pod_sets
            ],
        }


def sized_workloads(state: Snapshot) -> tuple[SizedWorkload, ...]:
    """Every resizable workload of ``state`` (a snapshot as ``apply_decisions`` leaves it),
    by key: a workload whose growth still waits beside it is read with that growth joined
    back, as its object asks it."""
    entries = {w.key: w for w in state.workloads if grown_workload(w.key) is not None}
    out: list[SizedWorkload] = []
    for view in state.workloads:
        if view.key in entries:
            continue
        entry = entries.get(growth_key(view.key))
        whole = view if entry is None else rejoined(view, entry)
        sizes = pod_set_sizes(whole)
        if sizes:
            text, words = sizes_text(whole), sizes_words(whole)
            out.append(SizedWorkload(view.key, view.queue, view.phase.value, text, words, sizes))
    return tuple(sorted(out, key=lambda w: w.job))
