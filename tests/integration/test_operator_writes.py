"""The operator's writes over a real HTTPS connection whose link breaks as the Lease is lost:
once the replica no longer holds the Lease, nothing is sent, on a first try or again
(docs/operations.md, "A replica that loses its Lease").

The operator's clients are built as ``run_operator`` builds them (``writes_of``)."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from webhook_harness import CertificateAuthority

from sluice.kube.writer import WriteGate, write_client
from sluice.operator.executor import Executor
from sluice.operator.leader import LeaseElector
from sluice.operator.plan import Plan
from sluice.operator.run import writes_of
from sluice.operator.state import ClusterState
from sluice.operator.writes import PodChange, Write

JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "j1",
        "namespace": "ns",
        "uid": "uid-j1",
        "resourceVersion": "7",
        "labels": {"sluice.dev/queue-name": "team"},
    },
    "spec": {"suspend": True},
}


@dataclass
class Link:
    """What the server does with each connection and request; the defaults answer all."""

    before_handshake: Callable[[int], bool] = lambda n: False
    """Given the connection's number (1, 2, ...): True cuts it before its TLS handshake."""
    on_request: Callable[[str], str] = lambda method: "answer"
    """Given the method: "answer" (200, the job), "cut" (closed, no answer), "hang" (no
    answer, the connection kept open)."""


@dataclass
class Server:
    """An HTTPS server on 127.0.0.1 that records the request line of every request it gets."""

    context: ssl.SSLContext
    link: Link
    requests: list[str] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()
        for sock in self.held:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            if self.link.before_handshake(self.connections):
                raw.close()  # a FIN in the middle of the handshake, as a healed partition does
                continue
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self.context.wrap_socket(raw, server_side=True)
            stream = conn.makefile("rb")
            while line := stream.readline():
                length = 0
                while (header := stream.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                stream.read(length)
                method = line.decode().split()[0]
                self.requests.append(line.decode().strip())
                what = self.link.on_request(method)
                if what == "cut":
                    conn.close()
                    return
                if what == "hang":
                    self.held.append(conn)
                    return
                body = json.dumps(JOB).encode()
                head = (
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                )
                conn.sendall(head.encode() + body)
        except OSError:
            return


@dataclass
class Replica:
    """A replica's clients as run_operator builds them, and the Lease it believes it holds."""

    api: client.ApiClient
    elector: LeaseElector
    gate: WriteGate
    writer: client.ApiClient
    state: ClusterState

    def lose_lease(self) -> None:
        self.elector.is_leader = False


@pytest.fixture
def tls(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    authority = CertificateAuthority.create("sluice-writes-ca")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(authority.cert_pem)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    authority.issue_serving().write(cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, ca_file


@pytest.fixture
def link() -> Link:
    return Link()


@pytest.fixture
def server(tls: tuple[ssl.SSLContext, Path], link: Link) -> Iterator[Server]:
    running = Server(tls[0], link)
    yield running
    running.close()


def replica(server: Server, ca_file: Path, renew_seconds: float = 5.0) -> Replica:
    cfg = client.Configuration()
    cfg.host = f"https://127.0.0.1:{server.port}"
    cfg.ssl_ca_cert = str(ca_file)
    api = client.ApiClient(cfg)
    elector = LeaseElector(
        write_client(api), "sluice-system", "sluice-operator", "operator-b",
        lease_seconds=15, renew_seconds=renew_seconds,
    )  # fmt: skip
    elector.is_leader, elector.renewed_at = True, time.monotonic()
    state = ClusterState()
    state.on_workload("ADDED", JOB)
    return Replica(api, elector, *writes_of(api, elector), state)


REASON = Write(
    kind="reason",
    workload="ns/j1",
    patch={"metadata": {"annotations": {"sluice.dev/pending-reason": "position 1 in team"}}},
)


def test_a_write_whose_handshake_breaks_as_the_lease_is_lost_is_not_sent_later(
    server: Server, link: Link, tls: tuple[ssl.SSLContext, Path]
) -> None:
    """The issue's timeline: the write's new connection is cut in its TLS handshake, the
    Lease is lost meanwhile, and the link comes back: the transport must not send it then."""
    node = replica(server, tls[1])

    def cut_first(n: int) -> bool:
        if n == 1:
            node.lose_lease()
            return True
        return False

    link.before_handshake = cut_first
    executor = Executor(node.api, node.state, node.writer)

    assert executor.write(REASON) is None
    assert server.requests == []
    assert executor.unsure == {"ns/j1"}  # it may have landed, for all the executor knows


def test_a_deletion_whose_connection_breaks_as_the_lease_is_lost_is_sent_once(
    server: Server, link: Link, tls: tuple[ssl.SSLContext, Path]
) -> None:
    """urllib3's default retries send a DELETE again when its connection breaks before the
    answer (a PUT as well): here it reaches the API server once."""
    node = replica(server, tls[1])

    def cut_deletions(method: str) -> str:
        if method == "DELETE":
            node.lose_lease()
            return "cut"
        return "answer"

    link.on_request = cut_deletions
    executor = Executor(node.api, node.state, node.writer)
    evict = Write(kind="reclaim", workload="ns/j1", patch={}, pods=(PodChange("ns/p1", "u1"),))

    assert executor.write(evict) is None
    assert server.requests == ["DELETE /api/v1/namespaces/ns/pods/p1 HTTP/1.1"]


def test_a_write_that_gets_no_answer_gives_up_before_the_lease_can_pass(
    server: Server, link: Link, tls: tuple[ssl.SSLContext, Path]
) -> None:
    """A swallowed write (a partition) ends within the write timeout, so none is still on
    its way when another replica may take the Lease; its outcome is unknown, so the job is
    read again before the next decision."""
    link.on_request = lambda method: "hang" if method == "PATCH" else "answer"
    node = replica(server, tls[1], renew_seconds=0.4)
    executor = Executor(node.api, node.state, node.writer)
    ended = threading.Event()

    def write() -> None:
        executor.write(REASON)
        ended.set()

    threading.Thread(target=write, daemon=True).start()
    assert ended.wait(60), "the write never gave up"  # not a measure: it hangs without a timeout
    assert executor.unsure == {"ns/j1"}
    assert len(server.requests) == 1


def test_the_queued_writes_of_a_replica_that_lost_its_lease_stay_unsent(
    server: Server, link: Link, tls: tuple[ssl.SSLContext, Path]
) -> None:
    """Lost in the middle of a phase: the writes still queued behind it are abandoned."""
    node = replica(server, tls[1])
    answered = 0

    def lose_after_three(method: str) -> str:
        nonlocal answered
        answered += 1
        if answered == 3:
            node.lose_lease()
        return "answer"

    link.on_request = lose_after_three
    for i in range(2, 41):
        node.state.on_workload(
            "ADDED", {**JOB, "metadata": {**JOB["metadata"], "name": f"j{i}", "uid": f"u{i}"}}
        )
    executor = Executor(node.api, node.state, node.writer)
    reasons = tuple(
        Write(kind="reason", workload=f"ns/j{i}", patch=REASON.patch) for i in range(1, 41)
    )

    executor.run(Plan(reasons=reasons), node.elector.holds, writers=1)

    assert len(server.requests) == 3
    assert executor.stats.abandoned >= 1
    assert sum(executor.stats.by_kind.values()) == 3
