"""``sluice job list`` and ``sluice job why``: where a tenant's jobs stand and why.

Both read only what the operator publishes on the tenant's own objects (the Job's
annotations, its Events) and the Queue, so a user who may read Jobs and Events in their
namespace and list Queues can use them; nothing is listed cluster-wide unless asked (-A).
"""

from __future__ import annotations

from typing import Annotated, Any, cast

import typer

from sluice.api.constants import GROUP, PLURAL, POD_GROUP_LABEL, QUEUE_LABEL, VERSION
from sluice.api.views import PublishedJob
from sluice.api.workloads import BY_KIND, Adapter
from sluice.api.workloads.job import JOB
from sluice.api.workloads.pods import GROUP_PREFIX, PodMember
from sluice.api.workloads.pods import KIND as PODS
from sluice.cli.common import Kubeconfig, KubeContext, fail, group, table_console
from sluice.cli.job_report import (
    explain,
    explain_pods,
    job_line,
    job_table,
    pod_workload_line,
    pod_workload_name,
    usage_queues,
)
from sluice.scheduler.snapshot import plain_pod_workloads, read_members

Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", help="Namespace of the jobs; default the context's namespace."
    ),
]
Kind = Annotated[
    str,
    typer.Option(
        "--kind",
        help="Kind of workload (docs/workloads.md): "
        + ", ".join(BY_KIND)
        + f", or {PODS} for plain pods and pod groups (pod/NAME, pod-group/GROUP).",
    ),
]


def _adapter(kind: str) -> Adapter | None:
    """The kind's adapter; None for plain pods."""
    adapter = BY_KIND.get(kind)
    if adapter is None and kind != PODS:
        fail(f"--kind {kind}: not a kind sluice gates ({', '.join([*BY_KIND, PODS])})")
    return adapter


def register(app: typer.Typer) -> None:
    jobs = group(app, "job", "Where your jobs stand in their queues, and why.")
    jobs.command("list")(list_jobs)
    jobs.command("why")(why)


def _api(kubeconfig: str | None, context: str | None) -> Any:
    from sluice.kube import KubeConfigError, api_client

    try:
        return api_client(kubeconfig, context)
    except KubeConfigError as err:
        fail(str(err))


def _denied(err: BaseException, what: str) -> str:
    """A failed call, for people, as the one classifier reads it."""
    from sluice.kube.errors import Failure, classify, message

    failure = classify(err)
    if failure is Failure.FORBIDDEN:
        return f"not allowed to {what} (the API server said: {message(err)})"
    if isinstance(err, OSError):
        return f"cannot reach the API server: {err}"
    return f"cannot {what}: {failure.value}, {message(err)}"


def list_jobs(
    namespace: Namespace = None,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Jobs of every namespace.")
    ] = False,
    queue: Annotated[str | None, typer.Option(help="Only the jobs of this queue.")] = None,
    kind: Kind = JOB.kind,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """The managed jobs (or workloads of another kind) of a namespace: queue, state, position
    in the queue, the reason they wait and when they were admitted."""
    from kubernetes import client

    from sluice.kube import context_namespace
    from sluice.kube.errors import API_ERRORS

    adapter = _adapter(kind)
    api = _api(kubeconfig, context)
    custom = client.CustomObjectsApi(api)
    selector = f"{QUEUE_LABEL}={queue}" if queue else QUEUE_LABEL
    ns = namespace or context_namespace(kubeconfig, context)
    try:
        if adapter is None:
            core = client.CoreV1Api(api)
            pods = (
                core.list_pod_for_all_namespaces(label_selector=selector)
                if all_namespaces
                else core.list_namespaced_pod(ns, label_selector=selector)
            )
            items = [api.sanitize_for_serialization(p) for p in pods.items]
        else:  # every kind at its group's path, batch/v1 Jobs as much as the CRDs
            api_group = (adapter.group, adapter.version)
            found = cast(
                dict[str, Any],
                custom.list_cluster_custom_object(
                    *api_group, adapter.plural, label_selector=selector
                )
                if all_namespaces
                else custom.list_namespaced_custom_object(
                    *api_group, ns, adapter.plural, label_selector=selector
                ),
            )
            items = list(found.get("items") or ())
    except API_ERRORS as err:
        plural = "pods" if adapter is None else adapter.plural
        what = f"list {plural}" + ("" if all_namespaces else f" in namespace {ns}")
        fail(_denied(err, what))
    if adapter is None:
        lines = _pod_lines(items)
    else:
        lines = [line for item in items if (line := job_line(_with_kind(api, item, adapter)))]
    if not lines:
        where = "any namespace" if all_namespaces else f"namespace {ns}"
        plural = "pods" if adapter is None else adapter.plural
        typer.echo(f"no {plural} of {'queue ' + queue if queue else 'any queue'} in {where}")
        return
    table_console().print(job_table(lines, all_namespaces))


