"""The RayCluster a RayJob runs, as far as its worker groups' sizes go (docs/elastic.md,
*Grown through the queue*).

Ray's autoscaler sizes a worker group by patching ``replicas`` on the RayCluster, and
KubeRay never carries a later change of the RayJob's ``rayClusterSpec`` into the cluster it
made from it. A running RayJob therefore asks, per worker group, the replicas its current
cluster has: its growth is read there, and it is admitted on the RayJob, which holds the
queue label, the hold and sluice's record. The RayCluster is no workload of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sluice.api.admitted_size import size_records_of
from sluice.api.workloads.model import dig

RAY_CLUSTER_KIND: Final = "RayCluster"
_JOB_KIND: Final = "RayJob"
_GROUP: Final = "ray.io/"


@dataclass(frozen=True, slots=True)
class ClusterSizes:
    """What a RayCluster that a RayJob controls says of its size."""

    job: str
    """The RayJob's key, namespace/name."""
    job_uid: str
    cluster: str
    """The RayCluster's name (KubeRay names a new one at each start of the RayJob)."""
    replicas: tuple[tuple[str, int], ...]
    """Per worker group (its groupName, else its index), the replicas the cluster has."""


def cluster_sizes(obj: Mapping[str, Any]) -> ClusterSizes | None:
    """The sizes of a RayCluster a RayJob controls; None for any other (one of its own is
    outside sluice, as it has always been)."""
    meta = obj.get("metadata") or {}
    owner = next(
        (
            ref
            for ref in meta.get("ownerReferences") or ()
            if isinstance(ref, Mapping) and ref.get("controller") is True
        ),
        None,
    )
    if owner is None or owner.get("kind") != _JOB_KIND:
        return None
    if not str(owner.get("apiVersion") or "").startswith(_GROUP):
        return None
    groups = dig(obj, ("spec", "workerGroupSpecs"))
    replicas: list[tuple[str, int]] = []
    for i, group in enumerate(groups if isinstance(groups, list) else ()):
        if not isinstance(group, Mapping):
            continue
        value = group.get("replicas")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            replicas.append((_group_name(group, i), value))
    return ClusterSizes(
        job=f"{meta.get('namespace', '')}/{owner.get('name', '')}",
        job_uid=str(owner.get("uid") or ""),
        cluster=str(meta.get("name") or ""),
        replicas=tuple(replicas),
    )


def as_its_cluster_asks(job: Mapping[str, Any], sizes: ClusterSizes | None) -> Mapping[str, Any]:
    """The RayJob with each worker group of its size record (sluice.dev/admitted-size)
    at the ``replicas`` its running cluster has, the RayJob's own minReplicas and
    maxReplicas still bounding them. A group without a record is read as the RayJob says:
    it is held, and its gated pods released, at that size, so a size read from its cluster
    would release pods no queue admitted. The object itself when nothing differs, when it
    is held (a held RayJob has no cluster and asks what its spec says), or when ``sizes``
    are not of the cluster its status names, under its name and uid."""
    if sizes is None or dig(job, ("spec", "suspend")) is True:
        return job
    meta = job.get("metadata") or {}
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    if key != sizes.job or str(meta.get("uid") or "") != sizes.job_uid:
        return job
    if dig(job, ("status", "rayClusterName")) != sizes.cluster:
        return job
    groups = dig(job, ("spec", "rayClusterSpec", "workerGroupSpecs"))
    recorded = {r.pod_set for r in size_records_of(meta.get("annotations") or {})}
    if not isinstance(groups, list) or not recorded:
        return job
    running = {name: n for name, n in sizes.replicas if name in recorded}
    asked: list[Any] = []
    for i, group in enumerate(groups):
        if isinstance(group, Mapping):
            now = running.get(_group_name(group, i))
            if now is not None and group.get("replicas") != now:
                group = {**group, "replicas": now}
        asked.append(group)
    if asked == groups:
        return job
    spec = job["spec"]
    cluster = {**spec["rayClusterSpec"], "workerGroupSpecs": asked}
    return {**job, "spec": {**spec, "rayClusterSpec": cluster}}


def workers_taken_patch(
    job: Mapping[str, Any],
    cluster: ClusterSizes,
    sizes: Sequence[tuple[str, int, int]],
    deletes: Sequence[tuple[str, str]],
) -> list[dict[str, Any]]:
    """The JSON patch of the RayCluster a RayJob runs once reclaim or preempt took workers
    above its minimum (docs/scheduler.md, *Victims above a minimum*): each worker group of
    ``sizes`` (pod set, pods asked, pods admitted) that has more replicas on the cluster than
    it is admitted lowered to them, with the pods of ``deletes`` (pod set, pod) of that group
    named in its ``scaleStrategy.workersToDelete``, which KubeRay deletes, and no others,
    with Ray's autoscaler on. Each group's place is tested to hold that group at the replicas
    the cluster was read at, so a change since leaves the cluster alone. [] when no group has
    more replicas than admitted.

    The groups are found in the RayJob's spec: KubeRay makes the cluster's from it, in its
    order, and the door keeps them (``sluice.queues.ray_clusters``)."""
    on_cluster = dict(cluster.replicas)
    admitted = {name: pods for name, _, pods in sizes}
    groups = dig(job, ("spec", "rayClusterSpec", "workerGroupSpecs"))
    ops: list[dict[str, Any]] = []
    for i, group in enumerate(groups if isinstance(groups, list) else ()):
        if not isinstance(group, Mapping):
            continue
        name, hosts = _group_name(group, i), group_hosts(group)
        now = on_cluster.get(name)
        if name not in admitted or now is None or now * hosts <= admitted[name]:
            continue
        at = f"/spec/workerGroupSpecs/{i}"
        if group.get("groupName"):
            ops.append({"op": "test", "path": f"{at}/groupName", "value": name})
        named = [pod for pod_set, pod in deletes if pod_set == name]
        ops += [
            {"op": "test", "path": f"{at}/replicas", "value": now},
            {"op": "replace", "path": f"{at}/replicas", "value": admitted[name] // hosts},
            {"op": "add", "path": f"{at}/scaleStrategy", "value": {"workersToDelete": named}},
        ]
    return ops


def group_hosts(group: Mapping[str, Any]) -> int:
    """A worker group's ``numOfHosts``: the pods of one of its replicas (1 when unset or not a
    count above 0)."""
    hosts = group.get("numOfHosts")
    return hosts if isinstance(hosts, int) and hosts > 0 else 1


def _group_name(group: Mapping[str, Any], i: int) -> str:
    """A worker group's name as the RayJob's pod sets name it (``rayjob._group_name``)."""
    return str(group.get("groupName") or i)
