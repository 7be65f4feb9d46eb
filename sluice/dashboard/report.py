"""``sluice simulate --html``: the dashboard's views over a simulated dump, as one
self-contained file (the page's script and style inlined, the data embedded; nothing is
fetched), with each queue's deserved and allocated before and after the simulated cycles."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sluice.api.queue import FlavorStatus, Queue
from sluice.api.resources import Resources
from sluice.dashboard.domains import amounts_json
from sluice.dashboard.server import static_text
from sluice.dashboard.view import flavor_json
from sluice.scheduler.growth import grown_workload
from sluice.scheduler.model import CycleResult, Decision, QueueResult

ACTIONS = {"admit": "Admitted", "reclaim": "Reclaimed", "preempt": "Preempted"}


def _queue(name: str, result: QueueResult, queue: Queue | None) -> dict[str, Any]:
    """A queue's line of the page, as the dashboard draws one from its status: the flavors'
    figures go through the status's own reading (``FlavorFigures.to_kube``), so each flavor
    gets the bars the dashboard gives it (``flavor_json``)."""
    capability = queue.spec.capability if queue is not None and queue.spec.capability else None
    flavors = [FlavorStatus.model_validate(f.to_kube()) for f in result.flavors]
    return {
        "name": name,
        "parent": result.parent,
        "state": result.state,
        "valid": result.valid,
        "invalidReason": result.invalid_reason,
        "weight": result.weight,
        "share": round(result.share, 4),
        "pending": result.pending,
        "running": result.running + result.inqueue,
        "namespaces": "",
        "guarantee": amounts_json(result.guarantee),
        "deserved": amounts_json(result.deserved),
        "allocated": amounts_json(result.allocated),
        "capability": amounts_json(capability),
        "overCapability": result.over_capability,
        "usage": result.usage.dominant if result.usage is not None else "",
        "flavors": [flavor_json(queue, f) for f in flavors] if queue is not None else [],
    }


def report_data(
    before: CycleResult,
    after: CycleResult,
    decisions: Sequence[tuple[int, Decision]],
    specs: Mapping[str, Queue],
    title: str,
    sized: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The page's data: the tree after the cycles (``specs``: the queues simulated, by name,
    for their capability and flavor entries), each queue's jobs (its resizable workloads
    admitted, with their sizes, then its waiting jobs in order), the decisions as the
    timeline (cycle by cycle, an admission with the sizes it carries), and deserved/allocated
    before and after. ``sized``: the resizable workloads after the cycles, as simulate's
    JSON gives them (``job``, ``queue``, ``state``, ``size``, ``words``)."""
    queues = [_queue(name, q, specs.get(name)) for name, q in sorted(after.queues.items())]
    queues.append({**_queue("root", _root(after), None), "parent": None})
    sizes = {w["job"]: w for w in sized}
    jobs: dict[str, list[dict[str, Any]]] = {}
    for w in sized:
        if w["state"] in ("inqueue", "running"):
            jobs.setdefault(w["queue"], []).append(_row(w["job"], w["state"], None, "", w))
    for pending in after.pending:
        # A growth entry's row shows its workload's sizes: the growth is what waits.
        sizes_of = sizes.get(grown_workload(pending.job) or pending.job, {})
        row = _row(pending.job, "pending", pending.position, pending.cause, sizes_of)
        jobs.setdefault(pending.queue, []).append(row)
    timeline = [
        {
            "time": f"cycle {cycle}",
            "action": ACTIONS[d.action],
            "job": d.job,
            "queue": d.queue,
            **({"for": d.for_job} if d.for_job else {}),
            **({"size": size} if (size := _sizes(d)) else {}),
        }
        for cycle, d in decisions
    ][::-1]
    history: dict[str, dict[str, dict[str, int]]] = {}
    for name, q in after.queues.items():
        was = before.queues.get(name)
        names = set(q.deserved) | set(q.allocated)
        if was is not None:
            names |= set(was.deserved) | set(was.allocated)
        history[name] = {
            r: {
                "deservedBefore": was.deserved.get_amount(r) if was else 0,
                "allocatedBefore": was.allocated.get_amount(r) if was else 0,
                "deservedAfter": q.deserved.get_amount(r),
                "allocatedAfter": q.allocated.get_amount(r),
            }
            for r in sorted(names)
        }
    return {
        "title": title,
        "tree": {"queues": queues, "timeline": timeline},
        "jobs": jobs,
        "history": history,
    }


def _row(
    job: str, state: str, position: int | None, reason: str, sized: Mapping[str, Any]
) -> dict[str, Any]:
    """A job's row as the dashboard's ``job_json`` gives it."""
    namespace, _, name = job.partition("/")
    return {
        "namespace": namespace,
        "name": name,
        "state": state,
        "position": position,
        "reason": reason,
        "admittedAt": "",
        "size": sized.get("size", ""),
        "sizeWords": sized.get("words", ""),
    }


def _sizes(decision: Decision) -> str:
    """An admission's sizes, in words: ``6 of 8 pods``, per pod set by name for several;
    "" for one without sizes."""
    if decision.action != "admit" or not decision.sizes:
        return ""
    named = len(decision.sizes) > 1
    return ", ".join(
        f"{name + ' ' if named else ''}{admitted} of {asked} pods"
        for name, asked, admitted in decision.sizes
    )


def _root(result: CycleResult) -> QueueResult:
    """Root's line: the cluster, what its children hold."""
    allocated = Resources()
    for q in result.queues.values():
        if q.parent == "root":
            allocated = allocated + q.allocated
    return QueueResult(
        state="Open",
        parent=None,
        weight=1,
        priority=0,
        deserved=result.cluster_total,
        allocated=allocated,
    )


def render_html(data: dict[str, Any]) -> str:
    """One file: the dashboard page with its style and script inlined and ``data`` embedded."""
    page = static_text("index.html")
    style = f"<style>\n{static_text('app.css')}</style>"
    # "</" cannot end the embedding script early once escaped.
    payload = json.dumps(data).replace("</", "<\\/")
    script = (
        f"<script>window.SLUICE_DATA = {payload};</script>\n"
        f"<script>\n{static_text('app.js')}</script>"
    )
    page = page.replace('<link rel="stylesheet" href="static/app.css">', style)
    page = page.replace('<script src="static/app.js"></script>', script)
    return page.replace("<title>sluice queues</title>", f"<title>{_escape(data['title'])}</title>")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
