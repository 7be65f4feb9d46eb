"""Feeding a DashboardView from a cluster for ``sluice dashboard``: a list and then a watch
of Queues and of managed Jobs, each in a daemon thread, relisting when the watch expires or
fails (as the operator's watches do, with a back-off)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from sluice.api.constants import GROUP, PLURAL, QUEUE_LABEL, VERSION
from sluice.dashboard.view import DashboardView

log = logging.getLogger("sluice.dashboard")

Lister = Callable[..., Any]


class Feed:
    def __init__(self, api: client.ApiClient, view: DashboardView) -> None:
        self.api = api
        self.view = view
        self.stop = threading.Event()
        objects = client.CustomObjectsApi(api)
        batch = client.BatchV1Api(api)

        def queues(**kw: Any) -> Any:
            return objects.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kw)

        def jobs(**kw: Any) -> Any:
            # Raw JSON: tens of thousands of Jobs cost more as client models than as dicts.
            return batch.list_job_for_all_namespaces(
                label_selector=QUEUE_LABEL, **{"_preload_content": False, **kw}
            )

        self.sources: list[tuple[str, Lister, Callable[..., None]]] = [
            ("queues", queues, view.on_queue),
            ("jobs", jobs, view.on_job),
        ]

    def start(self) -> None:
        for name, lister, sink in self.sources:
            threading.Thread(
                target=self._run, args=(name, lister, sink), name=f"dashboard-{name}", daemon=True
            ).start()

    def _listing(self, lister: Lister) -> tuple[list[dict[str, Any]], str | None]:
        raw = lister()
        data = raw if isinstance(raw, dict) else _json(raw)
        return list(data.get("items") or []), (data.get("metadata") or {}).get("resourceVersion")

    def _run(self, name: str, lister: Lister, sink: Callable[..., None]) -> None:
        backoff = 0.5
        while not self.stop.is_set():
            try:
                items, version = self._listing(lister)
                for item in items:
                    if name == "jobs":
                        sink("ADDED", item, initial=True)
                    else:
                        sink("ADDED", item)
                backoff = 0.5
                for kind, obj in self._watch(lister, version):
                    sink(kind, obj)
            except ApiException as err:
                if err.status != 410:
                    log.warning("event=dashboard-watch-error source=%s status=%s", name, err.status)
                    self.stop.wait(backoff)
                    backoff = min(backoff * 2, 30.0)
            except Exception as err:  # noqa: BLE001 - the feed must survive any client failure
                log.warning("event=dashboard-watch-error source=%s error=%r", name, err)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _watch(self, lister: Lister, version: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(lister, resource_version=version, timeout_seconds=300):  # type: ignore[no-untyped-call]
            if self.stop.is_set():
                stream.stop()  # type: ignore[no-untyped-call]
                return
            kind, obj = event.get("type"), event.get("raw_object") or event.get("object")
            if kind == "ERROR":
                code = obj.get("code") if isinstance(obj, dict) else None
                raise ApiException(status=code or 500, reason="watch error")
            if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
                yield kind, obj


def _json(raw: Any) -> dict[str, Any]:
    import json

    data: dict[str, Any] = json.loads(raw.data)
    raw.release_conn()
    return data
