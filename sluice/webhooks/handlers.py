"""The admission endpoints: AdmissionReview in, the queue rules' verdict out.

They only adapt: every decision comes from sluice.queues, fed by the Queue cache and, for the
rare checks that need them, facts asked of the API server. One of those is a queue the cache
has not seen yet (``with_unseen``): the watch lags the API server by a moment, so a parent
applied just before its child, root just created by the operator, or a queue created just
before its first job is read from the API server rather than refused as missing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sluice.api.constants import (
    DEFAULT_MAX_QUEUE_DEPTH,
    FLAVOR_KIND,
    KIND,
    QUEUE_LABEL,
    TOPOLOGY_KIND,
)
from sluice.api.errors import InvalidObject
from sluice.api.pod_views import gated
from sluice.api.queue import Queue
from sluice.api.workloads import BY_KIND, Adapter, controlled_by
from sluice.api.workloads.job import JOB
from sluice.api.workloads.model import scaled
from sluice.api.workloads.ray_cluster import RAY_CLUSTER_KIND
from sluice.api.workloads.rayjob import RAY_JOB
from sluice.queues.admission import (
    ClusterFacts,
    check_queue_create,
    check_queue_delete,
    check_queue_update,
    job_facts_needed,
)
from sluice.queues.defaults import queue_with_defaults
from sluice.queues.flavor_kept import check_flavor_kept
from sluice.queues.flavors import check_flavor
from sluice.queues.jobs import (
    Writer,
    check_job_create,
    check_job_delete,
    check_job_update,
    check_pod_update,
    job_admitted,
    job_queue,
    job_settings,
    needs_namespace_labels,
)
from sluice.queues.pods import (
    check_plain_pod_update,
    check_pod_create,
    is_plain_pod,
    job_pod_settings,
    pod_settings,
)
from sluice.queues.ray_clusters import check_ray_cluster_update
from sluice.queues.topology import asks_topology, check_topology, check_topology_request
from sluice.queues.verdict import ALLOW, Verdict, deny
from sluice.webhooks.cache import ClusterFactsSource, QueueCache
from sluice.webhooks.review import Request, ReviewError, respond


@dataclass
class Context:
    cache: QueueCache
    facts: ClusterFactsSource
    operator_users: frozenset[str]
    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH
    protected_job_users: tuple[str, ...] = ()
    """Users and groups that may protect jobs (sluice.dev/preemptable)."""
    workloads: frozenset[str] = frozenset({JOB.kind})
    """The kinds of workload sluice gates (docs/workloads.md)."""
    controllers: frozenset[str] = field(init=False, default=frozenset())
    """The gated kinds that make workloads of their own (a JobSet's Jobs): what they control
    is part of them."""

    def __post_init__(self) -> None:
        self.controllers = self.workloads - {JOB.kind}


Answer = tuple[dict[str, Any], Verdict]


async def with_unseen(
    ctx: Context, queues: Mapping[str, Queue], name: str | None, skip: str | None = None
) -> Mapping[str, Queue]:
    """``queues`` with the queue ``name`` and the ancestors above it that they do not hold,
    read from the API server, nearest first, up to the deepest tree allowed. Only a miss costs
    a read; a queue the API server does not hold either (or cannot read) stays missing, for
    the rules to refuse. ``skip``: the queue under review, never read as its own ancestor."""
    found: dict[str, Queue] = {}
    while (
        name is not None
        and name != skip
        and name not in queues
        and name not in found
        and len(found) <= ctx.max_queue_depth
    ):
        queue = _readable(await ctx.facts.stored_queue(name))
        if queue is None:
            break
        found[name] = queue
        name = queue.parent
    if not found:
        return queues
    return {**queues, **found}


def _expect(request: Request, kind: str) -> None:
    if request.kind != kind:
        raise ReviewError(f"this endpoint reviews {kind} objects, got {request.kind}")


def _answer(request: Request, verdict: Verdict) -> Answer:
    body = respond(
        request.uid,
        allowed=verdict.allowed,
        message=verdict.message,
        reason=verdict.rule,
        warnings=verdict.warnings,
    )
    return body, verdict


# Queues ------------------------------------------------------------------------------------


async def mutate_queue(request: Request, ctx: Context) -> Answer:
    _expect(request, KIND)
    if request.operation not in ("CREATE", "UPDATE") or request.obj is None:
        return _answer(request, ALLOW)
    patched = queue_with_defaults(request.obj)
    return respond(request.uid, original=request.obj, patched=patched), ALLOW


async def validate_queue(request: Request, ctx: Context) -> Answer:
    _expect(request, KIND)
    if request.sub_resource:
        return _answer(request, ALLOW)  # status is the operator's, not a spec change
    if request.operation == "UPDATE" and _spec(request.obj) == _spec(request.old):
        # Metadata only (the operator's finalizer, an annotation): never blocked, even on a
        # queue whose stored spec is already broken.
        return _answer(request, ALLOW)
    existing: dict[str, Queue] = dict(ctx.cache.queues)
    if request.operation == "DELETE":
        if request.old is None and request.name not in existing:
            return _answer(request, ALLOW)
        try:
            gone = _queue_for_delete(request.old) if request.old else existing[request.name]
        except InvalidObject as err:
            return _answer(request, deny("invalid-object", str(err)))
        return _answer(request, check_queue_delete(gone))
    if request.obj is None:
        return _answer(request, ALLOW)
    try:
        new = _queue(request.obj)
    except InvalidObject as err:
        return _answer(request, deny("invalid-object", str(err)))
    old = _readable(request.old)
    if old is not None:
        existing[old.name] = old
    else:
        existing.pop(new.name, None)  # an unreadable stored queue being repaired
    existing = dict(await with_unseen(ctx, existing, new.parent, skip=new.name))
    needed = job_facts_needed(old, new, existing)
    holding = frozenset([q for q in sorted(needed) if await ctx.facts.queue_holds_jobs(q)])
    facts = ClusterFacts(
        max_queue_depth=ctx.max_queue_depth,
        cluster_capacity=ctx.facts.cluster_capacity(),
        queues_holding_jobs=holding,
        flavors=await ctx.facts.flavor_names() if new.spec.flavors else None,
    )
    if old is None:
        verdict = check_queue_create(new, existing, facts)
    else:
        verdict = check_queue_update(old, new, existing, facts)
    return _answer(request, verdict)


def _queue(obj: Mapping[str, Any]) -> Queue:
    return Queue.from_object(queue_with_defaults(obj))


def _spec(obj: Mapping[str, Any] | None) -> Any:
    return obj.get("spec") if obj is not None else None


def _readable(obj: Mapping[str, Any] | None) -> Queue | None:
    """The stored queue, or None when there is none or it cannot be read (created before the
    webhooks): then the new version must pass the rules on its own, as on create."""
    if obj is None:
        return None
    try:
        return _queue(obj)
    except InvalidObject:
        return None


def _queue_for_delete(obj: Mapping[str, Any]) -> Queue:
    """Deletion depends only on the name and status.state: a queue whose spec cannot be read
    must still be deletable once Closed, or a broken object could never be removed."""
    try:
        return _queue(obj)
    except InvalidObject:
        meta = obj.get("metadata")
        status = obj.get("status")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        state = status.get("state") if isinstance(status, Mapping) else None
        stub: dict[str, Any] = {"metadata": {"name": name}}
        if state in ("Open", "Closing", "Closed", "Unknown"):
            stub["status"] = {"state": state}
        return Queue.from_object(stub)


# Jobs and their pods ----------------------------------------------------------------------


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _writer(request: Request, ctx: Context) -> Writer:
    return Writer(
        name=request.username,
        groups=request.user_groups,
        operator=request.username in ctx.operator_users,
        protectors=ctx.protected_job_users,
    )


def _pointer(*keys: str | int) -> str:
    return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in keys)


def _set(
    ops: list[dict[str, Any]], obj: Mapping[str, Any], keys: tuple[str | int, ...], value: Any
) -> None:
    """A JSON patch op setting obj[keys...] = value, adding missing parents (as objects); an
    index names an item of a list that exists. A parent added is put in ``obj`` too (a copy),
    so that the next setting under it adds to it rather than replacing it."""
    node: Any = obj
    for depth, key in enumerate(keys[:-1]):
        if isinstance(key, int):
            child = node[key] if isinstance(node, list) and 0 <= key < len(node) else None
        else:
            child = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(child, Mapping | list):
            nested: Any = value
            for inner in reversed(keys[depth + 1 :]):
                nested = {inner: nested}
            ops.append({"op": "add", "path": _pointer(*keys[: depth + 1]), "value": nested})
            if isinstance(node, dict) and not isinstance(key, int):
                node[key] = copy.deepcopy(nested)
            return
        node = child
    ops.append({"op": "add", "path": _pointer(*keys), "value": value})


async def mutate_job(request: Request, ctx: Context) -> Answer:
    _expect(request, JOB.kind)
    return await _mutate(request, ctx, JOB)


async def mutate_workload(request: Request, ctx: Context) -> Answer:
    """The other kinds of workload sluice gates (docs/workloads.md), as a Job."""
    return await _mutate(request, ctx, _adapter(request, ctx))


async def _mutate(request: Request, ctx: Context, adapter: Adapter) -> Answer:
    """What queues.jobs.job_settings gives a new managed workload, as JSON patch operations
    written directly: diffing whole Jobs would cost more than every rule together."""
    if request.operation != "CREATE" or request.obj is None:
        return _answer(request, ALLOW)
    job = request.obj
    if not isinstance(job.get("spec", {}), Mapping):
        raise ReviewError("object.spec is not an object")
    if ctx.controllers and controlled_by(job, ctx.controllers):
        return _answer(request, ALLOW)  # part of a workload sluice manages as a whole
    queue_name = _labels(job).get(QUEUE_LABEL)
    if not queue_name:
        queue_name = await ctx.facts.namespace_default_queue(request.namespace)
        if not queue_name:
            return _answer(request, ALLOW)  # not managed by sluice
    queues = await with_unseen(ctx, ctx.cache.queues, str(queue_name))
    queue = queues.get(str(queue_name))
    ops: list[dict[str, Any]] = []
    for keys, value in job_settings(job, str(queue_name), queue, adapter):
        _set(ops, job, keys, value)
    return respond(request.uid, patch=ops), ALLOW


async def validate_job(request: Request, ctx: Context) -> Answer:
    _expect(request, JOB.kind)
    return await _validate(request, ctx, JOB)


async def validate_workload(request: Request, ctx: Context) -> Answer:
    """The other kinds of workload sluice gates (docs/workloads.md), as a Job."""
    if request.sub_resource == "scale":
        return await _validate_scale(request, ctx)
    return await _validate(request, ctx, _adapter(request, ctx))


async def validate_ray_cluster(request: Request, ctx: Context) -> Answer:
    """A RayCluster that a managed RayJob runs changes only where Ray's autoscaler writes
    (queues.ray_clusters); the webhook's selector sends only those carrying a queue label."""
    _expect(request, RAY_CLUSTER_KIND)
    if (
        RAY_JOB.kind not in ctx.workloads
        or request.operation != "UPDATE"
        or request.sub_resource
        or request.old is None
        or request.obj is None
    ):
        return _answer(request, ALLOW)
    verdict = check_ray_cluster_update(
        request.old, request.obj, request.namespace, _writer(request, ctx)
    )
    return _answer(request, verdict)


async def _validate_scale(request: Request, ctx: Context) -> Answer:
    """A write of a workload's /scale subresource (`kubectl scale`, an HPA): a Scale that
    carries nothing but the count, judged as that count written on the workload, which is
    read for it (docs/elastic.md, *Grown through the queue*)."""
    group, plural = request.resource
    adapter = next((a for a in BY_KIND.values() if (a.group, a.plural) == (group, plural)), None)
    replicas = ((request.obj or {}).get("spec") or {}).get("replicas")
    if (
        adapter is None
        or adapter.kind not in ctx.workloads
        or not adapter.scale_replicas
        or request.operation != "UPDATE"
        or not isinstance(replicas, int)
    ):
        return _answer(request, ALLOW)
    stored = await ctx.facts.stored_workload(adapter, request.namespace, request.name)
    if stored is None:
        return _answer(request, ALLOW)  # gone: the API server answers the write itself
    written = replace(
        request,
        kind=adapter.kind,
        group=adapter.group,
        sub_resource="",
        old=stored,
        obj=scaled(stored, adapter.scale_replicas, replicas),
    )
    return await _validate(written, ctx, adapter)


async def _validate(request: Request, ctx: Context, adapter: Adapter) -> Answer:
    if request.sub_resource:
        return _answer(request, ALLOW)
    writer = _writer(request, ctx)
    queues = ctx.cache.queues
    if request.operation == "DELETE" and request.old is not None:
        verdict = check_job_delete(request.old, request.namespace, request.options, writer, adapter)
        return _answer(request, verdict)
    if request.obj is None:
        return _answer(request, ALLOW)
    if ctx.controllers and controlled_by(request.obj, ctx.controllers):
        return _answer(request, ALLOW)  # part of a workload sluice manages as a whole
    queue_name = job_queue(request.obj)
    if request.old is None or job_queue(request.old) != queue_name:
        queues = await with_unseen(ctx, queues, queue_name)  # the rules read only a new queue
    labels = None
    if needs_namespace_labels(queue_name, queues):
        labels = await ctx.facts.namespace_labels(request.namespace)
    if request.operation == "CREATE":
        if queue_name is None:
            return _answer(request, ALLOW)  # not managed by sluice
        verdict = check_job_create(
            request.obj, request.namespace, queues, labels, writer, adapter=adapter
        )
        return _answer(request, await _topology(request, ctx, verdict, adapter, False))
    if request.operation == "UPDATE" and request.old is not None:
        verdict = check_job_update(
            request.old, request.obj, request.namespace, queues, labels, writer, adapter
        )
        admitted = job_admitted(request.old, adapter)
        verdict = await _topology(request, ctx, verdict, adapter, admitted)
        if verdict.allowed:
            kind = str(request.obj.get("kind") or adapter.kind).lower()
            who = f"{kind} {request.namespace}/{request.name}"
            verdict = check_flavor_kept(request.old, request.obj, who, admitted, adapter)
        return _answer(request, verdict)
    return _answer(request, ALLOW)


async def _topology(
    request: Request, ctx: Context, verdict: Verdict, adapter: Adapter, admitted: bool
) -> Verdict:
    """What a workload (or plain pod) of a queue asks of a Topology (queues.topology); the
    Topologies are read only for one that asks, or asked, anything."""
    new, old = request.obj, request.old
    if not verdict.allowed or new is None or job_queue(new) is None:
        return verdict
    if not asks_topology(new, adapter) and (old is None or not asks_topology(old, adapter)):
        return verdict
    who = f"{(new.get('kind') or adapter.kind).lower()} {request.namespace}/{request.name}"
    levels = await ctx.facts.topology_levels()
    return check_topology_request(old, new, who, admitted, levels, adapter)


async def validate_flavor(request: Request, ctx: Context) -> Answer:
    _expect(request, FLAVOR_KIND)
    if request.sub_resource or request.obj is None or request.operation == "DELETE":
        return _answer(request, ALLOW)
    return _answer(request, check_flavor(request.obj))


async def validate_topology(request: Request, ctx: Context) -> Answer:
    _expect(request, TOPOLOGY_KIND)
    if request.sub_resource or request.obj is None or request.operation == "DELETE":
        return _answer(request, ALLOW)
    return _answer(request, check_topology(request.obj))


def _adapter(request: Request, ctx: Context) -> Adapter:
    adapter = BY_KIND.get(request.kind)
    if adapter is None or adapter.group != request.group or adapter.kind not in ctx.workloads:
        gated = ", ".join(sorted(k for k in ctx.workloads if k != JOB.kind)) or "none"
        raise ReviewError(
            f"this endpoint reviews the kinds of workload sluice gates ({gated}),"
            f" got {request.group or 'core'} {request.kind}"
        )
    return adapter


async def mutate_pod(request: Request, ctx: Context) -> Answer:
    """A new plain pod of a queue (its label, or its namespace's default queue) gets the
    queue label and sluice's scheduling gate (queues.pods.pod_settings); a pod of a managed
    job gets the gate only when its template carried sluice.dev/resizable
    (queues.pods.job_pod_settings); pods of no queue pass untouched. The webhook's selectors
    send only pods that carry the queue label or live in a namespace with a default queue."""
    _expect(request, "Pod")
    if request.operation != "CREATE" or request.obj is None:
        return _answer(request, ALLOW)
    pod = request.obj
    ops: list[dict[str, Any]] = []
    if not is_plain_pod(pod):
        for keys, value in job_pod_settings(pod):
            _set(ops, pod, keys, value)
        return respond(request.uid, patch=ops), ALLOW
    queue_name = _labels(pod).get(QUEUE_LABEL)
    if not queue_name:
        queue_name = await ctx.facts.namespace_default_queue(request.namespace)
        if not queue_name:
            return _answer(request, ALLOW)
    for keys, value in pod_settings(pod, str(queue_name)):
        _set(ops, pod, keys, value)
    return respond(request.uid, patch=ops), ALLOW


async def validate_pod(request: Request, ctx: Context) -> Answer:
    """Pods of a queue (the webhook's objectSelector sends only those): a plain pod's create
    and updates (queues.pods), a managed Job's pods' updates and in-place resizes."""
    _expect(request, "Pod")
    if request.sub_resource not in ("", "resize"):
        return _answer(request, ALLOW)  # status, binding, ephemeralcontainers: not requests
    if request.operation == "CREATE" and request.obj is not None:
        queue_name = _labels(request.obj).get(QUEUE_LABEL)
        if not queue_name or not is_plain_pod(request.obj):
            return _answer(request, ALLOW)
        queues = await with_unseen(ctx, ctx.cache.queues, str(queue_name))
        labels = None
        if needs_namespace_labels(str(queue_name), queues):
            labels = await ctx.facts.namespace_labels(request.namespace)
        verdict = check_pod_create(
            request.obj, request.namespace, queues, labels, _writer(request, ctx)
        )
        return _answer(request, await _topology(request, ctx, verdict, JOB, False))
    if request.operation != "UPDATE" or request.obj is None or request.old is None:
        return _answer(request, ALLOW)
    if QUEUE_LABEL not in _labels(request.old) and QUEUE_LABEL not in _labels(request.obj):
        return _answer(request, ALLOW)
    writer = _writer(request, ctx)
    if is_plain_pod(request.old):
        verdict = check_plain_pod_update(request.old, request.obj, request.namespace, writer)
        if not writer.operator:
            admitted = not gated(request.old.get("spec") or {})
            verdict = await _topology(request, ctx, verdict, JOB, admitted)
    else:
        verdict = check_pod_update(request.old, request.obj, request.namespace, writer)
    return _answer(request, verdict)
