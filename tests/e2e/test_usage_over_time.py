"""Fair over time on the living cluster: team A fills the cluster with jobs that complete
after a set time, team B arrives with a few. Without the usage plugin B gets a slot only when
its share is below A's, so the two take turns; with it the slots that free go to B until B
has used about as much as A. Kept small: two slots, jobs of a few seconds, and time scaled down to
match (entry penalty 1 s). A failover in the middle keeps that order: the new leader reads
A's usage back from its status."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sluice.operator.status import USAGE_WRITE_SECONDS

from .components import Operator
from .helpers import SUMMARY, Kubectl, controlplane, unique_name, wait_for
from .scenario import Scenario

SLOTS = 2
RUNS = "5s"
LEASE_SECONDS = 6
USAGE_CONFIG = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - {name: drf}
  - {name: proportion}
  - {name: usage, arguments: {halfLife: 10m, entryPenalty: 1s}}
"""


def set_config(kubectl: Kubectl, name: str, text: str) -> None:
    kubectl.run("create", "namespace", "sluice-system", check=False)
    kubectl.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "sluice-system"},
            "data": {"scheduler.yaml": text},
        }
    )


def operator(
    cluster: controlplane.Cluster, kubectl: Kubectl, workdir: Path, identity: str, text: str
) -> Operator:
    config = unique_name("usage-config")
    set_config(kubectl, config, text)
    return Operator(
        cluster,
        workdir,
        identity,
        lease_name=f"lease-{identity}",
        lease_seconds=LEASE_SECONDS,
        extra=[f"--config-map-name={config}"],
    )


def admitted_at(s: Scenario, name: str) -> datetime | None:
    stamp = s.annotation(name, "admitted-at")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


def created_at(s: Scenario, name: str) -> datetime:
    stamp = s.get_job(name)["metadata"]["creationTimestamp"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def fill_with_a(s: Scenario, count: int) -> list[str]:
    s.node(SLOTS)
    s.queue("a")
    s.queue("b")
    names = [s.job(f"a{i:02d}", "a", 1, complete_after=RUNS) for i in range(count)]
    s.wait_admitted(*names[:SLOTS])
    return names


def admissions_after(s: Scenario, jobs: list[str], since: datetime, already: set[str]) -> list[str]:
    """The jobs admitted at or after ``since`` and not ``already`` (the stamps are to the
    second), in the order they were admitted."""
    stamps = {name: admitted_at(s, name) for name in jobs if name not in already}
    return sorted(
        (n for n, at in stamps.items() if at is not None and at >= since),
        key=lambda n: (stamps[n], n),
    )


def wait_of(s: Scenario, name: str) -> float:
    admitted = admitted_at(s, name)
    assert admitted is not None, name
    return (admitted - created_at(s, name)).total_seconds()


def run_b(s: Scenario, a_jobs: list[str]) -> tuple[float, list[str]]:
    """B's jobs arrive while A fills the cluster; B's median wait, and the admissions from
    B's arrival on until B's last."""
    s.wait_admitted(*a_jobs[SLOTS : 2 * SLOTS], timeout=30)  # A's second round runs
    already = {n for n in a_jobs if s.admitted(n)}
    b_jobs = [s.job(f"b{i}", "b", 1, complete_after=RUNS) for i in range(3 * SLOTS)]
    arrived = created_at(s, b_jobs[0])
    s.wait_admitted(*b_jobs, timeout=60)
    waits = [wait_of(s, n) for n in b_jobs]
    order = admissions_after(s, a_jobs + b_jobs, arrived, already)
    last_b = max(i for i, n in enumerate(order) if n.startswith("b"))
    return statistics.median(waits), order[: last_b + 1]


def usage_recorded(s: Scenario, queue: str) -> dict[str, Any] | None:
    """The queue's status once its status.usage names the scenario's resource."""
    status = s.queue_status(queue)
    return status if s.resource in (status.get("usage") or {}).get("resources", {}) else None


@pytest.fixture(scope="module")
def figures(request: pytest.FixtureRequest) -> Iterator[dict[str, float]]:
    found: dict[str, float] = {}
    yield found
    if "without" in found and "with" in found:
        ratio = found["without"] / max(found["with"], 0.5)
        request.config.stash.setdefault(SUMMARY, []).append(
            f"usage over time: B's median wait {found['without']:.1f}s without the plugin,"
            f" {found['with']:.1f}s with it (x{ratio:.1f})"
        )


def test_without_the_plugin_b_takes_turns_with_a(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
    figures: dict[str, float],
) -> None:
    op = operator(control_plane, kubectl, tmp_path, unique_name("plain"), "")
    try:
        s = Scenario(kubectl, namespace)
        a_jobs = fill_with_a(s, 14)
        figures["without"], order = run_b(s, a_jobs)
    finally:
        op.stop()
    # A gets a slot between B's jobs: today's order only evens out the shares held now.
    assert any(n.startswith("a") for n in order), order


def test_with_the_plugin_b_goes_first_at_the_next_completions(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
    figures: dict[str, float],
) -> None:
    op = operator(control_plane, kubectl, tmp_path, unique_name("usage"), USAGE_CONFIG)
    try:
        s = Scenario(kubectl, namespace)
        a_jobs = fill_with_a(s, 14)
        figures["with"], order = run_b(s, a_jobs)
        # status.usage is written at most every USAGE_WRITE_SECONDS: the first write may
        # predate A's jobs; the next one records them.
        status = wait_for(
            lambda: usage_recorded(s, "a"),
            timeout=USAGE_WRITE_SECONDS + 15,
            what="A's usage in its status",
        )
    finally:
        op.stop()
    # From B's arrival on, the slots that free go to B: its first two rounds take every one
    # (by then B has used about half what A had); after that the two take turns by usage.
    assert all(n.startswith("b") for n in order[: 2 * SLOTS]), order
    assert status["usage"]["resources"][s.resource] > 0
    assert status["usage"]["dominant"].startswith(s.resource)
    assert figures["with"] < figures.get("without", float("inf"))


def test_a_new_leader_resumes_from_the_usage_in_status(
    control_plane: controlplane.Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    config = unique_name("usage-config")
    set_config(kubectl, config, USAGE_CONFIG)
    lease = unique_name("lease")
    extra = [f"--config-map-name={config}"]
    first = Operator(
        control_plane, tmp_path, "usage-a", lease, lease_seconds=LEASE_SECONDS, extra=extra
    )
    second: Operator | None = None
    try:
        s = Scenario(kubectl, namespace)
        a_jobs = fill_with_a(s, 20)
        second = Operator(
            control_plane, tmp_path, "usage-b", lease, lease_seconds=LEASE_SECONDS, extra=extra
        )
        # Written once at A's first cycle, then again 30 s on, with what A used meanwhile.
        wait_for(
            lambda: (
                (s.queue_status("a").get("usage") or {}).get("resources", {}).get(s.resource, 0)
                >= 30
            ),
            timeout=60,
            what="A's usage in its status",
        )
        first.kill()  # a crash: nothing is handed over but what the status says
        already = {n for n in a_jobs if s.admitted(n)}
        b_jobs = [s.job(f"b{i}", "b", 1, complete_after=RUNS) for i in range(2)]
        arrived = created_at(s, b_jobs[0])
        s.wait_admitted(*b_jobs, timeout=LEASE_SECONDS * 3 + 30)
        assert "became-leader" in second.logs()
        order = admissions_after(s, a_jobs + b_jobs, arrived, already)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    # The new leader starts from A's usage as written, not from zero: B goes first.
    assert order[:2] == b_jobs, order
