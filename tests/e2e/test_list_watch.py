"""The one list-and-watch (sluice.kube.watch) against the real API server: a version too old
to watch from (410) lists again; a dropped connection resumes the watch where it was, with
no listing, and nothing created meanwhile is missed. The operator's watches of workloads
and pods start where its own listing ended, and a listing again forgets what was deleted
while none watched."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import urllib.request
from collections.abc import Iterator
from functools import partial
from typing import Any
from urllib.parse import urlparse

import pytest
from kubernetes import client

from sluice.api.constants import QUEUE_LABEL
from sluice.api.workloads.job import JOB
from sluice.kube import api_client
from sluice.kube.watch import ListWatch
from sluice.operator.run import prime
from sluice.operator.state import ClusterState
from sluice.operator.watches import resumed
from sluice.scheduler.snapshot import readers

from .helpers import Kubectl, controlplane, wait_for


class Proxy:
    """A TCP relay to the API server whose connections can all be cut at once."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.server.accept()
            except OSError:
                return
            far = socket.create_connection(self.target)
            with self.lock:
                self.open += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                end.close()

    def cut(self) -> None:
        """Every connection drops mid-stream, as a load balancer restarting drops them."""
        with self.lock:
            doomed, self.open = self.open, []
        for end in doomed:
            with contextlib.suppress(OSError):  # already closed by its other end
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.server.close()
        self.cut()


def compact_etcd(cluster: controlplane.Cluster) -> int:
    """Compact etcd's history up to now, as the API server does every five minutes: no watch
    may start from an older version. The revision compacted to."""
    state = json.loads((cluster.state_dir / "state.json").read_text())
    base = f"http://127.0.0.1:{state['etcd_port']}/v3/kv"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{base}/{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return dict(json.loads(answer.read()))

    revision = int(post("range", {"key": "AA=="})["header"]["revision"])  # any key: the header
    post("compaction", {"revision": revision, "physical": True})
    return revision


@pytest.fixture
def proxy(control_plane: controlplane.Cluster) -> Iterator[Proxy]:
    url = urlparse(api_client(str(control_plane.kubeconfig)).configuration.host)
    relay = Proxy((url.hostname or "127.0.0.1", url.port or 443))
    yield relay
    relay.close()


def test_expired_versions_list_again_and_a_dropped_watch_resumes(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    namespace: str,
    proxy: Proxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = api_client(str(control_plane.kubeconfig))
    api.configuration.host = f"https://127.0.0.1:{proxy.port}"
    core = client.CoreV1Api(api)
    listed: list[list[str]] = []
    seen: list[tuple[str, str]] = []

    def names(items: Any) -> list[str]:
        return sorted(i["metadata"]["name"] for i in items)

    def create(name: str) -> None:
        template = {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
        kubectl.apply({"apiVersion": "v1", "kind": "PodTemplate",
                       "metadata": {"name": name, "namespace": namespace}, **template})  # fmt: skip

    create("first")
    # PodTemplates: the local API server watches them from etcd, not from its cache.
    watch = ListWatch(
        "podtemplates",
        partial(core.list_namespaced_pod_template, namespace),
        lambda items: listed.append(names(items)),
        lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
        timeout_seconds=60,
    )
    compact_etcd(control_plane)
    watch.version = "1"  # compacted away: the API server answers 410 Gone
    caplog.set_level(logging.INFO, logger="sluice.kube")
    watch.start()
    try:
        wait_for(lambda: listed, timeout=30, what="the listing after 410")
        assert "event=watch-expired source=podtemplates" in caplog.text
        assert listed == [["first"]]
        create("second")
        wait_for(lambda: ("ADDED", "second") in seen, timeout=30, what="second watched")
        proxy.cut()  # the watch's connection drops mid-stream
        create("third")
        kubectl.run("delete", "podtemplate", "first", "-n", namespace)
        wait_for(lambda: ("DELETED", "first") in seen, timeout=30, what="the watch resumed")
        assert ("ADDED", "third") in seen  # created while it was cut: not missed
        assert "event=watch-error source=podtemplates failure=unsure" in caplog.text
        assert len(listed) == 1  # resumed from the last version seen, not listed again
    finally:
        watch.stop.set()


def test_the_operators_watches_start_where_its_listing_ended_and_forget_what_they_missed(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    namespace: str,
) -> None:
    api = api_client(str(control_plane.kubeconfig))
    state = ClusterState(readers=readers(workload_kinds=[JOB.kind]))

    def create(name: str) -> None:
        kubectl.apply({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": name, "namespace": namespace,
                                    "labels": {QUEUE_LABEL: "team"}},
                       "spec": {"suspend": True, "template": {"spec": {
                           "restartPolicy": "Never",
                           "containers": [{"name": "c", "image": "i"}]}}}})  # fmt: skip

    def stored() -> set[str]:
        return {k.partition("/")[2] for k in state.workloads if k.startswith(f"{namespace}/")}

    create("a")
    create("b")
    versions = prime(api, state, (JOB,))
    assert stored() == {"a", "b"}
    jobs = resumed(api, state, (JOB,), versions)[0]
    jobs.start()
    try:
        create("c")
        wait_for(lambda: "c" in stored(), timeout=30, what="c watched")
        assert jobs.listings == 0  # it went on from the operator's own listing
    finally:
        jobs.stop.set()
    kubectl.run("delete", "job", "a", "-n", namespace)  # while nothing watches
    # What the watch does when its version has expired (410, as the test above shows; the
    # API server's watch cache serves Jobs from versions etcd has compacted away).
    jobs.listing()
    assert stored() == {"b", "c"}  # a forgotten: the listing no longer held it
    assert jobs.version is not None and int(jobs.version) > int(versions[JOB.kind] or 0)
    kubectl.run("delete", "job", "b", "-n", namespace)
    prime(api, state, (JOB,))  # a new leader's listing forgets the same way
    assert stored() == {"c"}
