"""The rule at the door for the RayCluster a managed RayJob runs (docs/elastic.md, *What
the tenancy guarantees become*): it changes only where Ray's autoscaler writes, its worker
groups' ``replicas`` and ``scaleStrategy``.

The RayCluster is no workload of its own: KubeRay makes it once from the RayJob's
``rayClusterSpec``, and sluice reads only its replicas (``sluice.api.workloads.ray_cluster``).
Its pod templates carry the labels that hold its pods at the door, and its groups and
requests are what the RayJob's queue admitted: a template without the labels, a new group or
a larger request would make pods that run ungated, or ask more, past what the queue
admitted. KubeRay itself writes only the cluster's metadata and status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.admitted_size import size_records_of
from sluice.api.constants import QUEUE_LABEL
from sluice.api.workloads.ray_cluster import cluster_sizes, group_hosts
from sluice.queues.jobs import Writer, metadata_map
from sluice.queues.verdict import ALLOW, Verdict, deny

AUTOSCALED = ("replicas", "scaleStrategy")
"""What Ray's autoscaler writes in a worker group."""


def check_ray_cluster_update(
    old: Mapping[str, Any], new: Mapping[str, Any], namespace: str, writer: Writer
) -> Verdict:
    """A RayCluster a RayJob controls and that carries a queue label (KubeRay copies the
    RayJob's labels onto it); any other RayCluster is outside sluice."""
    queue = metadata_map(old, "labels").get(QUEUE_LABEL)
    sizes = cluster_sizes(old)
    if writer.operator or not queue or sizes is None:
        return ALLOW
    if _bare(old.get("spec")) == _bare(new.get("spec")):
        return ALLOW
    name = (old.get("metadata") or {}).get("name", "")
    job = sizes.job.partition("/")[2]
    return deny(
        "raycluster-spec",
        f"raycluster {namespace}/{name} of RayJob {job} (queue {queue}): only its worker"
        " groups' replicas and scaleStrategy may change, as Ray's autoscaler writes them; the"
        " rest is the RayJob's, admitted by its queue: suspend the RayJob (spec.suspend: true)"
        " and change its spec.rayClusterSpec instead",
    )


def raised_groups(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    """The worker groups (by groupName, else index) whose replicas a write raises."""
    before = {name: (n, hosts) for name, n, hosts in _groups(old)}
    return tuple(name for name, n, _ in _groups(new) if name in before and n > before[name][0])


def check_ray_cluster_raise(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    job: Mapping[str, Any] | None,
    namespace: str,
    writer: Writer,
) -> Verdict:
    """A worker group's replicas raised while they are below what the RayJob's record
    (``job``, read as the API server holds it now) admits is refused until the operator
    lowers the record with them (docs/elastic.md, *Grown through the queue*): its queue
    holds the group at the lower size from the moment it fell, and may have given the rest
    to others, so a raise back before the record follows would run its new workers, released
    up to the record, past what the queue admits. Once the record is lowered a raise is
    growth, gated until the queue admits it. Ray's autoscaler tries again on its next
    round."""
    queue = metadata_map(old, "labels").get(QUEUE_LABEL)
    sizes = cluster_sizes(old)
    if writer.operator or not queue or sizes is None or job is None:
        return ALLOW
    recorded = {r.pod_set: r.admitted for r in size_records_of(metadata_map(job, "annotations"))}
    before = {name: (n, hosts) for name, n, hosts in _groups(old)}
    for name in raised_groups(old, new):
        replicas, hosts = before[name]
        if name in recorded and replicas * hosts < recorded[name]:
            cluster = (old.get("metadata") or {}).get("name", "")
            return deny(
                "raycluster-below-record",
                f"raycluster {namespace}/{cluster} of RayJob {sizes.job.partition('/')[2]}"
                f" (queue {queue}): worker group {name} runs {replicas} replicas, fewer than"
                f" the {recorded[name] // hosts} its queue admitted, which sluice has not"
                " yet recorded lower; its queue may have given that room to others already:"
                " raise it again once sluice.dev/admitted-size on the RayJob says the lower"
                " size, and the raise waits in the queue as growth",
            )
    return ALLOW


def _groups(obj: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """Each worker group's name, replicas and numOfHosts."""
    groups = (obj.get("spec") or {}).get("workerGroupSpecs")
    out: list[tuple[str, int, int]] = []
    for i, group in enumerate(groups if isinstance(groups, list) else ()):
        if not isinstance(group, Mapping):
            continue
        replicas = group.get("replicas")
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            out.append((str(group.get("groupName") or i), replicas, group_hosts(group)))
    return out


def _bare(spec: Any) -> Any:
    """The spec without what the autoscaler writes in each worker group."""
    if not isinstance(spec, Mapping):
        return spec
    groups = spec.get("workerGroupSpecs")
    if not isinstance(groups, list):
        return dict(spec)
    bare = [
        {k: v for k, v in g.items() if k not in AUTOSCALED} if isinstance(g, Mapping) else g
        for g in groups
    ]
    return {**spec, "workerGroupSpecs": bare}
