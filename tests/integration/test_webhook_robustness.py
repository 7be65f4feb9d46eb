"""Bad input never crashes the server or earns a 500; TLS rotates without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webhook_harness import Webhook, make_review

from sluice.webhooks import server
from sluice.webhooks.review import ReviewError, parse_review


def with_object(review: dict[str, Any], obj: object) -> dict[str, Any]:
    review["request"]["object"] = obj
    return review


async def post_raw(webhook: Webhook, path: str, body: bytes) -> tuple[int, str]:
    async with webhook.session.post(
        webhook.url + path, data=body, headers={"Content-Type": "application/json"}
    ) as resp:
        return resp.status, await resp.text()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "body is not JSON"),
        (b"[]", "body is not a JSON object"),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}
            ).encode(),
            "apiVersion must be",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}).encode(),
            "kind must be AdmissionReview",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "request is missing",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"operation": "CREATE"},
                }
            ).encode(),
            "request.uid is missing",
        ),
        (b"\xff\xfe\x00", "body is not JSON"),
        (
            json.dumps(with_object(make_review("Job", {}), {"metadata": ["j"]})).encode(),
            "request.object.metadata is not an object",
        ),
        (
            json.dumps(
                make_review("Job", {"metadata": {"labels": {"sluice.dev/queue-name": 7}}})
            ).encode(),
            "request.object.metadata.labels is not a map of strings",
        ),
        (
            json.dumps(
                make_review("Job", {"metadata": {}}, operation="UPDATE", old={"spec": "x"})
            ).encode(),
            "request.oldObject.spec is not an object",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "u", "operation": ["CREATE"]},
                }
            ).encode(),
            "request.operation",
        ),
    ],
)
async def test_malformed_reviews_get_a_400_with_the_reason(
    webhook: Webhook, body: bytes, reason: str
) -> None:
    status, text = await post_raw(webhook, "/validate/jobs", body)
    assert status == 400
    assert reason in json.loads(text)["error"]


async def test_an_object_of_the_wrong_kind_is_a_400(webhook: Webhook) -> None:
    review = make_review("Pod", {"metadata": {"name": "p"}})
    status, body = await webhook.review("/validate/queues", review)
    assert status == 400 and "reviews Queue objects, got Pod" in body["error"]


async def test_an_oversized_body_is_refused_with_413(webhook: Webhook) -> None:
    status, _ = await post_raw(webhook, "/validate/jobs", b"x" * (server.MAX_BODY_BYTES + 1))
    assert status == 413


async def test_a_body_that_never_finishes_gets_a_408(
    webhook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "BODY_TIMEOUT_SECONDS", 0.3)
    host, port = webhook.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(webhook.ca_file))
    reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
    writer.write(
        b"POST /validate/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 1000\r\n\r\n{"apiVersion"'
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readline(), timeout=5)
    assert b"408" in head
    writer.close()


async def test_a_client_closing_mid_request_leaves_the_server_serving(webhook: Webhook) -> None:
    host, port = webhook.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(webhook.ca_file))
    for _ in range(5):
        _, writer = await asyncio.open_connection(host, int(port), ssl=context)
        writer.write(b"POST /validate/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
        await writer.drain()
        writer.close()
    async with webhook.session.get(webhook.url + "/healthz") as resp:
        assert resp.status == 200


async def test_a_client_gone_before_its_body_is_read_is_one_line_not_a_traceback(
    webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    """The API server closes its connection when a review takes longer than its webhook
    timeout (a busy replica) or when it restarts: the server logs one warning, counts the
    request as abandoned, and no traceback reaches its log."""
    host, port = webhook.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(webhook.ca_file))
    with caplog.at_level(logging.INFO):
        _, writer = await asyncio.open_connection(host, int(port), ssl=context)
        writer.write(b"POST /validate/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
        await writer.drain()
        writer.close()
        for _ in range(100):
            if any("event=request-abandoned" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
    abandoned = [r for r in caplog.records if "event=request-abandoned" in r.getMessage()]
    assert len(abandoned) == 1 and "path=/validate/jobs" in abandoned[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    async with webhook.session.get(webhook.url + "/metrics") as resp:
        text = await resp.text()
    assert 'sluice_webhook_requests_total{outcome="abandoned",path="/validate/jobs"} 1.0' in text


async def test_health_readiness_and_metrics(webhook: Webhook) -> None:
    async with webhook.session.get(webhook.url + "/readyz") as resp:
        assert resp.status == 503  # nothing synced yet
    webhook.cache.replace([])
    async with webhook.session.get(webhook.url + "/readyz") as resp:
        assert resp.status == 200
    await webhook.review(
        "/validate/jobs",
        make_review(
            "Job",
            {"metadata": {"name": "j", "labels": {"sluice.dev/queue-name": "gone"}}},
            namespace="n",
        ),
    )
    async with webhook.session.get(webhook.url + "/metrics") as resp:
        text = await resp.text()
    assert 'sluice_webhook_denials_total{rule="job-queue-missing"} 1.0' in text
    assert 'sluice_webhook_requests_total{outcome="denied",path="/validate/jobs"} 1.0' in text


async def test_a_rotated_certificate_is_served_to_new_connections(webhook: Webhook) -> None:
    from webhook_harness import CertificateAuthority

    new_ca = CertificateAuthority.create("rotated-ca")
    rotated_ca_file = webhook.ca_file.with_name("rotated.crt")
    rotated_ca_file.write_bytes(new_ca.cert_pem)
    fresh_ctx = ssl.create_default_context(cafile=str(rotated_ca_file))
    async with webhook.session.get(webhook.url + "/healthz") as resp:
        assert resp.status == 200  # a keep-alive connection opened before the rotation
    # Rotation as a Secret volume does it: new files, no signal; the server notices by itself.
    new_ca.issue_serving().write(webhook.tls.cert_file, webhook.tls.key_file)
    served_new = False
    for _ in range(200):
        try:
            async with (
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=fresh_ctx)) as fresh,
                fresh.get(webhook.url + "/healthz") as resp,
            ):
                served_new = resp.status == 200
                break
        except aiohttp.ClientConnectorCertificateError:
            await asyncio.sleep(0.05)
    assert served_new
    old = ssl.create_default_context(cafile=str(webhook.ca_file))
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=old)) as stale,
            stale.get(webhook.url + "/healthz"),
        ):
            pass
    async with webhook.session.get(webhook.url + "/healthz") as resp:
        assert resp.status == 200  # the connection opened before still serves


async def test_a_half_written_key_pair_keeps_the_old_certificate(webhook: Webhook) -> None:
    from webhook_harness import CertificateAuthority

    other = CertificateAuthority.create("other-ca")
    pair = webhook.ca_file.with_name("other")
    other.issue_serving().write(pair.with_suffix(".crt"), pair.with_suffix(".key"))
    webhook.tls.cert_file.write_bytes(pair.with_suffix(".crt").read_bytes())  # key not yet
    with pytest.raises(ssl.SSLError):
        webhook.tls.reload()
    context = ssl.create_default_context(cafile=str(webhook.ca_file))
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.get(webhook.url + "/healthz") as resp,
    ):
        assert resp.status == 200  # still the original certificate and key


# Fuzzing ------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_fuzz_the_request_parser_raises_only_review_errors(body: bytes) -> None:
    with contextlib.suppress(ReviewError):
        parse_review(body)


MUTATION_BASES = [
    make_review(
        "Job",
        {"metadata": {"name": "j", "labels": {"sluice.dev/queue-name": "q"}}, "spec": {}},
        namespace="n",
    ),
    make_review(
        "Job",
        {"metadata": {"name": "j", "labels": {"sluice.dev/queue-name": "q"}}, "spec": {}},
        operation="UPDATE",
        old={"metadata": {"name": "j", "labels": {"sluice.dev/queue-name": "q"}}, "spec": {}},
        namespace="n",
    ),
    make_review(
        "Queue",
        {"metadata": {"name": "t"}, "spec": {"parent": "q", "weight": 2}},
        operation="UPDATE",
        old={"metadata": {"name": "t"}, "spec": {"parent": "root"}},
    ),
    make_review("Queue", None, operation="DELETE", old={"metadata": {"name": "q"}, "status": {}}),
]


def mutated_reviews() -> st.SearchStrategy[dict[str, object]]:
    def mutate(base: dict[str, object], path: list[str], value: object) -> dict[str, object]:
        review = json.loads(json.dumps(base))
        target = review
        for key in path[:-1]:
            target = target.setdefault(key, {}) if isinstance(target, dict) else target
        if isinstance(target, dict):
            target[path[-1]] = value
        return review

    paths = st.sampled_from(
        [
            ["request", "object"],
            ["request", "object", "spec"],
            ["request", "object", "spec", "parent"],
            ["request", "object", "spec", "guarantee"],
            ["request", "object", "spec", "capability"],
            ["request", "object", "spec", "state"],
            ["request", "object", "spec", "suspend"],
            ["request", "object", "spec", "template"],
            ["request", "oldObject", "spec", "suspend"],
            ["request", "object", "metadata"],
            ["request", "object", "metadata", "labels"],
            ["request", "object", "status"],
            ["request", "oldObject"],
            ["request", "oldObject", "spec"],
            ["request", "oldObject", "status"],
            ["request", "operation"],
            ["request", "userInfo"],
            ["request", "kind"],
            ["request", "namespace"],
            ["request", "subResource"],
        ]
    )
    return st.builds(mutate, st.sampled_from(MUTATION_BASES), paths.map(list), json_values)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(review=mutated_reviews())
def test_mutated_reviews_never_get_a_5xx_nor_an_internal_error(
    webhook_sync: object, review: dict[str, object]
) -> None:
    """Malformed parts are answered on purpose (400, or a denial naming the field), never by
    the catch-all that reports an unexpected failure."""
    status, bodies = webhook_sync(review)  # type: ignore[operator]
    assert status < 500
    assert not any("InternalError" in body for body in bodies), bodies


@pytest.fixture
def webhook_sync() -> object:
    """The app behind a plain-HTTP test server on its own loop, for hypothesis' sync tests."""
    from aiohttp.test_utils import TestClient, TestServer
    from webhook_harness import FakeFacts

    from sluice.webhooks.cache import QueueCache
    from sluice.webhooks.handlers import Context

    cache = QueueCache()
    cache.replace(
        [{"metadata": {"name": "root"}}, {"metadata": {"name": "q"}, "spec": {"parent": "root"}}]
    )
    ctx = Context(cache=cache, facts=FakeFacts(), operator_users=frozenset())
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(server.build_app(ctx)), loop=loop)
    loop.run_until_complete(client.start_server())

    def post(review: dict[str, object]) -> tuple[int, list[str]]:
        async def go() -> tuple[int, list[str]]:
            statuses, bodies = [], []
            for path in server.ROUTES:
                resp = await client.post(path, json=review)
                bodies.append(await resp.text())
                statuses.append(resp.status)
            return max(statuses), bodies

        return loop.run_until_complete(go())

    yield post
    loop.run_until_complete(client.close())
    loop.close()
