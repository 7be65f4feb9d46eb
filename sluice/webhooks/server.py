"""The webhook HTTPS server: routes, limits, readiness and graceful shutdown.

No request makes it crash or answer 500: a body that is not an AdmissionReview gets a 400
with the reason, an oversized body a 413, a body that dribbles in too slowly a 408, and an
unexpected failure inside a rule a denial that says the request could not be evaluated.
Headers that dribble in too slowly (connection.HeaderDeadline) and a TLS handshake that never
completes cost the client its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from sluice.webhooks import handlers
from sluice.webhooks.connection import HeaderDeadline, mark_headers
from sluice.webhooks.handlers import Answer, Context
from sluice.webhooks.metrics import WebhookMetrics
from sluice.webhooks.review import Request, ReviewError, parse_review, respond
from sluice.webhooks.tls import ReloadingTLS

log = logging.getLogger("sluice.webhooks")

MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server's own request size limit
BODY_TIMEOUT_SECONDS = 10.0
HEADER_TIMEOUT_SECONDS = 10.0  # the API server gives a webhook call 10 s by default
HANDSHAKE_TIMEOUT_SECONDS = 10.0

Handler = Callable[[Request, Context], Awaitable[Answer]]

ROUTES: dict[str, Handler] = {
    "/validate/queues": handlers.validate_queue,
    "/validate/topologies": handlers.validate_topology,
    "/validate/flavors": handlers.validate_flavor,
    "/mutate/queues": handlers.mutate_queue,
    "/validate/jobs": handlers.validate_job,
    "/mutate/jobs": handlers.mutate_job,
    "/validate/pods": handlers.validate_pod,
    "/mutate/pods": handlers.mutate_pod,
    "/validate/workloads": handlers.validate_workload,
    "/mutate/workloads": handlers.mutate_workload,
    "/validate/rayclusters": handlers.validate_ray_cluster,
}

CTX_KEY: web.AppKey[Context] = web.AppKey("ctx", Context)
METRICS_KEY: web.AppKey[WebhookMetrics] = web.AppKey("metrics", WebhookMetrics)
STOPPING_KEY: web.AppKey[asyncio.Event] = web.AppKey("stopping", asyncio.Event)


def _bad_request(reason: str, status: int = 400) -> web.Response:
    return web.json_response({"error": reason}, status=status)


def _review_route(path: str, handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def route(request: web.Request) -> web.Response:
        metrics = request.app[METRICS_KEY]
        started = time.perf_counter()
        outcome = "error"
        try:
            try:
                async with asyncio.timeout(BODY_TIMEOUT_SECONDS):
                    body = await request.read()
            except TimeoutError:
                outcome = "bad_request"
                return _bad_request("request body not received in time", 408)
            except web.HTTPRequestEntityTooLarge:
                outcome = "bad_request"
                return _bad_request(f"request body over {MAX_BODY_BYTES} bytes", 413)
            except ConnectionResetError:
                # The client went away mid-request (the API server gave up after its webhook
                # timeout, or restarted): nobody is left to answer, and nothing is wrong here.
                outcome = "abandoned"
                log.warning("event=request-abandoned path=%s", path)
                return _bad_request("the connection closed before the request was read")
            try:
                review = parse_review(body)
            except ReviewError as err:
                outcome = "bad_request"
                return _bad_request(str(err))
            try:
                answer, verdict = await handler(review, request.app[CTX_KEY])
            except ReviewError as err:
                outcome = "bad_request"
                return _bad_request(str(err))
            except Exception as err:
                # A failure inside a rule denies with a pointer to the logs; it never crashes
                # the server or answers 500.
                log.exception("event=review-failed path=%s", path)
                answer = respond(
                    review.uid,
                    allowed=False,
                    message=f"sluice could not evaluate this request ({type(err).__name__});"
                    " see the sluice-webhooks logs",
                    reason="InternalError",
                )
                return web.json_response(answer)
            outcome = "allowed" if verdict.allowed else "denied"
            if not verdict.allowed:
                metrics.denials.labels(verdict.rule or "unknown").inc()
            return web.json_response(answer, dumps=json.dumps)
        finally:
            metrics.requests.labels(path, outcome).inc()
            metrics.latency.labels(path, outcome).observe(time.perf_counter() - started)

    return route


def build_app(ctx: Context, metrics: WebhookMetrics | None = None) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[mark_headers])
    app[CTX_KEY] = ctx
    app[METRICS_KEY] = metrics or WebhookMetrics()
    app[STOPPING_KEY] = asyncio.Event()
    for path, handler in ROUTES.items():
        app.router.add_post(path, _review_route(path, handler))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(request: web.Request) -> web.Response:
        if request.app[STOPPING_KEY].is_set():
            return web.Response(text="shutting down", status=503)
        if request.app[CTX_KEY].cache.synced:
            return web.Response(text="ok")
        return web.Response(text="queue cache not synced yet", status=503)

    async def metrics_route(request: web.Request) -> web.Response:
        m = request.app[METRICS_KEY]
        m.queues.set(len(request.app[CTX_KEY].cache.queues))
        return web.Response(
            body=generate_latest(m.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_route)
    return app


async def serve(
    ctx: Context,
    host: str,
    port: int,
    tls: ReloadingTLS,
    stop: asyncio.Event,
    shutdown_timeout: float = 10.0,
    header_timeout: float = HEADER_TIMEOUT_SECONDS,
    handshake_timeout: float = HANDSHAKE_TIMEOUT_SECONDS,
    tls_check_interval: float = 2.0,
    shutdown_delay: float = 0.0,
) -> None:
    """Serve until ``stop`` is set; then report not ready but keep serving for shutdown_delay
    (the Service's endpoints take a moment to drop this replica, and with failurePolicy Fail a
    refused connection would refuse a tenant's request), then stop listening and drain
    in-flight requests for up to shutdown_timeout. A second stop ends the delay early."""
    app = build_app(ctx)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    factory = runner.server
    assert factory is not None  # set by setup()
    listener = await asyncio.get_running_loop().create_server(
        lambda: HeaderDeadline(factory(), header_timeout),
        host,
        port,
        ssl=tls.context,
        ssl_handshake_timeout=handshake_timeout,
        reuse_address=True,
    )
    log.info("event=serving host=%s port=%s", host, port)
    reload_task = asyncio.create_task(tls.watch(tls_check_interval))
    try:
        await stop.wait()
        stop.clear()  # a second stop (another SIGTERM or Ctrl-C) cuts the delay short
        app[STOPPING_KEY].set()
        log.info("event=stopping delay=%ss", shutdown_delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), shutdown_delay)
    finally:
        reload_task.cancel()
        log.info("event=draining timeout=%ss", shutdown_timeout)
        listener.close()  # no new connections; open ones finish their requests
        await runner.cleanup()
