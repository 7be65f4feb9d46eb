"""Reading a cluster dump (``kubectl get ... -o yaml|json``) into a scheduler Snapshot.

The operator tolerates a broken queue tree (it marks the offending queue invalid and schedules
the rest), but a dump with a missing parent or a cycle is almost always a truncated or
hand-edited dump, so simulate refuses it up front rather than printing a misleading answer.
Every refusal is one line naming the document, the object and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml

from sluice.api.config import SchedulerConfig, load_scheduler_config
from sluice.api.constants import (
    CONFIGMAP_KEY,
    CONFIGMAP_NAME,
    FLAVOR_KIND,
    ROOT_QUEUE,
    TOPOLOGY_KIND,
)
from sluice.api.device_claims import read_claim_template, read_resource_claim
from sluice.api.device_context import device_contexts
from sluice.api.device_quota import DeviceMapping
from sluice.api.devices import read_device_class
from sluice.api.errors import ConfigError, InvalidObject
from sluice.api.pod_defaults import (
    DefaultsOf,
    PodDefaults,
    defaults_for,
    limit_range_from_object,
    pod_defaults,
    runtime_class_from_object,
)
from sluice.api.queue import Queue
from sluice.api.views import NamespaceView, WorkloadView
from sluice.api.workloads import ADAPTERS
from sluice.api.workloads.pods import PodWorkload
from sluice.scheduler.model import Snapshot
from sluice.scheduler.snapshot import (
    DEVICE_KINDS,
    KINDS,
    WORKLOAD_KINDS,
    Read,
    Reader,
    UnreadableObject,
    plain_pod_workloads,
    read,
    read_members,
    readers,
)
from sluice.scheduler.snapshot import build_snapshot as build

SUPPORTED_KINDS = (
    "Queue",
    *WORKLOAD_KINDS,
    "Pod",
    "Node",
    "PriorityClass",
    "Namespace",
    "ConfigMap",
    "LimitRange",
    "RuntimeClass",
    TOPOLOGY_KIND,
    *DEVICE_KINDS,
    FLAVOR_KIND,
)

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SnapshotError(ValueError):
    """A dump simulate cannot use; the message is one line meant for the user."""


@dataclass(frozen=True, slots=True)
class Located:
    """An object of the dump and where it was found, for messages."""

    where: str  # "snapshot.yaml: document 3" or "snapshot.json: item 12"
    obj: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind") or "")

    @property
    def label(self) -> str:
        meta = self.obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        ident = f"{namespace}/{name}" if namespace else str(name or "<unnamed>")
        return f"{self.kind or '<no kind>'} {ident}"


@dataclass(frozen=True, slots=True)
class Dump:
    """The snapshot and where its configuration came from (for the table's header)."""

    snapshot: Snapshot
    config_source: str
    forming: tuple[PodWorkload, ...] = ()
    """Groups of plain pods that are not a workload yet, each saying what it waits for."""


def load_objects(path: Path) -> list[Located]:
    """Every object of a YAML or JSON dump, ``kind: List`` documents flattened."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SnapshotError(f"{path}: cannot read: {err}") from None
    return parse_objects(text, path.name)


def parse_objects(text: str, source: str) -> list[Located]:
    stripped = text.lstrip()
    documents: list[Any]
    if stripped.startswith(("{", "[")):
        try:
            documents = [json.loads(text)]
        except json.JSONDecodeError as err:
            raise SnapshotError(
                f"{source}: not valid JSON at line {err.lineno} column {err.colno}: {err.msg}"
            ) from None
    else:
        try:
            documents = list(yaml.load_all(text, Loader=_Loader))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise SnapshotError(f"{source}: not valid YAML{at}") from None
    out: list[Located] = []
    for number, document in enumerate(documents, start=1):
        where = f"{source}: document {number}"
        if document is None:
            continue
        if isinstance(document, list):
            out.extend(_items(document, where))
        elif not isinstance(document, Mapping):
            raise SnapshotError(f"{where}: expected a Kubernetes object, got {_type(document)}")
        elif "items" in document and str(document.get("kind", "")).endswith("List"):
            out.extend(_items(document.get("items") or [], where))
        else:
            out.append(Located(where, document))
    return out


def _items(items: Any, where: str) -> Iterator[Located]:
    if not isinstance(items, list):
        raise SnapshotError(f"{where}: field items: expected a list")
    for index, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise SnapshotError(f"{where}: item {index}: expected a Kubernetes object")
        yield Located(f"{where}, item {index}", item)


def _type(value: Any) -> str:
    return {str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def build_snapshot(
    objects: list[Located],
    now: datetime,
    config: tuple[SchedulerConfig, str] | None = None,
    config_map_name: str = CONFIGMAP_NAME,
) -> Dump:
    """The Snapshot the operator would build from these objects (its builder, strict: an
    unreadable object is an error naming it).

    ``config`` (from --config) wins over a ``sluice-scheduler`` ConfigMap in the dump; without
    either, the default configuration is used.
    """
    by_kind = _by_kind(objects)
    if config is not None:
        chosen, source = config
    else:
        chosen, source = _config_from_dump(by_kind["ConfigMap"], config_map_name)
    namespaces = [read("Namespace", item.where, item.obj) for item in by_kind["Namespace"]]
    using, using_defaults = _readers(namespaces, by_kind, chosen.device_mapping)
    reads = namespaces + [
        read(kind, item.where, item.obj, using) for kind in KINDS[1:] for item in by_kind[kind]
    ]
    try:
        # Plain pods are the workloads they form, as in the operator (docs/workloads.md).
        members, unreadable = read_members(
            ((item.where, item.obj) for item in by_kind["Pod"]), using_defaults
        )
        pod_workloads, formed = plain_pod_workloads(members)
        # A dump without pods says nothing of them: nodes then hold only what admitted jobs keep.
        built = build(
            [*reads, *unreadable, *formed],
            now,
            strict=True,
            config=chosen,
            pods_known=bool(by_kind["Pod"]),
        )
    except UnreadableObject as err:
        raise SnapshotError(str(err)) from None
    _check_queues([one for one in reads if isinstance(one.view, Queue)])
    _check_workloads_once(reads, by_kind)
    forming = tuple(w for _, w in sorted(pod_workloads.items()) if w.view is None)
    return Dump(built.snapshot, source, forming)


def _by_kind(objects: list[Located]) -> dict[str, list[Located]]:
    """The dump's objects by kind; a kind sluice does not read, or a workload of another API
    version than its adapter's, is an error naming the object."""
    by_kind: dict[str, list[Located]] = {kind: [] for kind in SUPPORTED_KINDS}
    for item in objects:
        if item.kind not in by_kind:
            raise SnapshotError(
                f"{item.where}: {item.label}: field kind: unsupported kind {item.kind or '(none)'}"
                f" (expected {', '.join(SUPPORTED_KINDS)})"
            )
        by_kind[item.kind].append(item)
    for adapter in ADAPTERS:
        for item in by_kind[adapter.kind]:
            api_version = item.obj.get("apiVersion")
            if api_version not in (None, adapter.api_version):
                raise SnapshotError(
                    f"{item.where}: {item.label}: field apiVersion: expected "
                    f"{adapter.api_version}, got {api_version}"
                )
    return by_kind


def _readers(
    namespaces: list[Read], by_kind: dict[str, list[Located]], mapping: DeviceMapping
) -> tuple[Mapping[str, Reader], DefaultsOf]:
    """How the dump's workloads are read: the queue of each namespace that names a default,
    and what their pods would ask under the dump's LimitRanges and RuntimeClasses, and what
    their claims count as under its DeviceClasses, claims and templates."""
    default_queues = {
        ns.view.name: ns.view.default_queue
        for ns in namespaces
        if isinstance(ns.view, NamespaceView) and ns.view.default_queue
    }
    limit_ranges, runtime_classes = [], []
    for item in [*by_kind["LimitRange"], *by_kind["RuntimeClass"]]:
        try:
            if item.kind == "LimitRange":
                limit_ranges.append(limit_range_from_object(item.obj))
            else:
                runtime_classes.append(runtime_class_from_object(item.obj))
        except InvalidObject as err:
            raise SnapshotError(f"{item.where}: {err}") from None
    devices = device_contexts(
        [_device_read(item, read_device_class) for item in by_kind["DeviceClass"]],
        [_device_read(item, read_claim_template) for item in by_kind["ResourceClaimTemplate"]],
        [_device_read(item, read_resource_claim) for item in by_kind["ResourceClaim"]],
        mapping,
    )
    table = pod_defaults(limit_ranges, runtime_classes, devices)

    def defaults_of(namespace: str) -> PodDefaults:
        return defaults_for(table, namespace)

    return readers(default_queues, defaults_of=defaults_of), defaults_of


_D = TypeVar("_D")


def _device_read(item: Located, reader: Callable[[Mapping[str, Any]], _D]) -> _D:
    try:
        return reader(item.obj)
    except InvalidObject as err:
        raise SnapshotError(f"{item.where}: {err}") from None


def _check_workloads_once(reads: list[Read], by_kind: dict[str, list[Located]]) -> None:
    """A workload once in the dump."""
    labels = {item.where: item.label for kind in WORKLOAD_KINDS for item in by_kind[kind]}
    seen: set[str] = set()
    for one in reads:
        if isinstance(one.view, WorkloadView):
            if one.view.key in seen:
                raise SnapshotError(f"{one.ref}: {labels[one.ref]}: appears twice in the dump")
            seen.add(one.view.key)


def _check_queues(reads: list[Read]) -> None:
    """A queue once, under parents that are in the dump, with no cycle."""
    queues: dict[str, Queue] = {}
    where: dict[str, str] = {}
    for one in reads:
        assert isinstance(one.view, Queue)
        queue = one.view
        if queue.name in queues:
            raise SnapshotError(f"{one.ref}: Queue {queue.name}: appears twice in the dump")
        queues[queue.name] = queue
        where[queue.name] = one.ref
    for name in sorted(queues):
        parent = queues[name].parent
        if parent is None or parent in queues or parent == ROOT_QUEUE:
            continue
        raise SnapshotError(
            f"{where[name]}: Queue {name}: field spec.parent: parent queue {parent} is not in "
            "the dump (a truncated dump? include every queue: kubectl get queues -o yaml)"
        )
    for name in sorted(queues):
        chain = [name]
        parent = queues[name].parent
        while parent is not None and parent in queues:
            if parent in chain:
                loop = " -> ".join([*chain[chain.index(parent) :], parent])
                raise SnapshotError(
                    f"{where[name]}: Queue {name}: field spec.parent: the parents form a cycle "
                    f"({loop})"
                )
            chain.append(parent)
            parent = queues[parent].parent


def _config_from_dump(items: list[Located], name: str) -> tuple[SchedulerConfig, str]:
    for item in items:
        meta = item.obj.get("metadata") or {}
        if meta.get("name") != name:
            continue  # other ConfigMaps of a namespace dump are not ours to judge
        data = item.obj.get("data") or {}
        text = data.get(CONFIGMAP_KEY)
        if not isinstance(text, str):
            raise SnapshotError(f"{item.where}: {item.label}: field data.{CONFIGMAP_KEY}: missing")
        return (
            load_config(text, f"{item.where}: {item.label}: data.{CONFIGMAP_KEY}"),
            f"ConfigMap {item.label.split(' ', 1)[1]}",
        )
    return SchedulerConfig(), "default configuration"


def load_config(text: str, source: str) -> SchedulerConfig:
    try:
        return load_scheduler_config(text)
    except ConfigError as err:
        raise SnapshotError(f"{source}: {err}") from None


def load_config_file(path: Path) -> tuple[SchedulerConfig, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SnapshotError(f"{path}: cannot read: {err}") from None
    try:
        document = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        document = None  # load_config reports where the YAML breaks
    if isinstance(document, Mapping) and document.get("kind") == "ConfigMap":
        data = document.get("data") or {}
        inner = data.get(CONFIGMAP_KEY) if isinstance(data, Mapping) else None
        if not isinstance(inner, str):
            raise SnapshotError(f"{path}: ConfigMap: field data.{CONFIGMAP_KEY}: missing")
        return load_config(inner, f"{path}: data.{CONFIGMAP_KEY}"), str(path)
    return load_config(text, str(path)), str(path)
