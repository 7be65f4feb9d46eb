"""The operator's listings and resumed watches (``sluice.operator.watches``) into the state,
against scripted listings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from sluice.api.constants import QUEUE_LABEL
from sluice.operator.state import ClusterState
from sluice.operator.watches import Listing, Resumed, list_anew, list_into, store_workload


class Page:
    """A raw listing page as the client answers with ``_preload_content=False``."""

    def __init__(self, items: list[dict[str, Any]], version: int, token: str = "") -> None:
        body = {"metadata": {"resourceVersion": str(version), "continue": token}, "items": items}
        self.data = json.dumps(body).encode()

    def release_conn(self) -> None:
        pass


class Lister:
    """A list call answering with ``pages`` in turn, recording each call."""

    def __init__(self, *pages: Page) -> None:
        self.pages = list(pages)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Page:
        self.calls.append(kwargs)
        return self.pages.pop(0)


def job(name: str, version: int, labelled: bool = True) -> dict[str, Any]:
    labels = {QUEUE_LABEL: "team"} if labelled else {}
    meta = {"name": name, "namespace": "ns", "resourceVersion": str(version), "labels": labels}
    return {"metadata": meta, "spec": {"suspend": True}}


def test_a_listing_stores_each_page_as_it_arrives_naming_kind_and_version() -> None:
    lister = Lister(Page([job("a", 3)], 10, token="t"), Page([job("b", 4)], 11))
    stored: list[tuple[str, str, str, str, int]] = []

    def store(event: str, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        stored.append((event, obj["apiVersion"], obj["kind"], name, len(lister.calls)))

    listed, version = list_into(lister, "batch/v1", "Job", store, QUEUE_LABEL)
    assert listed == {"ns/a", "ns/b"} and version == "11"
    # a stored before the second page was asked for: the whole listing is never held at once
    assert stored == [("ADDED", "batch/v1", "Job", "a", 1), ("ADDED", "batch/v1", "Job", "b", 2)]
    assert all(call["label_selector"] == QUEUE_LABEL for call in lister.calls)
    named = {**job("c", 5), "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}
    kinds: list[str] = []
    list_into(Lister(Page([named], 12)), "batch/v1", "Job", lambda e, o: kinds.append(o["kind"]))
    assert kinds == ["JobSet"]  # what the object names is kept


def test_listing_anew_forgets_what_the_listing_no_longer_holds_but_not_what_came_after() -> None:
    state = ClusterState()
    for name, version in (("kept", 5), ("deleted-unseen", 6), ("created-since", 12)):
        state.on_workload("ADDED", job(name, version))
    listing = Listing(Lister(Page([job("kept", 5)], 10)), "batch/v1", "Job",
                      state.on_workload, QUEUE_LABEL)  # fmt: skip
    state.wake.clear()
    assert list_anew(state, listing) == "10"
    assert set(state.workloads) == {"ns/kept", "ns/created-since"}
    assert state.wake.is_set()  # the forgotten job freed what it held: the loop looks again


def test_a_workload_whose_queue_label_went_away_leaves_and_only_jobs_reach_the_dashboard() -> None:
    state = ClusterState()
    shown: list[tuple[str, str]] = []

    class View:
        def on_job(self, event: str, obj: Mapping[str, Any]) -> None:
            shown.append((event, obj["metadata"]["name"]))

    store = store_workload(state, View())  # type: ignore[arg-type]
    store("ADDED", job("a", 3))
    store("ADDED", {**job("s", 4), "kind": "JobSet", "apiVersion": "jobset.x-k8s.io/v1alpha2"})
    assert set(state.workloads) == {"ns/a", "ns/s"}
    store("MODIFIED", job("a", 5, labelled=False))  # a watch's MODIFIED, its label removed
    assert set(state.workloads) == {"ns/s"}
    assert shown == [("ADDED", "a"), ("DELETED", "a")]  # the dashboard forgets it too


def test_a_resumed_watch_starts_from_the_listing_it_is_given_and_lists_anew_when_expired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = ClusterState()
    state.on_workload("ADDED", job("a", 5))
    lister = Lister(Page([job("b", 14)], 15))
    listing = Listing(lister, "batch/v1", "Job", state.on_workload, QUEUE_LABEL)
    watched_from: list[str | None] = []

    def watch(self: Resumed) -> None:
        watched_from.append(self.version)
        self.version = None if len(watched_from) == 1 else self.version  # as after a 410
        if len(watched_from) == 2:
            self.stop.set()

    monkeypatch.setattr(Resumed, "watch", watch)
    resumed = Resumed(state, listing, "10")
    assert resumed.name == "job" and resumed.kwargs == {"label_selector": QUEUE_LABEL}
    resumed.run()
    assert watched_from == ["10", "15"]  # from the operator's listing, then from its own
    assert resumed.listings == 1 and len(lister.calls) == 1
    assert set(state.workloads) == {"ns/b"}  # a, gone while unwatched, forgotten


@pytest.mark.parametrize(("status", "level"), [(404, "INFO"), (403, "ERROR")])
def test_a_kind_not_served_or_forbidden_lists_nothing_and_says_so(
    status: int, level: str, caplog: pytest.LogCaptureFixture
) -> None:
    from kubernetes import client

    from sluice.operator.watches import list_if_served

    def refused(**_: Any) -> Any:
        raise client.ApiException(status=status)

    state = ClusterState()
    with caplog.at_level("INFO", logger="sluice.operator"):
        list_if_served(Listing(refused, "resource.k8s.io/v1", "DeviceClass", state.on_device_class))
    assert [(r.levelname, "kind=DeviceClass" in r.getMessage()) for r in caplog.records] == [
        (level, True)
    ]
    assert not state.reads["DeviceClass"]


def test_any_other_failure_to_list_a_device_kind_is_raised() -> None:
    from kubernetes import client

    from sluice.operator.watches import list_if_served

    def broken(**_: Any) -> Any:
        raise client.ApiException(status=500)

    with pytest.raises(client.ApiException):
        list_if_served(Listing(broken, "resource.k8s.io/v1", "DeviceClass", lambda e, o: None))
