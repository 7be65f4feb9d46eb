"""``sluice dashboard``: the operator's queue dashboard, served locally from a cluster's
Queues and Jobs (read-only; needs only the right to list and watch them)."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer

from sluice.cli.common import Kubeconfig, KubeContext, fail


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard)


def dashboard(
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    port: Annotated[int, typer.Option(help="Local port to serve the page on.")] = 8081,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
) -> None:
    """Serve the live queue dashboard on http://HOST:PORT/ until interrupted."""
    from sluice.dashboard.feed import Feed
    from sluice.dashboard.server import serve
    from sluice.dashboard.view import DashboardView
    from sluice.kube import KubeConfigError, api_client

    try:
        api = api_client(kubeconfig, context)
    except KubeConfigError as err:
        fail(str(err))
    view = DashboardView()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        feed = Feed(api, view)
        server = asyncio.create_task(serve(view, host, port, stop))
        await asyncio.sleep(0.1)
        if server.done():
            server.result()  # a port in use, say: say so
        feed.start()
        typer.echo(f"sluice dashboard on http://{host}:{port}/ (Ctrl-C stops it)", err=True)
        try:
            await server
        finally:
            feed.stop.set()

    try:
        asyncio.run(main())
    except OSError as err:
        fail(f"cannot serve on {host}:{port}: {err}")
