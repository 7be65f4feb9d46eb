"""What a decision shows at once, whichever pass made it: the metrics of each admission,
reclaim and preemption, and the queue's status after a completion, a deletion or an
admission. The operator here runs its full pass once an hour, so only the decision pass can
explain what these tests see."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .components import Operator
from .helpers import Kubectl, controlplane, unique_name, wait_for, wait_for_reserved_queues
from .scenario import Scenario

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Every sample /metrics serves, by name and labels."""

CONFIG = """
actions: "enqueue, allocate, reclaim, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: drf}, {name: proportion}]
"""


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return controlplane.cluster.free_port()


@pytest.fixture(scope="module")
def operator(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
    metrics_port: int,
) -> Iterator[Operator]:
    kubectl.run("create", "namespace", "sluice-system", check=False)
    config_map = unique_name("shown-config")
    kubectl.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": config_map, "namespace": "sluice-system"},
            "data": {"scheduler.yaml": CONFIG},
        }
    )
    op = Operator(
        control_plane,
        tmp_path_factory.mktemp("operator"),
        "e2e-shown",
        extra=(
            f"--metrics-port={metrics_port}",
            "--full-pass-seconds=3600",
            f"--config-map-name={config_map}",
        ),
    )
    try:
        # Its metrics served and the Lease held (another module's operator may have held it):
        # what the tests count is this operator's.
        wait_for(lambda: _leading(metrics_port), timeout=60, what="the operator to lead")
        wait_for_reserved_queues(kubectl)
        yield op
    finally:
        op.stop()
        kubectl.run("delete", "configmap", config_map, "-n", "sluice-system", check=False)


@pytest.fixture
def s(operator: Operator, kubectl: Kubectl, namespace: str) -> Scenario:
    return Scenario(kubectl, namespace)


def scrape(port: int) -> Samples:
    """Every sample /metrics serves, by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _leading(port: int) -> bool:
    try:
        return value(scrape(port), "sluice_leader") == 1
    except OSError:  # not serving yet
        return False


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def priority_class(kubectl: Kubectl, value_: int) -> str:
    name = unique_name("shown-pc")
    kubectl.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value_,
        }
    )
    return name


def counted(
    before: Samples,
    after: Samples,
    name: str,
    **labels: str,
) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_each_admission_and_reclaim_is_counted_once_as_it_is_written(
    s: Scenario, metrics_port: int
) -> None:
    s.node(8)
    owed, lender = s.queue("owed"), s.queue("lender")
    before = scrape(metrics_port)
    # The lender takes the whole node; the owed queue then reclaims its half.
    s.job("l1", "lender", 4)
    s.job("l2", "lender", 4)
    s.wait_admitted("l1", "l2")
    s.job("o1", "owed", 4)
    s.wait_admitted("o1")
    # One of the two gives its room back (both were admitted within the same second).
    wait_for(lambda: [s.admitted(j) for j in ("l1", "l2")].count(False) == 1, what="a victim")
    after = scrape(metrics_port)
    assert counted(before, after, "sluice_admission_wait_seconds_count", queue=lender) == 2
    assert counted(before, after, "sluice_admission_wait_seconds_count", queue=owed) == 1
    assert counted(before, after, "sluice_evictions_total", queue=lender, reason="reclaim") == 1
    assert counted(before, after, "sluice_evictions_total", queue=owed, reason="reclaim") == 0
    assert counted(before, after, "sluice_decisions_total", action="reclaim") >= 1


def test_a_preemption_is_counted_once_as_it_is_written(
    s: Scenario, kubectl: Kubectl, metrics_port: int
) -> None:
    s.node(8)
    ranked = s.queue("ranked", capability={s.resource: "4"})
    low, high = priority_class(kubectl, 10), priority_class(kubectl, 1000)
    before = scrape(metrics_port)
    s.job("low", "ranked", 4, low)
    s.wait_admitted("low")
    s.job("high", "ranked", 4, high)
    s.wait_admitted("high")
    s.wait_suspended("low")
    after = scrape(metrics_port)
    assert counted(before, after, "sluice_admission_wait_seconds_count", queue=ranked) == 2
    assert counted(before, after, "sluice_evictions_total", queue=ranked, reason="preempt") == 1
    assert counted(before, after, "sluice_evictions_total", queue=ranked, reason="reclaim") == 0


def test_a_queues_status_follows_completions_deletions_and_admissions_at_once(
    s: Scenario, kubectl: Kubectl
) -> None:
    s.node(8)
    s.queue("moves", capability={s.resource: "4"})
    s.job("first", "moves", 2, complete_after="3s")
    s.job("second", "moves", 2, complete_after="3s")
    s.wait_admitted("first", "second")
    status = wait_for(
        lambda: (
            (st := s.queue_status("moves")).get("running", 0) + st.get("inqueue", 0) == 2 and st
        ),
        what="both admitted in the status",
    )
    assert status["allocated"] == {s.resource: "4"}
    # The Job controller completes both; the status says so though no full pass runs.
    s.wait_complete("first")
    s.wait_complete("second")
    status = wait_for(
        lambda: (st := s.queue_status("moves")).get("completed") == 2 and st,
        what="both completed in the status",
    )
    assert status["running"] == 0 and status["inqueue"] == 0 and status["pending"] == 0
    assert not status.get("allocated")
    # A deletion.
    kubectl.run("delete", "job", "first", "-n", s.namespace, "--wait=true")
    wait_for(lambda: s.queue_status("moves").get("completed") == 1, what="one completed left")
    # An admission, and a job that waits.
    s.job("third", "moves", 4)
    s.job("fourth", "moves", 4)
    s.wait_admitted("third")
    status = wait_for(
        lambda: (
            (st := s.queue_status("moves")).get("pending") == 1
            and st.get("allocated") == {s.resource: "4"}
            and st
        ),
        what="third admitted and fourth waiting in the status",
    )
    assert status["running"] + status["inqueue"] == 1
