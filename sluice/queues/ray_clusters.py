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

from sluice.api.constants import QUEUE_LABEL
from sluice.api.workloads.ray_cluster import cluster_sizes
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
