"""Who wrote what when, from the API server's audit log: every write of the operator
replicas that landed (status below 400), with the replica its user agent names
(``sluice-operator/<identity>``), at the time the API server finished it.

Two checks come from it: no replica writes anything (a decision, a reason, a status, a
finalizer, an Event) while another holds the Lease (each run of one replica's writes, once
another has written, begins with its own Lease write: it took the Lease before writing
anything else), and, for each partition of the leader, the time from its last write to the
next leader's first decision or record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

AGENT = "sluice-operator/"


@dataclass(frozen=True)
class Write:
    at: float
    identity: str
    verb: str
    resource: str
    name: str
    decision: str = ""
    """admit, evict, or "" (a reason, a status, the Lease)."""

    @property
    def lease(self) -> bool:
        return self.resource == "leases"


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def writes(path: Path) -> list[Write]:
    found: list[Write] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill
        agent = entry.get("userAgent") or ""
        code = (entry.get("responseStatus") or {}).get("code") or 0
        if entry.get("stage") != "ResponseComplete" or not agent.startswith(AGENT) or code >= 400:
            continue
        ref = entry.get("objectRef") or {}
        resource = ref.get("resource", "") + (
            f"/{ref['subresource']}" if ref.get("subresource") else ""
        )
        found.append(
            Write(
                _time(entry["stageTimestamp"]),
                agent.removeprefix(AGENT).split(" ")[0],
                entry.get("verb", ""),
                resource,
                f"{ref.get('namespace', '')}/{ref.get('name', '')}",
                _decision(entry.get("verb", ""), resource, entry.get("requestObject")),
            )
        )
    return sorted(found, key=lambda w: w.at)


def _decision(verb: str, resource: str, body: object) -> str:
    if resource == "pods" and verb == "delete":
        return "evict"
    if resource == "pods" and verb == "patch" and "schedulingGates" in json.dumps(body):
        return "admit"
    if resource == "jobs" and verb == "patch" and isinstance(body, dict):
        suspend = (body.get("spec") or {}).get("suspend")
        return "admit" if suspend is False else "evict" if suspend is True else ""
    return ""


def decisions(found: list[Write]) -> list[Write]:
    """The writes that are decisions or their records (not the Events that tell them)."""
    return [w for w in found if w.resource != "events"]


def interleaved(found: list[Write]) -> list[str]:
    """Runs of writes by one replica (Events as much as any) that began with something other
    than its Lease."""
    problems: list[str] = []
    current = ""
    for write in found:
        if write.identity == current:
            continue
        if current and not write.lease:
            problems.append(
                f"{write.identity} wrote {write.verb} {write.resource} {write.name} at"
                f" {write.at:.3f} after {current} had written, without taking the Lease first"
            )
        current = write.identity
    return problems


@dataclass(frozen=True)
class Handover:
    old: str
    new: str
    last_old: float
    """The partitioned leader's last write that landed."""
    first_new: float
    """The next leader's first write (taking the Lease)."""
    first_decision: float
    """The next leader's first write that is not its Lease (0: none before ``until``)."""


def handover(found: list[Write], old: str, since: float, until: float) -> Handover | None:
    """Between ``since`` (a partition of ``old`` began) and ``until``: the last write of
    ``old`` before another replica's first write, that first write and its first decision;
    None when no other replica wrote (the partition healed before the Lease could pass)."""
    ordered = [w for w in decisions(found) if w.at <= until]
    last_old = max((w.at for w in ordered if w.identity == old and w.at <= since), default=since)
    first: Write | None = None
    for write in ordered:
        if write.at < since:
            continue
        if first is None and write.identity == old:
            last_old = write.at
        elif first is None:
            first = write
        elif write.identity == first.identity and not write.lease:
            return Handover(old, first.identity, last_old, first.at, write.at)
    if first is None:
        return None
    return Handover(old, first.identity, last_old, first.at, 0.0)
