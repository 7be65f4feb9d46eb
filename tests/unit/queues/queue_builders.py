"""Queues in one line each for the rule tests."""

from __future__ import annotations

from typing import Any

from sluice.api.queue import Queue


def q(name: str, parent: str | None = None, *, status: str | None = None, **spec: Any) -> Queue:
    body: dict[str, Any] = {}
    for key, value in spec.items():
        body[{"guarantee": "guarantee", "pcn": "priorityClassName"}.get(key, key)] = (
            {"resource": value} if key == "guarantee" else value
        )
    if parent is not None:
        body["parent"] = parent
    obj: dict[str, Any] = {"metadata": {"name": name}, "spec": body}
    if status:
        obj["status"] = {"state": status}
    return Queue.from_object(obj)


def cluster(*queues: Queue) -> dict[str, Queue]:
    out = {"root": q("root"), "default": q("default")}
    out.update({x.name: x for x in queues})
    return out
