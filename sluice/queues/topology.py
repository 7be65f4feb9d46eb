"""The rules at the door for Topologies and for what workloads ask of them.

A Topology names at least one level, each a valid label key, none twice. A workload (or a
plain pod) may ask sluice.dev/topology-required or sluice.dev/topology-preferred, not both on
one object or pod template, naming a level of some Topology; what it asks cannot change while
it is admitted (it would run outside the domain it was admitted into, or claim one it was not
given). Only the kinds whose pods sluice can confine to a domain may ask (a Job, plain pods).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import (
    TOPOLOGY_KIND,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from sluice.api.errors import InvalidObject
from sluice.api.topology import TopologyRequest, level_problems, workload_request
from sluice.api.workloads import Adapter
from sluice.api.workloads.job import JOB
from sluice.api.workloads.model import at
from sluice.queues.verdict import ALLOW, Verdict, deny

REQUEST_ANNOTATIONS = frozenset({TOPOLOGY_REQUIRED_ANNOTATION, TOPOLOGY_PREFERRED_ANNOTATION})
"""The sluice.dev/ annotations a workload's owner writes (the others are sluice's)."""
CONFINED_KINDS = frozenset({JOB.kind, "Pod"})
"""The kinds sluice confines to a domain by nodeSelector (docs/scheduler.md, *Topology*)."""


def check_topology(obj: Mapping[str, Any]) -> Verdict:
    problems = level_problems((obj.get("spec") or {}).get("levels"))
    if not problems:
        return ALLOW
    name = (obj.get("metadata") or {}).get("name") or "?"
    return deny("topology-invalid", f"{TOPOLOGY_KIND.lower()} {name}: " + "; ".join(problems))


def asks_topology(obj: Mapping[str, Any], adapter: Adapter = JOB) -> bool:
    """Whether the object or one of its pod templates carries a topology annotation: only
    then are the Topologies looked up."""
    sources = [obj, *(at(obj, path) for path in adapter.template_paths(obj))]
    return any(
        key in REQUEST_ANNOTATIONS
        for source in sources
        if isinstance(source, Mapping)
        for key in ((source.get("metadata") or {}).get("annotations") or {})
    )


def request(obj: Mapping[str, Any], adapter: Adapter) -> TopologyRequest | None:
    """What the workload (or plain pod) asks; raises InvalidObject for both on one set."""
    templates = [at(obj, path) for path in adapter.template_paths(obj)]
    name = (obj.get("metadata") or {}).get("name") or "?"
    return workload_request(obj, [t for t in templates if isinstance(t, Mapping)], "", name)


def check_topology_request(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    who: str,
    admitted: bool,
    levels: frozenset[str],
    adapter: Adapter = JOB,
) -> Verdict:
    """``old``: None on create; ``admitted``: the old object runs (held no more);
    ``levels``: the node labels of every Topology's levels."""
    try:
        asked = request(new, adapter)
        before = request(old, adapter) if old is not None else None
    except InvalidObject as err:
        return deny("topology-request-invalid", f"{who}: {err.problem}")
    if admitted and asked != before:
        return deny(
            "topology-request-immutable",
            f"{who}: what an admitted workload asks of a Topology cannot change (from"
            f" {_said(before)} to {_said(asked)}); suspend it to queue it again with the new ask",
        )
    if asked is None or asked == before:
        return ALLOW
    kind = str(new.get("kind") or adapter.kind)
    if kind not in CONFINED_KINDS:
        return deny(
            "topology-request-kind",
            f"{who}: sluice places only Jobs and plain pods in one domain of a Topology;"
            f" a {kind} cannot ask {asked.annotation}",
        )
    if asked.level not in levels:
        known = ", ".join(sorted(levels)) or "none: no Topology exists"
        return deny(
            "topology-request-level",
            f"{who}: {asked.annotation}: {asked.level} is no level of any Topology (levels:"
            f" {known})",
        )
    return ALLOW


def _said(asked: TopologyRequest | None) -> str:
    return asked.describe() if asked is not None else "nothing"
