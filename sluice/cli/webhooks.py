"""``sluice webhooks serve``: the admission webhook server."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Annotated

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

DEFAULT_OPERATOR_USER = "system:serviceaccount:sluice-system:sluice-operator"


def register(app: typer.Typer) -> None:
    group(app, "webhooks", "Admission webhooks that enforce the queue rules.").command("serve")(
        serve
    )


def serve(
    tls_cert_file: Annotated[
        Path, typer.Option(help="PEM serving certificate (reloaded on change).")
    ],
    tls_key_file: Annotated[Path, typer.Option(help="PEM private key (reloaded on change).")],
    port: Annotated[int, typer.Option(help="HTTPS port.")] = 8443,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "0.0.0.0",
    kubeconfig: Kubeconfig = None,
    operator_user: Annotated[
        list[str] | None,
        typer.Option(help="User allowed to clear spec.suspend on managed jobs (repeatable)."),
    ] = None,
    protected_job_user: Annotated[
        list[str] | None,
        typer.Option(
            help="User or group allowed to set sluice.dev/preemptable on jobs, besides the"
            " operator (repeatable)."
        ),
    ] = None,
    max_queue_depth: Annotated[
        int, typer.Option(help="Deepest allowed queue level under root.")
    ] = DEFAULT_MAX_QUEUE_DEPTH,
    shutdown_delay: Annotated[
        float,
        typer.Option(
            help="Seconds to keep serving (not ready) after SIGTERM, while the Service stops"
            " routing to this replica; then in-flight requests drain."
        ),
    ] = 5.0,
    workload_kind: WorkloadKinds = None,
    log_level: LogLevel = "info",
) -> None:
    """Serve /validate/queues, /mutate/queues, /validate/jobs, /mutate/jobs, /validate/pods,
    /validate/workloads and /mutate/workloads over HTTPS."""
    from sluice.kube import KubeConfigError, api_client
    from sluice.webhooks.cache import KubeFacts, QueueCache, QueueWatcher
    from sluice.webhooks.handlers import Context
    from sluice.webhooks.server import serve as run_server
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

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        async def capacity() -> None:
            while True:
                try:
                    await facts.refresh_capacity()
                except Exception as err:  # noqa: BLE001 - a warning source, never fatal
                    logging.getLogger("sluice.webhooks").warning(
                        "event=capacity-refresh-failed error=%r", err
                    )
                await asyncio.sleep(60)

        task = asyncio.create_task(capacity())
        try:
            await run_server(ctx, host, port, tls, stop, shutdown_delay=shutdown_delay)
        finally:
            task.cancel()
            watcher.stop()

    asyncio.run(main())
