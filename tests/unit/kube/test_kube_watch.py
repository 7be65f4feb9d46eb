"""Listing and watching (``sluice.kube.watch``) against a scripted API server: the paged
listings, and the list-then-watch loop through the kubernetes client's own watch stream."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from urllib3.exceptions import ProtocolError

from sluice.kube.watch import BACKOFF_FIRST, BACKOFF_MOST, PAGE, ListWatch, list_all, pages


class Answer:
    """A raw answer of the client (``_preload_content=False``): a listing's body, or a
    watch's stream of one JSON event a line."""

    def __init__(self, body: Any = None, events: list[dict[str, Any]] | None = None) -> None:
        self.data = json.dumps(body).encode()
        self.lines = [json.dumps(e).encode() + b"\n" for e in events or []]
        self.status = 200
        self.released = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from self.lines

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        self.released = True


def item(name: str, version: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}}


def page(items: list[dict[str, Any]], version: int, token: str = "") -> Answer:
    return Answer({"metadata": {"resourceVersion": str(version), "continue": token},
                   "items": items})  # fmt: skip


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


class Server:
    """Answers each list call with the next of ``listings`` and each watch call with the next
    of ``watches`` (an Answer, or an exception raised as the client would raise it)."""

    def __init__(self, listings: list[Answer], watches: list[Answer | Exception]) -> None:
        self.listings = listings
        self.watches = watches
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Answer:
        self.calls.append(kwargs)
        script: list[Any] = self.watches if kwargs.get("watch") else self.listings
        answer = script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, Answer)
        return answer


class Stop(threading.Event):
    """A stop flag whose waits are recorded, not slept, and that is set at the ``last``."""

    def __init__(self, last: int) -> None:
        super().__init__()
        self.waits: list[float | None] = []
        self.last = last

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if len(self.waits) == self.last:
            self.set()
        return self.is_set()


def test_a_listing_is_read_page_by_page_each_connection_given_back() -> None:
    first, second = page([item("a", 3)], 10, token="t"), page([item("b", 4)], 11)
    server = Server([first, second], [])
    got = list(pages(server, label_selector="q"))
    assert got == [([item("a", 3)], "10"), ([item("b", 4)], "11")]
    asked = [(c["limit"], c["_continue"], c["_preload_content"], c["label_selector"])
             for c in server.calls]  # fmt: skip
    assert asked == [(PAGE, None, False, "q"), (PAGE, "t", False, "q")]
    assert first.released and second.released
    every = Server([page([item("a", 3)], 10, token="t"), page([], 12)], [])
    assert list_all(every) == ([item("a", 3)], "12")  # where to watch from: the last page's


def test_a_list_watch_resumes_lists_again_when_expired_and_backs_off_on_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    expired = {"code": 410, "reason": "Expired", "message": "too old resource version"}
    server = Server(
        [page([item("a", 3)], 5, token="t"), page([item("b", 4)], 10), page([item("b", 4)], 20)],
        [
            Answer(events=[event("ADDED", item("c", 11)), event("BOOKMARK", item("", 12))]),
            ProtocolError("connection dropped"),
            ProtocolError("connection dropped"),
            Answer(events=[event("ERROR", expired)]),
            Answer(events=[event("DELETED", item("b", 21))]),
            ProtocolError("connection dropped"),
        ],
    )
    listed: list[list[str]] = []
    seen: list[tuple[str, str]] = []
    watch = ListWatch(
        "things",
        server,
        lambda items: listed.append([i["metadata"]["name"] for i in items]),
        lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
        timeout_seconds=60,
    )
    watch.stop = stop = Stop(last=3)
    caplog.set_level(logging.INFO, logger="sluice.kube")
    watch.run()
    assert listed == [["a", "b"], ["b"]]  # the first listing, then one after the 410
    assert seen == [("ADDED", "c"), ("DELETED", "b")]  # no bookmark, no error
    watched = [c for c in server.calls if c.get("watch")]
    assert [c["resource_version"] for c in watched] == ["10", "12", "12", "12", "20", "21"]
    assert all(c["timeout_seconds"] == 60 and c["allow_watch_bookmarks"] for c in watched)
    # Each failure waits twice as long as the one before; a watch that ran resets the wait.
    assert stop.waits == [BACKOFF_FIRST, 2 * BACKOFF_FIRST, BACKOFF_FIRST]
    assert watch.listings == 2
    assert "event=watch-expired source=things" in caplog.text
    assert "event=watch-error source=things failure=unsure" in caplog.text


def test_the_wait_after_failures_stops_doubling_at_its_most() -> None:
    failures = 12
    server = Server([page([], 1)], [ProtocolError("refused")] * failures)
    watch = ListWatch("things", server, lambda items: None, lambda kind, obj: None)
    watch.stop = stop = Stop(last=failures)
    watch.run()
    assert stop.waits[:3] == [BACKOFF_FIRST, 2 * BACKOFF_FIRST, 4 * BACKOFF_FIRST]
    assert max(w or 0 for w in stop.waits) == BACKOFF_MOST
    assert stop.waits[-1] == BACKOFF_MOST


def test_a_watch_told_to_stop_ends_its_stream_at_the_next_event() -> None:
    events = [event("ADDED", item(name, v)) for name, v in (("a", 2), ("b", 3), ("c", 4))]
    server = Server([page([], 1)], [Answer(events=events)])
    seen: list[str] = []
    watch = ListWatch("things", server, lambda items: None, lambda kind, obj: None)

    def on_event(kind: str, obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        watch.stop.set()

    watch.on_event = on_event
    watch.run()
    assert seen == ["a"]
    assert watch.version == "2"  # where a later start resumes
