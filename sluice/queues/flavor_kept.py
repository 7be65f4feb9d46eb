"""The rule at the door for what admission into flavors wrote in a workload's pod templates
(docs/scheduler.md, *Flavors*): while the workload runs, each template keeps the labels and
tolerations its flavor added, or its pods would run outside the flavor whose quota they
count in. A suspended workload's may change (sluice takes them off itself then). A plain
pod's nodeSelector cannot change once its gate is gone, nor a toleration be taken off: the
API server keeps those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.flavor_assignment import flavor_assignments_of
from sluice.api.workloads import Adapter
from sluice.api.workloads.enforce import unenforced
from sluice.queues.verdict import ALLOW, Verdict, deny


def check_flavor_kept(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    who: str,
    admitted: bool,
    adapter: Adapter,
) -> Verdict:
    """``old``: None on create; ``admitted``: the old object runs (held no more)."""
    if not admitted or old is None or str(new.get("kind") or adapter.kind) == "Pod":
        return ALLOW
    kept = flavor_assignments_of((old.get("metadata") or {}).get("annotations") or {})
    pod_set = unenforced(new, adapter, kept)
    if pod_set is None:
        return ALLOW
    flavor = next(a.flavor for a in kept if a.pod_set == pod_set)
    return deny(
        "flavor-assignment-kept",
        f"{who}: the pod template of pod set {pod_set} must keep the nodeSelector and"
        f" tolerations of flavor {flavor} it was admitted into while it runs; suspend it to"
        " change them",
    )
