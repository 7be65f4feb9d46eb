"""Queues the webhooks' Queue cache has not seen yet, on a real API server: sluice's webhook
server runs with its cache held at what it listed when it started (``held_webhook_server``),
so the moment a watch lags the API server lasts the whole test, and what the webhooks do in
that moment is seen every time, not one start in several."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sluice.webhooks.cache import QueueCache

from .components import Operator, held_webhook_server, refused_by_sluice, registered_webhooks
from .helpers import Kubectl, KubectlError, controlplane, queue, unique_name, wait_for


@contextmanager
def held_webhooks(
    cluster: controlplane.Cluster, kubectl: Kubectl, workdir: Path
) -> Iterator[QueueCache]:
    """The held webhook server, registered, once the API server sends it Queues."""
    with (
        held_webhook_server(cluster, kubectl, workdir) as (port, cache),
        registered_webhooks(kubectl, port, cluster.ca_cert.read_bytes()),
    ):
        wait_for(lambda: refused_by_sluice(kubectl), timeout=20, what="the webhooks active")
        yield cache


def stored(kubectl: Kubectl, name: str) -> bool:
    return bool(kubectl.run("get", "queue", name, "--ignore-not-found", "-o", "name").strip())


def job(name: str, namespace: str, queue_name: str) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"sluice.dev/queue-name": queue_name},
        },
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


def test_the_operator_creates_default_under_webhooks_that_have_not_seen_root(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    """A fresh cluster: no reserved queue, the webhooks up before the operator. The webhooks
    never see root through their cache here; default must be created all the same."""
    kubectl.run("create", "namespace", "sluice-system", check=False)
    for name in ("default", "root"):  # as a fresh cluster: none (no webhooks registered yet)
        if stored(kubectl, name):
            body = '{"metadata": {"finalizers": null}}'
            kubectl.run("patch", "queue", name, "--type=merge", "-p", body)
            kubectl.run("delete", "queue", name, "--wait=true")
    with held_webhooks(control_plane, kubectl, tmp_path) as cache:
        assert "root" not in cache.queues
        op = Operator(control_plane, tmp_path, unique_name("reserved"), lease_name=unique_name("l"))
        try:
            wait_for(lambda: stored(kubectl, "default"), timeout=30, what="default created")
        finally:
            op.stop()
        assert kubectl.get("queue", "default")["spec"]["parent"] == "root"
        assert "root" not in cache.queues  # still held: root was read from the API server
        log = op.logs()
        assert log.index("event=queue-created queue=root") < log.index(
            "event=queue-created queue=default"
        )


def test_a_parent_and_its_child_in_one_apply_and_a_job_at_once(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path: Path, namespace: str
) -> None:
    for name, spec in (("root", {}), ("default", {"parent": "root"})):
        if not stored(kubectl, name):
            kubectl.create(queue(name, **spec))
    with held_webhooks(control_plane, kubectl, tmp_path) as cache:
        dept, team = unique_name("dept"), unique_name("team")
        kubectl.apply([queue(dept), queue(team, parent=dept, weight=2)])
        assert kubectl.get("queue", team)["spec"]["parent"] == dept
        assert dept not in cache.queues  # it was read from the API server

        # A child listed before its parent: refused, the parent created; applying again works.
        lab, group = unique_name("lab"), unique_name("group")
        manifest = [queue(lab, parent=group), queue(group)]
        with pytest.raises(KubectlError, match=f"queue {lab}: parent {group} does not exist"):
            kubectl.apply(manifest)
        assert stored(kubectl, group) and not stored(kubectl, lab)
        kubectl.apply(manifest)
        assert kubectl.get("queue", lab)["spec"]["parent"] == group

        # A job created right after its queue: held (suspended) and stored.
        fresh = unique_name("fresh")
        kubectl.create(queue(fresh))
        kubectl.create(job("j", namespace, fresh))
        assert kubectl.get("job", "j", namespace)["spec"]["suspend"] is True
        with pytest.raises(KubectlError, match="queue nowhere-at-all does not exist"):
            kubectl.create(job("k", namespace, "nowhere-at-all"))
