"""A replica started while the API server cannot be reached (restarted during an outage, or
cut off from it) waits for it and says why; it never crashes with a traceback, over and over,
before it has listed anything."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, ProtocolError

from sluice.operator import run, watches
from sluice.operator.state import ClusterState


async def test_the_first_listing_is_tried_again_until_the_api_server_answers(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    failures: list[BaseException] = [
        MaxRetryError(None, "/apis/scheduling.sluice.dev/v1beta1/queues", ProtocolError("reset")),  # type: ignore[arg-type]
        ApiException(status=503, reason="storage is (re)initializing"),
    ]
    calls: list[int] = []

    def prime(*_: Any) -> dict[str, str | None]:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return {"Job": "7"}

    monkeypatch.setattr(run, "prime", prime)
    state = ClusterState(loop=asyncio.get_running_loop())
    with caplog.at_level(logging.WARNING, logger="sluice.operator"):
        listed = await run.prime_until_listed(
            None,
            state,
            (),
            asyncio.Event(),
            retry_seconds=0.01,  # type: ignore[arg-type]
        )
    assert listed == {"Job": "7"}  # where the workloads' watch starts
    assert len(calls) == 3
    lines = [r.getMessage() for r in caplog.records if "event=list-failed" in r.getMessage()]
    assert len(lines) == 2
    assert "Max retries exceeded" in lines[0] or "reset" in lines[0]
    assert "storage is (re)initializing" in lines[1]


async def test_a_signal_while_waiting_for_the_api_server_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def prime(*_: Any) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(run, "prime", prime)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, stop.set)
    state = ClusterState(loop=asyncio.get_running_loop())
    listed = await asyncio.wait_for(
        run.prime_until_listed(None, state, (), stop, retry_seconds=10),  # type: ignore[arg-type]
        timeout=5,
    )
    assert listed is None


async def test_a_failure_that_is_not_the_api_servers_is_not_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def prime(*_: Any) -> None:
        raise KeyError("a bug, not an outage")

    monkeypatch.setattr(run, "prime", prime)
    state = ClusterState(loop=asyncio.get_running_loop())
    with pytest.raises(KeyError):
        await run.prime_until_listed(None, state, (), asyncio.Event(), retry_seconds=0.01)  # type: ignore[arg-type]


async def test_a_listing_that_fails_names_its_kind_in_the_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A kind whose CRD is missing (RayCluster beside RayJob): the operator waits, unready,
    # and its log says which listing it waits on.
    tries: list[int] = []

    def missing(**_: Any) -> Any:
        raise ApiException(status=404, reason="Not Found")

    def prime(*_: Any) -> dict[str, str | None]:
        tries.append(1)
        if len(tries) == 1:
            watches.list_into(missing, "ray.io/v1", "RayCluster", lambda *_: None)
        return {}

    monkeypatch.setattr(run, "prime", prime)
    state = ClusterState(loop=asyncio.get_running_loop())
    with caplog.at_level(logging.WARNING, logger="sluice.operator"):
        await run.prime_until_listed(None, state, (), asyncio.Event(), retry_seconds=0.01)  # type: ignore[arg-type]
    [line] = [r.getMessage() for r in caplog.records if "event=list-failed" in r.getMessage()]
    assert "listing='RayCluster ray.io/v1'" in line and "Not Found" in line
