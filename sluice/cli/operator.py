"""``sluice operator run``: the Kopf operator with the scheduling loop."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

from sluice.api.constants import DEFAULT_MAX_QUEUE_DEPTH


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        help="The operator: watches, the Lease and the scheduling loop.", no_args_is_help=True
    )
    group.command("run")(run)
    app.add_typer(group, name="operator")


def run(
    kubeconfig: Annotated[
        str | None, typer.Option(help="Kubeconfig; default $KUBECONFIG, then in-cluster.")
    ] = None,
    namespace: Annotated[
        str, typer.Option(help="Namespace of the Lease and the sluice-scheduler ConfigMap.")
    ] = "sluice-system",
    lease_name: Annotated[
        str, typer.Option(help="Name of the leader-election Lease.")
    ] = "sluice-operator",
    identity: Annotated[str, typer.Option(help="Lease holder identity (default: host-pid).")] = "",
    health_port: Annotated[int, typer.Option(help="Liveness endpoint port (0: off).")] = 8080,
    metrics_port: Annotated[int, typer.Option(help="Prometheus metrics port (0: off).")] = 9090,
    lease_seconds: Annotated[int, typer.Option(help="Lease duration.")] = 15,
    resync_seconds: Annotated[float, typer.Option(help="Cycle at least this often.")] = 10.0,
    max_queue_depth: Annotated[
        int, typer.Option(help="Deepest allowed queue level under root.")
    ] = DEFAULT_MAX_QUEUE_DEPTH,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Run the operator (every replica watches; only the Lease holder writes)."""
    from sluice.kube import KubeConfigError, api_client
    from sluice.operator.run import OperatorOptions, run_operator

    logging.basicConfig(
        level=log_level.upper(),
        format="time=%(asctime)s level=%(levelname)s logger=%(name)s %(message)s",
    )
    logging.getLogger("kopf").setLevel(logging.WARNING)
    try:
        api = api_client(kubeconfig)
    except KubeConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    options = OperatorOptions(
        namespace=namespace,
        lease_name=lease_name,
        identity=identity,
        health_port=health_port,
        metrics_port=metrics_port,
        lease_seconds=lease_seconds,
        renew_seconds=max(1.0, lease_seconds / 3),
        resync_seconds=resync_seconds,
        max_queue_depth=max_queue_depth,
    )
    asyncio.run(run_operator(api, options))
