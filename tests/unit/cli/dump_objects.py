"""The objects of a cluster dump, as `kubectl get -o yaml` gives them, for simulate tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

CREATED = "2026-01-01T00:00:00Z"


def queue(name: str, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body = dict(spec)
    if parent:
        body["parent"] = parent
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": CREATED},
        "spec": body,
    }


def job(
    name: str,
    queue_name: str,
    cpu: str | None = None,
    *,
    requests: dict[str, str] | None = None,
    admitted_at: str | None = None,
    created: str = CREATED,
    **pod: Any,
) -> dict[str, Any]:
    """A managed Job of one pod requesting ``cpu`` (or ``requests``); admitted (running) when
    ``admitted_at`` is given, else waiting suspended. ``pod``: more pod spec fields."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "labels": {"sluice.dev/queue-name": queue_name},
        "creationTimestamp": created,
    }
    if admitted_at:
        meta["annotations"] = {"sluice.dev/admitted-at": admitted_at}
    wanted = requests if requests is not None else {"cpu": cpu or "1"}
    container = {"name": "c", "resources": {"requests": wanted}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": admitted_at is None,
            "template": {"spec": {"containers": [container], **pod}},
        },
        "status": {"active": 1} if admitted_at else {},
    }


def node(name: str, cpu: str | None = None, **allocatable: str) -> dict[str, Any]:
    """A Ready node; resources whose names are not identifiers go in ``allocatable``."""
    extra = allocatable.pop("allocatable", None) or {}
    amounts = {**({"cpu": cpu} if cpu else {}), **allocatable, **extra}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": amounts, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def write(tmp_path: Path, objects: list[dict[str, Any]], name: str = "dump.yaml") -> Path:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    else:
        path.write_text(yaml.safe_dump_all(objects))
    return path


def gated_pod(
    name: str, queue_name: str, cpu: str, group: str = "", total: int = 0, created: str = CREATED
) -> dict[str, Any]:
    """A plain pod of a queue held by sluice's scheduling gate, in ``group`` of ``total`` pods
    when given."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "labels": {"sluice.dev/queue-name": queue_name},
        "creationTimestamp": created,
    }
    if group:
        meta["labels"]["sluice.dev/pod-group"] = group
        meta["annotations"] = {"sluice.dev/pod-group-total-count": str(total)}
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container], "schedulingGates": [{"name": "sluice.dev/admission"}]},
        "status": {"phase": "Pending"},
    }
