"""The memo tables of reading (quantity strings, pod shapes, pod constraints, pod sets) change
how fast objects are read, never what is read: every view built with them equals, field for
field, the view built without them (``memo.uncached``), whatever was read before it."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api import memo
from sluice.api.errors import InvalidObject
from sluice.api.pod_defaults import NO_DEFAULTS, PodDefaults
from sluice.api.pod_request import SHAPES_KEPT, pod_request
from sluice.api.pod_views import pod_from_object
from sluice.api.resources import Resources
from sluice.api.workloads import POD_LABELS, adapter_for

HERE = Path(__file__).parent
REAL = HERE / "workloads" / "real"
FIXTURES = HERE / "workloads"

DefaultsOf = Callable[[str], PodDefaults]


def read(obj: dict[str, Any], defaults_of: DefaultsOf = lambda ns: NO_DEFAULTS) -> str:
    """The view of an object, or the error reading it, as text: every field, compared or not."""
    try:
        if obj.get("kind") == "Pod":
            return repr(pod_from_object(obj, POD_LABELS))
        adapter = adapter_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        assert adapter is not None, obj.get("kind")
        return repr(adapter.view(obj, {}, defaults_of))
    except InvalidObject as err:
        return f"InvalidObject: {err}"


def both_ways(
    objects: list[dict[str, Any]], defaults_of: DefaultsOf = lambda ns: NO_DEFAULTS
) -> tuple[list[str], list[str]]:
    """Each object read through tables that start empty and fill as they go, and each read
    without any table."""
    memo.clear_all()
    cached = [read(obj, defaults_of) for obj in objects]
    cached += [read(obj, defaults_of) for obj in objects]  # now from full tables
    with memo.uncached():
        fresh = [read(obj, defaults_of) for obj in objects]
    return cached, fresh + fresh


def captured() -> Iterator[dict[str, Any]]:
    for path in sorted(REAL.glob("*.json")):
        yield from json.loads(path.read_text()).values()
    for path in sorted(FIXTURES.glob("*.yaml")):
        yield from (doc for doc in yaml.safe_load_all(path.read_text()) if doc)


def test_the_captured_objects_read_the_same_with_and_without_the_tables() -> None:
    objects = [o for o in captured() if o.get("kind") == "Pod" or adapter_for_object(o)]
    assert len(objects) > 20
    cached, fresh = both_ways(objects)
    assert cached == fresh
    read_as_views = [t for t in fresh if t.startswith(("WorkloadView", "PodView"))]
    assert len(read_as_views) > len(fresh) // 2


def adapter_for_object(obj: dict[str, Any]) -> bool:
    return adapter_for(str(obj.get("apiVersion")), str(obj.get("kind"))) is not None


QUANTITIES = ["1", "1000m", "1.5", "500m", "2", "0", "0.5", "1e3", "1k", "8Gi", "8G", "8192Mi"]


def container(rng: random.Random, name: str) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for field in ("requests", "limits"):
        if rng.random() < 0.7:
            names = rng.sample(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"], 2)
            resources[field] = {n: rng.choice(QUANTITIES) for n in names}
    out: dict[str, Any] = {"name": name, "image": "x"}
    if resources or rng.random() < 0.5:
        out["resources"] = resources
    return out


def generated_job(rng: random.Random, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [container(rng, f"c{n}") for n in range(rng.randint(1, 3))]
    }
    if rng.random() < 0.4:
        spec["initContainers"] = [
            {
                **container(rng, f"i{n}"),
                **({"restartPolicy": "Always"} if rng.random() < 0.5 else {}),
            }
            for n in range(rng.randint(1, 3))
        ]
    if rng.random() < 0.2:
        spec["resources"] = {"requests": {"cpu": rng.choice(QUANTITIES)}}
    if rng.random() < 0.2:
        spec["overhead"] = {"cpu": rng.choice(QUANTITIES)}
    if rng.random() < 0.3:
        spec["runtimeClassName"] = rng.choice(["kata", "gvisor"])
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"pool": rng.choice("ab")}
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if rng.random() < 0.2:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                    ]
                }
            }
        }
    if rng.random() < 0.3:
        spec["priorityClassName"] = rng.choice(["high", "low"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"j{i}",
            "namespace": rng.choice(["team-a", "team-b", "plain"]),
            "labels": {"sluice.dev/queue-name": "q"},
        },
        "spec": {"parallelism": rng.randint(1, 4), "suspend": True, "template": {"spec": spec}},
    }


NAMESPACE_DEFAULTS = {
    "team-a": PodDefaults(
        Resources.parse({"cpu": "250m", "memory": "1Gi"}),
        {"kata": Resources.parse({"cpu": "100m"})},
    ),
    "team-b": PodDefaults(
        Resources.parse({"cpu": "500m"}),
        {"kata": Resources.parse({"cpu": "200m"}), "gvisor": Resources.parse({"memory": "64Mi"})},
    ),
}


def namespace_defaults(namespace: str) -> PodDefaults:
    return NAMESPACE_DEFAULTS.get(namespace, NO_DEFAULTS)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_workloads_and_their_pods_read_the_same_with_and_without_the_tables(
    seed: int,
) -> None:
    rng = random.Random(seed)
    jobs = [generated_job(rng, i) for i in range(300)]
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": job["metadata"]["namespace"]},
            "spec": job["spec"]["template"]["spec"],
        }
        for i, job in enumerate(jobs)
    ]
    objects = [*jobs, *pods]
    rng.shuffle(objects)
    cached, fresh = both_ways(objects, namespace_defaults)
    assert cached == fresh


def job_with(quantity: Any, namespace: str = "team-a") -> dict[str, Any]:
    c = {"name": "c", "resources": {"requests": {"cpu": quantity}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": namespace, "labels": {"sluice.dev/queue-name": "q"}},
        "spec": {"suspend": True, "template": {"spec": {"containers": [c, {"name": "d"}]}}},
    }


def test_objects_that_differ_in_one_quantity_string_read_apart() -> None:
    # 1 and True are equal keys in Python: only the first is a quantity.
    variants: list[Any] = ["1", "1000m", "1.5", "1001m", 1, True, 1.0, [1], {"a": 1}, "1x"]
    objects = [job_with(v) for v in variants]
    cached, fresh = both_ways(objects + list(reversed(objects)))
    assert cached == fresh
    texts = dict(zip(map(repr, variants), fresh, strict=False))
    assert texts["1"] == texts["'1'"] == texts["'1000m'"]
    assert texts["True"].startswith("InvalidObject") and texts["[1]"].startswith("InvalidObject")
    assert texts["'1.5'"] != texts["'1'"] != texts["'1001m'"]


def test_one_template_reads_with_what_its_namespace_adds() -> None:
    """The same template in namespaces with different LimitRanges and RuntimeClasses, and
    with the LimitRange changed between reads: each read as without the tables."""
    spec = {"containers": [{"name": "c"}, {"name": "d", "resources": {"limits": {"cpu": "1"}}}]}
    spec["runtimeClassName"] = "kata"
    read_with: dict[str, Resources] = {}
    for round_ in range(2):
        for namespace, defaults in [*NAMESPACE_DEFAULTS.items(), ("plain", NO_DEFAULTS)]:
            changed = PodDefaults(Resources.parse({"cpu": "3"})) if round_ else defaults
            got = pod_request(copy.deepcopy(spec), "Job", "j", defaults=changed)
            with memo.uncached():
                assert got == pod_request(spec, "Job", "j", defaults=changed)
            read_with[f"{namespace}{round_}"] = got
    assert len({read_with[k] for k in ("team-a0", "team-b0", "plain0", "team-a1")}) == 4


def test_the_tables_are_bounded() -> None:
    memo.clear_all()
    for i in range(SHAPES_KEPT + 100):
        pod_request({"containers": [{"resources": {"requests": {"cpu": f"{i}m"}}}]}, "Pod", "p")
    assert all(table.size() <= SHAPES_KEPT for table in memo.tables())