def why(
    job: Annotated[str, typer.Argument(help="NAMESPACE/NAME of the job, or NAME with -n.")],
    namespace: Namespace = None,
    kind: Kind = JOB.kind,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """Why a job (or a workload of another kind) waits (the operator's reason and its
    position), or when it was admitted, with its queue's numbers and the Events sluice posted
    on it."""
    from kubernetes import client

    from sluice.kube import context_namespace
    from sluice.kube.errors import API_ERRORS, Failure, classify

    adapter = _adapter(kind)
    if adapter is None:
        _why_pods(job, namespace, kubeconfig, context)
        return
    ns, sep, name = job.rpartition("/")
    if not sep:
        ns, name = namespace or context_namespace(kubeconfig, context), job
    if not ns or not name:
        fail(f"{job!r}: give the job as NAMESPACE/NAME, or NAME with -n NAMESPACE")
    api = _api(kubeconfig, context)
    try:
        found = client.CustomObjectsApi(api).get_namespaced_custom_object(
            adapter.group, adapter.version, ns, adapter.plural, name
        )
        obj = _with_kind(api, found, adapter)
    except API_ERRORS as err:
        what = adapter.kind.lower()
        gone = classify(err) is Failure.GONE
        fail(f"{what} {ns}/{name} not found" if gone else _denied(err, f"read the {what}"))
    queue_name = ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    queue, queue_error = _queue(api, queue_name) if queue_name else (None, "")
    events: list[dict[str, Any]] = []
    try:
        listing = client.CoreV1Api(api).list_namespaced_event(
            ns, field_selector=f"involvedObject.kind={adapter.kind},involvedObject.name={name}"
        )
        events = [api.sanitize_for_serialization(e) for e in listing.items]
    except API_ERRORS:
        pass  # Events are a courtesy: the job's own annotations carry the decision
    others: dict[str, dict[str, Any]] = {}
    for other in usage_queues(obj) or ():
        found, _ = _queue(api, other)
        if found is not None:
            others[other] = found
    for line in explain(obj, queue, events, queue_error, others):
        typer.echo(line)


def _queue(api: Any, name: str) -> tuple[dict[str, Any] | None, str]:
    """The Queue, or why it cannot be read."""
    from kubernetes import client

    from sluice.kube.errors import API_ERRORS, Failure, classify

    try:
        found = client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    except API_ERRORS as err:
        gone = classify(err) is Failure.GONE
        return None, "not found" if gone else _denied(err, "read the queue")
    return cast(dict[str, Any], found), ""


def _members(items: list[dict[str, Any]]) -> tuple[list[PodMember], list[PublishedJob]]:
    """The managed plain pods among these, and a line for each one sluice cannot read."""
    refs = [f"{_meta(i).get('namespace')}/pod/{_meta(i).get('name')}" for i in items]
    members, unreadable = read_members(zip(refs, items, strict=True))
    lines = [
        PublishedJob(ns, name, "-", "unreadable", reason=one.error)
        for one in unreadable
        for ns, _, name in [one.ref.partition("/")]
    ]
    return members, lines


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], obj.get("metadata") or {})


def _pod_lines(items: list[dict[str, Any]]) -> list[PublishedJob]:
    """The workloads of plain pods these pods form, as the operator forms them."""
    members, unreadable = _members(items)
    found, _ = plain_pod_workloads(members)
    return [pod_workload_line(w) for w in found.values()] + unreadable


def _why_pods(
    given: str, namespace: str | None, kubeconfig: str | None, context: str | None
) -> None:
    """`job why --kind Pod`: the workload of plain pods ``pod/NAME`` or ``pod-group/GROUP``."""
    from kubernetes import client

    from sluice.kube import context_namespace
    from sluice.kube.errors import API_ERRORS

    named = pod_workload_name(given, namespace or context_namespace(kubeconfig, context))
    if named is None:
        fail(f"{given!r}: give the workload as [NAMESPACE/]pod/NAME or [NAMESPACE/]pod-group/GROUP")
    ns, name = named
    api = _api(kubeconfig, context)
    core = client.CoreV1Api(api)
    short = name.partition("/")[2]
    try:
        if name.startswith(GROUP_PREFIX):
            listing = core.list_namespaced_pod(ns, label_selector=f"{POD_GROUP_LABEL}={short}")
        else:
            listing = core.list_namespaced_pod(ns, field_selector=f"metadata.name={short}")
    except API_ERRORS as err:
        fail(_denied(err, f"list pods in namespace {ns}"))
    members, unreadable = _members([api.sanitize_for_serialization(p) for p in listing.items])
    if unreadable:
        fail(f"{ns}/{name}: {unreadable[0].reason}")
    workload = plain_pod_workloads(members)[0].get(f"{ns}/{name}")
    if workload is None:
        fail(f"{ns}/{name}: no pod of it is held or admitted by sluice")
    queue, queue_error = _queue(api, workload.members[0].queue)
    events: list[dict[str, Any]] = []
    try:
        found = core.list_namespaced_event(ns, field_selector="involvedObject.kind=Pod")
        events = [api.sanitize_for_serialization(e) for e in found.items]
    except API_ERRORS:
        pass  # Events are a courtesy: the pods' own annotations carry the decision
    for line in explain_pods(workload, queue, events, queue_error):
        typer.echo(line)


def _with_kind(api: Any, item: Any, adapter: Adapter) -> dict[str, Any]:
    """An object as JSON, with its kind and apiVersion (a listing's items have none)."""
    obj = cast(dict[str, Any], api.sanitize_for_serialization(item))
    obj.setdefault("kind", adapter.kind)
    obj.setdefault("apiVersion", adapter.api_version)
    return obj
