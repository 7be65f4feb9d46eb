"""Two operator replicas: only the Lease holder writes; a follower takes over when the leader
dies; a crash in the middle of a burst admits nothing twice and nothing over quota."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .components import Operator
from .helpers import Kubectl, controlplane, unique_name, wait_for
from .scenario import Scenario

LEASE_SECONDS = 6


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def pair(
    control_plane: controlplane.Cluster, kubectl: Kubectl, workdir: Path
) -> Iterator[tuple[Operator, Operator, str]]:
    kubectl.run("create", "namespace", "sluice-system", check=False)
    lease = unique_name("lease")
    first = Operator(
        control_plane, workdir, "replica-a", lease_name=lease, lease_seconds=LEASE_SECONDS
    )
    wait_for(lambda: holder(kubectl, lease) == "replica-a", timeout=30, what="replica-a leading")
    second = Operator(
        control_plane, workdir, "replica-b", lease_name=lease, lease_seconds=LEASE_SECONDS
    )
    try:
        yield first, second, lease
    finally:
        first.stop()
        second.stop()


def holder(kubectl: Kubectl, lease: str) -> str | None:
    found = kubectl.run(
        "get", "lease", lease, "-n", "sluice-system", "--ignore-not-found", "-o", "json"
    )
    if not found.strip():
        return None
    return json.loads(found)["spec"].get("holderIdentity")


def exit_code(operator: Operator, timeout: float) -> int:
    """The process's exit code once it has ended; its log if it has not."""
    try:
        return operator.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{operator.identity} still runs after {timeout} s:\n{operator.logs()[-4000:]}")


def logged_at(operator: Operator, event: str) -> datetime:
    """When the operator first logged ``event``."""
    for line in operator.logs().splitlines():
        if event in line:
            return datetime.strptime(line.split(" level=")[0], "time=%Y-%m-%d %H:%M:%S,%f")
    raise AssertionError(f"{operator.identity} never logged {event}")


def one_admitted(kubectl: Kubectl, namespace: str, name: str) -> Scenario:
    """A node, queue team, and its job ``name`` admitted by the leader."""
    s = Scenario(kubectl, namespace)
    s.node(4)
    s.queue("team")
    s.job(name, "team", 1)
    s.wait_admitted(name)
    return s


def test_only_the_leader_writes_and_a_follower_takes_over(
    pair: tuple[Operator, Operator, str], kubectl: Kubectl, namespace: str
) -> None:
    first, second, lease = pair
    s = one_admitted(kubectl, namespace, "one")
    assert holder(kubectl, lease) == "replica-a"
    assert "became-leader" not in second.logs()
    first.kill()  # a crash: the Lease is not released, it must expire
    s.job("two", "team", 1)
    s.wait_admitted("two", timeout=LEASE_SECONDS * 3 + 10)
    assert holder(kubectl, lease) == "replica-b"
    assert "became-leader" in second.logs()


def test_a_crash_in_the_middle_of_a_burst_admits_nothing_twice_or_over_quota(
    control_plane: controlplane.Cluster, kubectl: Kubectl, namespace: str, workdir: Path
) -> None:
    kubectl.run("create", "namespace", "sluice-system", check=False)
    lease = unique_name("lease")
    s = Scenario(kubectl, namespace)
    s.node(100)
    s.queue("burst", capability={s.resource: "30"})
    names = [f"b{i:02d}" for i in range(60)]
    op = Operator(control_plane, workdir, "crashy", lease_name=lease, lease_seconds=LEASE_SECONDS)
    try:
        for i, name in enumerate(names):
            s.job(name, "burst", 1)
            if i == 25:
                op.kill()  # mid-burst, mid-cycle most likely
                killed = datetime.now(UTC)
                op = Operator(
                    control_plane,
                    workdir,
                    "crashy-2",
                    lease_name=lease,
                    lease_seconds=LEASE_SECONDS,
                )

        def settled() -> list[dict[str, object]] | None:
            jobs = kubectl.json("get", "jobs", "-n", namespace)["items"]
            admitted = [j for j in jobs if j["spec"].get("suspend") is False]
            waiting = [j for j in jobs if j["spec"].get("suspend") is not False]
            reasons = [
                (j["metadata"].get("annotations") or {}).get("sluice.dev/pending-reason")
                for j in waiting
            ]
            if len(admitted) == 30 and all(reasons):
                return jobs
            return None

        jobs = wait_for(
            settled, timeout=LEASE_SECONDS * 3 + 30, what="30 admitted, the rest explained"
        )
    finally:
        op.stop()
    admitted = [j for j in jobs if j["spec"].get("suspend") is False]
    assert len(admitted) == 30  # exactly the capability: nothing over quota
    assert all(j["metadata"]["annotations"].get("sluice.dev/admitted-at") for j in admitted)
    events = kubectl.json("get", "events", "-n", namespace)["items"]
    # Nobody was ever taken back, so the count never went above 30 on the way either.
    assert not [e for e in events if e["reason"] in ("Reclaimed", "Preempted")]
    admitted_events: dict[str, int] = {}
    for event in events:
        if event["reason"] == "Admitted":
            name = event["involvedObject"]["name"]
            admitted_events[name] = admitted_events.get(name, 0) + 1
    assert all(count == 1 for count in admitted_events.values()), admitted_events
    assert set(admitted_events) <= {j["metadata"]["name"] for j in admitted}
    # A cycle's Events follow all its admissions (the Job's annotation is the record): only
    # jobs the killed replica admitted may lack theirs; the new leader posts every one.
    for job in admitted:
        if job["metadata"]["name"] not in admitted_events:
            stamp = job["metadata"]["annotations"]["sluice.dev/admitted-at"]
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            assert when <= killed + timedelta(seconds=1), (job["metadata"]["name"], stamp)


