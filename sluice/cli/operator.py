"""``sluice operator run``: the Kopf operator with the scheduling loop."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from sluice.api.constants import CONFIGMAP_NAME, DEFAULT_MAX_QUEUE_DEPTH
from sluice.cli.common import (
    Kubeconfig,
    LogLevel,
    WorkloadKinds,
    fail,
    group,
    setup_logging,
    workload_kinds,
)
from sluice.operator.exiting import STOP_SECONDS

Namespace = Annotated[str, typer.Option(help="Namespace of the Lease and the scheduler ConfigMap.")]
LeaseName = Annotated[str, typer.Option(help="Name of the leader-election Lease.")]
ConfigMapName = Annotated[
    str,
    typer.Option(help="Name of the ConfigMap holding scheduler.yaml (the chart's: per release)."),
]
Identity = Annotated[str, typer.Option(help="Lease holder identity (default: host-pid).")]
HealthPort = Annotated[int, typer.Option(help="Port of /healthz and /readyz (0: off).")]
MetricsPort = Annotated[int, typer.Option(help="Prometheus metrics port (0: off).")]
DashboardPort = Annotated[int, typer.Option(help="Port of the read-only queue dashboard (0: off).")]
LeaseSeconds = Annotated[
    int,
    typer.Option(
        min=3,
        help="Lease duration; renewed every third of it (at most 5 s); followers try again"
        " when it expires.",
    ),
]
ResyncSeconds = Annotated[float, typer.Option(help="Cycle at least this often.")]
FullPassSeconds = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="Run the full pass (positions, pending reasons, per-queue metrics) at most"
        " this often, and once after the last change, when changes pause for a fifth of"
        " this (for at most the resync more); decisions, and the queue statuses after"
        " them, never wait for it.",
    ),
]
MaxQueueDepth = Annotated[int, typer.Option(help="Deepest allowed queue level under root.")]
StopSeconds = Annotated[
    float,
    typer.Option(
        min=1.0,
        help="Once stopping (a signal, a lost Lease), end after this long at the latest,"
        " naming in the log what had not stopped; keep it below the pod's"
        " terminationGracePeriodSeconds.",
    ),
]


def register(app: typer.Typer) -> None:
    group(app, "operator", "The operator: watches, the Lease and the scheduling loop.").command(
        "run"
    )(run)


def run(
    kubeconfig: Kubeconfig = None,
    namespace: Namespace = "sluice-system",
    lease_name: LeaseName = "sluice-operator",
    config_map_name: ConfigMapName = CONFIGMAP_NAME,
    identity: Identity = "",
    health_port: HealthPort = 8080,
    metrics_port: MetricsPort = 9090,
    dashboard_port: DashboardPort = 8081,
    lease_seconds: LeaseSeconds = 15,
    resync_seconds: ResyncSeconds = 10.0,
    full_pass_seconds: FullPassSeconds = 5.0,
    max_queue_depth: MaxQueueDepth = DEFAULT_MAX_QUEUE_DEPTH,
    stop_seconds: StopSeconds = STOP_SECONDS,
    workload_kind: WorkloadKinds = None,
    log_level: LogLevel = "info",
) -> None:
    """Run the operator (every replica watches; only the Lease holder writes)."""
    from sluice.kube import KubeConfigError, api_client
    from sluice.operator.run import OperatorOptions, run_operator

    kinds = tuple(sorted(workload_kinds(workload_kind)))
    setup_logging(log_level)
    try:
        api = api_client(kubeconfig)
    except KubeConfigError as err:
        fail(str(err))
    options = OperatorOptions(
        namespace=namespace,
        lease_name=lease_name,
        config_map_name=config_map_name,
        identity=identity,
        health_port=health_port,
        metrics_port=metrics_port,
        dashboard_port=dashboard_port,
        lease_seconds=lease_seconds,
        renew_seconds=max(1.0, min(5.0, lease_seconds / 3)),
        resync_seconds=resync_seconds,
        full_pass_seconds=full_pass_seconds,
        max_queue_depth=max_queue_depth,
        workload_kinds=kinds,
        stop_seconds=stop_seconds,
    )
    raise typer.Exit(asyncio.run(run_operator(api, options)))
