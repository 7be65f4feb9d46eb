"""The write client: a gate asked before every request, a timeout on each, no retries."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client

from sluice.kube.errors import Unsent
from sluice.kube.writer import WriteClient, WriteGate, write_client


class Transport:
    """Stands for the client's REST layer: records what would have been sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        self.sent.append((method, kwargs.get("_request_timeout")))
        raise client.ApiException(status=404)  # an answer: what it says does not matter here


def recorded(timeout: float | None = 2.5, gate: WriteGate | None = None) -> tuple[Any, Transport]:
    writer = WriteClient(client.Configuration(), timeout, gate)
    transport = Transport()
    writer.rest_client = transport
    return client.CustomObjectsApi(writer), transport


def patch(objects: Any, **kwargs: Any) -> None:
    with pytest.raises(client.ApiException):
        objects.patch_namespaced_custom_object("batch", "v1", "ns", "jobs", "j", {}, **kwargs)


def test_no_request_goes_out_while_the_gate_says_no() -> None:
    holding = [False]
    objects, transport = recorded(gate=WriteGate(lambda: holding[0]))
    with pytest.raises(Unsent):
        objects.patch_namespaced_custom_object("batch", "v1", "ns", "jobs", "j", {})
    assert transport.sent == []
    holding[0] = True
    patch(objects)
    assert [method for method, _ in transport.sent] == ["PATCH"]


def test_a_closed_gate_stays_closed() -> None:
    gate = WriteGate(lambda: True)
    assert gate.enter()
    gate.leave()
    gate.close()
    assert not gate.enter()
    assert gate.closed


def test_each_request_gives_up_after_the_write_timeout_or_sooner() -> None:
    objects, transport = recorded(timeout=2.5)
    patch(objects)
    patch(objects, _request_timeout=10)
    patch(objects, _request_timeout=1)
    assert [timeout for _, timeout in transport.sent] == [2.5, 2.5, 1]


def test_the_transport_never_sends_a_request_twice() -> None:
    api = client.ApiClient(client.Configuration())
    api.user_agent = "sluice-operator/operator-b"
    writer = write_client(api, 2.5)
    retries = writer.rest_client.pool_manager.connection_pool_kw["retries"]
    assert retries is False or retries.total is False  # urllib3: the first error is raised
    assert writer.user_agent == "sluice-operator/operator-b"
    assert api.configuration.retries is None  # reads keep the client's own retries


def test_in_flight_requests_are_waited_for() -> None:
    gate = WriteGate()
    assert gate.enter()
    assert not gate.wait_idle(0)
    threading.Timer(0, gate.leave).start()
    assert gate.wait_idle(60)