def test_a_clean_stop_hands_the_lease_over_without_waiting_for_it_to_expire(
    control_plane: controlplane.Cluster, kubectl: Kubectl, namespace: str, workdir: Path
) -> None:
    kubectl.run("create", "namespace", "sluice-system", check=False)
    lease = unique_name("lease")
    # A Lease far longer than the test's patience: only a release can explain the takeover.
    first = Operator(control_plane, workdir, "calm-a", lease_name=lease, lease_seconds=300)
    second = None
    try:
        wait_for(lambda: holder(kubectl, lease) == "calm-a", timeout=30, what="calm-a leading")
        second = Operator(control_plane, workdir, "calm-b", lease_name=lease, lease_seconds=300)
        first.stop()
        assert first.process.returncode == 0, first.logs()
        assert "event=stopped" in first.logs()
        assert holder(kubectl, lease) in (None, "", "calm-b")
        s = Scenario(kubectl, namespace)
        s.node(1)
        s.queue("handover")
        s.job("after", "handover", 1)
        s.wait_admitted("after", timeout=60)
        assert holder(kubectl, lease) == "calm-b"
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_kill_while_a_cycle_is_writing_admits_nothing_twice_or_over_quota(
    control_plane: controlplane.Cluster, kubectl: Kubectl, namespace: str, workdir: Path
) -> None:
    """All jobs wait before the operator starts, so its first cycle admits 40 at once; a watch
    sees the first admission land and the operator is killed while the rest are in flight."""
    from kubernetes import client, watch

    from sluice.kube import api_client

    kubectl.run("create", "namespace", "sluice-system", check=False)
    lease = unique_name("lease")
    s = Scenario(kubectl, namespace)
    s.node(100)
    s.queue("inflight", capability={s.resource: "40"})
    for i in range(80):
        s.job(f"w{i:02d}", "inflight", 1)
    batch = client.BatchV1Api(api_client(str(control_plane.kubeconfig)))
    stream = watch.Watch()
    op = Operator(control_plane, workdir, "inflight-1", lease_name=lease, lease_seconds=300)
    try:
        for event in stream.stream(batch.list_namespaced_job, namespace, timeout_seconds=60):
            if event["object"].spec.suspend is False:
                op.kill()
                break
        stream.stop()
        assert op.process.returncode is not None
        admitted_at_kill = sum(
            1 for j in batch.list_namespaced_job(namespace).items if j.spec.suspend is False
        )
        # The killed replica never released its Lease: a new one under another Lease name
        # stands in for the replica that takes over once it has expired.
        op = Operator(control_plane, workdir, "inflight-2", lease_name=unique_name("lease"))

        def settled() -> list[dict[str, Any]] | None:
            jobs = kubectl.json("get", "jobs", "-n", namespace)["items"]
            admitted = [j for j in jobs if j["spec"].get("suspend") is False]
            waiting = [j for j in jobs if j["spec"].get("suspend") is not False]
            explained = all(
                (j["metadata"].get("annotations") or {}).get("sluice.dev/pending-reason")
                for j in waiting
            )
            return jobs if len(admitted) == 40 and explained else None

        jobs = wait_for(settled, timeout=60, what="40 admitted, the rest explained")
    finally:
        op.stop()
    print(f"admitted when killed: {admitted_at_kill} of 40")
    admitted = [j for j in jobs if j["spec"].get("suspend") is False]
    assert len(admitted) == 40
    assert all(j["metadata"]["annotations"].get("sluice.dev/admitted-at") for j in admitted)
    events = kubectl.json("get", "events", "-n", namespace)["items"]
    assert not [e for e in events if e["reason"] in ("Reclaimed", "Preempted")]
    counts: dict[str, int] = {}
    for event in events:
        if event["reason"] == "Admitted":
            name = event["involvedObject"]["name"]
            counts[name] = counts.get(name, 0) + 1
    assert all(count == 1 for count in counts.values()), counts


def test_a_leader_whose_lease_is_taken_away_ends_and_the_other_replica_takes_over(
    pair: tuple[Operator, Operator, str], kubectl: Kubectl, namespace: str
) -> None:
    """The Lease written over by another holder (which then never renews it): the leader finds
    it at its next renewal, stops writing and exits non-zero for Kubernetes to restart it; the
    warm follower takes the Lease once it expires and admits the next job (how long that takes
    is printed; bench/bench_failover.py measures takeovers, on a machine of known load)."""
    first, second, lease = pair
    s = one_admitted(kubectl, namespace, "before")
    taken_at = time.monotonic()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    taken = {"spec": {"holderIdentity": "someone-else", "renewTime": now}}
    kubectl.run("patch", "lease", lease, "-n", "sluice-system", "--type=merge",
                "-p", json.dumps(taken))  # fmt: skip
    s.job("after", "team", 1)
    s.wait_admitted("after", timeout=LEASE_SECONDS * 3)
    took = time.monotonic() - taken_at
    code = exit_code(first, timeout=LEASE_SECONDS * 2)
    print(f"lease taken to the other replica's admission: {took:.1f} s")
    assert code == 1, first.logs()
    # Its tasks stopped at once: Kopf did not wait 5 s for one it had not started to end.
    stopping = logged_at(first, "event=stopped") - logged_at(first, "event=lease-lost")
    assert stopping < timedelta(seconds=3), first.logs()
    assert holder(kubectl, lease) == "replica-b"
    assert "became-leader" in second.logs()
    # Admitted once, by the new leader only: the old one wrote nothing after it lost the Lease.
    events = kubectl.json("get", "events", "-n", namespace)["items"]
    admitted = [e for e in events if e["reason"] == "Admitted"]
    assert sorted(e["involvedObject"]["name"] for e in admitted) == ["after", "before"]
