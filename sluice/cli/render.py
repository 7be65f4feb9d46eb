"""Rendering simulate's results: its JSON contract, and tables for people."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from sluice.api.constants import ROOT_QUEUE
from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.api.workloads.pods import PodWorkload
from sluice.cli.sized import SizedWorkload
from sluice.queues.lifecycle import QueueAction
from sluice.scheduler.model import CycleResult, Decision, QueueResult


@dataclass(frozen=True, slots=True)
class Simulation:
    """What several cycles produced: the first cycle's queue order, the last cycle's state."""

    queue_order: Sequence[str]
    final: CycleResult
    decisions: Sequence[tuple[int, Decision]]
    queue_actions: Sequence[QueueAction]
    config_source: str = ""
    cycles: int = 1
    notes: Sequence[str] = field(default_factory=tuple)
    initial: CycleResult | None = None
    """The dump as it was, before any decision (for --html's before and after)."""
    queues: Mapping[str, Queue] = field(default_factory=dict)
    """The queues simulated, by name: --html reads their capability and flavor entries."""
    config_warnings: Sequence[str] = ()
    """What the configuration names that sluice accepts and ignores; simulate prints them on
    stderr, so the output itself stays the same."""
    forming: Sequence[PodWorkload] = ()
    """Groups of plain pods that are not a workload yet: listed among the pending, with what
    they wait for, as the operator writes it on their pods."""
    sized: Sequence[SizedWorkload] = ()
    """The resizable workloads once the last cycle's decisions are applied, with their sizes
    (docs/elastic.md): admitted smaller, grown, their growth waiting."""


def _pending(sim: Simulation) -> list[tuple[str, str, str]]:
    """(job, queue, reason) of every job that waits after the last cycle, then of every group
    of plain pods still being formed."""
    out = [(p.job, p.queue, p.reason) for p in sim.final.pending]
    return out + [(w.key, w.members[0].queue, w.waiting) for w in sim.forming]


def to_json(sim: Simulation) -> dict[str, Any]:
    return {
        "queueOrder": list(sim.queue_order),
        "queues": {name: _queue_json(q) for name, q in sorted(sim.final.queues.items())},
        "decisions": [_decision_json(cycle, d) for cycle, d in sim.decisions],
        "pending": [
            {"job": job, "queue": queue, "reason": reason} for job, queue, reason in _pending(sim)
        ],
        "queueActions": [
            {"action": a.action, "queue": a.queue, "reason": a.reason} for a in sim.queue_actions
        ],
        **({"resizable": [w.to_json() for w in sim.sized]} if sim.sized else {}),
    }


def _queue_json(q: QueueResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "state": q.state,
        "parent": q.parent,
        "weight": q.weight,
        "priority": q.priority,
        "guarantee": q.guarantee.to_kube(),
        "deserved": q.deserved.to_kube(),
        "allocated": q.allocated.to_kube(),
        "share": round(q.share, 6),
        "pending": q.pending,
        "inqueue": q.inqueue,
        "running": q.running,
        "completed": q.completed,
        "valid": q.valid,
    }
    if q.flavors:
        out["flavors"] = [f.to_kube() for f in q.flavors]
    if not q.valid:
        out["invalidReason"] = q.invalid_reason
    return out


def _decision_json(cycle: int, d: Decision) -> dict[str, Any]:
    out: dict[str, Any] = {"cycle": cycle, "action": d.action, "job": d.job, "queue": d.queue}
    if d.for_job is not None:
        out["for"] = d.for_job
    if d.action == "requeue":
        out["requeues"] = d.requeues
    if d.domain:
        out["domain"] = d.domain
    if d.reason:
        out["reason"] = d.reason
    if d.sizes:  # per pod set recorded: pods asked and admitted (docs/elastic.md)
        out["sizes"] = [{"podSet": n, "asked": a, "admitted": m} for n, a, m in d.sizes]
    return out


# ----------------------------------------------------------------------------------------------
# Tables


def render_table(sim: Simulation, console: Console) -> None:
    header = f"{sim.cycles} cycle{'s' if sim.cycles != 1 else ''}; {sim.config_source}"
    if sim.final.cluster_total:
        header += f"; cluster total {sim.final.cluster_total.describe()}"
    console.print(Text(header, style="dim"))
    console.print(_queue_table(sim.final))
    console.print(_decision_table(sim.decisions))
    console.print(_pending_table(_pending(sim)))
    if sim.sized:
        console.print(_sized_table(sim.sized))
    if sim.queue_actions:
        console.print(_queue_action_table(sim.queue_actions))


def _tree_order(queues: dict[str, QueueResult]) -> list[tuple[str, int]]:
    children: dict[str | None, list[str]] = {}
    for name, q in queues.items():
        parent = q.parent if q.parent in queues else None
        children.setdefault(parent, []).append(name)
    out: list[tuple[str, int]] = []
    stack = [(name, 0) for name in sorted(children.get(None, []), reverse=True)]
    seen: set[str] = set()
    while stack:
        name, depth = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        out.append((name, depth))
        stack.extend((kid, depth + 1) for kid in sorted(children.get(name, []), reverse=True))
    out.extend((name, 0) for name in sorted(set(queues) - seen))
    return out


def _res(r: Resources) -> str:
    return "\n".join(f"{k} {v}" for k, v in r.to_kube().items()) or "-"


def _queue_table(result: CycleResult) -> Table:
    table = Table(title="Queues", title_justify="left", show_lines=True)
    # On a narrow terminal cells fold onto more lines; nothing is cut to "…".
    for column in ("QUEUE", "STATE", "WEIGHT", "PRIO", "DESERVED", "ALLOCATED", "SHARE"):
        table.add_column(column, overflow="fold")
    for column in ("PEND", "INQ", "RUN", "DONE"):
        table.add_column(column, justify="right", overflow="fold")
    queues = dict(result.queues)
    flavored = any(q.flavors for q in queues.values())
    if flavored:  # allocated/deserved per flavor, only where some queue has flavors
        table.add_column("FLAVORS", overflow="fold")
    for name, depth in _tree_order(queues):
        q = queues[name]
        state = q.state if q.valid else f"{q.state} (invalid: {q.invalid_reason})"
        table.add_row(
            ("  " * depth) + name,
            state,
            str(q.weight),
            str(q.priority),
            _res(q.deserved),
            _res(q.allocated),
            f"{q.share:.2f}",
            str(q.pending),
            str(q.inqueue),
            str(q.running),
            str(q.completed),
            *(("\n".join(f.summary() for f in q.flavors) or "-",) if flavored else ()),
            style=None if q.valid else "red",
        )
    if not queues:
        table.caption = f"no queues besides {ROOT_QUEUE}"
    return table


def _decision_table(decisions: Sequence[tuple[int, Decision]]) -> Table:
    table = Table(title="Decisions", title_justify="left")
    # DOMAIN (docs/scheduler.md, *Topology*) only when some admission went into one.
    domains = any(d.domain for _, d in decisions)
    columns = ("CYCLE", "ACTION", "JOB", "QUEUE", "FOR", *(("DOMAIN",) if domains else ()), "WHY")
    for column in columns:
        table.add_column(column, overflow="fold")
    for cycle, d in decisions:
        where = (d.domain,) if domains else ()
        table.add_row(str(cycle), d.action, d.job, d.queue, d.for_job or "", *where, d.reason)
    if not decisions:
        table.caption = "nothing to admit, reclaim, preempt or requeue"
    return table


def _pending_table(pending: Sequence[tuple[str, str, str]]) -> Table:
    table = Table(title="Pending jobs", title_justify="left")
    for column in ("JOB", "QUEUE", "REASON"):
        table.add_column(column, overflow="fold")
    for row in pending:
        table.add_row(*row)
    if not pending:
        table.caption = "no job is waiting"
    return table


def _sized_table(sized: Sequence[SizedWorkload]) -> Table:
    table = Table(title="Resizable workloads", title_justify="left")
    for column in ("JOB", "QUEUE", "STATE", "ADMITTED", "SIZES"):
        table.add_column(column, overflow="fold")
    for w in sized:
        table.add_row(w.job, w.queue, w.state, w.size or "-", w.words or "-")
    return table


def _queue_action_table(actions: Sequence[QueueAction]) -> Table:
    table = Table(title="Queue actions the operator would take", title_justify="left")
    for column in ("ACTION", "QUEUE", "REASON"):
        table.add_column(column)
    for a in actions:
        table.add_row(a.action, a.queue, a.reason)
    return table
