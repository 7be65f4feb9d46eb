"""Listing and watching, as every reader of the API server does it: paged lists of raw JSON,
and a list-then-watch that resumes from the last resourceVersion seen, lists again when that
version has expired (410) and backs off on any other failure."""

from __future__ import annotations

import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kubernetes import watch

from sluice.kube.errors import Failure, classify, message

log = logging.getLogger("sluice.kube")

Item = dict[str, Any]
Items = Sequence[Mapping[str, Any]]
Lister = Callable[..., Any]
"""A list call of the kubernetes client (``list_namespaced_job``, ``partial(
CustomObjectsApi.list_cluster_custom_object, group, version, plural)``, ...)."""

PAGE = 500
BACKOFF_FIRST, BACKOFF_MOST = 0.5, 30.0


def drain(response: Any) -> bytes:
    """Read a raw answer and hand its connection back to the pool (urllib3 keeps it
    otherwise, and every later request would pay for a new TLS handshake)."""
    data: bytes = response.data
    response.release_conn()
    return data


def pages(call: Lister, **kwargs: Any) -> Iterator[tuple[list[Item], str | None]]:
    """Each page of a list as raw JSON (client models cost more than the request), with the
    listing's resourceVersion."""
    token: str | None = None
    while True:
        answer = call(limit=PAGE, _continue=token, _preload_content=False, **kwargs)
        page = json.loads(drain(answer))
        meta = page.get("metadata") or {}
        yield list(page.get("items") or ()), meta.get("resourceVersion")
        token = meta.get("continue")
        if not token:
            return


def list_all(call: Lister, **kwargs: Any) -> tuple[list[Item], str | None]:
    """Every item of a list, and the resourceVersion to watch from."""
    items: list[Item] = []
    version: str | None = None
    for page, listed in pages(call, **kwargs):
        items += page
        version = listed
    return items, version


class Watching(ABC):
    """A watch from a resourceVersion, in a daemon thread until ``stop``, listing anew
    (``listing``, each kind of watch its own) when it has no version to watch from.

    ``on_event(type, object)`` gets every ADDED, MODIFIED or DELETED. A watch that ends (the
    server's timeout, a dropped connection) resumes from the last version seen; an expired
    version lists again at once; any other failure waits first, doubling up to 30 s."""

    def __init__(
        self,
        name: str,
        call: Lister,
        on_event: Callable[[str, Mapping[str, Any]], None],
        timeout_seconds: int = 300,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self.call = call
        self.on_event = on_event
        self.timeout_seconds = timeout_seconds
        self.kwargs = kwargs
        self.version: str | None = None
        """Where the next watch starts; None: list first."""
        self.listings = 0
        self.stop = threading.Event()

    @abstractmethod
    def listing(self) -> None:
        """List everything anew and set ``version`` to where to watch from."""

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=f"watch-{self.name}", daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        backoff = BACKOFF_FIRST
        while not self.stop.is_set():
            try:
                if self.version is None:
                    self.listing()
                    self.listings += 1
                self.watch()
                backoff = BACKOFF_FIRST
            except Exception as err:  # noqa: BLE001 - the watch must outlive any failure
                failure = classify(err)
                if failure is Failure.EXPIRED:
                    log.info("event=watch-expired source=%s", self.name)
                    self.version = None
                    continue
                log.warning(
                    "event=watch-error source=%s failure=%s error=%s",
                    self.name,
                    failure.value,
                    message(err),
                )
                self.stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MOST)

    def watch(self) -> None:
        """One watch from ``version`` until the server ends it or ``stop``; an expired
        version raises (the client turns the server's ERROR event into an ApiException)."""
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        call = self.call
        events = stream.stream(  # type: ignore[no-untyped-call]
            # Through a function that names no return type, the client hands each event's
            # object over as parsed, not dumped and parsed again (twice) into its model.
            lambda **kwargs: call(**kwargs),
            resource_version=self.version,
            timeout_seconds=self.timeout_seconds,
            allow_watch_bookmarks=True,
            **self.kwargs,
        )
        for event in events:
            if self.stop.is_set():
                stream.stop()  # type: ignore[no-untyped-call]
                return
            kind, obj = event.get("type"), event.get("raw_object")  # as the listing: JSON
            if not isinstance(obj, dict):
                continue
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self.version = str(version)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.on_event(kind, obj)


class ListWatch(Watching):
    """A list, then a watch from its resourceVersion (``Watching``): ``on_listing(items)``
    gets every listing whole (the first, and each after an expired version)."""

    def __init__(
        self,
        name: str,
        call: Lister,
        on_listing: Callable[[Items], None],
        on_event: Callable[[str, Mapping[str, Any]], None],
        timeout_seconds: int = 300,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, call, on_event, timeout_seconds, **kwargs)
        self.on_listing = on_listing

    def listing(self) -> None:
        """List everything anew, hand it to ``on_listing`` and note where to watch from."""
        items, self.version = list_all(self.call, **self.kwargs)
        self.on_listing(items)
