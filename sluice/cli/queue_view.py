"""Pure pieces of the `sluice queue` commands: flag parsing and rendering Queue objects."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.tree import Tree

from sluice.api.constants import ROOT_QUEUE
from sluice.api.quantity import QuantityError, format_quantity, parse_quantity
from sluice.api.selector import LabelSelector


class FlagError(ValueError):
    """A flag value that cannot be used; the message names the flag."""


def parse_resources(flag: str, value: str) -> dict[str, str]:
    """``cpu=4,memory=8Gi`` -> {"cpu": "4", "memory": "8Gi"}; quantities checked, kept as typed."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        name, sep, amount = part.partition("=")
        if not sep or not name or not amount:
            raise FlagError(f"{flag}: {part!r} is not resource=quantity (e.g. cpu=4,memory=8Gi)")
        try:
            parse_quantity(amount)
        except QuantityError as err:
            raise FlagError(f"{flag}: {name}: {err}") from None
        out[name] = amount
    return out


def spec_from_flags(**flags: Any) -> dict[str, Any]:
    """The Queue spec fields the user set (None means: not given)."""
    spec: dict[str, Any] = {}
    names = {
        "weight": "weight",
        "priority": "priority",
        "priority_class_name": "priorityClassName",
        "parent": "parent",
        "reclaimable": "reclaimable",
        "dequeue_strategy": "dequeueStrategy",
    }
    for key, field in names.items():
        value = flags.get(key)
        if value is not None:
            spec[field] = value.value if isinstance(value, enum.Enum) else value
    for key in ("capability", "deserved"):
        if flags.get(key):
            spec[key] = parse_resources(f"--{key}", flags[key])
    if flags.get("guarantee"):
        spec["guarantee"] = {"resource": parse_resources("--guarantee", flags["guarantee"])}
    return spec


def _resources(raw: Mapping[str, Any] | None) -> str:
    if not raw:
        return "-"
    parts = []
    for name in sorted(raw):
        try:
            parts.append(f"{name}={format_quantity(parse_quantity(raw[name]), name)}")
        except QuantityError:
            parts.append(f"{name}={raw[name]}")
    return ",".join(parts)


def _age(meta: Mapping[str, Any], now: datetime) -> str:
    created = meta.get("creationTimestamp")
    if not created:
        return "-"
    seconds = int(
        (now - datetime.fromisoformat(str(created).replace("Z", "+00:00"))).total_seconds()
    )
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _namespaces(selector: Any) -> str:
    """The namespaces a queue takes jobs from, as kubectl writes selectors."""
    if selector is None:
        return "<any>"
    try:
        return LabelSelector.model_validate(selector).describe()
    except ValueError:
        return "<unreadable>"


def queue_table(items: Sequence[Mapping[str, Any]], now: datetime | None = None) -> Table:
    now = now or datetime.now(UTC)
    table = Table(box=None, pad_edge=False, header_style="bold")
    # USAGE (the usage plugin's dominant usage over time) only where some queue has any.
    usage = any((obj.get("status") or {}).get("usage") for obj in items)
    for column in (
        "NAME",
        "STATE",
        "PARENT",
        "WEIGHT",
        "PRIORITY",
        "PENDING",
        "RUNNING",
        "ALLOCATED",
        "NAMESPACES",
        *(("USAGE",) if usage else ()),
        "AGE",
    ):
        table.add_column(column, overflow="fold")
    for obj in sorted(items, key=lambda o: o["metadata"]["name"]):
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        table.add_row(
            obj["metadata"]["name"],
            str(status.get("state") or "-"),
            str(spec.get("parent") or "-"),
            str(spec.get("weight", 1)),
            str(spec.get("priority", spec.get("priorityClassName", "-"))),
            str(status.get("pending", 0)),
            str(status.get("running", 0) + status.get("inqueue", 0)),
            _resources(status.get("allocated")),
            _namespaces(spec.get("namespaceSelector")),
            *((str((status.get("usage") or {}).get("dominant") or "-"),) if usage else ()),
            _age(obj["metadata"], now),
        )
    return table


def _flavor_line(item: Mapping[str, Any]) -> str:
    """A line under a queue of the tree for one flavor of its ``status.flavors``."""
    line = f"\n  flavor {item.get('name', '-')}"
    if "deserved" in item:
        line += f" deserved={_resources(item.get('deserved'))}"
    line += f" allocated={_resources(item.get('allocated'))}"
    if "realCapability" in item:
        line += f" realCapability={_resources(item.get('realCapability'))}"
    return line


def queue_tree(items: Sequence[Mapping[str, Any]], top: str = ROOT_QUEUE) -> Tree:
    by_name = {o["metadata"]["name"]: o for o in items}
    children: dict[str, list[str]] = {}
    for name, obj in by_name.items():
        if name == ROOT_QUEUE:
            continue
        parent = (obj.get("spec") or {}).get("parent") or ROOT_QUEUE
        children.setdefault(parent, []).append(name)

    def label(name: str) -> str:
        obj = by_name.get(name, {"spec": {}, "status": {}})
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return (
            f"[bold]{name}[/bold] {status.get('state') or '-'} weight={spec.get('weight', 1)}"
            f" deserved={_resources(status.get('deserved'))}"
            f" allocated={_resources(status.get('allocated'))}"
            f" share={float(status.get('share') or 0):.2f}"
            + "".join(_flavor_line(f) for f in status.get("flavors") or ())
        )

    tree = Tree(label(top))

    def grow(node: Tree, name: str, seen: set[str]) -> None:
        for child in sorted(children.get(name, [])):
            if child in seen:
                continue
            grow(node.add(label(child)), child, seen | {child})

    grow(tree, top, {top})
    return tree


def subtree(items: Sequence[Mapping[str, Any]], top: str) -> list[str]:
    """``top`` and its descendants, parents before children."""
    children: dict[str, list[str]] = {}
    for obj in items:
        parent = (obj.get("spec") or {}).get("parent")
        if parent:
            children.setdefault(parent, []).append(obj["metadata"]["name"])
    out, stack = [], [top]
    while stack:
        name = stack.pop(0)
        out.append(name)
        stack.extend(sorted(children.get(name, [])))
    return out
