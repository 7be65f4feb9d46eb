"""``sluice job list`` and ``sluice job why``: where a tenant's jobs stand and why.

Both read only what the operator publishes on the tenant's own objects (the Job's
annotations, its Events) and the Queue, so a user who may read Jobs and Events in their
namespace and list Queues can use them; nothing is listed cluster-wide unless asked (-A).
"""

from __future__ import annotations

from typing import Annotated, Any, cast

import typer

from sluice.api.constants import GROUP, PLURAL, QUEUE_LABEL, VERSION
from sluice.cli.common import Kubeconfig, KubeContext, fail, group, table_console
from sluice.cli.job_report import explain, job_line, job_table

Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", help="Namespace of the jobs; default the context's namespace."
    ),
]


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


def _denied(err: Any, what: str) -> str:
    if err.status == 403:
        return f"not allowed to {what} (the API server said: {err.reason})"
    return f"cannot {what}: {err.status} {err.reason}"


def list_jobs(
    namespace: Namespace = None,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Jobs of every namespace.")
    ] = False,
    queue: Annotated[str | None, typer.Option(help="Only the jobs of this queue.")] = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """The managed jobs of a namespace: queue, state, position in the queue, the reason they
    wait and when they were admitted."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from sluice.kube import context_namespace

    api = _api(kubeconfig, context)
    batch = client.BatchV1Api(api)
    selector = f"{QUEUE_LABEL}={queue}" if queue else QUEUE_LABEL
    ns = namespace or context_namespace(kubeconfig, context)
    try:
        if all_namespaces:
            raw = batch.list_job_for_all_namespaces(label_selector=selector)
        else:
            raw = batch.list_namespaced_job(ns, label_selector=selector)
    except ApiException as err:
        fail(_denied(err, "list jobs" + ("" if all_namespaces else f" in namespace {ns}")))
    except OSError as err:
        fail(f"cannot reach the API server: {err}")
    lines = [line for item in raw.items if (line := job_line(api.sanitize_for_serialization(item)))]
    if not lines:
        where = "any namespace" if all_namespaces else f"namespace {ns}"
        typer.echo(f"no jobs of {'queue ' + queue if queue else 'any queue'} in {where}")
        return
    table_console().print(job_table(lines, all_namespaces))


def why(
    job: Annotated[str, typer.Argument(help="NAMESPACE/NAME of the job, or NAME with -n.")],
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """Why a job waits (the operator's reason and its position), or when it was admitted,
    with its queue's numbers and the Events sluice posted on it."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from sluice.kube import context_namespace

    ns, sep, name = job.rpartition("/")
    if not sep:
        ns, name = namespace or context_namespace(kubeconfig, context), job
    if not ns or not name:
        fail(f"{job!r}: give the job as NAMESPACE/NAME, or NAME with -n NAMESPACE")
    api = _api(kubeconfig, context)
    try:
        obj = api.sanitize_for_serialization(client.BatchV1Api(api).read_namespaced_job(name, ns))
    except ApiException as err:
        fail(f"job {ns}/{name} not found" if err.status == 404 else _denied(err, "read the job"))
    except OSError as err:
        fail(f"cannot reach the API server: {err}")
    queue_name = ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    queue: dict[str, Any] | None = None
    queue_error = ""
    if queue_name:
        try:
            queue = cast(
                dict[str, Any],
                client.CustomObjectsApi(api).get_cluster_custom_object(
                    GROUP, VERSION, PLURAL, queue_name
                ),
            )
        except ApiException as err:
            queue_error = "not found" if err.status == 404 else _denied(err, "read the queue")
    events: list[dict[str, Any]] = []
    try:
        listing = client.CoreV1Api(api).list_namespaced_event(
            ns, field_selector=f"involvedObject.kind=Job,involvedObject.name={name}"
        )
        events = [api.sanitize_for_serialization(e) for e in listing.items]
    except ApiException:
        pass  # Events are a courtesy: the job's own annotations carry the decision
    for line in explain(obj, queue, events, queue_error):
        typer.echo(line)
