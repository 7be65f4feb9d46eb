"""``sluice webhooks serve``: the admission webhook server."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sluice.api.constants import DEFAULT_MAX_QUEUE_DEPTH
from sluice.api.views import JOB_KIND
from sluice.api.workloads import BY_KIND
from sluice.cli.common import (
    Kubeconfig,
    LogLevel,
    WorkloadKinds,
    fail,
    group,
    setup_logging,
    workload_kinds,
)

if TYPE_CHECKING:
    from sluice.webhooks.cache import KubeFacts
    from sluice.webhooks.handlers import Context
    from sluice.webhooks.tls import ReloadingTLS

DEFAULT_OPERATOR_USER = "system:serviceaccount:sluice-system:sluice-operator"


def register(app: typer.Typer) -> None:
    group(app, "webhooks", "Admission webhooks that enforce the queue rules.").command("serve")(
        serve
    )


# The command's options, as typer reads them from the annotations.
TlsCertFile = Annotated[Path, typer.Option(help="PEM serving certificate (reloaded on change).")]
TlsKeyFile = Annotated[Path, typer.Option(help="PEM private key (reloaded on change).")]
Port = Annotated[int, typer.Option(help="HTTPS port.")]
Host = Annotated[str, typer.Option(help="Address to listen on.")]
OperatorUser = Annotated[
    list[str] | None,
    typer.Option(help="User allowed to clear spec.suspend on managed jobs (repeatable)."),
]
ProtectedJobUser = Annotated[
    list[str] | None,
    typer.Option(
        help="User or group allowed to set sluice.dev/preemptable on jobs, besides the"
        " operator (repeatable)."
    ),
]
MaxQueueDepth = Annotated[int, typer.Option(help="Deepest allowed queue level under root.")]
ShutdownDelay = Annotated[
    float,
    typer.Option(
        help="Seconds to keep serving (not ready) after SIGTERM, while the Service stops"
        " routing to this replica; then in-flight requests drain."
    ),
]

CAPACITY_SECONDS = 60.0
"""How often the cluster's capacity, which root's guarantees are warned against, is read."""


def serve(
    tls_cert_file: TlsCertFile,
    tls_key_file: TlsKeyFile,
    port: Port = 8443,
    host: Host = "0.0.0.0",
    kubeconfig: Kubeconfig = None,
    operator_user: OperatorUser = None,
    protected_job_user: ProtectedJobUser = None,
    max_queue_depth: MaxQueueDepth = DEFAULT_MAX_QUEUE_DEPTH,
    shutdown_delay: ShutdownDelay = 5.0,
    workload_kind: WorkloadKinds = None,
    log_level: LogLevel = "info",
) -> None:
    """Serve the admission reviews over HTTPS: /validate and /mutate of queues, jobs, pods and
    workloads, and /validate/topologies."""
    from sluice.kube import KubeConfigError, api_client
    from sluice.webhooks.cache import KubeFacts, QueueCache, QueueWatcher
    from sluice.webhooks.handlers import Context
    from sluice.webhooks.tls import ReloadingTLS

    kinds = workload_kinds(workload_kind)
    setup_logging(log_level)
    try:
        tls = ReloadingTLS(tls_cert_file, tls_key_file)
    except (OSError, ValueError) as err:
        raise typer.BadParameter(f"cannot load the TLS pair: {err}") from None
    try:
        api = api_client(kubeconfig)
    except KubeConfigError as err:
        fail(str(err))
    cache = QueueCache()
    facts = KubeFacts(api, workloads=[BY_KIND[k] for k in sorted(kinds) if k != JOB_KIND])
    ctx = Context(
        cache=cache,
        facts=facts,
        operator_users=frozenset(operator_user or [DEFAULT_OPERATOR_USER]),
        max_queue_depth=max_queue_depth,
        protected_job_users=tuple(protected_job_user or ()),
        workloads=kinds,
    )
    watcher = QueueWatcher(api, cache)
    watcher.start()
    try:
        asyncio.run(_serve(ctx, facts, Listen(host, port, tls, shutdown_delay)))
    finally:
        watcher.stop()


@dataclass(frozen=True)
class Listen:
    host: str
    port: int
    tls: ReloadingTLS
    shutdown_delay: float


async def _serve(ctx: Context, facts: KubeFacts, listen: Listen) -> None:
    """Serve until SIGTERM or SIGINT, reading the cluster's capacity meanwhile."""
    from sluice.webhooks.server import serve as run_server

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.create_task(_refresh_capacity(facts))
    try:
        await run_server(
            ctx, listen.host, listen.port, listen.tls, stop, shutdown_delay=listen.shutdown_delay
        )
    finally:
        task.cancel()


async def _refresh_capacity(facts: KubeFacts) -> None:
    while True:
        try:
            await facts.refresh_capacity()
        except Exception as err:  # noqa: BLE001 - a warning source, never fatal
            logging.getLogger("sluice.webhooks").warning(
                "event=capacity-refresh-failed error=%r", err
            )
        await asyncio.sleep(CAPACITY_SECONDS)
