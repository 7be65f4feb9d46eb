"""Shared pieces of the webhook integration tests: a fake fact source, a test CA, reviews."""

from __future__ import annotations

import asyncio
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from sluice.api.resources import Resources
from sluice.api.workloads import BY_KIND, Adapter
from sluice.webhooks.cache import QueueCache
from sluice.webhooks.handlers import Context
from sluice.webhooks.server import ReloadingTLS, serve

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hack"))
from controlplane.pki import CertificateAuthority

OPERATOR = "system:serviceaccount:sluice-system:sluice-operator"
PROTECTORS = ("platform-admin", "group:unused", "sluice-admins")
# Short enough for the slow-client tests to see a cut, long enough for loopback clients.
HEADER_TIMEOUT = 0.5
HANDSHAKE_TIMEOUT = 0.5


@dataclass
class FakeFacts:
    """Cluster facts a test sets by hand."""

    holding: set[str] = field(default_factory=set)
    namespaces: dict[str, str] = field(default_factory=dict)
    namespace_labels_by_name: dict[str, dict[str, str]] = field(default_factory=dict)
    capacity: Resources | None = None
    levels: frozenset[str] = frozenset()
    flavors: frozenset[str] = frozenset()
    asked: list[str] = field(default_factory=list)
    gate: asyncio.Event | None = None  # when set by a test, answers wait for it
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Queues the API server holds that the cache may not have seen yet."""
    read: list[str] = field(default_factory=list)
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Workloads the API server holds, by kind/namespace/name."""

    async def queue_holds_jobs(self, queue: str) -> bool:
        self.asked.append(queue)
        if self.gate is not None:
            await self.gate.wait()
        return queue in self.holding

    async def namespace_default_queue(self, namespace: str) -> str | None:
        return self.namespaces.get(namespace)

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        return self.namespace_labels_by_name.get(namespace, {})

    def cluster_capacity(self) -> Resources | None:
        return self.capacity

    async def topology_levels(self) -> frozenset[str]:
        return self.levels

    async def flavor_names(self) -> frozenset[str]:
        return self.flavors

    async def stored_queue(self, name: str) -> dict[str, Any] | None:
        self.read.append(name)
        return self.stored.get(name)

    async def stored_workload(
        self, adapter: Adapter, namespace: str, name: str
    ) -> dict[str, Any] | None:
        return self.workloads.get(f"{adapter.kind}/{namespace}/{name}")


@dataclass
class Webhook:
    url: str
    cache: QueueCache
    facts: FakeFacts
    ca_file: Path
    tls: ReloadingTLS
    session: aiohttp.ClientSession
    stop: asyncio.Event

    async def review(self, path: str, review: dict[str, Any]) -> tuple[int, Any]:
        async with self.session.post(self.url + path, json=review) as resp:
            try:
                body = await resp.json()
            except aiohttp.ContentTypeError:
                body = await resp.text()
            return resp.status, body


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ca(tmp_path: Path) -> tuple[CertificateAuthority, Path]:
    authority = CertificateAuthority.create("sluice-integration-ca")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(authority.cert_pem)
    return authority, ca_file


async def _webhook(
    tmp_path: Path, ca: tuple[CertificateAuthority, Path], shutdown_delay: float = 0.0
) -> AsyncIterator[Webhook]:
    authority, ca_file = ca
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    authority.issue_serving().write(cert, key)
    tls = ReloadingTLS(cert, key)
    cache = QueueCache()
    facts = FakeFacts()
    ctx = Context(
        cache=cache,
        facts=facts,
        operator_users=frozenset({OPERATOR}),
        protected_job_users=PROTECTORS,
        workloads=frozenset(BY_KIND),  # every kind sluice gates (docs/workloads.md)
    )
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve(
            ctx,
            "127.0.0.1",
            port,
            tls,
            stop,
            shutdown_timeout=2,
            header_timeout=HEADER_TIMEOUT,
            handshake_timeout=HANDSHAKE_TIMEOUT,
            tls_check_interval=0.1,
            shutdown_delay=shutdown_delay,
        )
    )
    client_ctx = ssl.create_default_context(cafile=str(ca_file))
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx))
    url = f"https://127.0.0.1:{port}"
    for _ in range(100):
        try:
            async with session.get(url + "/healthz") as resp:
                if resp.status == 200:
                    break
        except aiohttp.ClientError:
            await asyncio.sleep(0.05)
    yield Webhook(url, cache, facts, ca_file, tls, session, stop)
    await session.close()
    stop.set()
    await task


ReviewMaker = Callable[..., dict[str, Any]]


def make_review(
    kind: str,
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    user: str = "alice",
    groups: tuple[str, ...] = ("system:authenticated",),
    options: dict[str, Any] | None = None,
    namespace: str = "",
    uid: str = "uid-1",
    sub_resource: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    group = {
        "Queue": "scheduling.sluice.dev",
        "Flavor": "scheduling.sluice.dev",
        "Job": "batch",
    }.get(kind, "")
    name = ((obj or old or {}).get("metadata") or {}).get("name", "")
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
        "operation": operation,
        "name": name,
        "namespace": namespace,
        "userInfo": {"username": user, "groups": list(groups)},
        "object": obj,
        "oldObject": old,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    if options is not None:
        request["options"] = options
    if dry_run:
        request["dryRun"] = True
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
