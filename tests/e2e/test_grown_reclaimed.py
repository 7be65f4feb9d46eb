"""A grown Job's growth taken back by reclaim, on the living cluster (docs/scheduler.md,
*Victims above a minimum*): the Job keeps running at the size it was first admitted at, its
parallelism and record lowered by the operator and its extra pods deleted by the real Job
controller, while the queue owed the room runs its job."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .components import Operator, sluice_system
from .helpers import Kubectl, controlplane, wait_for
from .scenario import Scenario
from .test_grown import gated, record, work_queue_job


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("grown-reclaimed")
    with sluice_system(control_plane, kubectl, workdir, "grown-reclaimed") as op:
        yield op


@pytest.fixture
def s(system: Operator, kubectl: Kubectl, namespace: str) -> Scenario:
    return Scenario(kubectl, namespace)


def test_a_grown_jobs_growth_is_reclaimed_and_it_runs_on_at_its_first_size(s: Scenario) -> None:
    # Room for 8: train (minimum 4) is admitted at 6 and grown to 8 while the cluster is
    # idle; queue owed then asks 2, its deserved share, and takes the growth back.
    s.node(8)
    s.queue("team")
    s.queue("owed")
    work_queue_job(s, 6, 4)
    s.wait_admitted("train")
    s.wait_pods_running("train", 6)
    s.kubectl.run(
        "patch", "job", "train", "-n", s.namespace, "--type=merge",
        "-p", '{"spec":{"parallelism":8}}',
    )  # fmt: skip
    wait_for(lambda: record(s)["main"]["admitted"] == 8, timeout=30, what="growth admitted")
    grown = {p["metadata"]["uid"] for p in s.wait_pods_running("train", 8, timeout=60)}

    s.job("urgent", "owed", 1, pods=2)
    s.wait_admitted("urgent", timeout=30)
    wait_for(lambda: record(s)["main"]["admitted"] == 6, timeout=30, what="train's record lowered")
    assert record(s) == {"main": {"admitted": 6, "asked": 8, "fields": {"spec.parallelism": 8}}}
    train = s.get_job("train")
    assert train["spec"]["parallelism"] == 6
    assert train["spec"]["suspend"] is False  # never suspended: it runs on
    pods = s.wait_pods_running("train", 6, timeout=60)
    assert not any(gated(p) for p in pods)
    # Six of the very pods that ran at 8: the Job was never suspended and started again.
    assert {p["metadata"]["uid"] for p in pods} < grown
    s.wait_pods_running("urgent", 2, timeout=60)
    assert s.admitted("train")
    shrunk = [e for e in s.events("train") if e["reason"] == "Reclaimed"]
    assert shrunk and "its size lowered by sluice" in shrunk[-1]["message"]
    assert "above its minimum" in shrunk[-1]["message"]
