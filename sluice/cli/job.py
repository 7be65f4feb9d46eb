"""``sluice job why NS/NAME``: why a job waits, where it stands, and what would have to free up."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from sluice.api.constants import (
    ADMITTED_AT_ANNOTATION,
    CONFIGMAP_NAME,
    GROUP,
    PENDING_REASON_ANNOTATION,
    PLURAL,
    QUEUE_LABEL,
    RECLAIMED_BY_ANNOTATION,
    VERSION,
)
from sluice.api.errors import InvalidObject
from sluice.api.views import JobPhase, job_from_object
from sluice.cli.common import Kubeconfig, fail, group
from sluice.cli.job_report import explain_pending
from sluice.cli.snapshot_io import Located, SnapshotError, build_snapshot


def register(app: typer.Typer) -> None:
    group(app, "job", "Ask sluice about a job.").command("why")(why)


def _live_objects(api: Any, namespace: str) -> list[Located]:
    from kubernetes import client

    serialize = api.sanitize_for_serialization
    out: list[Located] = []

    def add(kind: str, api_version: str, items: list[Any]) -> None:
        for item in items:
            obj = item if isinstance(item, dict) else serialize(item)
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", api_version)
            out.append(Located(f"cluster {kind}", obj))

    queues: Any = client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, PLURAL)
    add("Queue", f"{GROUP}/{VERSION}", queues["items"])
    add(
        "Job",
        "batch/v1",
        client.BatchV1Api(api).list_job_for_all_namespaces(label_selector=QUEUE_LABEL).items,
    )
    core = client.CoreV1Api(api)
    add("Namespace", "v1", core.list_namespace().items)  # their default queues
    add("Node", "v1", core.list_node().items)
    add(
        "PriorityClass",
        "scheduling.k8s.io/v1",
        client.SchedulingV1Api(api).list_priority_class().items,
    )
    with contextlib.suppress(client.exceptions.ApiException):  # absent: default config
        add("ConfigMap", "v1", [core.read_namespaced_config_map(CONFIGMAP_NAME, namespace)])
    return out


def why(
    job: Annotated[str, typer.Argument(help="NAMESPACE/NAME of the job.")],
    kubeconfig: Kubeconfig = None,
    namespace: Annotated[
        str, typer.Option(help="Namespace of the sluice-scheduler ConfigMap.")
    ] = "sluice-system",
) -> None:
    """Why a job is pending (its reason and position, re-derived now), or when it was admitted."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from sluice.kube import KubeConfigError, api_client
    from sluice.scheduler.cycle import run_cycle

    ns, sep, name = job.partition("/")
    if not sep or not ns or not name:
        fail(f"{job!r}: give the job as NAMESPACE/NAME")
    try:
        api = api_client(kubeconfig)
        obj = api.sanitize_for_serialization(client.BatchV1Api(api).read_namespaced_job(name, ns))
    except KubeConfigError as err:
        fail(str(err))
    except ApiException as err:
        fail(
            f"job {job} not found" if err.status == 404 else f"cannot read job {job}: {err.reason}"
        )
    try:
        view = job_from_object(obj)
    except InvalidObject as err:
        fail(str(err))
    if view is None:
        typer.echo(f"job {job} is not managed by sluice (no {QUEUE_LABEL} label)")
        return
    annotations = obj["metadata"].get("annotations") or {}
    if view.phase is JobPhase.COMPLETED:
        typer.echo(f"job {job} has finished (queue {view.queue})")
        return
    if view.phase.admitted:
        admitted = annotations.get(ADMITTED_AT_ANNOTATION, "at an unknown time")
        typer.echo(f"job {job} is admitted in queue {view.queue} ({admitted}); {view.phase.value}")
        return
    typer.echo(f"job {job} is pending in queue {view.queue}")
    if annotations.get(RECLAIMED_BY_ANNOTATION):
        typer.echo(f"  it was suspended to make room for {annotations[RECLAIMED_BY_ANNOTATION]}")
    if annotations.get(PENDING_REASON_ANNOTATION):
        typer.echo(f"  the operator's last word: {annotations[PENDING_REASON_ANNOTATION]}")
    try:
        items = _live_objects(api, namespace)
        # The sluice-scheduler ConfigMap among them is the configuration, as for the operator.
        snapshot = build_snapshot(items, datetime.now(UTC)).snapshot
    except (SnapshotError, ApiException) as err:
        fail(f"cannot re-derive the reason now: {err}")
    result = run_cycle(snapshot)
    for line in explain_pending(result, job, view.queue, view.request):
        typer.echo(f"  {line}")
