"""Connection-level defences and shutdown of the real HTTPS server: slow clients lose their
connection, patient keep-alive clients keep theirs, and a stop drains what is in flight."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import aiohttp
from webhook_harness import HEADER_TIMEOUT, CertificateAuthority, Webhook, _webhook, make_review

# Bounds on how long a test waits for the server to act; never assertions on speed.
PATIENCE_STEPS = 200
STEP = 0.05


def _address(webhook: Webhook) -> tuple[str, int]:
    host, port = webhook.url.removeprefix("https://").split(":")
    return host, int(port)


async def _closed_by_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Dribble header bytes until the server drops the connection (or patience runs out)."""
    for i in range(PATIENCE_STEPS):
        try:
            writer.write(f"X-Slow-{i}: y\r\n".encode())
            await writer.drain()
            data = await asyncio.wait_for(reader.read(1024), timeout=STEP)
        except TimeoutError:
            continue
        except (ConnectionError, ssl.SSLError):
            return True
        if data == b"":
            return True
        if data:
            return False  # the server answered headers it never completely received
    return False


async def test_headers_dribbled_byte_by_byte_lose_the_connection(webhook: Webhook) -> None:
    host, port = _address(webhook)
    context = ssl.create_default_context(cafile=str(webhook.ca_file))
    reader, writer = await asyncio.open_connection(host, port, ssl=context)
    writer.write(b"POST /validate/jobs HTTP/1.1\r\nHost: x\r\n")
    assert await _closed_by_server(reader, writer)
    writer.close()
    async with webhook.session.get(webhook.url + "/healthz") as resp:
        assert resp.status == 200


async def test_a_tls_handshake_that_never_starts_loses_the_connection(webhook: Webhook) -> None:
    host, port = _address(webhook)
    reader, writer = await asyncio.open_connection(host, port)  # TCP only, no ClientHello
    data = b"x"
    for _ in range(PATIENCE_STEPS):
        try:
            data = await asyncio.wait_for(reader.read(1024), timeout=STEP)
            break
        except TimeoutError:
            continue
        except ConnectionError:
            data = b""
            break
    assert data == b""
    writer.close()


async def test_an_idle_keep_alive_connection_is_not_cut_between_requests(
    webhook: Webhook,
) -> None:
    webhook.cache.replace([{"metadata": {"name": "root"}}])
    review = make_review("Job", {"metadata": {"name": "j"}}, namespace="n")
    connector = aiohttp.TCPConnector(
        ssl=ssl.create_default_context(cafile=str(webhook.ca_file)), limit=1
    )
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(2):
            async with session.post(webhook.url + "/validate/jobs", json=review) as resp:
                assert resp.status == 200
                await resp.read()
            await asyncio.sleep(HEADER_TIMEOUT * 3)  # idle is not slow: no clock runs
        async with session.post(webhook.url + "/validate/jobs", json=review) as resp:
            assert resp.status == 200
            assert (await resp.json())["response"]["allowed"] is True


async def test_stopping_drains_the_request_in_flight(webhook: Webhook) -> None:
    webhook.cache.replace(
        [{"metadata": {"name": "root"}}, {"metadata": {"name": "dept"}, "spec": {"parent": "root"}}]
    )
    webhook.facts.gate = asyncio.Event()
    queue = {"metadata": {"name": "team"}, "spec": {"parent": "dept"}}
    in_flight = asyncio.create_task(
        webhook.review("/validate/queues", make_review("Queue", queue, uid="drain-1"))
    )
    for _ in range(PATIENCE_STEPS):
        if webhook.facts.asked:
            break
        await asyncio.sleep(STEP)
    assert webhook.facts.asked == ["dept"]  # the request is inside the rules, waiting
    webhook.stop.set()
    host, port = _address(webhook)
    refused = False
    for _ in range(PATIENCE_STEPS):
        try:
            _, writer = await asyncio.open_connection(host, port)
        except ConnectionError:
            refused = True
            break
        writer.close()
        await asyncio.sleep(STEP)
    assert refused  # the listener is closed while the request is still in flight
    assert not in_flight.done()
    webhook.facts.gate.set()
    status, body = await in_flight
    assert status == 200
    assert body["response"] == {"uid": "drain-1", "allowed": True}


async def test_after_a_stop_it_reports_not_ready_but_still_answers_during_the_delay(
    tmp_path: Path, ca: tuple[CertificateAuthority, Path]
) -> None:
    async for webhook in _webhook(tmp_path, ca, shutdown_delay=600):
        webhook.cache.replace([{"metadata": {"name": "root"}}])
        webhook.stop.set()
        ready = 200
        for _ in range(PATIENCE_STEPS):
            async with webhook.session.get(webhook.url + "/readyz") as resp:
                ready = resp.status
            if ready == 503:
                break
            await asyncio.sleep(STEP)
        assert ready == 503
        context = ssl.create_default_context(cafile=str(webhook.ca_file))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as fresh:
            review = make_review("Job", {"metadata": {"name": "j"}}, namespace="n", uid="late")
            async with fresh.post(webhook.url + "/validate/jobs", json=review) as resp:
                assert resp.status == 200  # a new connection is still served
                assert (await resp.json())["response"] == {"uid": "late", "allowed": True}
        # leaving the loop stops the server a second time, which ends the delay
