"""Devices asked through DRA claims, counted end to end by the operator's scheduler over a
dump (docs/scheduler.md, *Devices (DRA)*): the DeviceClass, ResourceSlice, claim and
template objects are the ones the real control plane wrote (tests/unit/api/devices_real)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dump_objects import gated_pod, job, node, queue, write

from sluice.cli.render import to_json
from sluice.cli.simulate import simulate_file

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
REAL = Path(__file__).parents[1] / "api" / "devices_real"
GPU = "example.com/gpu"


def _real(name: str, namespace: str | None = "ns") -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((REAL / name).read_text())
    if namespace is not None and obj["metadata"].get("namespace"):
        obj["metadata"]["namespace"] = namespace
    return obj


def _config(tmp_path: Path, mapped: bool = True) -> Path:
    path = tmp_path / "scheduler.yaml"
    text = "tiers:\n- plugins: [{name: priority}, {name: gang}]\n- plugins: [{name: capacity}]\n"
    if mapped:
        text += f"deviceClassMappings:\n- name: {GPU}\n  deviceClassNames: [gpu-x]\n"
    path.write_text(text)
    return path


def _claiming(name: str, queue_name: str, claim: dict[str, str], pods: int = 1) -> dict[str, Any]:
    """A waiting Job of ``pods`` pods, each naming ``claim`` (a template or a claim)."""
    obj = job(name, queue_name, "1", resourceClaims=[{"name": "gpus", **claim}])
    obj["spec"]["parallelism"] = obj["spec"]["completions"] = pods
    return obj


def _cluster(tmp_path: Path, *more: dict[str, Any], cap: str = "8") -> Path:
    objects = [
        queue("team", capability={GPU: cap}),
        node("n1", "16"),
        _real("gpu.deviceclass.json"),
        _real("node-local.resourceslice.json"),
        _real("five.resourceclaimtemplate.json"),
        *more,
    ]
    return write(tmp_path, objects)


def test_a_template_claim_counts_per_pod_against_the_queue_cap_with_the_reason(
    tmp_path: Path,
) -> None:
    two = _claiming("two", "team", {"resourceClaimTemplateName": "five"}, 2)
    out = to_json(simulate_file(_cluster(tmp_path, two, cap="6"), _config(tmp_path), now=NOW))
    assert out["decisions"] == []
    (pending,) = out["pending"]
    assert pending["reason"] == (
        "position 1 in team; team would use example.com/gpu 10 > capability 6"
        " (devices of gpu-x asked through claims)"
    )
    # Past what the nodes' slices hold (8), the cluster's word says so too.
    out = to_json(simulate_file(_cluster(tmp_path, two), _config(tmp_path), now=NOW))
    assert out["pending"][0]["reason"] == (
        "position 1 in team; cluster has example.com/gpu 8 free, job requests example.com/gpu"
        " 10 (devices of gpu-x asked through claims)"
    )


def test_unmapped_class_counts_under_its_own_name(tmp_path: Path) -> None:
    implicit = "deviceclass.resource.kubernetes.io/gpu-x"
    objects = [
        queue("team", capability={implicit: "4"}),
        node("n1", "16"),
        _real("gpu.deviceclass.json"),
        _real("node-local.resourceslice.json"),
        _real("five.resourceclaimtemplate.json"),
        _claiming("one", "team", {"resourceClaimTemplateName": "five"}),
    ]
    out = to_json(simulate_file(write(tmp_path, objects), _config(tmp_path, False), now=NOW))
    (pending,) = out["pending"]
    assert f"team would use {implicit} 5 > capability 4" in pending["reason"]


def test_device_room_comes_from_the_slices_and_what_allocated_claims_hold(
    tmp_path: Path,
) -> None:
    # n1 has 8 devices; the real pod's claim holds 5 of them: a job of one pod asking 5
    # more does not fit, though the queue allows it, and says the nodes lack the devices.
    held = [_real("from-template.pod.json"), _real("from-template.resourceclaim.json")]
    dump = _cluster(
        tmp_path, *held, _claiming("more", "team", {"resourceClaimTemplateName": "five"})
    )
    out = to_json(simulate_file(dump, _config(tmp_path, mapped=True), now=NOW))
    assert out["decisions"] == []
    (pending,) = out["pending"]
    assert GPU in pending["reason"]
    # Without the held claim, the same job is admitted.
    dump = _cluster(tmp_path, _claiming("more", "team", {"resourceClaimTemplateName": "five"}))
    out = to_json(simulate_file(dump, _config(tmp_path), now=NOW))
    assert [d["action"] for d in out["decisions"]] == ["admit"]


def test_a_claim_named_by_every_pod_counts_once(tmp_path: Path) -> None:
    shared = _real("from-template.resourceclaim.json")
    shared["metadata"] = {"name": "shared", "namespace": "ns"}
    shared.pop("status")
    # 4 pods naming one claim of 5 devices: 5 counted, not 20.
    dump = _cluster(tmp_path, shared, _claiming("four", "team", {"resourceClaimName": "shared"}, 4))
    out = to_json(simulate_file(dump, _config(tmp_path), now=NOW))
    assert [d["action"] for d in out["decisions"]] == ["admit"]
    assert out["queues"]["team"]["allocated"][GPU] == "5"


def test_a_missing_template_holds_the_job_with_the_reason(tmp_path: Path) -> None:
    dump = _cluster(tmp_path, _claiming("lost", "team", {"resourceClaimTemplateName": "gone"}))
    out = to_json(simulate_file(dump, _config(tmp_path), now=NOW))
    assert out["decisions"] == []
    (pending,) = out["pending"]
    assert "ResourceClaimTemplate ns/gone does not exist" in pending["reason"]


def test_all_devices_cannot_be_counted_before_allocation(tmp_path: Path) -> None:
    template = copy.deepcopy(_real("five.resourceclaimtemplate.json"))
    template["metadata"]["name"] = "every"
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exactly["allocationMode"] = "All"
    exactly.pop("count")
    dump = _cluster(
        tmp_path, template, _claiming("all", "team", {"resourceClaimTemplateName": "every"})
    )
    out = to_json(simulate_file(dump, _config(tmp_path), now=NOW))
    assert out["decisions"] == []
    (pending,) = out["pending"]
    assert "allocationMode All" in pending["reason"]


def test_an_extended_resource_a_class_serves_counts_as_the_class_and_finds_room(
    tmp_path: Path,
) -> None:
    # Nodes do not advertise the class's extended resource; its room is the slices'.
    asked = job(
        "ext", "team", requests={"cpu": "1", "deviceclass.resource.kubernetes.io/gpu-x": "3"}
    )
    dump = _cluster(tmp_path, asked, cap="2")
    out = to_json(simulate_file(dump, _config(tmp_path), now=NOW))
    (pending,) = out["pending"]
    assert "team would use example.com/gpu 3 > capability 2" in pending["reason"]
    dump = _cluster(tmp_path, asked)
    out = to_json(simulate_file(dump, _config(tmp_path), now=NOW))
    assert [d["action"] for d in out["decisions"]] == ["admit"]


def test_plain_pods_count_their_claims_too(tmp_path: Path) -> None:
    # A group of two gated plain pods, each asking 5 devices through the template: 10 > 6.
    pods = [gated_pod(f"p{i}", "team", "1", group="g", total=2) for i in range(2)]
    for pod in pods:
        pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "five"}]
    out = to_json(simulate_file(_cluster(tmp_path, *pods, cap="6"), _config(tmp_path), now=NOW))
    assert out["decisions"] == []
    (pending,) = out["pending"]
    assert "team would use example.com/gpu 10 > capability 6" in pending["reason"]
