"""The client writes go through: its transport never tries a request twice, each request gives
up after a set time, and a gate (``WriteGate``) decides before every request whether it may
be sent at all.

A client's transport (urllib3) sends a request again, unasked, when its connection broke
before the answer (for PUT and DELETE), when the TLS handshake of its connection failed (for
every method), or when the server asked it to come back later: long after the writer last
checked whether it may write. Here nothing is sent again; a writer that wants another try
makes it, and that try meets the gate as the first did.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client

from sluice.kube.errors import Unsent

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

WRITERS = 8
"""Parallel writes one writer runs at once (a phase of the workloads' writes, the custom
objects' writes); the operator's connection pool holds them all."""


class WriteGate:
    """Whether a request may be sent now (``may_send``, asked before each one, and not
    closed), and how many are in flight. Closed, it stays closed: a process that stops sends
    nothing more, whatever it still had queued."""

    def __init__(self, may_send: Callable[[], bool] = lambda: True) -> None:
        self._may_send = may_send
        self._closed = False
        self._in_flight = 0
        self._idle = threading.Condition()

    def close(self) -> None:
        with self._idle:
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def enter(self) -> bool:
        """Whether a request may go now; if so it counts as in flight until ``leave``."""
        with self._idle:
            if self._closed or not self._may_send():
                return False
            self._in_flight += 1
            return True

    def leave(self) -> None:
        with self._idle:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Until no request is in flight, for ``timeout`` seconds at most; whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)


class WriteClient(client.ApiClient):
    """An API client whose requests are never sent twice by its transport, each bounded by
    ``timeout`` seconds (or the shorter one a call asks for), and each asked of ``gate``
    first: a request the gate keeps back raises ``Unsent``, and nothing goes out."""

    def __init__(
        self,
        configuration: client.Configuration,
        timeout: float | None = None,
        gate: WriteGate | None = None,
    ) -> None:
        cfg = copy.deepcopy(configuration)
        cfg.retries = False  # urllib3: no retry of any kind, the first error is raised
        super().__init__(cfg)
        self.timeout = timeout
        self.gate = gate or WriteGate()

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        if not self.gate.enter():
            raise Unsent(f"{method} {url.split('?', 1)[0]}: the writer may not write now")
        try:
            return super().call_api(
                method, url, header_params, body, post_params, self._timeout(_request_timeout)
            )
        finally:
            self.gate.leave()

    def _timeout(self, asked: Any) -> Any:
        """The shorter of the call's own timeout (a number) and the client's."""
        if self.timeout is None:
            return asked
        if isinstance(asked, int | float) and asked:
            return min(float(asked), self.timeout)
        return self.timeout


def write_client(
    api: client.ApiClient, timeout: float | None = None, gate: WriteGate | None = None
) -> WriteClient:
    """A ``WriteClient`` for the same cluster, as the same user agent, as ``api``."""
    writer = WriteClient(api.configuration, timeout, gate)
    writer.user_agent = api.user_agent
    return writer
