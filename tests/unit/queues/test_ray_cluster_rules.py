"""At the door: the RayCluster a managed RayJob runs changes only where Ray's autoscaler
writes (docs/elastic.md, *What the tenancy guarantees become*): its worker groups'
``replicas`` and ``scaleStrategy``. Its templates and groups are the RayJob's, admitted by
its queue: a template without sluice's labels, a new group or a larger request would make
pods that run ungated past what the queue admitted."""

from __future__ import annotations

import copy
from typing import Any

from sluice.queues.jobs import Writer
from sluice.queues.ray_clusters import check_ray_cluster_update

OPERATOR = Writer("system:serviceaccount:sluice-system:sluice-operator", operator=True)
ALICE = Writer("alice", ("system:authenticated",))
LABELS = {"sluice.dev/queue-name": "team", "sluice.dev/resizable": "true"}


def cluster(owner: str | None = "RayJob", queue: bool = True) -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    template = {"metadata": {"labels": dict(LABELS)}, "spec": pod}
    meta: dict[str, Any] = {"name": "train-abc", "namespace": "ns", "labels": {}}
    if queue:
        meta["labels"]["sluice.dev/queue-name"] = "team"
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "ray.io/v1",
                "kind": owner,
                "name": "train",
                "uid": "u",
                "controller": True,
            }
        ]
    group = {"groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 4}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": meta,
        "spec": {
            "headGroupSpec": {"template": copy.deepcopy(template)},
            "workerGroupSpecs": [{**group, "template": copy.deepcopy(template)}],
        },
    }


def changed(obj: dict[str, Any], how: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    how(out["spec"])
    return out


def test_the_autoscalers_fields_change_and_nothing_else() -> None:
    old = cluster()

    def scale(spec: dict[str, Any]) -> None:
        spec["workerGroupSpecs"][0]["replicas"] = 3
        spec["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["w-1"]}

    assert check_ray_cluster_update(old, changed(old, scale), "ns", ALICE).allowed
    meta = copy.deepcopy(old)
    meta["metadata"]["finalizers"] = ["ray.io/gcs-ft-redis-cleanup-finalizer"]  # KubeRay's
    assert check_ray_cluster_update(old, meta, "ns", ALICE).allowed


def test_its_templates_groups_and_bounds_are_the_ray_jobs() -> None:
    old = cluster()
    for how in (
        lambda s: s["workerGroupSpecs"][0]["template"]["metadata"]["labels"].clear(),
        lambda s: s["headGroupSpec"]["template"]["metadata"]["labels"].clear(),
        lambda s: s["workerGroupSpecs"].append(copy.deepcopy(s["workerGroupSpecs"][0])),
        lambda s: s["workerGroupSpecs"][0].update(maxReplicas=8),
        lambda s: s["workerGroupSpecs"][0]["template"]["spec"]["containers"][0].update(
            resources={"requests": {"cpu": "4"}}
        ),
    ):
        verdict = check_ray_cluster_update(old, changed(old, how), "ns", ALICE)
        assert not verdict.allowed
        assert verdict.rule == "raycluster-spec"
    verdict = check_ray_cluster_update(old, changed(old, how), "ns", ALICE)
    assert verdict.message == (
        "raycluster ns/train-abc of RayJob train (queue team): only its worker groups'"
        " replicas and scaleStrategy may change, as Ray's autoscaler writes them; the rest"
        " is the RayJob's, admitted by its queue: suspend the RayJob (spec.suspend: true) and"
        " change its spec.rayClusterSpec instead"
    )


def test_a_cluster_of_its_own_or_of_no_queue_and_the_operator_pass() -> None:
    def strip(s: dict[str, Any]) -> None:
        s["workerGroupSpecs"][0]["template"]["metadata"]["labels"].clear()

    for old in (cluster(owner=None), cluster(owner="RayService"), cluster(queue=False)):
        assert check_ray_cluster_update(old, changed(old, strip), "ns", ALICE).allowed
    assert check_ray_cluster_update(cluster(), changed(cluster(), strip), "ns", OPERATOR).allowed
