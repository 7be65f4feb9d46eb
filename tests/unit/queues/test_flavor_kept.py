"""flavor-assignment-kept for the kinds other than a Job (sluice/queues/flavor_kept.py): each
pod set's template keeps what its flavor added while the workload runs; a template sluice
wrote nothing in (an MPIJob's Launcher) is free, and so is a plain pod (the API server keeps
its nodeSelector and tolerations)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from sluice.api.flavor import FlavorView, Taint
from sluice.api.workloads import BY_KIND, Adapter
from sluice.api.workloads.flavor_patches import applied, flavor_admission_patch
from sluice.queues.flavor_kept import check_flavor_kept

REAL = Path(__file__).parents[1] / "api" / "workloads" / "real"
MODEL = "gpu.example.com/model"
FLAVORS = {
    "h100": FlavorView(
        "h100", {MODEL: "H100"}, (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    ),
    "a100": FlavorView("a100", {MODEL: "A100"}),
}


def running(file: str, **chosen: str) -> tuple[dict[str, Any], Adapter]:
    obj = json.loads((REAL / f"{file}.json").read_text())[file]
    adapter = BY_KIND[obj["kind"]]
    held = applied(obj, adapter.suspend_patch(True))
    release = adapter.suspend_patch(False)
    patch = flavor_admission_patch(tuple(chosen.items()), held, adapter, FLAVORS, release)
    return applied(held, patch), adapter


def test_an_mpijobs_workers_keep_their_flavor_and_its_launcher_is_free() -> None:
    old, adapter = running("mpijob", Launcher="a100", Worker="h100")
    launcher = copy.deepcopy(old)
    launcher["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["nodeSelector"] = {}
    assert check_flavor_kept(old, launcher, "mpijob ns/m", True, adapter).allowed
    worker = copy.deepcopy(old)
    del worker["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["tolerations"]
    verdict = check_flavor_kept(old, worker, "mpijob ns/m", True, adapter)
    assert (verdict.allowed, verdict.rule) == (False, "flavor-assignment-kept")
    assert verdict.message.startswith(
        "mpijob ns/m: the pod template of pod set Worker must keep the nodeSelector and"
        " tolerations of flavor h100"
    )
    assert check_flavor_kept(old, worker, "mpijob ns/m", False, adapter).allowed


def test_a_rayjobs_worker_group_keeps_its_flavor() -> None:
    obj = json.loads((REAL / "rayjob.json").read_text())["rayjob"]
    adapter = BY_KIND[obj["kind"]]
    names = [name for name, _ in adapter.domain_templates(obj)]
    old, _ = running("rayjob", **dict.fromkeys(names, "a100"))
    new = copy.deepcopy(old)
    group = new["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    group["nodeSelector"][MODEL] = "H100"
    verdict = check_flavor_kept(old, new, "rayjob ns/r", True, adapter)
    assert not verdict.allowed
    assert "flavor a100" in verdict.message


def test_a_plain_pod_and_a_workload_without_a_record_are_left_alone() -> None:
    pod = {"kind": "Pod", "metadata": {"annotations": {}}, "spec": {}}
    assert check_flavor_kept(pod, pod, "pod ns/p", True, BY_KIND["Job"]).allowed
    plain, adapter = running("pytorchjob")
    assert check_flavor_kept(plain, plain, "pytorchjob ns/t", True, adapter).allowed
